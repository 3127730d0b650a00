package engine

// Batched appends. A network event loop serves every frame that arrived
// while it was busy, one after another, and then waits for more. Produce
// requests among them that write the same partition — from one connection
// or many — are appended together: the handler checks each partition's
// record set as usual but, instead of appending it, adds it to the loop's
// ProduceBatch; when the loop has served everything ready it calls Flush,
// which appends each partition's record sets with one Log.Append (one
// pwritev, one high-watermark move, one wake-up of the fetches waiting on
// the partition) and then answers the requests, in arrival order, so their
// acknowledgements leave in the same loop iteration. A partition's record
// sets are appended in arrival order within each acks class (acks=all
// appends apart, since min.insync.replicas refuses only them); requests
// of different connections are concurrent, so any order between them is
// one Kafka could have chosen, and one connection has one request in
// flight. With one producer the
// batch holds one request and costs nothing but the deferral to the end of
// the loop's iteration (no syscall, no goroutine hand-off).
//
// A ProduceBatch belongs to one goroutine: the loop that serves its
// sessions' frames (Session.Batch) is the one that calls Flush. Requests
// served elsewhere (worker pools, the std backend, in-process callers)
// have no batch and append at once.

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/storage"
)

// ProduceBatch gathers the appends of the produce requests one event loop
// serves between two waits. The zero value is not usable: see
// NewProduceBatch.
type ProduceBatch struct {
	groups []appendGroup
	// index finds a partition's group. Invariant: index and groups[:n]
	// describe the same groups, n = len(groups) between flushes.
	index map[appendKey]int
	// reqs are the requests waiting for the flush, in arrival order.
	reqs []*produceScratch
}

// appendKey separates acks=all appends from the others: a partition below
// min.insync.replicas refuses the former only.
type appendKey struct {
	p       *Partition
	acksAll bool
}

// appendGroup is one partition's share of the batch: the record sets to
// append in one call and, entry by entry, the request and answer each
// belongs to.
type appendGroup struct {
	key     appendKey
	entries []storage.AppendEntry
	owners  []batchOwner // parallel to entries
}

type batchOwner struct {
	s   *produceScratch
	t   *Topic
	out *kmsg.ProduceResponseTopicPartition
}

// NewProduceBatch makes an empty batch for one event loop.
func NewProduceBatch() *ProduceBatch {
	return &ProduceBatch{index: make(map[appendKey]int)}
}

// add defers one partition's append to the flush.
func (pb *ProduceBatch) add(s *produceScratch, t *Topic, p *Partition, out *kmsg.ProduceResponseTopicPartition, e storage.AppendEntry) {
	key := appendKey{p, s.acks == -1}
	i, ok := pb.index[key]
	if !ok {
		i = len(pb.groups)
		pb.index[key] = i
		pb.groups = grow(pb.groups, i+1)
		pb.groups[i].key = key
	}
	g := &pb.groups[i]
	g.entries = append(g.entries, e)
	g.owners = append(g.owners, batchOwner{s, t, out})
	s.deferred++
}

// wait queues a request whose partitions were all handled, some deferred.
func (pb *ProduceBatch) wait(s *produceScratch) {
	pb.reqs = append(pb.reqs, s)
}

// Pending reports whether requests wait for Flush.
func (pb *ProduceBatch) Pending() bool { return len(pb.reqs) > 0 }

// Flush appends every partition's record sets, one Append per partition,
// and answers the waiting requests.
func (pb *ProduceBatch) Flush() {
	if len(pb.reqs) == 0 {
		return
	}
	now := time.Now().UnixMilli()
	for i := range pb.groups {
		pb.groups[i].append(now)
	}
	for i, s := range pb.reqs {
		pb.reqs[i] = nil
		// Held for the batch, the request took handler time, not a
		// wait: client quotas (request_percentage) count it as inline.
		s.r.authz.inline.Store(true)
		s.complete(s.r.Msg.(*kmsg.ProduceRequest).TimeoutMillis)
	}
	pb.reqs = pb.reqs[:0]
	pb.groups = pb.groups[:0]
	clear(pb.index)
}

// append writes the group's record sets with one Append and hands each
// its outcome.
func (g *appendGroup) append(now int64) {
	acks := int16(1)
	if g.key.acksAll {
		acks = -1
	}
	_ = g.key.p.append(g.entries, acks, now)
	for j := range g.entries {
		o := &g.owners[j]
		o.s.appended(o.t, g.key.p, o.out, &g.entries[j])
		o.s.deferred--
	}
	clear(g.entries) // do not keep request frames alive
	clear(g.owners)
	g.entries, g.owners = g.entries[:0], g.owners[:0]
	g.key = appendKey{}
}
