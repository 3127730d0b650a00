// Package par runs a function over many items on a bounded number of
// goroutines: the one way Sluice opens, closes and deletes many partition
// logs side by side.
package par

import (
	"cmp"
	"sync"
	"sync/atomic"
)

// Each runs fn(0..n-1) on up to workers goroutines (at least one) and
// returns the first error; every fn runs whatever the others return.
func Each(n, workers int, fn func(i int) error) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		next  atomic.Int64
	)
	for range min(n, max(workers, 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				if err := fn(i); err != nil {
					mu.Lock()
					first = cmp.Or(first, err)
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return first
}
