package engine

// Replica fetchers and the ISR tick: the I/O of replication.
//
// A follower fetches the partitions it follows with Kafka's Fetch, as
// Kafka's replica fetcher threads do: one fetcher per leader broker
// multiplexes every partition this broker follows from it over one TCP
// connection and one incremental fetch session (KIP-227), so that at
// 10,000 partitions over three brokers a broker runs two fetchers, not
// 10,000 loops, and an idle round trip carries no partitions at all. Each
// round:
//
//  1. a partition that becomes a follower fetches at once from its log
//     end, naming its latest epoch (LastFetchedEpoch, KIP-595's
//     truncation on fetch, as Kafka 2.7+ replicas do); partitions whose
//     replication.Follower still needs a question answered (an epoch of
//     the leader's this log lacks, KIP-279, or an out-of-range fetch)
//     ask the leader where their epoch ends (OffsetForLeaderEpoch v4)
//     and truncate there (Partition.onEpochEndOffset → storage
//     TruncateTo);
//  2. one Fetch v15 (ReplicaState.ID = this broker, the followed leader
//     epoch, min bytes 1, max wait 500 ms) in the session: only partitions
//     whose fetch offset or last epoch changed are sent, those that
//     stopped fetching (truncating, backing off, moved away, or held back
//     by follower.replication.throttled.rate: a throttled replica not
//     caught up, while the quota is spent) are forgotten;
//  3. each partition's records are appended as the leader wrote them
//     (AppendAsFollower) and the leader's high watermark taken; a
//     DivergingEpoch answer goes to the state machine, which truncates
//     where the leader says the logs part (never before that answer);
//     OFFSET_OUT_OF_RANGE asks the leader's log start (ListOffsets
//     earliest, as Kafka's follower does) and the state machine resets
//     the log there (TruncateFullyAndStartAt) or truncates by epoch
//     again; leader-side errors (an image behind on either side) back
//     the partition off.
//
// A partition moves to another fetcher when its leader changes
// (replicaManager.follow). The request and response buffers are reused;
// what the fetcher holds grows with the largest response (bounded by
// replicaFetchMaxBytes) and the number of partitions.
//
// The ISR tick is one goroutine for the broker: every half
// replica.lag.time.max.ms it asks each replicated partition led here
// whether a follower has lagged too long (Partition.tickISR).

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/record"
	"github.com/sluice-broker/sluice/replication"
)

// Kafka's replica fetcher defaults.
const (
	replicaFetchWait      = 500 * time.Millisecond // replica.fetch.wait.max.ms
	replicaFetchMaxBytes  = 10 << 20               // replica.fetch.response.max.bytes
	replicaPartitionBytes = 1 << 20                // replica.fetch.max.bytes
	// replicaFetchBackoff is how long a fetcher waits after a failed
	// connection, and a partition after a leader-side error (Kafka's
	// replica.fetch.backoff.ms is 1000; shorter here, since a broker of
	// ours restarts in well under a second).
	replicaFetchBackoff = 200 * time.Millisecond
	replicaFetchVersion = 15
	replicaOffsetsEpoch = 4 // OffsetForLeaderEpoch version
	replicaListOffsets  = 7 // ListOffsets version
)

// replicaManager owns the broker's replica fetchers and its ISR tick.
type replicaManager struct {
	self       int32
	lagTimeMax time.Duration
	dial       DialFunc // to leaders' inter-broker listeners; nil: plain TCP
	log        *slog.Logger
	link       linkSlot
	isr        *isrSender // batches ISR proposals into AlterPartition requests

	// leaderQuota and followerQuota measure the bytes of throttled
	// replicas this broker sends as a leader and fetches as a follower.
	leaderQuota, followerQuota replicationQuota
	// rates reads the throttle rates (Broker.ReplicationThrottles, at
	// every use: they may change at run time); nil: none.
	rates atomic.Pointer[func() (leader, follower int64)]

	stop chan struct{}
	wg   sync.WaitGroup

	mu struct {
		sync.Mutex
		closed bool
		// fetchers by leader broker id.
		fetchers map[int32]*replicaFetcher
		// following maps each followed partition to its leader.
		// Invariant: p is in fetchers[following[p]].
		following map[*Partition]int32
		// leading holds the replicated partitions led here (the tick's).
		leading map[*Partition]struct{}
	}
}

