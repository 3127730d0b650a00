package engine

// Fetch (key 1), versions 4-16.
//
// Zero-copy: the records of each partition are a storage.Region spliced
// into the response frame (fetch_encode.go writes every other byte of the
// body itself), so record bytes go from the page cache to the socket.
//
// Semantics, as Kafka:
//   - read_uncommitted consumers read up to the high watermark,
//     read_committed ones up to the last stable offset (LSO), with the
//     aborted transactions that overlap the records returned (Kafka's rule:
//     marker at or after the fetch offset, first offset before the end of
//     what is returned; an empty list when none, null for
//     read_uncommitted and for errors). Every answer carries the LSO. A
//     parked read_committed fetch is woken by LSO moves, not by high
//     watermark moves that leave the LSO where it was.
//   - Partitions are read in request (or session) order. The response stops
//     at max.bytes (capped at Kafka's fetch.max.bytes default, 55 MiB) and
//     each partition at its own max bytes, except that the first batch of
//     the first non-empty partition comes whole even if larger (KIP-74). A
//     later partition whose first batch does not fit in what is left gets
//     no records this time (Kafka would send a truncated batch the client
//     discards).
//   - Errors per partition: UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_ID
//     (v13+, topics by id), FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH
//     (v9+ CurrentLeaderEpoch; v16+ also names the current leader, KIP-951),
//     OFFSET_OUT_OF_RANGE outside [log start, log end], and a diverging
//     epoch (v12+ LastFetchedEpoch, KIP-595) when the client's last epoch
//     ends before its fetch offset. Errored partitions carry -1 offsets.
//   - Fetches from replicas (replica id >= 0 before v15, ReplicaState.ID
//     from v15) are served to the partition's assigned followers
//     (Partition.acceptsFollower; anyone else gets NOT_LEADER_OR_FOLLOWER):
//     they read up to the log end offset (fetchLogEnd) from the same
//     file-region path, and each read records the follower's fetch offset
//     (its log end) in the leader's replication state, which may move the
//     high watermark and propose an ISR expansion (followerFetched). The
//     answer carries the high watermark. A consumer reads up to the high
//     watermark, or the last stable offset for read_committed. A partition
//     not led here answers NOT_LEADER_OR_FOLLOWER. A parked follower fetch
//     is woken by appends (its data is the log end), a consumer's by the
//     high watermark.
//   - Long poll: with fewer than min.bytes readable and no error, the fetch
//     parks in the purgatory (fetch_purgatory.go) for up to max.wait.ms and
//     is answered, re-read from the logs, by the high watermark move that
//     brings enough bytes (Partition.advanceHighWatermark, whoever
//     appended: a produce or the group coordinator), the timer, or broker
//     shutdown.
//   - v7+ fetch sessions (KIP-227, fetch_sessions.go).
//   - Replication throttles (KIP-73): a follower's fetch of a partition
//     whose topic names this leader's replica in
//     leader.replication.throttled.replicas, by a follower outside the
//     ISR, counts against leader.replication.throttled.rate; over it,
//     the partition gets no records this time.
//   - Reading from followers (KIP-392): a consumer's fetch of v11+ is
//     served by a follower too, up to the follower's high watermark (an
//     offset between it and the follower's log end reads nothing yet and
//     waits; one outside [log start, log end] is OFFSET_OUT_OF_RANGE, on
//     which clients go back to the leader), fenced against the leader
//     epoch the follower follows. With replica.selector.class set to
//     Kafka's RackAwareReplicaSelector, the leader answers a consumer
//     whose client.rack (RackID) is not the leader's with the in-sync
//     follower in that rack that has the fetch offset, as
//     PreferredReadReplica and no records, and answers at once.
//
// Left out: tiered storage.

import (
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/replication"
	"github.com/sluice-broker/sluice/storage"
)

func init() { register(kmsg.Fetch, 4, 16, (*Broker).handleFetch) }

// fetchMaxBytes is Kafka's broker default fetch.max.bytes: a response is
// never built larger than this, whatever the client asks.
const fetchMaxBytes = 55 << 20

// fetch is one fetch request on its way: the partitions to read, in response
// order, and what reading them found. It is pooled; a parked fetch keeps its
// fetch until it is answered.
type fetch struct {
	b         *Broker
	r         *Request
	version   int16
	minBytes  int64
	maxBytes  int64
	wait      time.Duration
	isolation fetchIsolation // how far the fetcher may read
	replica   int32          // the fetching replica's broker id, -1 for consumers
	// anyReplica: a consumer that may read from followers (v11+,
	// KIP-392), and rack its client.rack ("" none).
	anyReplica bool
	rack       string
	nowMs      int64 // when the partitions were read (a follower's fetch time)

	errCode     int16         // top-level error (fetch sessions)
	sessionID   int32         // session id to answer with
	session     *fetchSession // nil when sessionless
	incremental bool          // answer only partitions that changed

	parts []fetchPart
	// aborted holds the aborted transactions of every read_committed
	// part (fetchPart.abortedFrom/To index it); reused across requests.
	aborted []storage.AbortedTxn
}

