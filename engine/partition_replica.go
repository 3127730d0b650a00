package engine

// The replication side of Partition: what a leader records of its
// followers' fetches (which moves the high watermark and proposes ISR
// changes) and what a follower does with its leader's answers (truncate by
// leader epoch, append the fetched batches, take the leader's high
// watermark). The decisions are replication.Leader's and
// replication.Follower's; these methods feed them under p.mu and carry
// out what they return. The replica fetchers (replica_fetcher.go) call
// the follower half.

import (
	"errors"
	"slices"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-broker/sluice/replication"
	"github.com/sluice-broker/sluice/storage"
)

// ---- replication: the leader's side ----

// followerFetched records that follower replica fetched from offset (its
// log end) at nowMs: the Leader may move the high watermark (waking
// acks=all produces and parked consumer fetches) and may propose adding
// the follower to the ISR.
func (p *Partition) followerFetched(replica int32, offset, nowMs int64) {
	p.mu.Lock()
	l := p.mu.leader
	if l == nil {
		p.mu.Unlock()
		return
	}
	_, expand := l.OnFollowerFetch(replica, offset, nowMs)
	moved, due := p.moveHighWatermarkLocked()
	p.mu.Unlock()
	p.released(moved, due)
	p.proposeISR(expand)
}

// tickISR looks for in-sync followers that have lagged for
// replica.lag.time.max.ms and proposes their removal.
func (p *Partition) tickISR(nowMs int64) {
	p.mu.Lock()
	var shrink *replication.ISRProposal
	if l := p.mu.leader; l != nil {
		shrink = l.Tick(nowMs)
	}
	p.mu.Unlock()
	p.proposeISR(shrink)
}

// proposeISR sends an ISR change to the controller; the Leader acts on it
// when an image carries it (applyImage).
func (p *Partition) proposeISR(prop *replication.ISRProposal) {
	if prop != nil && p.replicas != nil {
		p.replicas.alterPartition(p, prop)
	}
}

// isrRejected drops prop if it is still the pending proposal.
func (p *Partition) isrRejected(prop *replication.ISRProposal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if l := p.mu.leader; l != nil && l.Pending() == prop {
		l.OnISRRejected()
	}
}

// ISR is the committed in-sync replica set while this broker leads (nil
// otherwise).
func (p *Partition) ISR() []int32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if l := p.mu.leader; l != nil {
		return slices.Clone(l.ISR())
	}
	return nil
}

// ---- replication: the follower's side ----

// followPosition is what a replica fetcher asks of a followed partition.
type followPosition struct {
	epoch      int32 // the leader epoch followed
	truncating bool  // waiting for OffsetForLeaderEpoch(askEpoch)
	askEpoch   int32
	offset     int64 // next offset to fetch (not truncating)
	// lastEpoch is the log's latest epoch, named in the fetch so the
	// leader can answer DivergingEpoch (-1: none).
	lastEpoch int32
}

// followPosition returns where the fetcher of broker leader stands with p;
// false when p does not follow leader any more.
func (p *Partition) followPosition(leader int32) (followPosition, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f := p.mu.follower
	if f == nil || f.Leader != leader {
		return followPosition{}, false
	}
	pos := followPosition{epoch: f.Epoch, truncating: f.Phase() == replication.Truncating, askEpoch: f.AskedEpoch(),
		offset: f.FetchOffset(), lastEpoch: f.LastFetchedEpoch(p.log)}
	return pos, true
}

// followerLocked returns the follower state if p still follows leader at
// epoch (the fetcher's view may be one image behind).
func (p *Partition) followerLocked(leader, epoch int32) *replication.Follower {
	if f := p.mu.follower; f != nil && f.Leader == leader && f.Epoch == epoch {
		return f
	}
	return nil
}

// onEpochEndOffset takes the leader's OffsetForLeaderEpoch answer and
// truncates the log where the histories part.
func (p *Partition) onEpochEndOffset(leader, epoch, leaderEpoch int32, endOffset int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	f := p.followerLocked(leader, epoch)
	if f == nil || f.Phase() != replication.Truncating {
		return nil
	}
	return p.stepLocked(f, f.OnEpochEndOffset(leaderEpoch, endOffset, p.log, p.log.HighWatermark()))
}

