package storage

import (
	"bytes"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sluice-broker/sluice/record"
)

func TestReadLimitsAndBoundaries(t *testing.T) {
	cfg := testConfig()
	cfg.IndexIntervalBytes = 256
	l := mustOpen(t, t.TempDir(), cfg)
	defer l.Close()
	batches := appendN(t, l, 50, 2, 100) // offsets 0..99, each batch same size
	size := int64(len(batches[0]))
	l.SetHighWatermark(60)
	tests := []struct {
		name        string
		offset      int64
		maxBytes    int32
		uncommitted bool
		wantFirst   int64
		wantBatches int
		wantErr     error
	}{
		{"first batch whole even if maxBytes smaller (KIP-74)", 0, 1, false, 0, 1, nil},
		{"offset inside a batch", 5, 1, false, 4, 1, nil},
		{"maxBytes cut on batch boundary", 0, int32(3*size + size/2), false, 0, 3, nil},
		{"exact multiple", 10, int32(4 * size), false, 10, 4, nil},
		{"stops at high watermark", 40, 1 << 20, false, 40, 10, nil},
		{"at high watermark is empty", 60, 1 << 20, false, 0, 0, nil},
		{"uncommitted reads to LEO", 60, 1 << 20, true, 60, 20, nil},
		{"at LEO is empty", 100, 1 << 20, true, 0, 0, nil},
		{"past LEO", 101, 1 << 20, true, 0, 0, ErrOffsetOutOfRange},
		{"negative", -1, 1 << 20, true, 0, 0, ErrOffsetOutOfRange},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := l.Read(tt.offset, tt.maxBytes, tt.uncommitted)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			hs := splitBatches(t, readRegion(t, r))
			if len(hs) != tt.wantBatches {
				t.Fatalf("%d batches, want %d", len(hs), tt.wantBatches)
			}
			if len(hs) > 0 && hs[0].BaseOffset != tt.wantFirst {
				t.Fatalf("first %d, want %d", hs[0].BaseOffset, tt.wantFirst)
			}
		})
	}
}

func TestReadHighWatermarkInsideBatch(t *testing.T) {
	l := mustOpen(t, t.TempDir(), testConfig())
	defer l.Close()
	appendN(t, l, 3, 4, 10) // batches [0,3] [4,7] [8,11]
	l.SetHighWatermark(6)   // inside the second batch: only the first is committed
	hs := readAll(t, l, false)
	if len(hs) != 1 || hs[0].BaseOffset != 0 {
		t.Fatalf("%+v", hs)
	}
	l.SetHighWatermark(1000) // clamped to LEO
	if l.HighWatermark() != 12 {
		t.Fatalf("HW %d", l.HighWatermark())
	}
}

func TestReadReturnsSameBytes(t *testing.T) {
	l := mustOpen(t, t.TempDir(), testConfig())
	defer l.Close()
	batches := appendN(t, l, 20, 3, 50)
	l.SetHighWatermark(l.LogEndOffset())
	r, err := l.Read(0, 1<<30, false)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(readRegion(t, r), bytes.Join(batches, nil)) {
		t.Fatal("log bytes differ from the appended (rewritten) batches")
	}
}

func TestReadAcrossSegments(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 2000
	l := mustOpen(t, t.TempDir(), cfg)
	defer l.Close()
	appendN(t, l, 30, 2, 300)
	l.SetHighWatermark(l.LogEndOffset())
	// A read stays within one segment.
	r, err := l.Read(0, 1<<20, false)
	if err != nil {
		t.Fatal(err)
	}
	if r.Len > cfg.SegmentBytes {
		t.Fatalf("read crossed a segment: %d", r.Len)
	}
	r.Release()
	hs := readAll(t, l, false)
	for i, h := range hs {
		if h.BaseOffset != int64(2*i) {
			t.Fatalf("batch %d at %d", i, h.BaseOffset)
		}
	}
	if len(hs) != 30 {
		t.Fatalf("%d batches", len(hs))
	}
}

