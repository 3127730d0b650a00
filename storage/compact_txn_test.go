package storage

import (
	"encoding/binary"
	"fmt"
	"maps"
	"os"
	"testing"

	"github.com/sluice-broker/sluice/record"
)

// txnKeyed is keyedBatch for a transactional producer.
func txnKeyed(t testing.TB, pid int64, seq int32, recs ...kv) []byte {
	b := keyedBatch(t, keyedSpec{pid: pid, seq: seq}, recs...)
	binary.BigEndian.PutUint16(b[record.PosAttributes:], uint16(record.Attributes(b)|record.AttrTransactional))
	record.SetCRC(b)
	return b
}

// view reads the log as a consumer at the isolation level does (read_
// committed: up to the LSO, skipping aborted transactions by the fetch
// range's aborted list) and returns each key's last value ("" for a
// tombstone), and how many aborted records a read_uncommitted reader saw.
func view(t testing.TB, l *Log, committed bool) map[string]string {
	t.Helper()
	out := map[string]string{}
	off := l.LogStartOffset()
	for {
		var r Region
		var err error
		if committed {
			r, err = l.ReadCommitted(off, 1<<20)
		} else {
			r, err = l.Read(off, 1<<20, false)
		}
		if err != nil {
			t.Fatal(err)
		}
		if r.Len == 0 {
			return out
		}
		b := readRegion(t, r)
		var hs []record.Header
		for p := b; len(p) > 0; {
			h, _ := record.ParseHeader(p)
			hs = append(hs, h)
			p = p[h.Size():]
		}
		end := hs[len(hs)-1].LastOffset() + 1
		aborted := l.AbortedTxns(nil, off, end)
		for len(b) > 0 {
			h, recs := decodeBatch(t, b)
			b = b[h.Size():]
			if h.IsControl() || (committed && h.IsTransactional() && isAborted(aborted, h)) {
				continue
			}
			for _, r := range recs {
				out[r.key] = string(r.value)
			}
		}
		off = end
	}
}

// TestCompactTransactions: compaction removes aborted transactions'
// records, keeps committed ones (compacted by key), keeps markers while
// they matter and removes them after delete.retention.ms; a cleaned log
// reads the same under read_committed before and after, and under
// read_uncommitted as read_committed once the aborted records are gone.
func TestCompactTransactions(t *testing.T) {
	dir := t.TempDir()
	cfg := compactConfig()
	cfg.DeleteRetentionMs = 1000
	l := mustOpen(t, dir, cfg)
	defer func() { l.Close() }()
	var want map[string]string // the read_committed view
	filled := 0
	filler := func(n int) {
		for i := 0; i < n; i++ {
			k, v := fmt.Sprintf("fill-%d", filled%7), fmt.Sprintf("v%d", filled)
			appendHW(t, l, keyedBatch(t, keyedSpec{}, rec(k, v)))
			if want != nil {
				want[k] = v
			}
			filled++
		}
	}
	appendHW(t, l, txnKeyed(t, 1, 0, rec("k1", "a1"), rec("k2", "a2"))) // aborted
	appendHW(t, l, keyedBatch(t, keyedSpec{}, rec("k1", "p1")))
	appendHW(t, l, txnKeyed(t, 2, 0, rec("k1", "c1"), rec("k3", "c3"))) // committed
	marker(t, l, 1, 0, false)
	marker(t, l, 2, 0, true)
	appendHW(t, l, txnKeyed(t, 1, 2, rec("k3", "a3"))) // aborted
	marker(t, l, 1, 0, false)
	appendHW(t, l, txnKeyed(t, 1, 3, rec("k4", "c4"))) // committed: producer 1's last
	marker(t, l, 1, 0, true)
	filler(60)
	settle(t, l)
	want = view(t, l, true)
	if want["k1"] != "c1" || want["k2"] != "" || want["k3"] != "c3" || want["k4"] != "c4" {
		t.Fatalf("read_committed before compaction: %v", want)
	}
	if u := view(t, l, false); u["k2"] != "a2" || u["k3"] != "a3" {
		t.Fatalf("read_uncommitted before compaction: %v", u)
	}
	if n := len(l.AbortedTxns(nil, 0, 1<<40)); n != 2 {
		t.Fatalf("%d aborted transactions indexed, want 2", n)
	}

	now := int64(1_800_000_000_000)
	st := mustCompact(t, l, now)
	t.Logf("pass 1: %+v", st)
	if st.AbortedRemoved != 3 {
		t.Fatalf("pass 1 removed %d aborted records, want 3", st.AbortedRemoved)
	}
	check := func(what string) {
		t.Helper()
		if got := view(t, l, true); !maps.Equal(got, want) {
			t.Fatalf("%s: read_committed %v, want %v", what, got, want)
		}
		if got := view(t, l, false); !maps.Equal(got, want) {
			t.Fatalf("%s: read_uncommitted %v, want %v", what, got, want)
		}
	}
	check("pass 1")
	if err := l.Close(); err != nil { // the cleaned segments' .txnindex files are read back
		t.Fatal(err)
	}
	l = mustOpen(t, dir, cfg)
	check("pass 1, reopened")
	if n := len(l.AbortedTxns(nil, 0, 1<<40)); n != 2 {
		t.Fatalf("after pass 1: %d aborted transactions indexed, want 2 (their records were just removed)", n)
	}

	// Pass 2 (new dirty data asks for it): no aborted data is left, so
	// the abort markers are stamped with a horizon and their entries go.
	filler(30)
	settle(t, l)
	st = mustCompact(t, l, now+1)
	t.Logf("pass 2: %+v", st)
	check("pass 2")
	if n := len(l.AbortedTxns(nil, 0, 1<<40)); n != 0 {
		t.Fatalf("after pass 2: %d aborted transactions indexed, want 0", n)
	}
	// Pass 3 after the horizon removes the abort markers; producer 1's
	// last batch (its commit marker) stays, as does producer 2's commit
	// while its transaction's record c1/c3 remain.
	filler(30)
	settle(t, l)
	st = mustCompact(t, l, now+1+cfg.DeleteRetentionMs)
	t.Logf("pass 3: %+v", st)
	if st.MarkersRemoved != 2 {
		t.Fatalf("pass 3 removed %d markers, want the 2 abort markers", st.MarkersRemoved)
	}
	check("pass 3")
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, dir, cfg)
	check("reopened")
	crash(l)
	l = mustOpen(t, dir, cfg)
	check("recovered")
	if cp := os.Getenv("SLUICE_KAFKA_CLASSPATH"); cp != "" {
		// Kafka's DumpLogSegments reads the cleaned segments: emptied
		// batches, markers with a delete horizon, cleaned .txnindex files.
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		runKafkaDumpLog(t, cp, dir, len(splitBatches(t, logStream(t, dir))))
	}
}