// onDivergingEpoch handles a fetch answer naming where the log diverges
// from the leader's; lastEpoch and fetchOffset are what the fetch named. A
// stale answer (the log moved since) changes nothing.
func (p *Partition) onDivergingEpoch(leader, epoch, lastEpoch int32, fetchOffset int64, divEpoch int32, divEnd int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	f := p.followerLocked(leader, epoch)
	if f == nil || f.Phase() != replication.Fetching || f.FetchOffset() != fetchOffset || f.LastFetchedEpoch(p.log) != lastEpoch {
		return nil
	}
	return p.stepLocked(f, f.OnDivergingEpoch(lastEpoch, divEpoch, divEnd, p.log, p.log.HighWatermark()))
}

// onFetchOutOfRange handles OFFSET_OUT_OF_RANGE for the fetch offset.
func (p *Partition) onFetchOutOfRange(leader, epoch int32, leaderLogStart int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	f := p.followerLocked(leader, epoch)
	if f == nil {
		return nil
	}
	return p.stepLocked(f, f.OnOutOfRange(leaderLogStart, p.log.HighWatermark(), p.log))
}

// appendFetched appends what the leader returned for fetchOffset and
// takes its high watermark and log start (records the leader deleted go
// here too, as in Kafka). Batches that do not continue the log (the
// fetcher's view was stale) send the follower back to truncation. A high
// watermark move wakes consumers parked on this follower (KIP-392).
func (p *Partition) appendFetched(leader, epoch int32, fetchOffset int64, records []byte, leaderHW, leaderLogStart int64) error {
	p.mu.Lock()
	hw := p.log.HighWatermark()
	err := p.appendFetchedLocked(leader, epoch, fetchOffset, records, leaderHW, leaderLogStart)
	moved := p.log.HighWatermark() > hw
	p.mu.Unlock()
	if moved && p.waiters != nil {
		p.wakeConsumers(max(int64(len(records)), 1))
	}
	return err
}

func (p *Partition) appendFetchedLocked(leader, epoch int32, fetchOffset int64, records []byte, leaderHW, leaderLogStart int64) error {
	f := p.followerLocked(leader, epoch)
	if f == nil || f.Phase() != replication.Fetching || f.FetchOffset() != fetchOffset {
		return nil
	}
	if len(records) > 0 {
		if err := followerAppend(p.log, records); err != nil {
			if errors.Is(err, storage.ErrUnexpectedAppendOffset) {
				return p.stepLocked(f, f.OnOutOfRange(p.LogStartOffset(), p.log.HighWatermark(), p.log))
			}
			return err
		}
	}
	p.log.SetHighWatermark(f.OnFetched(p.log.LogEndOffset(), leaderHW))
	if leaderLogStart > p.log.LogStartOffset() && leaderLogStart <= p.log.HighWatermark() {
		if _, err := p.log.DeleteRecordsBefore(leaderLogStart); err != nil {
			return err
		}
	}
	return nil
}

// stepLocked does what the follower state machine asks of the log.
func (p *Partition) stepLocked(f *replication.Follower, s replication.Step) error {
	var err error
	switch {
	case s.ResetTo >= 0:
		err = followerReset(p.log, s.ResetTo)
	case s.TruncateTo >= 0:
		err = followerTruncate(p.log, s.TruncateTo)
	}
	if err != nil {
		return err
	}
	if s.FetchFrom >= 0 {
		// A cut inside a batch leaves the log end at that batch's base.
		f.OnFetched(p.log.LogEndOffset(), p.log.HighWatermark())
	}
	return nil
}

// The storage calls of follower replication, in one place.

func followerAppend(l *storage.Log, records []byte) error {
	_, err := l.AppendAsFollower(records)
	return err
}

func followerTruncate(l *storage.Log, offset int64) error { return l.TruncateTo(offset) }

func followerReset(l *storage.Log, offset int64) error { return l.TruncateFullyAndStartAt(offset) }

