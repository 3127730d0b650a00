package storage

import (
	"sync"
	"sync/atomic"
)

// Index mappings are bounded process-wide. A segment maps its two index
// files on first use (an append to the active segment, or a search) and
// stays mapped until evicted from a CLOCK cache holding at most maxMapped
// segments (2 mappings each), active ones included: an idle active
// segment's read-write mappings go like any other, keeping their entry
// counts, and come back on the next append or search without a scan (its
// dirty pages stay in the page cache, and a flush then fsyncs the files
// instead of msyncing the mapping). Only mappings a writer fills without
// the lock are pinned while it does (recovery, truncation, a cleaner
// output). So a broker holds about 2*maxMapped index mappings whatever its
// partition count (plus those in use at once, which eviction skips), and
// since a mapping does not keep its file open, index files cost no
// descriptors. The default of 1024 segments is 2,048 mappings, far under
// Linux's default vm.max_map_count of 65,530; `sluice serve` sizes it from
// that limit.
var maxMapped atomic.Int64

func init() { maxMapped.Store(1024) }

// SetMaxMappedSegments sets how many segments may keep their indexes
// mapped at once (process-wide). n < 1 is treated as 1.
func SetMaxMappedSegments(n int) { maxMapped.Store(int64(max(n, 1))) }

// mapCache is the CLOCK ring of segments whose indexes are mapped and not
// pinned.
var mapCache struct {
	mu   sync.Mutex
	ring []*segment // Invariant: s in ring <=> s.ix.cached
	hand int
}

// cacheAdd records that s just mapped its indexes, evicting others if the
// ring is over its bound. The caller holds s.ix exclusively.
func cacheAdd(s *segment) {
	mapCache.mu.Lock()
	defer mapCache.mu.Unlock()
	for int64(len(mapCache.ring)) >= maxMapped.Load() && evictOne() {
	}
	s.ix.cached = true
	mapCache.ring = append(mapCache.ring, s)
}

// cacheRemove drops s from the ring; the caller holds s.ix exclusively.
func cacheRemove(s *segment) {
	mapCache.mu.Lock()
	defer mapCache.mu.Unlock()
	if !s.ix.cached {
		return
	}
	for i, v := range mapCache.ring {
		if v == s {
			removeRing(i)
			return
		}
	}
}

func removeRing(i int) {
	r := mapCache.ring
	r[i].ix.cached = false
	copy(r[i:], r[i+1:])
	r[len(r)-1] = nil
	mapCache.ring = r[:len(r)-1]
	if mapCache.hand > i {
		mapCache.hand--
	}
}

// evictOne unmaps one segment that was not used since the hand last passed
// it (second chance). Segments in use by a reader are skipped with TryLock,
// never waited for, so eviction cannot deadlock with readers that are
// themselves mapping. It reports false when nothing could be evicted (the
// bound is then exceeded until readers finish).
func evictOne() bool {
	for tries := 0; tries < 2*len(mapCache.ring); tries++ {
		if mapCache.hand >= len(mapCache.ring) {
			mapCache.hand = 0
		}
		v := mapCache.ring[mapCache.hand]
		if v.ix.used.Swap(false) || !v.ix.TryLock() {
			mapCache.hand++
			continue
		}
		v.unmapLocked()
		removeRing(mapCache.hand)
		v.ix.Unlock()
		return true
	}
	return false
}