// fetchPart is one partition of a fetch: what was asked and what was read.
type fetchPart struct {
	// Asked. In a session these come from the session's cache.
	topicName          string   // v4-v12
	topicID            [16]byte // v13+
	partition          int32
	fetchOffset        int64
	maxBytes           int32
	currentLeaderEpoch int32
	lastFetchedEpoch   int32
	sp                 *sessionPart // the session's entry, if any

	// Read.
	topic        *Topic
	err          int16
	hw, logStart int64
	lso          int64
	// f.aborted[abortedFrom:abortedTo] are the aborted transactions
	// overlapping records (read_committed).
	abortedFrom, abortedTo int32
	records                storage.Region
	end                    int64 // what the fetcher could read up to, at the read
	divergingEpoch         int32 // -1: none
	divergingEnd           int64
	leaderEpoch            int32 // >= 0: report the current leader (KIP-951)
	preferred              int32 // >= 0: read from this replica instead (KIP-392)
	omit                   bool  // incremental fetch: nothing new for the client
}

var fetchPool = sync.Pool{New: func() any { return new(fetch) }}

func (b *Broker) handleFetch(r *Request) {
	req := r.Msg.(*kmsg.FetchRequest)
	f := fetchPool.Get().(*fetch)
	f.init(b, r, req)
	b.sessions.begin(f, req)
	if f.errCode != 0 {
		f.respond()
		return
	}
	readable, failed := f.read()
	if failed || readable >= f.minBytes || f.wait <= 0 || len(f.parts) == 0 {
		f.respond()
		return
	}
	f.park(readable)
}

func (f *fetch) init(b *Broker, r *Request, req *kmsg.FetchRequest) {
	*f = fetch{b: b, r: r, version: r.Version, parts: f.parts[:0], aborted: f.aborted[:0]}
	f.minBytes = int64(req.MinBytes)
	f.maxBytes = min(int64(req.MaxBytes), fetchMaxBytes)
	f.wait = time.Duration(req.MaxWaitMillis) * time.Millisecond
	f.replica = req.ReplicaID
	if r.Version >= 15 {
		f.replica = req.ReplicaState.ID
	}
	f.isolation = isolationFor(f.replica >= 0, req.IsolationLevel)
	if r.Version >= 11 && f.replica < 0 {
		f.anyReplica = true
		if b.cfg.ReplicaSelectorClass == rackAwareSelector {
			f.rack = req.Rack
		}
	}
}

// addRequested appends the partitions of req in request order (a
// sessionless or full fetch).
func (f *fetch) addRequested(req *kmsg.FetchRequest) {
	for i := range req.Topics {
		t := &req.Topics[i]
		for j := range t.Partitions {
			f.parts = append(f.parts, f.requestedPart(t, &t.Partitions[j]))
		}
	}
}

// requestedPart takes one partition of the request, with the fields of
// versions that lack them at their defaults.
func (f *fetch) requestedPart(t *kmsg.FetchRequestTopic, p *kmsg.FetchRequestTopicPartition) fetchPart {
	fp := fetchPart{partition: p.Partition, fetchOffset: p.FetchOffset, maxBytes: p.PartitionMaxBytes,
		currentLeaderEpoch: -1, lastFetchedEpoch: -1}
	if f.version >= 13 {
		fp.topicID = t.TopicID
	} else {
		fp.topicName = t.Topic
	}
	if f.version >= 9 {
		fp.currentLeaderEpoch = p.CurrentLeaderEpoch
	}
	if f.version >= 12 {
		fp.lastFetchedEpoch = p.LastFetchedEpoch
	}
	return fp
}

// read reads every partition, returning the bytes readable and whether any
// partition failed (which answers the fetch at once, as in Kafka).
func (f *fetch) read() (readable int64, failed bool) {
	remaining := f.maxBytes
	first := true // no records taken yet: KIP-74 lets the first batch exceed the limits
	var last *Topic
	if f.replica >= 0 {
		f.nowMs = wallMs()
	}
	f.aborted = f.aborted[:0]
	for i := range f.parts {
		fp := &f.parts[i]
		last = f.resolve(fp, last)
		f.readPart(fp, &remaining, &first)
		readable += fp.records.Len
		failed = failed || fp.err != 0 || fp.divergingEpoch >= 0 || fp.preferred >= 0
	}
	return readable, failed
}

