package engine

// ShareFetch (key 78), versions 1-2.
//
// One request of a share session (share_sessions.go): first the
// acknowledgements it carries are applied to their share-partitions (and
// written to the share coordinator before the answer), then, unless the
// session is closing (epoch -1), records are acquired for the member from
// every partition of the session: Available records first (redeliveries),
// then new ones up to the high watermark, at most MaxRecords, each locked
// for share.record.lock.duration.ms. The answer carries whole record
// batches covering the acquired offsets and the acquired ranges with
// their delivery counts (spliced from the log files like Fetch's, cut
// after the batch of the last offset acquired); the client hands out only
// those. With nothing
// acquired the request waits up to MaxWaitMillis: new records, or records
// another member releases (an acknowledgement, a closed session, a member
// gone), answer it at once.
//
// A read_committed group (share.isolation.level) acquires up to the last
// stable offset and never delivers records of aborted transactions (they
// are archived as they are acquired).
//
// Left out: ShareAcquireMode record_limit (v2) is treated as
// batch_optimized with MaxRecords honoured exactly, and MinBytes beyond
// "any record".

import (
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/engine/share"
	"github.com/sluice-broker/sluice/storage"
)

func init() { register(kmsg.ShareFetch, 1, 2, (*Broker).handleShareFetch) }

// maxShareWait bounds MaxWaitMillis.
const maxShareWait = 30 * time.Second

type shareFetch struct {
	b          *Broker
	r          *Request
	req        *kmsg.ShareFetchRequest
	resp       *kmsg.ShareFetchResponse
	group      string
	member     string
	tps        []shareTP
	out        map[shareTP]*kmsg.ShareFetchResponseTopicPartition
	maxRecords int
	// regions are the partitions' records spliced from the logs, released
	// once the answer (which holds its own references) is handed over.
	regions map[shareTP]storage.Region
	// bufs hold records read through memory (read_committed around
	// aborted transactions); back to shareReadBufs once the answer is
	// encoded.
	bufs []*[]byte
}

func (b *Broker) handleShareFetch(r *Request) {
	req := r.Msg.(*kmsg.ShareFetchRequest)
	resp := req.ResponseKind().(*kmsg.ShareFetchResponse)
	f := &shareFetch{b: b, r: r, req: req, resp: resp, out: map[shareTP]*kmsg.ShareFetchResponseTopicPartition{},
		regions: map[shareTP]storage.Region{}}
	if req.GroupID == nil || *req.GroupID == "" || req.MemberID == nil || *req.MemberID == "" {
		resp.ErrorCode = kerr.InvalidRequest.Code
		r.Respond(resp)
		return
	}
	f.group, f.member = *req.GroupID, *req.MemberID
	resp.AcquisitionLockTimeoutMillis = int32(b.sharePartitionConfig(f.group).LockDuration.Milliseconds())
	var add, forget []shareTP
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			add = append(add, shareTP{t.TopicID, p.Partition})
		}
	}
	for _, t := range req.ForgottenTopicsData {
		for _, p := range t.Partitions {
			forget = append(forget, shareTP{t.TopicID, p})
		}
	}
	tps, code := b.share.session(connID(r), f.group, f.member, req.ShareSessionEpoch, add, forget)
	if code != 0 {
		resp.ErrorCode = code
		r.Respond(resp)
		return
	}
	f.tps = tps
	f.acknowledge()
	if req.ShareSessionEpoch == -1 {
		b.share.releaseSession(f.group, f.member, tps)
		f.respond()
		return
	}
	f.maxRecords = int(req.MaxRecords)
	if f.maxRecords <= 0 {
		f.maxRecords = 1 << 30
	}
	if f.acquire() || req.MaxWaitMillis <= 0 || f.hasErrors() {
		f.respond()
		return
	}
	f.park()
}

// partOut is the answer's entry for a partition, made on first use.
func (f *shareFetch) partOut(tp shareTP) *kmsg.ShareFetchResponseTopicPartition {
	if p := f.out[tp]; p != nil {
		return p
	}
	p := kmsg.NewShareFetchResponseTopicPartition()
	p.Partition = tp.partition
	p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = -1, -1
	f.out[tp] = &p
	return &p
}

// acknowledge applies the request's acknowledgements.
func (f *shareFetch) acknowledge() {
	renew := f.b.shareRenewEnabled(f.group)
	for _, t := range f.req.Topics {
		for _, p := range t.Partitions {
			if len(p.AcknowledgementBatches) == 0 {
				continue
			}
			batches := make([]ackBatch, len(p.AcknowledgementBatches))
			for i, ab := range p.AcknowledgementBatches {
				batches[i] = ackBatch{ab.FirstOffset, ab.LastOffset, ab.AcknowledgeTypes}
			}
			tp := shareTP{t.TopicID, p.Partition}
			f.partOut(tp).AcknowledgeErrorCode = f.b.shareAcknowledge(f.group, f.member, tp, batches, renew)
		}
	}
}

// acquire acquires records in every session partition and reports
// whether any were.
func (f *shareFetch) acquire() bool {
	maxBytes := f.req.MaxBytes
	if maxBytes <= 0 {
		maxBytes = 1 << 20
	}
	got := false
	for _, tp := range f.tps {
		if f.maxRecords <= 0 || maxBytes <= 0 {
			break
		}
		buf := shareReadBufs.Get().(*[]byte)
		recs, ranges, code := f.b.shareAcquire(f.group, f.member, tp, maxBytes, f.maxRecords, buf)
		if recs.bytes != nil {
			f.bufs = append(f.bufs, buf)
		} else {
			shareReadBufs.Put(buf)
		}
		if code == 0 && len(ranges) == 0 {
			continue
		}
		out := f.partOut(tp)
		out.ErrorCode = code
		if code != 0 {
			continue
		}
		got = true
		out.Records = recs.bytes // one read per partition and request
		if recs.region.Len > 0 {
			old := f.regions[tp]
			old.Release()
			f.regions[tp] = recs.region
		}
		for _, rg := range ranges {
			out.AcquiredRecords = append(out.AcquiredRecords, kmsg.ShareFetchResponseTopicPartitionAcquiredRecord{
				FirstOffset: rg.First, LastOffset: rg.Last, DeliveryCount: rg.Count})
			f.maxRecords -= int(rg.Last - rg.First + 1)
		}
		maxBytes -= int32(len(recs.bytes)) + int32(recs.region.Len)
	}
	return got
}

