package par

import (
	"errors"
	"sync/atomic"
	"testing"
)

func TestEachRunsEveryIndexOnceAndReturnsAnError(t *testing.T) {
	for _, workers := range []int{0, 1, 3, 100} {
		var seen [50]atomic.Int32
		var running, peak atomic.Int32
		err := Each(len(seen), workers, func(i int) error {
			n := running.Add(1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			defer running.Add(-1)
			seen[i].Add(1)
			if i == 7 || i == 30 {
				return errors.New("boom")
			}
			return nil
		})
		if err == nil {
			t.Fatalf("workers=%d: no error returned", workers)
		}
		for i := range seen {
			if seen[i].Load() != 1 {
				t.Fatalf("workers=%d: index %d ran %d times", workers, i, seen[i].Load())
			}
		}
		if p := int(peak.Load()); p > max(workers, 1) {
			t.Fatalf("workers=%d: %d ran at once", workers, p)
		}
	}
	if err := Each(0, 4, func(int) error { t.Fatal("called"); return nil }); err != nil {
		t.Fatal(err)
	}
}