func newReplicaManager(cfg Config, log *slog.Logger) *replicaManager {
	m := &replicaManager{self: cfg.NodeID, lagTimeMax: cfg.ReplicaLagTimeMax, dial: cfg.InterBroker.Dial, log: log, stop: make(chan struct{})}
	if m.lagTimeMax <= 0 {
		m.lagTimeMax = 30 * time.Second
	}
	m.isr = newISRSender(m)
	m.mu.fetchers = map[int32]*replicaFetcher{}
	m.mu.following = map[*Partition]int32{}
	m.mu.leading = map[*Partition]struct{}{}
	m.wg.Add(1)
	go m.tickLoop()
	return m
}

func (m *replicaManager) lagTimeMaxMs() int64 { return m.lagTimeMax.Milliseconds() }

// throttleRates is leader.replication.throttled.rate and
// follower.replication.throttled.rate now.
func (m *replicaManager) throttleRates() (leader, follower int64) {
	if f := m.rates.Load(); f != nil {
		return (*f)()
	}
	return replication.Unthrottled, replication.Unthrottled
}

// fetchWait is the fetchers' max wait: Kafka's 500 ms, but well inside
// replica.lag.time.max.ms (Kafka requires replica.fetch.wait.max.ms below
// it): an idle in-sync follower must come back before it counts as lagging.
func (m *replicaManager) fetchWait() time.Duration {
	return max(min(replicaFetchWait, m.lagTimeMax/3), time.Millisecond)
}

// follow makes p fetched from leader (-1: from nobody).
func (m *replicaManager) follow(p *Partition, leader int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.mu.leading, p)
	if old, ok := m.mu.following[p]; ok && old != leader {
		m.mu.fetchers[old].remove(p)
		delete(m.mu.following, p)
	}
	if leader < 0 || m.mu.closed {
		return
	}
	f := m.mu.fetchers[leader]
	if f == nil {
		f = newReplicaFetcher(m, leader)
		m.mu.fetchers[leader] = f
		m.wg.Add(1)
		go f.run()
	}
	m.mu.following[p] = leader
	f.add(p) // again on an epoch change: the fetcher rereads its position
}

// lead makes p led here; replicated says whether it has followers to tick.
func (m *replicaManager) lead(p *Partition, replicated bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.mu.following[p]; ok {
		m.mu.fetchers[old].remove(p)
		delete(m.mu.following, p)
	}
	if replicated && !m.mu.closed {
		m.mu.leading[p] = struct{}{}
	} else {
		delete(m.mu.leading, p)
	}
}

// alterPartition queues an ISR proposal for the controller; the sender
// batches it with the others made meanwhile (cluster_link.go).
func (m *replicaManager) alterPartition(p *Partition, prop *replication.ISRProposal) {
	m.isr.enqueue(p, prop)
}

// tickLoop runs the ISR shrink check of every replicated partition led
// here, every half replica.lag.time.max.ms (Kafka's isr-expiration task).
func (m *replicaManager) tickLoop() {
	defer m.wg.Done()
	t := time.NewTicker(max(m.lagTimeMax/2, 10*time.Millisecond))
	defer t.Stop()
	var parts []*Partition
	for {
		select {
		case <-m.stop:
			return
		case now := <-t.C:
			parts = m.leadingSnapshot(parts[:0])
			for _, p := range parts {
				p.tickISR(now.UnixMilli())
			}
			clear(parts)
		}
	}
}

func (m *replicaManager) leadingSnapshot(dst []*Partition) []*Partition {
	m.mu.Lock()
	defer m.mu.Unlock()
	for p := range m.mu.leading {
		dst = append(dst, p)
	}
	return dst
}

// close stops the fetchers and the tick and waits for them (before the
// logs close).
func (m *replicaManager) close() {
	m.mu.Lock()
	if m.mu.closed {
		m.mu.Unlock()
		return
	}
	m.mu.closed = true
	close(m.stop)
	for _, f := range m.mu.fetchers {
		f.interrupt()
	}
	m.mu.Unlock()
	m.wg.Wait()
}

// replicaFetcher fetches every partition this broker follows from one
// leader.
type replicaFetcher struct {
	m      *replicaManager
	leader int32
	wake   chan struct{} // a partition was added or removed

	mu struct {
		sync.Mutex
		// changed holds partitions added (true) or removed (false) since
		// the loop last looked.
		changed map[*Partition]bool
		conn    net.Conn // the open connection, for interrupt
	}

	// Owned by the run goroutine.
	parts map[*Partition]*fetcherPart
	// outOfRange collects the partitions a fetch answered
	// OFFSET_OUT_OF_RANGE; their leader's log start is asked next.
	outOfRange []*fetcherPart
	byKey      map[partKey]*fetcherPart
	conn       net.Conn
	corr       int32
	session    struct{ id, epoch int32 }
	wbuf       []byte
	rbuf       []byte
	fmt        *kmsg.RequestFormatter
	req        kmsg.FetchRequest
}

