package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluice-broker/sluice/record"
)

// fuzzSeeds are starting points for both fuzz targets: valid batches,
// record sets, and damaged variants.
func fuzzSeeds() [][]byte {
	one := buildBatch(spec(1, 0))
	three := buildBatch(spec(3, 40))
	idem := idemBatch(7, 1, 0, 2)
	twoSet := append(append([]byte(nil), one...), three...)
	record.SetBaseOffset(twoSet[len(one):], 1)
	flipped := append([]byte(nil), twoSet...)
	flipped[len(one)/2] ^= 0x10
	return [][]byte{
		one, three, idem, twoSet, flipped,
		twoSet[:len(twoSet)-7],
		append(append([]byte(nil), twoSet...), make([]byte, 100)...),
		append(append([]byte(nil), twoSet...), 0xde, 0xad, 0xbe, 0xef),
		{}, make([]byte, record.HeaderLen),
	}
}

// FuzzCheckBatch feeds arbitrary bytes to the produce-path validation: it
// must never panic, and whatever it accepts must parse and fit.
func FuzzCheckBatch(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		size, err := checkBatch(b, 1<<20)
		if err == nil {
			h, perr := record.ParseHeader(b)
			if perr != nil || size != h.Size() || size > int64(len(b)) || h.NumRecords != h.LastOffsetDelta+1 {
				t.Fatalf("accepted a batch that does not parse: size %d %+v %v", size, h, perr)
			}
		} else if !errors.Is(err, ErrCorruptMessage) && !errors.Is(err, ErrInvalidRecord) && !errors.Is(err, ErrMessageTooLarge) {
			t.Fatalf("unmapped error %v", err)
		}
		var first record.Header
		n, _, _, err := validateRecordSet(&AppendEntry{Records: b}, &first, 1<<20, false)
		if err == nil && n != int64(len(b)) {
			t.Fatalf("record set of %d bytes accepted as %d", len(b), n)
		}
	})
}

// FuzzRecovery opens a log whose only segment holds arbitrary bytes, with no
// checkpoint, as after a crash. Open must either report corruption or
// recover a prefix of whole valid batches that reads back, accepts appends
// and survives a clean reopen.
func FuzzRecovery(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := filepath.Join(fastTempDir(t), "p-0")
		os.MkdirAll(dir, 0o755)
		if err := os.WriteFile(filepath.Join(dir, segmentName(0, logSuffix)), data, 0o644); err != nil {
			t.Fatal(err)
		}
		cfg := crashConfig()
		l, err := Open(dir, cfg)
		if err != nil {
			if !errors.Is(err, ErrLogCorrupt) {
				t.Fatalf("Open: %v", err)
			}
			return
		}
		size := l.Size()
		if size > int64(len(data)) {
			t.Fatalf("recovered %d bytes out of %d", size, len(data))
		}
		hs := readAll(t, l, true)
		var total int64
		for _, h := range hs {
			total += h.Size()
		}
		if total != size {
			t.Fatalf("read %d bytes of batches, log has %d", total, size)
		}
		appendOne(t, l, buildBatch(spec(2, 3)))
		leo := l.LogEndOffset()
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		l = mustOpen(t, dir, cfg)
		defer l.Close()
		if l.LogEndOffset() != leo {
			t.Fatalf("LEO %d after reopen, was %d", l.LogEndOffset(), leo)
		}
	})
}

// TestWriteFuzzSeedCorpus regenerates testdata/fuzz/*/seed-* from fuzzSeeds
// when SLUICE_WRITE_FUZZ_SEEDS=1.
func TestWriteFuzzSeedCorpus(t *testing.T) {
	if os.Getenv("SLUICE_WRITE_FUZZ_SEEDS") == "" {
		t.Skip("set SLUICE_WRITE_FUZZ_SEEDS=1 to regenerate the seed corpus")
	}
	for _, target := range []string{"FuzzCheckBatch", "FuzzRecovery", "FuzzAppendAsFollower"} {
		dir := filepath.Join("testdata", "fuzz", target)
		os.MkdirAll(dir, 0o755)
		for i, s := range fuzzSeeds() {
			body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", s)
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%02d", i)), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}
