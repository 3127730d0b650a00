package storage

import "testing"

// TestMappedIndexesAreBounded reads every segment of a many-segment log with
// the mapping cache bounded to 3 inactive segments: the bound holds, reads
// stay correct, and Close leaves nothing mapped.
func TestMappedIndexesAreBounded(t *testing.T) {
	SetMaxMappedSegments(3)
	defer SetMaxMappedSegments(1024)
	cfg := testConfig()
	cfg.SegmentBytes = 1500
	cfg.IndexIntervalBytes = 100
	dir := t.TempDir()
	l := mustOpen(t, dir, cfg)
	appendN(t, l, 60, 2, 100)
	l.Close()
	l = mustOpen(t, dir, cfg) // reopened: inactive segments start unmapped
	defer l.Close()
	l.SetHighWatermark(l.LogEndOffset())
	segs := l.segs.Load().segs
	if len(segs) < 10 {
		t.Fatalf("only %d segments", len(segs))
	}
	for round := 0; round < 3; round++ {
		for off := int64(0); off < l.LogEndOffset(); off += 3 {
			r, err := l.Read(off, 1, false)
			if err != nil {
				t.Fatal(err)
			}
			if h := splitBatches(t, readRegion(t, r)); h[0].BaseOffset > off || h[0].LastOffset() < off {
				t.Fatalf("Read(%d) returned batch %d", off, h[0].BaseOffset)
			}
			if n := mappedInactive(segs); n > 3 {
				t.Fatalf("%d inactive segments mapped", n)
			}
		}
	}
}

func mappedInactive(segs []*segment) int {
	mapCache.mu.Lock()
	defer mapCache.mu.Unlock()
	n := 0
	for _, s := range mapCache.ring {
		for _, t := range segs {
			if s == t {
				n++
			}
		}
	}
	return n
}