type partKey struct {
	topic     [16]byte
	partition int32
}

// fetcherPart is a partition in the fetcher, with what the leader's
// session holds of it.
type fetcherPart struct {
	p   *Partition
	pos followPosition
	ok  bool // pos is current (p still follows this leader)
	// inSession: the session has the partition at sentOffset/sentEpoch.
	inSession     bool
	sentOffset    int64
	sentEpoch     int32
	sentLastEpoch int32 // the LastFetchedEpoch sent
	// backoff: no fetching before this time (a leader-side error).
	backoff time.Time
	// caughtUp: the last answer left the log at the leader's high
	// watermark (Kafka's isReplicaInSync for throttling: an in-sync
	// follower is never throttled).
	caughtUp bool
	// throttled: the partition's bytes in the answer to the request in
	// flight count against follower.replication.throttled.rate.
	throttled bool
}

func newReplicaFetcher(m *replicaManager, leader int32) *replicaFetcher {
	f := &replicaFetcher{m: m, leader: leader, wake: make(chan struct{}, 1),
		parts: map[*Partition]*fetcherPart{}, byKey: map[partKey]*fetcherPart{},
		fmt: kmsg.NewRequestFormatter(kmsg.FormatterClientID(fmt.Sprintf("sluice-replica-fetcher-%d-%d", m.self, leader)))}
	f.mu.changed = map[*Partition]bool{}
	return f
}

func (f *replicaFetcher) add(p *Partition)    { f.change(p, true) }
func (f *replicaFetcher) remove(p *Partition) { f.change(p, false) }

func (f *replicaFetcher) change(p *Partition, add bool) {
	f.mu.Lock()
	f.mu.changed[p] = add
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// interrupt unblocks a round trip in flight (shutdown).
func (f *replicaFetcher) interrupt() {
	f.mu.Lock()
	if f.mu.conn != nil {
		f.mu.conn.Close()
	}
	f.mu.Unlock()
}

func (f *replicaFetcher) run() {
	defer f.m.wg.Done()
	defer f.closeConn()
	for {
		select {
		case <-f.m.stop:
			return
		default:
		}
		f.takeChanges()
		if len(f.parts) == 0 {
			select {
			case <-f.m.stop:
				return
			case <-f.wake:
			}
			continue
		}
		if err := f.round(); err != nil {
			f.m.log.Debug("replica fetcher", "leader", f.leader, "err", err)
			f.closeConn()
			select {
			case <-f.m.stop:
				return
			case <-time.After(replicaFetchBackoff):
			}
		}
	}
}

// takeChanges applies the partitions added and removed since last time.
func (f *replicaFetcher) takeChanges() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for p, add := range f.mu.changed {
		key := partKey{p.Topic.ID, p.Index}
		fp := f.parts[p]
		switch {
		case add && fp == nil:
			fp = &fetcherPart{p: p}
			f.parts[p], f.byKey[key] = fp, fp
		case add:
			fp.backoff = time.Time{} // a new epoch: try at once
		case fp != nil:
			delete(f.parts, p)
			delete(f.byKey, key)
			if fp.inSession {
				f.session.epoch = 0 // the session still has it: start a new one
			}
		}
	}
	clear(f.mu.changed)
}

// round truncates what must be, then fetches once.
func (f *replicaFetcher) round() error {
	if err := f.dial(); err != nil {
		return err
	}
	f.refresh()
	if err := f.truncate(); err != nil {
		return err
	}
	f.refresh()
	return f.fetch()
}

// refresh rereads every partition's position; a partition that no longer
// follows this leader waits for its removal.
func (f *replicaFetcher) refresh() {
	for _, fp := range f.parts {
		fp.pos, fp.ok = fp.p.followPosition(f.leader)
	}
}

func (f *replicaFetcher) dial() error {
	if f.conn != nil {
		return nil
	}
	addr, ok := f.m.link.load().BrokerAddr(f.leader)
	if !ok {
		return fmt.Errorf("no address for broker %d", f.leader)
	}
	c, err := dialPeer(f.m.dial, addr, 5*time.Second)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case <-f.m.stop:
		c.Close()
		return errors.New("closing")
	default:
	}
	f.conn, f.mu.conn = c, c
	f.session.id, f.session.epoch = 0, 0
	return nil
}

