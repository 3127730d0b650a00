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
	// spare are emptied lists kept for the next partition that gets a
	// waiter, so that parking does not allocate one. Invariant: each is
	// empty (and zeroed); len(spare) <= maxSpareLists.
	spare [][]*fetchWaiter
}

const maxSpareLists = 8

// fetchWaiter is one parked fetch. Consumer and follower fetches take
// theirs from a pool (parkPooled) and the waiter goes back once nothing
// can touch it any more: its answer has run and its timer has either been
// stopped or has run too (holds). A pooled waiter is reused under a new
// generation, so a reference kept from an earlier park (waiterRef: the
// fetch's own recheck, a wake that collected it just before another
// completed it) completes nothing when it comes late.
type fetchWaiter struct {
	parts    []*Partition // the partitions it is registered under
	minBytes int64
	// iso is how far the fetch reads, which says what wakes it: appends
	// (a follower's fetch), high watermark moves (a consumer's), or last
	// stable offset moves (a read_committed consumer's).
	iso    fetchIsolation
	seen   atomic.Int64 // bytes readable: what it had, plus what wakes reported
	answer parkedAnswer // reads the fetch again and responds
	pg     *fetchPurgatory
	pooled bool

	// state is the generation (state>>1) and whether that generation is
	// completed (state&1): set once per generation, by whoever completes.
	state atomic.Uint64
	// holds counts who may still touch the waiter in this generation:
	// its completion (1) and, while armed, its timer (1). The last to let
	// go ends the generation (and returns a pooled waiter to the pool).
	holds atomic.Int32

	mu    sync.Mutex
	timer *time.Timer // made on first use and reused; runs w.expire
	armed bool        // the timer is set for this generation
}

// parkedAnswer answers a fetch that waited: it reads the fetch again and
// responds. An interface rather than a func so that a pooled fetch can
// park without allocating a closure.
type parkedAnswer interface{ answerParked() }

// answerFunc adapts a closure (share fetches).
type answerFunc func()

func (f answerFunc) answerParked() { f() }

// waiterRef names one generation of a waiter.
type waiterRef struct {
	w   *fetchWaiter
	gen uint64
}

// complete completes the waiter if it is still in ref's generation and
// not completed yet.
func (ref waiterRef) complete() {
	if ref.w != nil {
		ref.w.completeGen(ref.gen)
	}
}

var waiterPool = sync.Pool{New: func() any { return &fetchWaiter{pooled: true} }}

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
// the broker is closing: the caller answers at once. The waiter is not
// pooled: the caller may keep it (share fetches do).
//
// Data may have arrived between the caller's read and the registration;
// the caller checks for that after park and calls complete if so.
func (pg *fetchPurgatory) park(parts []*Partition, have, minBytes int64, iso fetchIsolation, wait time.Duration, answer func()) (*fetchWaiter, bool) {
	if pg.closed.Load() {
		return nil, false
	}
	w := &fetchWaiter{parts: parts}
	pg.start(w, have, minBytes, iso, wait, answerFunc(answer))
	return w, true
}

// parkPooled is park with a pooled waiter, for fetches whose answer is
// the only thing that outlives the call: nothing is allocated. parts is
// copied. The returned reference stays safe to complete after the waiter
// has moved on.
func (pg *fetchPurgatory) parkPooled(parts []*Partition, have, minBytes int64, iso fetchIsolation, wait time.Duration, a parkedAnswer) (waiterRef, bool) {
	if pg.closed.Load() {
		return waiterRef{}, false
	}
	w := waiterPool.Get().(*fetchWaiter)
	w.parts = append(w.parts[:0], parts...)
	ref := waiterRef{w, w.state.Load() >> 1}
	pg.start(w, have, minBytes, iso, wait, a)
	return ref, true
}

// start registers w and arms its timer.
func (pg *fetchPurgatory) start(w *fetchWaiter, have, minBytes int64, iso fetchIsolation, wait time.Duration, a parkedAnswer) {
	w.minBytes, w.iso, w.answer, w.pg = minBytes, iso, a, pg
	gen := w.state.Load() >> 1
	w.seen.Store(have)
	w.holds.Store(2) // the completion and the timer
	pg.waiting.Add(1)
	for _, p := range w.parts {
		if !pg.register(p, w) {
			break // completed already; complete cleans up
		}
	}
	w.mu.Lock()
	armed := w.state.Load() == gen<<1 // not completed yet
	if armed {
		w.armed = true
		if w.timer == nil {
			w.timer = time.AfterFunc(wait, w.expire)
		} else {
			w.timer.Reset(wait)
		}
	}
	w.mu.Unlock()
	if !armed {
		w.release() // the timer's hold: it was never set
	}
	// close may have swept the shards between the check above and the
	// registration, and missed this waiter.
	if pg.closed.Load() {
		w.completeGen(gen)
	}
}