func TestOffsetForTimestamp(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 3000
	cfg.IndexIntervalBytes = 300
	l := mustOpen(t, t.TempDir(), cfg)
	defer l.Close()
	appendN(t, l, 40, 1, 100) // batch i: offset i, timestamp base+10i
	base := spec(1, 1).ts
	for _, tt := range []struct {
		ts       int64
		off, bts int64
		ok       bool
	}{
		{0, 0, base, true},
		{base, 0, base, true},
		{base + 1, 1, base + 10, true},
		{base + 155, 16, base + 160, true},
		{base + 390, 39, base + 390, true},
		{base + 391, -1, -1, false},
	} {
		off, bts, ok := l.OffsetForTimestamp(tt.ts)
		if off != tt.off || bts != tt.bts || ok != tt.ok {
			t.Errorf("OffsetForTimestamp(%d) = %d %d %v, want %d %d %v", tt.ts-base, off, bts-base, ok, tt.off, tt.bts-base, tt.ok)
		}
	}
}

// TestConcurrentReadsDuringAppends runs readers against a log that is being
// appended to and rolled; under -race this also checks the lock-free read
// path. Every region must hold whole, valid batches with contiguous offsets.
func TestConcurrentReadsDuringAppends(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 16 << 10
	cfg.IndexIntervalBytes = 512
	l := mustOpen(t, t.TempDir(), cfg)
	defer l.Close()
	var done atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for r := 0; r < 3; r++ {
		wg.Add(1)
		go func(uncommitted bool) {
			defer wg.Done()
			for !done.Load() {
				if err := readChain(l, uncommitted); err != nil {
					errs <- err
					return
				}
			}
		}(r%2 == 0)
	}
	for i := 0; i < 600; i++ {
		s := spec(1+i%5, 50+i%200)
		e := []AppendEntry{{Records: buildBatch(s)}, {Records: buildBatch(s)}}
		if err := l.Append(e, AppendOptions{}); err != nil || e[0].Err != nil || e[1].Err != nil {
			t.Fatal(err, e[0].Err, e[1].Err)
		}
		l.SetHighWatermark(l.LogEndOffset() - int64(i%3))
	}
	done.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func readChain(l *Log, uncommitted bool) error {
	limit := l.HighWatermark()
	if uncommitted {
		limit = l.LogEndOffset()
	}
	for off := int64(0); off < limit; {
		r, err := l.Read(off, 4096, uncommitted)
		if err != nil {
			return err
		}
		if r.Len == 0 {
			return nil
		}
		b := make([]byte, r.Len)
		_, err = r.File.ReadAt(b, r.Pos)
		r.Release()
		if err != nil {
			return err
		}
		for len(b) > 0 {
			size, err := checkBatch(b, 0)
			if err != nil {
				return err
			}
			if got := record.BaseOffset(b); got != off && off != 0 || got > off {
				return errors.New("gap or overlap in offsets")
			}
			off = record.LastOffset(b) + 1
			b = b[size:]
		}
	}
	return nil
}

// TestReadNextOffset: every region names the offset after its last batch,
// whether it stops at maxBytes, at the high watermark or at a segment end,
// so a reader can walk the log by NextOffset alone.
func TestReadNextOffset(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 2000
	l := mustOpen(t, t.TempDir(), cfg)
	defer l.Close()
	appendN(t, l, 30, 2, 300)
	l.SetHighWatermark(50)
	for _, maxBytes := range []int32{1, 700, 1 << 20} {
		off, reads := int64(0), 0
		for off < 50 {
			r, err := l.Read(off, maxBytes, false)
			if err != nil || r.Len == 0 {
				t.Fatalf("maxBytes %d: read at %d: %+v %v", maxBytes, off, r, err)
			}
			hs := splitBatches(t, readRegion(t, r))
			last := hs[len(hs)-1]
			if want := last.BaseOffset + int64(last.LastOffsetDelta) + 1; r.NextOffset != want {
				t.Fatalf("maxBytes %d: read at %d: NextOffset %d, batches end at %d", maxBytes, off, r.NextOffset, want)
			}
			off, reads = r.NextOffset, reads+1
		}
		if off != 50 {
			t.Fatalf("maxBytes %d: walk ended at %d", maxBytes, off)
		}
		t.Logf("maxBytes %d: %d reads", maxBytes, reads)
	}
}
