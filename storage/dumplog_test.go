package storage

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluice-broker/sluice/record"
)

// checkDumpLogInvariants checks what kafka-dump-log verifies on a closed
// partition directory: every .index entry points at a batch whose last
// offset is the entry's offset, and every .timeindex entry names a batch
// whose max timestamp is the entry's, with strictly increasing timestamps.
func checkDumpLogInvariants(t *testing.T, dir string) {
	t.Helper()
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		base, ok := parseSegmentName(e.Name(), logSuffix)
		if !ok {
			continue
		}
		log, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		lastAt := map[int64]int64{} // batch last offset -> position
		maxTs := map[int64]int64{}
		for pos := int64(0); pos < int64(len(log)); {
			h, err := record.ParseHeader(log[pos:])
			if err != nil {
				t.Fatal(err)
			}
			lastAt[h.LastOffset()] = pos
			maxTs[h.LastOffset()] = h.MaxTimestamp
			pos += h.Size()
		}
		idx, _ := os.ReadFile(filepath.Join(dir, segmentName(base, indexSuffix)))
		for i := 0; i+8 <= len(idx); i += 8 {
			rel, pos := binary.BigEndian.Uint32(idx[i:]), binary.BigEndian.Uint32(idx[i+4:])
			if p, ok := lastAt[base+int64(rel)]; !ok || p != int64(pos) {
				t.Fatalf("%s: index entry %d (%d,%d) does not match a batch", e.Name(), i/8, rel, pos)
			}
		}
		tix, _ := os.ReadFile(filepath.Join(dir, segmentName(base, timeIndexSuffix)))
		prev := int64(-1 << 63)
		for i := 0; i+12 <= len(tix); i += 12 {
			ts, rel := int64(binary.BigEndian.Uint64(tix[i:])), binary.BigEndian.Uint32(tix[i+8:])
			if got, ok := maxTs[base+int64(rel)]; !ok || got != ts || ts <= prev {
				t.Fatalf("%s: time index entry %d (%d,%d) does not match (batch ts %d, prev %d)", e.Name(), i/12, ts, rel, got, prev)
			}
			prev = ts
		}
	}
}
