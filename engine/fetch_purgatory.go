package engine

import (
	"sync"
	"sync/atomic"
	"time"
)

// fetchPurgatory holds long-polling fetches: requests that found fewer than
// min.bytes to return and may wait up to max.wait.ms for more. A waiter is
// registered under every partition it reads; the partition calls wake with
// the bytes a high watermark move just made visible (partition.go), and once a waiter has seen min.bytes
// (or its wait expires, or the broker closes) it is completed exactly once:
// its fetch is read again from the logs and answered from the goroutine
// that completed it. No file region is held while waiting.
//
// Waiters live in shards keyed by partition, so producers on different
// partitions do not contend; a broker with no waiters costs a produce one
// atomic load.
type fetchPurgatory struct {
	waiting atomic.Int64 // registered waiters, for the produce fast path
	shards  [32]purgatoryShard
	closed  atomic.Bool
}

type purgatoryShard struct {
	mu sync.Mutex
	// Invariant: a waiter is in byPartition[p] for each p in its parts until
	// it completes, and in no list after.
	byPartition map[*Partition][]*fetchWaiter
}

// fetchWaiter is one parked fetch.
type fetchWaiter struct {
	parts    []*Partition // the partitions it is registered under
	minBytes int64
	// iso is how far the fetch reads, which says what wakes it: appends
	// (a follower's fetch), high watermark moves (a consumer's), or last
	// stable offset moves (a read_committed consumer's).
	iso    fetchIsolation
	seen   atomic.Int64 // bytes readable: what it had, plus what wakes reported
	done   atomic.Bool  // set once, by whoever completes it
	answer func()       // reads the fetch again and responds
	pg     *fetchPurgatory

	mu    sync.Mutex
	timer *time.Timer // nil until park starts it; never started once done
}

func newFetchPurgatory() *fetchPurgatory {
	p := &fetchPurgatory{}
	for i := range p.shards {
		p.shards[i].byPartition = map[*Partition][]*fetchWaiter{}
	}
	return p
}

func (pg *fetchPurgatory) shard(p *Partition) *purgatoryShard {
	return &pg.shards[(uint(p.Topic.ID[0])+uint(p.Index))%uint(len(pg.shards))]
}

// park registers a fetch that has seen `have` of its minBytes and must
// otherwise answer after wait. It reports false, registering nothing, when
// the broker is closing: the caller answers at once.
//
// Data may have arrived between the caller's read and the registration;
// the caller checks for that after park and calls complete if so.
func (pg *fetchPurgatory) park(parts []*Partition, have, minBytes int64, iso fetchIsolation, wait time.Duration, answer func()) (*fetchWaiter, bool) {
	if pg.closed.Load() {
		return nil, false
	}
	w := &fetchWaiter{parts: parts, minBytes: minBytes, iso: iso, answer: answer, pg: pg}
	w.seen.Store(have)
	pg.waiting.Add(1)
	for _, p := range parts {
		if !pg.register(p, w) {
			break // completed already; complete cleans up
		}
	}
	w.mu.Lock()
	if !w.done.Load() {
		w.timer = time.AfterFunc(wait, w.complete)
	}
	w.mu.Unlock()
	// close may have swept the shards between the check above and the
	// registration, and missed this waiter.
	if pg.closed.Load() {
		w.complete()
	}
	return w, true
}

// register adds w under p unless w is already completed. Checking done
// under the shard lock means remove, which runs after done is set, cannot
// miss an entry.
func (pg *fetchPurgatory) register(p *Partition, w *fetchWaiter) bool {
	sh := pg.shard(p)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if w.done.Load() {
		return false
	}
	sh.byPartition[p] = append(sh.byPartition[p], w)
	return true
}

// wake tells the read_uncommitted consumer waiters on p that n more bytes
// are readable (the high watermark moved), and completes those that now
// have their min.bytes.
func (pg *fetchPurgatory) wake(p *Partition, n int64) { pg.wakeKind(p, n, fetchHighWatermark) }

// wakeCommitted tells the read_committed consumer waiters on p that n more
// bytes are readable (the last stable offset moved).
func (pg *fetchPurgatory) wakeCommitted(p *Partition, n int64) {
	pg.wakeKind(p, n, fetchTxnCommitted)
}

// wakeReplicas tells the follower waiters on p that n bytes were appended.
func (pg *fetchPurgatory) wakeReplicas(p *Partition, n int64) { pg.wakeKind(p, n, fetchLogEnd) }

func (pg *fetchPurgatory) wakeKind(p *Partition, n int64, iso fetchIsolation) {
	if pg.waiting.Load() == 0 {
		return
	}
	var ready [8]*fetchWaiter
	due := pg.collectReady(p, n, iso, ready[:0])
	for len(due) > 0 {
		for _, w := range due {
			w.complete()
		}
		if len(due) < len(ready) {
			return
		}
		// More were due than fit; those completed left the list.
		due = pg.collectReady(p, 0, iso, ready[:0])
	}
}

// collectReady adds n to every waiter of the kind on p and returns up to
// cap(dst) of those that reached min.bytes. With n == 0 it only collects.
func (pg *fetchPurgatory) collectReady(p *Partition, n int64, iso fetchIsolation, dst []*fetchWaiter) []*fetchWaiter {
	sh := pg.shard(p)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for _, w := range sh.byPartition[p] {
		if w.iso != iso {
			continue
		}
		seen := w.seen.Load()
		if n > 0 {
			seen = w.seen.Add(n)
		}
		if seen >= w.minBytes && len(dst) < cap(dst) && !w.done.Load() {
			dst = append(dst, w)
		}
	}
	return dst
}

// complete answers the waiter once, whoever gets here first: a wake, the
// timer, the broker closing, or the fetch's own recheck.
func (w *fetchWaiter) complete() {
	if !w.done.CompareAndSwap(false, true) {
		return
	}
	w.mu.Lock()
	if w.timer != nil {
		w.timer.Stop()
	}
	w.mu.Unlock()
	w.pg.remove(w)
	w.answer()
}

func (pg *fetchPurgatory) remove(w *fetchWaiter) {
	for _, p := range w.parts {
		sh := pg.shard(p)
		sh.mu.Lock()
		list := sh.byPartition[p]
		for i, x := range list {
			if x == w {
				list[i] = list[len(list)-1]
				list[len(list)-1] = nil
				list = list[:len(list)-1]
				break
			}
		}
		if len(list) == 0 {
			delete(sh.byPartition, p)
		} else {
			sh.byPartition[p] = list
		}
		sh.mu.Unlock()
	}
	pg.waiting.Add(-1)
}

// close answers every waiting fetch now (with whatever the logs hold) and
// makes later fetches answer without waiting. The broker calls it before
// closing the logs, so the answers can still read them.
func (pg *fetchPurgatory) close() {
	pg.closed.Store(true)
	for {
		w := pg.anyWaiter()
		if w == nil {
			return
		}
		w.complete()
	}
}

func (pg *fetchPurgatory) anyWaiter() *fetchWaiter {
	for i := range pg.shards {
		sh := &pg.shards[i]
		sh.mu.Lock()
		for _, list := range sh.byPartition {
			for _, w := range list {
				if !w.done.Load() {
					sh.mu.Unlock()
					return w
				}
			}
		}
		sh.mu.Unlock()
	}
	return nil
}

// ReleaseWaitingFetches answers every parked fetch now and makes later
// fetches answer without waiting. The network layer calls it when shutdown
// begins, so that draining in-flight requests does not wait out long polls.
func (b *Broker) ReleaseWaitingFetches() { b.waiters.close() }