// resolve finds fp's topic by name (v4-v12) or id (v13+), reusing the
// previous partition's topic when it is the same one.
func (f *fetch) resolve(fp *fetchPart, last *Topic) *Topic {
	switch {
	case last != nil && f.version >= 13 && last.ID == fp.topicID:
	case last != nil && f.version < 13 && last.Name == fp.topicName:
	case f.version >= 13:
		last = f.b.TopicByID(fp.topicID)
	default:
		last = f.b.Topic(fp.topicName)
	}
	fp.topic = last
	return last
}

// readPart fills in one partition's answer. remaining is what is left of
// the response's max bytes; first is true until some partition has records.
func (f *fetch) readPart(fp *fetchPart, remaining *int64, first *bool) {
	fp.records.Release() // a parked fetch's earlier read
	fp.err, fp.hw, fp.logStart, fp.end = 0, -1, -1, -1
	fp.lso, fp.abortedFrom, fp.abortedTo = -1, 0, 0
	fp.divergingEpoch, fp.divergingEnd, fp.leaderEpoch, fp.omit, fp.preferred = -1, -1, -1, false, -1
	p := f.partition(fp)
	if p == nil {
		return
	}
	if fp.err = checkPosition(fp, p); fp.err != 0 {
		return
	}
	if f.rack != "" && p.isLeader() {
		// KIP-392: a consumer in another rack than the leader reads
		// from a replica in its own; this answer carries no records.
		if fp.preferred = p.preferredReadReplica(f.rack, fp.fetchOffset, f.b); fp.preferred >= 0 {
			fp.hw, fp.logStart, fp.lso = p.HighWatermark(), p.LogStartOffset(), p.LastStableOffset()
			return
		}
	}
	throttled, rate := false, int64(0)
	if f.replica >= 0 && fp.divergingEpoch < 0 {
		p.followerFetched(f.replica, fp.fetchOffset, f.nowMs)
		throttled, rate = f.leaderThrottled(p)
	}
	// The LSO is read before the high watermark, so it is never above it.
	lso := p.LastStableOffset()
	hw, logStart, fetchable := p.HighWatermark(), p.LogStartOffset(), p.fetchableOffset(f.isolation)
	fp.hw, fp.logStart, fp.end, fp.lso = hw, logStart, fetchable, lso
	limit := min(int64(fp.maxBytes), *remaining)
	if fp.divergingEpoch >= 0 || fp.fetchOffset >= fetchable || (limit <= 0 && !*first) {
		return
	}
	if throttled && f.b.replicas.leaderQuota.exceeded(rate) {
		return // over leader.replication.throttled.rate: nothing this time
	}
	reg, err := p.read(fp.fetchOffset, int32(max(limit, 0)), f.isolation)
	if err != nil {
		fp.err, fp.hw, fp.logStart, fp.lso = ErrorCode(err), -1, -1, -1
		return
	}
	if reg.Len == 0 || (reg.Len > limit && !*first) {
		reg.Release()
		return
	}
	if throttled {
		f.b.replicas.leaderQuota.record(reg.Len, rate)
	}
	if f.isolation == fetchTxnCommitted {
		f.addAborted(fp, p, reg)
	}
	fp.records = reg
	*first = false
	*remaining -= reg.Len
}

// addAborted collects the aborted transactions overlapping reg, the
// records a read_committed fetch of fp returns.
func (f *fetch) addAborted(fp *fetchPart, p *Partition, reg storage.Region) {
	end := reg.NextOffset
	if end < 0 {
		end = fp.end
	}
	fp.abortedFrom = int32(len(f.aborted))
	f.aborted = p.abortedTxns(f.aborted, fp.fetchOffset, end)
	fp.abortedTo = int32(len(f.aborted))
}

// leaderThrottled reports whether the follower's fetch of p counts
// against leader.replication.throttled.rate (KIP-73: the topic names
// this leader's replica in leader.replication.throttled.replicas and the
// follower is not in the ISR), and the rate.
func (f *fetch) leaderThrottled(p *Partition) (bool, int64) {
	rate, _ := f.b.replicas.throttleRates()
	return rate != replication.Unthrottled && p.leaderThrottled(f.replica), rate
}