func (f *replicaFetcher) closeConn() {
	if f.conn == nil {
		return
	}
	f.mu.Lock()
	f.conn.Close()
	f.conn, f.mu.conn = nil, nil
	f.mu.Unlock()
	f.session.id, f.session.epoch = 0, 0
}

// ---- truncation ----

// truncate asks the leader where the latest epoch of each truncating
// partition ends and lets the partitions cut their logs there.
func (f *replicaFetcher) truncate() error {
	var asked map[partName]*fetcherPart
	now := time.Now()
	for _, fp := range f.parts {
		if !fp.ok || !fp.pos.truncating || now.Before(fp.backoff) {
			continue
		}
		if asked == nil {
			asked = map[partName]*fetcherPart{}
		}
		asked[partName{fp.p.Topic.Name, fp.p.Index}] = fp
	}
	if len(asked) == 0 {
		return nil
	}
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.ReplicaID = f.m.self
	topics := map[string]int{}
	for key, fp := range asked {
		i, ok := topics[key.topic]
		if !ok {
			i = len(req.Topics)
			topics[key.topic] = i
			req.Topics = append(req.Topics, kmsg.OffsetForLeaderEpochRequestTopic{Topic: key.topic})
		}
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = key.partition, fp.pos.epoch, fp.pos.askEpoch
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	resp := kmsg.NewPtrOffsetForLeaderEpochResponse()
	if err := f.roundTrip(req, replicaOffsetsEpoch, resp, 10*time.Second); err != nil {
		return err
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if fp := asked[partName{rt.Topic, rp.Partition}]; fp != nil {
				f.epochAnswer(fp, &rp)
			}
		}
	}
	return nil
}

// partName names a partition as OffsetForLeaderEpoch does.
type partName struct {
	topic     string
	partition int32
}

func (f *replicaFetcher) epochAnswer(fp *fetcherPart, rp *kmsg.OffsetForLeaderEpochResponseTopicPartition) {
	if rp.ErrorCode != 0 {
		fp.backoff = time.Now().Add(replicaFetchBackoff)
		return
	}
	if err := fp.p.onEpochEndOffset(f.leader, fp.pos.epoch, rp.LeaderEpoch, rp.EndOffset); err != nil {
		f.m.log.Error("replica truncation failed", "topic", fp.p.Topic.Name, "partition", fp.p.Index, "err", err)
		fp.backoff = time.Now().Add(replicaFetchBackoff)
	}
}

// ---- fetch ----

// fetch sends one Fetch in the session and applies its answer.
func (f *replicaFetcher) fetch() error {
	req := f.buildFetch()
	if req == nil {
		// Nothing fetchable now (all truncating or backing off).
		select {
		case <-f.m.stop:
		case <-f.wake:
		case <-time.After(replicaFetchBackoff):
		}
		return nil
	}
	resp := kmsg.NewPtrFetchResponse()
	if err := f.roundTrip(req, replicaFetchVersion, resp, f.m.fetchWait()+10*time.Second); err != nil {
		return err
	}
	switch resp.ErrorCode {
	case 0:
	case kerr.FetchSessionIDNotFound.Code, kerr.InvalidFetchSessionEpoch.Code, kerr.FetchSessionTopicIDError.Code:
		f.session.id, f.session.epoch = 0, 0
		return nil
	default:
		return kerr.ErrorForCode(resp.ErrorCode)
	}
	f.advanceSession(resp.SessionID)
	for i := range resp.Topics {
		rt := &resp.Topics[i]
		for j := range rt.Partitions {
			f.fetchAnswer(rt.TopicID, &rt.Partitions[j])
		}
	}
	return f.resolveOutOfRange()
}