func (f *shareFetch) hasErrors() bool {
	for _, p := range f.out {
		if p.ErrorCode != 0 || p.AcknowledgeErrorCode != 0 {
			return true
		}
	}
	return false
}

// park waits for new records in the session's partitions, then acquires
// again and answers.
func (f *shareFetch) park() {
	var parts []*Partition
	var ends []int64
	iso := f.b.shareIsolation(f.group)
	for _, tp := range f.tps {
		if t := f.b.TopicByID(tp.topic); t != nil {
			if p := t.Partition(tp.partition); p != nil {
				parts = append(parts, p)
				ends = append(ends, p.fetchableOffset(iso))
			}
		}
	}
	wait := min(time.Duration(f.req.MaxWaitMillis)*time.Millisecond, maxShareWait)
	tok := &parkedFetch{}
	answer := func() {
		f.b.share.unpark(parts, tok)
		f.acquire()
		f.respond()
	}
	w, ok := f.b.waiters.park(parts, 0, 1, iso, wait, answer)
	if !ok {
		answer()
		return
	}
	// Records released by another member wake it too, not only new ones.
	f.b.share.parkAlso(parts, tok, w)
	for i, p := range parts {
		if p.fetchableOffset(iso) != ends[i] {
			w.complete()
			return
		}
	}
}

func (f *shareFetch) respond() {
	byTopic := map[[16]byte]int{}
	for tp, p := range f.out {
		i, ok := byTopic[tp.topic]
		if !ok {
			i = len(f.resp.Topics)
			byTopic[tp.topic] = i
			f.resp.Topics = append(f.resp.Topics, kmsg.ShareFetchResponseTopic{TopicID: tp.topic})
		}
		f.resp.Topics[i].Partitions = append(f.resp.Topics[i].Partitions, *p)
	}
	f.resp.SetVersion(f.r.Version)
	if f.r.authz.post != nil {
		f.r.authz.post(f.resp) // authz_apis.go: the denied topics' partitions
	}
	w := f.r.beginResponse(true)
	encodeShareFetch(w, f.resp, f.regions) // copies f.bufs' records: free after
	f.r.finish(w.finish())
	for _, reg := range f.regions {
		reg.Release()
	}
	clear(f.regions)
	for _, b := range f.bufs {
		if cap(*b) <= maxPooledShareRead {
			shareReadBufs.Put(b)
		}
	}
}

// ---- the share-partition operations both APIs use ----

type ackBatch struct {
	first, last int64
	types       []int8
}

// sharePartitionLed resolves a share session partition to a partition led
// here.
func (b *Broker) sharePartitionLed(tp shareTP) (*Partition, int16) {
	t := b.TopicByID(tp.topic)
	if t == nil {
		return nil, kerr.UnknownTopicID.Code
	}
	p := t.Partition(tp.partition)
	if p == nil {
		return nil, kerr.UnknownTopicOrPartition.Code
	}
	if !p.isLeader() {
		return nil, kerr.NotLeaderForPartition.Code
	}
	return p, 0
}

// shareAcknowledge applies acknowledgement batches to one share-partition
// and writes its state; the first failing batch's code is the answer.
// Fetches parked on the partition are woken when records were released.
func (b *Broker) shareAcknowledge(group, member string, tp shareTP, batches []ackBatch, renew bool) int16 {
	p, code := b.sharePartitionLed(tp)
	if code != 0 {
		return code
	}
	sp, code := b.share.part(share.SPKey{Group: group, TopicID: tp.topic, Partition: tp.partition}, p)
	if code != 0 {
		return code
	}
	code = sp.acknowledge(b.share, member, batches, renew)
	if releases(batches) {
		b.share.wakeParked(p) // not under sp.mu: a woken fetch acquires from sp
	}
	return code
}

// acknowledge applies the batches and persists the result.
func (sp *sharePart) acknowledge(s *shareBroker, member string, batches []ackBatch, renew bool) int16 {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	now := time.Now()
	first := int16(0)
	for _, ab := range batches {
		if c := sp.sp.Acknowledge(member, ab.first, ab.last, ab.types, renew, now); c != 0 && first == 0 {
			first = c
		}
	}
	if c := sp.persist(s); c != 0 && first == 0 {
		first = c
	}
	return first
}

// releases reports whether acknowledgement batches give records back.
func releases(batches []ackBatch) bool {
	for _, ab := range batches {
		if slices.Contains(ab.types, share.AckRelease) {
			return true
		}
	}
	return false
}

// shareAcquire acquires records of one share-partition for member.
func (b *Broker) shareAcquire(group, member string, tp shareTP, maxBytes int32, maxRecords int, buf *[]byte) (shareRecords, []share.Range, int16) {
	p, code := b.sharePartitionLed(tp)
	if code != 0 {
		return shareRecords{}, nil, code
	}
	sp, code := b.share.part(share.SPKey{Group: group, TopicID: tp.topic, Partition: tp.partition}, p)
	if code != 0 {
		return shareRecords{}, nil, code
	}
	return b.share.acquire(sp, p, member, maxBytes, maxRecords, buf)
}
