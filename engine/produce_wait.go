package engine

// An acks=all produce is answered when the high watermark of every
// partition it wrote has passed its batch: Kafka's DelayedProduce. With
// replication the watermark waits for the in-sync followers' fetches, and
// a partition whose ISR shrank below min.insync.replicas meanwhile answers
// NOT_ENOUGH_REPLICAS_AFTER_APPEND (the Leader's AcksAllDone). The
// handler appends every partition first; a partition whose watermark is
// already there (always, with one replica) costs one atomic load and
// nothing is allocated. Otherwise the request's answer is handed to a
// producePending, which Partition.awaitHighWatermark calls back per
// partition from whichever goroutine moves the watermark; the last
// callback (or the timeout) answers the request, as a parked fetch is
// answered from another goroutine.

import (
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// producePending is an acks=all produce request waiting for high
// watermarks. It owns the request's scratch (and so its response) until it
// answers.
type producePending struct {
	r *Request
	s *produceScratch

	mu sync.Mutex
	// outs are the partitions' answers; an entry is set to nil when that
	// partition is settled (watermark reached, leadership lost, timeout).
	outs []*kmsg.ProduceResponseTopicPartition
	// waiting counts the unsettled partitions, plus one held by the
	// handler until it has appended every partition. Invariant: the
	// request is answered exactly when it drops to 0.
	waiting int
	timer   *time.Timer // started once the handler lets go; nil before
}

// awaitCommit makes the request's answer wait until p's high watermark
// reaches offset, unless it is there already (then the answer may still be
// NOT_ENOUGH_REPLICAS_AFTER_APPEND, Partition.acksAllDone).
func (s *produceScratch) awaitCommit(r *Request, p *Partition, out *kmsg.ProduceResponseTopicPartition, offset int64) {
	if done, code := p.acksAllDone(offset); done {
		if code != 0 {
			out.ErrorCode = code
		}
		return // the common path: nothing to wait for
	}
	if s.pending == nil {
		s.pending = &producePending{r: r, s: s, waiting: 1}
	}
	s.pending.add(p, out, offset)
}

// add waits for one partition.
func (pp *producePending) add(p *Partition, out *kmsg.ProduceResponseTopicPartition, offset int64) {
	pp.mu.Lock()
	i := len(pp.outs)
	pp.outs = append(pp.outs, out)
	pp.waiting++
	pp.mu.Unlock()
	if code, waiting := p.awaitHighWatermark(offset, func(code int16) { pp.settle(i, code) }); !waiting {
		pp.settle(i, code)
	}
}

// settle records partition i's outcome: 0 when its watermark passed the
// batch, else the error it answers with.
func (pp *producePending) settle(i int, code int16) {
	pp.mu.Lock()
	out := pp.outs[i]
	if out == nil {
		pp.mu.Unlock()
		return // timed out already
	}
	pp.outs[i] = nil
	if code != 0 {
		out.ErrorCode = code
	}
	pp.waiting--
	last := pp.waiting == 0
	pp.mu.Unlock()
	if last {
		pp.answer()
	}
}

// appended is the handler letting go once every partition is appended:
// the request is answered now if nothing is left to wait for, or when the
// last partition settles, or after timeoutMs.
func (pp *producePending) appended(timeoutMs int32) {
	pp.mu.Lock()
	pp.waiting--
	last := pp.waiting == 0
	if !last {
		pp.timer = time.AfterFunc(time.Duration(max(timeoutMs, 0))*time.Millisecond, pp.expire)
	}
	pp.mu.Unlock()
	if last {
		pp.answer()
	}
}

// expire answers REQUEST_TIMED_OUT for the partitions still waiting.
func (pp *producePending) expire() {
	pp.mu.Lock()
	if pp.waiting == 0 {
		pp.mu.Unlock()
		return // the last partition settled meanwhile
	}
	for i, out := range pp.outs {
		if out != nil {
			out.ErrorCode = kerr.RequestTimedOut.Code
			pp.outs[i] = nil
		}
	}
	pp.waiting = 0
	pp.mu.Unlock()
	pp.answer()
}

// answer sends the response; it runs once, after waiting reached 0.
func (pp *producePending) answer() {
	pp.mu.Lock()
	if pp.timer != nil {
		pp.timer.Stop()
	}
	pp.mu.Unlock()
	pp.r.Respond(&pp.s.resp)
	pp.s.release()
}