// resolveOutOfRange asks the leader for the log start of the partitions
// whose fetch offset it no longer has (ListOffsets earliest, as Kafka's
// follower does: an error answer carries no log start) and lets each
// follower state machine reset or truncate.
func (f *replicaFetcher) resolveOutOfRange() error {
	if len(f.outOfRange) == 0 {
		return nil
	}
	defer func() {
		clear(f.outOfRange)
		f.outOfRange = f.outOfRange[:0]
	}()
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = f.m.self
	asked := map[partName]*fetcherPart{}
	for _, fp := range f.outOfRange {
		key := partName{fp.p.Topic.Name, fp.p.Index}
		asked[key] = fp
		if n := len(req.Topics); n == 0 || req.Topics[n-1].Topic != key.topic {
			req.Topics = append(req.Topics, kmsg.ListOffsetsRequestTopic{Topic: key.topic})
		}
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.CurrentLeaderEpoch, rp.Timestamp = key.partition, fp.pos.epoch, -2
		t := &req.Topics[len(req.Topics)-1]
		t.Partitions = append(t.Partitions, rp)
	}
	resp := kmsg.NewPtrListOffsetsResponse()
	if err := f.roundTrip(req, replicaListOffsets, resp, 10*time.Second); err != nil {
		return err
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			fp := asked[partName{rt.Topic, rp.Partition}]
			if fp == nil {
				continue
			}
			err := kerr.ErrorForCode(rp.ErrorCode)
			if err == nil {
				err = fp.p.onFetchOutOfRange(f.leader, fp.pos.epoch, rp.Offset)
			}
			if err != nil {
				f.m.log.Warn("replica reset failed", "topic", rt.Topic, "partition", rp.Partition, "err", err)
				fp.backoff = time.Now().Add(replicaFetchBackoff)
			}
		}
	}
	return nil
}

// buildFetch fills f.req: every fetchable partition in a full fetch, else
// those whose position changed, and forgets those that stopped fetching.
// nil when there is nothing to fetch.
func (f *replicaFetcher) buildFetch() *kmsg.FetchRequest {
	req := &f.req
	topics, forgotten := req.Topics[:0], req.ForgottenTopics[:0]
	*req = kmsg.NewFetchRequest()
	req.ReplicaState.ID, req.ReplicaState.Epoch = f.m.self, -1
	req.ReplicaID = f.m.self
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = int32(f.m.fetchWait()/time.Millisecond), 1, replicaFetchMaxBytes
	// Epoch 0 with the old id closes that session and opens a new one.
	req.SessionID, req.SessionEpoch = f.session.id, f.session.epoch
	full := f.session.epoch == 0
	now := time.Now()
	_, rate := f.m.throttleRates()
	fetching := 0
	for _, fp := range f.parts {
		fetchable := fp.ok && !fp.pos.truncating && !now.Before(fp.backoff)
		if fetchable && f.throttle(fp, rate) {
			fetchable = false // over follower.replication.throttled.rate: not this round
		}
		if full {
			fp.inSession = false
		}
		switch {
		case fetchable:
			fetching++
			if fp.inSession && fp.sentOffset == fp.pos.offset && fp.sentEpoch == fp.pos.epoch && fp.sentLastEpoch == fp.pos.lastEpoch {
				continue
			}
			topics = addFetchPart(topics, fp)
			fp.inSession, fp.sentOffset, fp.sentEpoch, fp.sentLastEpoch = true, fp.pos.offset, fp.pos.epoch, fp.pos.lastEpoch
		case fp.inSession:
			forgotten = addForgotten(forgotten, fp)
			fp.inSession = false
		}
	}
	req.Topics, req.ForgottenTopics = topics, forgotten
	if fetching == 0 && len(forgotten) == 0 {
		return nil
	}
	return req
}

// throttle decides whether fp's bytes count against the follower's
// throttle rate this round (fp.throttled) and whether the quota holds
// the partition back: only a replica the topic names in
// follower.replication.throttled.replicas that is not caught up, as in
// Kafka.
func (f *replicaFetcher) throttle(fp *fetcherPart, rate int64) (wait bool) {
	fp.throttled = rate != replication.Unthrottled && !fp.caughtUp && fp.p.followerThrottled(f.m.self)
	return fp.throttled && f.m.followerQuota.exceeded(rate)
}

func addFetchPart(topics []kmsg.FetchRequestTopic, fp *fetcherPart) []kmsg.FetchRequestTopic {
	id := fp.p.Topic.ID
	if n := len(topics); n == 0 || topics[n-1].TopicID != id {
		topics = append(topics, kmsg.FetchRequestTopic{Topic: fp.p.Topic.Name, TopicID: id})
	}
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.CurrentLeaderEpoch, rp.FetchOffset = fp.p.Index, fp.pos.epoch, fp.pos.offset
	rp.LastFetchedEpoch, rp.LogStartOffset, rp.PartitionMaxBytes = fp.pos.lastEpoch, -1, replicaPartitionBytes
	t := &topics[len(topics)-1]
	t.Partitions = append(t.Partitions, rp)
	return topics
}