// done reports whether the waiter's current generation is completed.
func (w *fetchWaiter) done() bool { return w.state.Load()&1 != 0 }

// current names the waiter's current generation.
func (w *fetchWaiter) current() waiterRef { return waiterRef{w, w.state.Load() >> 1} }

// release lets go of one hold; the last ends the generation.
func (w *fetchWaiter) release() {
	if w.holds.Add(-1) != 0 {
		return
	}
	if !w.pooled {
		return
	}
	clear(w.parts)
	w.parts, w.answer = w.parts[:0], nil
	if cap(w.parts) > maxPooledTopics {
		w.parts = nil
	}
	w.state.Store((w.state.Load()>>1 + 1) << 1) // a new, open generation
	waiterPool.Put(w)
}

// register adds w under p unless w is already completed. Checking done
// under the shard lock means remove, which runs after done is set, cannot
// miss an entry.
func (pg *fetchPurgatory) register(p *Partition, w *fetchWaiter) bool {
	sh := pg.shard(p)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if w.done() {
		return false
	}
	list, ok := sh.byPartition[p]
	if !ok && len(sh.spare) > 0 {
		list = sh.spare[len(sh.spare)-1]
		sh.spare = sh.spare[:len(sh.spare)-1]
	}
	sh.byPartition[p] = append(list, w)
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
	var ready [8]waiterRef
	due := pg.collectReady(p, n, iso, ready[:0])
	for len(due) > 0 {
		for _, ref := range due {
			ref.complete()
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
func (pg *fetchPurgatory) collectReady(p *Partition, n int64, iso fetchIsolation, dst []waiterRef) []waiterRef {
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
		if seen >= w.minBytes && len(dst) < cap(dst) && !w.done() {
			dst = append(dst, w.current())
		}
	}
	return dst
}

// complete answers the waiter once, whoever gets here first: a wake, the
// timer, the broker closing, or the fetch's own recheck. It completes the
// current generation: only for a waiter the caller knows is still in it
// (an unpooled one, or under the shard lock); others use a waiterRef.
func (w *fetchWaiter) complete() { w.completeGen(w.state.Load() >> 1) }

func (w *fetchWaiter) completeGen(gen uint64) {
	if !w.state.CompareAndSwap(gen<<1, gen<<1|1) {
		return
	}
	w.mu.Lock()
	stopped := false
	if w.armed {
		w.armed = false
		stopped = w.timer.Stop() // else expire is running and lets go itself
	}
	w.mu.Unlock()
	w.finish()
	if stopped {
		w.release() // the timer's hold
	}
}

// expire is the timer's function.
func (w *fetchWaiter) expire() {
	w.mu.Lock()
	w.armed = false
	w.mu.Unlock()
	// The timer's hold keeps the generation from ending before this runs,
	// so the current one is the one it was set for.
	gen := w.state.Load() >> 1
	if w.state.CompareAndSwap(gen<<1, gen<<1|1) {
		w.finish()
	}
	w.release() // the timer's hold
}

// finish unregisters and answers a waiter just completed, then lets go of
// the completion's hold.
func (w *fetchWaiter) finish() {
	w.pg.remove(w)
	w.answer.answerParked()
	w.release()
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
			if cap(list) > 0 && cap(list) <= maxPooledTopics && len(sh.spare) < maxSpareLists {
				sh.spare = append(sh.spare, list)
			}
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
		ref := pg.anyWaiter()
		if ref.w == nil {
			return
		}
		ref.complete()
	}
}

func (pg *fetchPurgatory) anyWaiter() waiterRef {
	for i := range pg.shards {
		sh := &pg.shards[i]
		sh.mu.Lock()
		for _, list := range sh.byPartition {
			for _, w := range list {
				if !w.done() {
					ref := w.current()
					sh.mu.Unlock()
					return ref
				}
			}
		}
		sh.mu.Unlock()
	}
	return waiterRef{}
}

// ReleaseWaitingFetches answers every parked fetch now and makes later
// fetches answer without waiting. The network layer calls it when shutdown
// begins, so that draining in-flight requests does not wait out long polls.
func (b *Broker) ReleaseWaitingFetches() { b.waiters.close() }