// partition returns fp's partition, or nil with fp.err set.
func (f *fetch) partition(fp *fetchPart) *Partition {
	var p *Partition
	if fp.topic != nil {
		p = fp.topic.Partition(fp.partition)
	}
	switch {
	case fp.topic == nil && f.version >= 13:
		fp.err = kerr.UnknownTopicID.Code
	case f.r.fetchDenied(fetchTopicName(fp), f.replica >= 0): // authz.go
		fp.err = kerr.TopicAuthorizationFailed.Code
	case p == nil:
		fp.err = kerr.UnknownTopicOrPartition.Code
	case f.replica >= 0 && !p.acceptsFollower(f.replica):
		fp.err = kerr.NotLeaderForPartition.Code
	case f.anyReplica:
		fp.err = p.checkReadable(fp.currentLeaderEpoch)
		if fp.err == kerr.FencedLeaderEpoch.Code && f.version >= 16 && p.isLeader() {
			fp.leaderEpoch = p.LeaderEpoch()
		}
	default:
		fp.err = p.checkLeader(fp.currentLeaderEpoch)
		if fp.err == kerr.FencedLeaderEpoch.Code && f.version >= 16 {
			fp.leaderEpoch = p.LeaderEpoch()
		}
	}
	if fp.err != 0 {
		return nil
	}
	return p
}

// checkPosition validates where the client fetches from. With a last
// fetched epoch (v12+, KIP-595) it first checks the client's log against
// ours: if that epoch ends before the fetch offset, or we never had it, the
// client diverged and must truncate to the end we report in fp. An epoch
// the log cannot place, or an offset outside [log start, log end], is
// OFFSET_OUT_OF_RANGE, as in Kafka.
func checkPosition(fp *fetchPart, p *Partition) int16 {
	if fp.lastFetchedEpoch >= 0 {
		epoch, end := p.endOffsetForEpoch(fp.lastFetchedEpoch)
		// Below the log start is out of range whatever the epochs say.
		if epoch < 0 || end < 0 || fp.fetchOffset < p.LogStartOffset() {
			return kerr.OffsetOutOfRange.Code
		}
		if epoch < fp.lastFetchedEpoch || end < fp.fetchOffset {
			fp.divergingEpoch, fp.divergingEnd = epoch, end
			return 0
		}
	}
	return p.checkFetchOffset(fp.fetchOffset)
}

// park waits for more data. The logs' regions are not kept: the fetch is
// read again when it is answered. Parking allocates nothing for up to
// maxParkedInline partitions (the waiter is pooled, fetch_purgatory.go).
func (f *fetch) park(readable int64) {
	var partsBuf [maxParkedInline]*Partition
	var endsBuf [maxParkedInline]int64
	parts, ends := partsBuf[:0], endsBuf[:0]
	for i := range f.parts {
		fp := &f.parts[i]
		fp.records.Release()
		if p := fp.topic.Partition(fp.partition); p != nil {
			parts = append(parts, p)
			ends = append(ends, fp.end)
		}
	}
	iso := f.isolation
	w, ok := f.b.waiters.parkPooled(parts, readable, f.minBytes, f.isolation, f.wait, f)
	if !ok {
		f.answerParked()
		return
	}
	// An append between our read and the registration woke no one; look
	// for one now. f belongs to the waiter from here on: only parts,
	// ends and iso, which the answer does not touch, may be read, and w
	// completes nothing once the waiter has moved on.
	for i, p := range parts {
		if p.fetchableOffset(iso) != ends[i] {
			w.complete()
			return
		}
	}
}

// maxParkedInline is how many partitions a parking fetch lists on the
// stack.
const maxParkedInline = 16

// answerParked answers a parked fetch with a fresh read of every
// partition (parkedAnswer).
func (f *fetch) answerParked() {
	f.read()
	f.respond()
}

// respond encodes and sends the answer, and returns f to the pool.
func (f *fetch) respond() {
	if f.session != nil {
		f.session.finish(f)
	}
	w := f.r.beginResponse(f.version >= 12)
	f.encode(w)
	f.countFetched()
	f.r.finish(w.finish())
	f.release()
}

func (f *fetch) countFetched() {
	for i := range f.parts {
		fp := &f.parts[i]
		if fp.records.Len > 0 && !fp.omit && f.replica < 0 {
			// Records are counted as the offsets the fetch moves the
			// consumer past (exact unless the topic is compacted), so
			// the zero-copy path never reads a batch header to count.
			f.b.metrics.fetched(fp.topic.Name, int(fp.records.Len), int(max(fp.records.NextOffset-fp.fetchOffset, 0)))
		}
	}
}

// maxPooledParts keeps a fetch of a huge session from pinning memory.
const maxPooledParts = 4096

// release releases the records read (the response holds its own
// references) and returns f to the pool.
func (f *fetch) release() {
	for i := range f.parts {
		f.parts[i].records.Release()
	}
	parts := f.parts
	if cap(parts) > maxPooledParts {
		parts = nil
	}
	clear(parts)
	aborted := f.aborted
	if cap(aborted) > maxPooledParts {
		aborted = nil
	}
	*f = fetch{parts: parts[:0], aborted: aborted[:0]}
	fetchPool.Put(f)
}