// ---- reading from followers (KIP-392) ----

// The replica.selector.class values Sluice serves: Kafka's class names.
const (
	rackAwareSelector = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
	leaderSelector    = "org.apache.kafka.common.replica.LeaderSelector"
)

// preferredReadReplica is where a consumer in rack, fetching at offset,
// should read from, as Kafka's RackAwareReplicaSelector picks: the leader
// itself (-1) when it is in that rack; else the in-sync follower in that
// rack that has offset and the most records; else the leader. b names the
// brokers' racks. Only a leader redirects.
func (p *Partition) preferredReadReplica(rack string, offset int64, b *Broker) int32 {
	self := p.role.Load().self
	if b.rackOf(self) == rack {
		return -1
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.mu.leader
	if l == nil {
		return -1
	}
	best, bestLEO := int32(-1), int64(-1)
	for _, id := range l.ISR() {
		leo := l.FollowerLEO(id)
		if id == self || leo < offset || leo <= bestLEO || b.rackOf(id) != rack {
			continue
		}
		best, bestLEO = id, leo
	}
	return best
}

// rackOf is broker id's broker.rack ("" when unset or unknown): this
// broker's from its config, the others' from their registrations.
func (b *Broker) rackOf(id int32) string {
	if id == b.cfg.NodeID {
		return b.cfg.BrokerRack
	}
	if br, ok := b.image().Broker(id); ok && br.Rack != nil {
		return *br.Rack
	}
	return ""
}

// checkReadable is checkLeader for a consumer that may read from a
// follower (Fetch v11+, KIP-392): a follower of a live leader serves it
// too, with the same epoch fencing against the epoch it follows.
func (p *Partition) checkReadable(epoch int32) int16 {
	r := p.role.Load()
	if r.leader {
		return p.checkLeader(epoch)
	}
	switch {
	case r.leaderID < 0 || !slices.Contains(r.replicas, r.self):
		return kerr.NotLeaderForPartition.Code
	case epoch < 0:
		return 0
	case epoch < r.epoch:
		return kerr.FencedLeaderEpoch.Code
	case epoch > r.epoch:
		return kerr.UnknownLeaderEpoch.Code
	}
	return 0
}

// ---- replication throttles (KIP-73) ----

// Topic configs naming a topic's throttled replicas.
const (
	leaderThrottledReplicas   = "leader.replication.throttled.replicas"
	followerThrottledReplicas = "follower.replication.throttled.replicas"
)

// throttledList is a topic's throttled-replicas config ("" none).
func (p *Partition) throttledList(key string) string {
	if p.Topic == nil || p.Topic.overrides.Load() == nil {
		return ""
	}
	return p.Topic.Overrides()[key]
}

// leaderThrottled reports whether the leader throttles its answers to
// follower replica: the topic names this broker's replica of p in
// leader.replication.throttled.replicas, and the follower is not in the
// ISR (an in-sync replica is never throttled).
func (p *Partition) leaderThrottled(replica int32) bool {
	list := p.throttledList(leaderThrottledReplicas)
	if list == "" || !replication.ThrottledReplica(list, p.Index, p.role.Load().self) {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.mu.leader
	return l != nil && !slices.Contains(l.ISR(), replica)
}

// followerThrottled reports whether this follower (broker self) throttles
// its fetches of p: follower.replication.throttled.replicas names it.
// (Whether it is in sync is the fetcher's to know.)
func (p *Partition) followerThrottled(self int32) bool {
	list := p.throttledList(followerThrottledReplicas)
	return list != "" && replication.ThrottledReplica(list, p.Index, self)
}

// replicationQuota is a replication.Quota shared by a broker's fetches.
type replicationQuota struct {
	mu sync.Mutex
	q  replication.Quota
}

func (q *replicationQuota) exceeded(rate int64) bool {
	if rate == replication.Unthrottled {
		return false
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.q.Exceeded(rate, wallMs())
}

func (q *replicationQuota) record(n, rate int64) {
	if rate == replication.Unthrottled || n == 0 {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.q.Record(n, rate, wallMs())
}