func addForgotten(topics []kmsg.FetchRequestForgottenTopic, fp *fetcherPart) []kmsg.FetchRequestForgottenTopic {
	id := fp.p.Topic.ID
	if n := len(topics); n == 0 || topics[n-1].TopicID != id {
		topics = append(topics, kmsg.FetchRequestForgottenTopic{Topic: fp.p.Topic.Name, TopicID: id})
	}
	t := &topics[len(topics)-1]
	t.Partitions = append(t.Partitions, fp.p.Index)
	return topics
}

// advanceSession moves to the next epoch of the session the leader
// answered with (0: it keeps none, so every fetch is full).
func (f *replicaFetcher) advanceSession(id int32) {
	switch {
	case id == 0:
		f.session.id, f.session.epoch = 0, 0
	case f.session.epoch == 0 || id == f.session.id:
		f.session.id, f.session.epoch = id, nextSessionEpoch(f.session.epoch)
	}
}

// fetchAnswer applies one partition of a fetch response.
func (f *replicaFetcher) fetchAnswer(topicID [16]byte, rp *kmsg.FetchResponseTopicPartition) {
	fp := f.byKey[partKey{topicID, rp.Partition}]
	if fp == nil || !fp.ok || !fp.inSession {
		return
	}
	p, epoch := fp.p, fp.pos.epoch
	var err error
	switch {
	case rp.ErrorCode == kerr.OffsetOutOfRange.Code:
		f.outOfRange = append(f.outOfRange, fp)
	case rp.ErrorCode != 0:
		// NOT_LEADER_OR_FOLLOWER, FENCED/UNKNOWN_LEADER_EPOCH, unknown
		// topic: one of us is an image behind. Wait for the next image.
		fp.backoff = time.Now().Add(replicaFetchBackoff)
		return
	case rp.DivergingEpoch.EndOffset >= 0:
		err = p.onDivergingEpoch(f.leader, epoch, fp.sentLastEpoch, fp.sentOffset, rp.DivergingEpoch.Epoch, rp.DivergingEpoch.EndOffset)
	default:
		records := wholeBatches(rp.RecordBatches)
		err = p.appendFetched(f.leader, epoch, fp.sentOffset, records, rp.HighWatermark, rp.LogStartOffset)
		fp.caughtUp = p.LogEndOffset() >= rp.HighWatermark
		if fp.throttled {
			_, rate := f.m.throttleRates()
			f.m.followerQuota.record(int64(len(records)), rate)
		}
	}
	if err != nil {
		f.m.log.Error("replica fetch failed", "topic", p.Topic.Name, "partition", p.Index, "err", err)
		fp.backoff = time.Now().Add(replicaFetchBackoff)
	}
}

// wholeBatches cuts a trailing partial batch (a leader may end a response
// inside one).
func wholeBatches(b []byte) []byte {
	n := 0
	for len(b)-n >= record.HeaderLen {
		size := 12 + int(int32(binary.BigEndian.Uint32(b[n+8:])))
		if size < record.HeaderLen || n+size > len(b) {
			break
		}
		n += size
	}
	return b[:n]
}

// ---- the wire ----

// roundTrip sends req at version and reads its response into resp.
func (f *replicaFetcher) roundTrip(req kmsg.Request, version int16, resp kmsg.Response, timeout time.Duration) error {
	req.SetVersion(version)
	resp.SetVersion(version)
	f.corr++
	f.wbuf = f.fmt.AppendRequest(f.wbuf[:0], req, f.corr)
	if err := f.conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return err
	}
	if _, err := f.conn.Write(f.wbuf); err != nil {
		return err
	}
	body, err := f.readFrame()
	if err != nil {
		return err
	}
	if len(body) < 4 || int32(binary.BigEndian.Uint32(body)) != f.corr {
		return errors.New("response with a wrong correlation id")
	}
	body = body[4:]
	if resp.IsFlexible() {
		if body, err = skipTags(body); err != nil {
			return err
		}
	}
	return resp.ReadFrom(body)
}

// readFrame reads one size-prefixed frame into the reused buffer.
func (f *replicaFetcher) readFrame() ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(f.conn, size[:]); err != nil {
		return nil, err
	}
	n := int(int32(binary.BigEndian.Uint32(size[:])))
	if n < 4 || n > 2*replicaFetchMaxBytes {
		return nil, fmt.Errorf("response frame of %d bytes", n)
	}
	if cap(f.rbuf) < n {
		f.rbuf = make([]byte, n)
	}
	f.rbuf = f.rbuf[:n]
	if _, err := io.ReadFull(f.conn, f.rbuf); err != nil {
		return nil, err
	}
	return f.rbuf, nil
}
