package storage

import "testing"

// TestAppendAllocatesNothing pins the produce path at zero allocations per
// call when the caller reuses its entries slice (and buffers).
func TestAppendAllocatesNothing(t *testing.T) {
	l := mustOpen(t, t.TempDir(), testConfig())
	defer l.Close()
	entries := []AppendEntry{
		{Records: buildBatch(spec(16, 100))},
		{Records: buildBatch(spec(4, 100))},
	}
	opt := AppendOptions{LeaderEpoch: 1}
	l.Append(entries, opt) // first call sizes the reusable iovec slice
	allocs := testing.AllocsPerRun(200, func() {
		if err := l.Append(entries, opt); err != nil || entries[0].Err != nil {
			t.Fatal(err, entries[0].Err)
		}
		l.SetHighWatermark(l.LogEndOffset())
	})
	if allocs != 0 {
		t.Fatalf("Append allocates %v per call", allocs)
	}
}

// TestIdempotentAppendAllocatesNothing does the same for an idempotent
// producer once its state entry exists.
func TestIdempotentAppendAllocatesNothing(t *testing.T) {
	l := mustOpen(t, t.TempDir(), testConfig())
	defer l.Close()
	seq := int32(0)
	b := idemBatch(11, 0, 0, 4)
	entries := []AppendEntry{{Records: b}}
	l.Append(entries, AppendOptions{})
	allocs := testing.AllocsPerRun(200, func() {
		seq += 4
		b2 := entries[0].Records
		setSequenceForTest(b2, seq)
		if err := l.Append(entries, AppendOptions{}); err != nil || entries[0].Err != nil {
			t.Fatal(err, entries[0].Err)
		}
	})
	if allocs != 0 {
		t.Fatalf("idempotent Append allocates %v per call", allocs)
	}
}

// TestReadAllocatesNothing pins the fetch path at zero allocations.
func TestReadAllocatesNothing(t *testing.T) {
	cfg := testConfig()
	cfg.IndexIntervalBytes = 1024
	l := mustOpen(t, t.TempDir(), cfg)
	defer l.Close()
	appendN(t, l, 500, 4, 200)
	l.SetHighWatermark(l.LogEndOffset())
	off := int64(0)
	allocs := testing.AllocsPerRun(500, func() {
		r, err := l.Read(off, 16<<10, false)
		if err != nil || r.Len == 0 {
			t.Fatal(err)
		}
		r.Release()
		off = (off + 37) % l.LogEndOffset()
	})
	if allocs != 0 {
		t.Fatalf("Read allocates %v per call", allocs)
	}
}
