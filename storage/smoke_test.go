package storage

import "testing"

func TestSmokeAppendReadReopen(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, testConfig())
	for i := 0; i < 100; i++ {
		r := appendOne(t, l, buildBatch(spec(4, 100)))
		if r.FirstOffset != int64(i*4) || r.LastOffset != int64(i*4+3) {
			t.Fatalf("append %d: got %+v", i, r)
		}
	}
	if l.LogEndOffset() != 400 {
		t.Fatalf("LEO %d", l.LogEndOffset())
	}
	l.SetHighWatermark(400)
	reg, err := l.Read(50, 1000, false)
	if err != nil {
		t.Fatal(err)
	}
	hs := splitBatches(t, readRegion(t, reg))
	if hs[0].BaseOffset != 48 {
		t.Fatalf("first batch %d", hs[0].BaseOffset)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, dir, testConfig())
	defer l.Close()
	if l.LogEndOffset() != 400 || l.HighWatermark() != 400 {
		t.Fatalf("reopen LEO %d HW %d", l.LogEndOffset(), l.HighWatermark())
	}
	reg, err = l.Read(399, 1, false)
	if err != nil {
		t.Fatal(err)
	}
	hs = splitBatches(t, readRegion(t, reg))
	if len(hs) != 1 || hs[0].BaseOffset != 396 {
		t.Fatalf("got %+v", hs)
	}
}
