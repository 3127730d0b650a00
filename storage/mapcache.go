package storage

import (
	"sync"
	"sync/atomic"
)

// Index mappings are bounded process-wide. An active segment always has its
// two index files mapped (2 mappings per partition). Inactive segments map
// theirs on first use and stay mapped until evicted from a CLOCK cache
// holding at most maxMapped segments (2 mappings each). So a broker with P
// partitions holds at most 2*P + 2*maxMapped index mappings, and since a
// mapping does not keep its file open, index files cost no descriptors
// (each segment keeps exactly one descriptor: its .log, needed for
// sendfile). The default of 1024 keeps a 10,000-partition broker at
// ~22,000 mappings, well under Linux's default vm.max_map_count of 65,530.
var maxMapped atomic.Int64

func init() { maxMapped.Store(1024) }

// SetMaxMappedSegments sets how many inactive segments may keep their
// indexes mapped at once (process-wide). n < 1 is treated as 1.
func SetMaxMappedSegments(n int) { maxMapped.Store(int64(max(n, 1))) }

// mapCache is the CLOCK ring of inactive segments whose indexes are mapped.
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
