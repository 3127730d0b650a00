package engine

// Partition is the one owner of a partition's state on this broker. Request
// handlers, the group coordinator and the housekeeping loops reach the log
// only through it; nothing else holds the *storage.Log.
//
// It owns:
//   - the log (appends, reads, retention, rolls, compaction, close/delete);
//   - the high watermark and last stable offset, and the one place that
//     moves the high watermark (advanceHighWatermark), which wakes long-poll
//     fetches parked on the partition and acks=all produces waiting for it,
//     whoever appended: a produce, the group coordinator, later transaction
//     markers;
//   - its role: leader at epoch E, or follower of broker B at epoch E, with
//     the KIP-320 epoch fencing (checkLeader) and the NOT_LEADER_OR_FOLLOWER
//     answer handlers give when this broker does not lead it.
//
// Handlers see the narrow surface Redpanda's partition_proxy gives its
// handlers: is it the leader, its offsets, append with acks, read for a
// consumer or a follower, and the epoch lookups; the shape of the state
// follows kfake's partData, which carries leader, epoch and last stable
// offset from day one.
//
// How replication plugs in (issue 11, docs/cluster.md). The partition
// manager calls applyImage on every image change: a partition led here
// holds a replication.Leader (follower log ends, the maximal ISR, lag-based
// shrink, expansion), a followed one a replication.Follower that the
// broker's replica fetcher for its leader drives (replica_fetcher.go).
// highWatermarkTarget is the Leader's high watermark, which moves on
// appends and on follower fetches (followerFetched, partition_replica.go);
// advanceHighWatermark stays the one place that publishes it and wakes
// parked fetches and acks=all produces. checkMinInsync refuses an acks=all
// append when the committed ISR is smaller than min.insync.replicas, and a
// waiting acks=all produce is answered by the Leader's AcksAllDone. ISR
// changes the Leader proposes go to the controller (cluster_link.go) and
// take effect only when a later image carries them. A follower refuses
// client appends and reads; becoming one releases every acks=all produce
// still waiting, with NOT_LEADER_OR_FOLLOWER, as Kafka does.

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-broker/sluice/metadata"
	"github.com/sluice-broker/sluice/replication"
	"github.com/sluice-broker/sluice/storage"
)

// Partition is one partition of a topic on this broker.
type Partition struct {
	Topic *Topic
	Index int32

	// log is the partition's data. Never nil; only the methods of this
	// file use it.
	log *storage.Log
	// waiters holds the broker's parked long-poll fetches; a high
	// watermark move wakes those parked on this partition.
	waiters *fetchPurgatory
	// replicas is the broker's replica manager (follower fetchers, the
	// ISR tick, AlterPartition); nil for a partition built alone.
	replicas *replicaManager
	// role is replaced whole (never mutated) under mu, so handlers read it
	// with one atomic load. Never nil after newPartition.
	role atomic.Pointer[partitionRole]
	// applied is the last image applyImage acted on (the manager's calls
	// are serialised under the metadata lock).
	applied atomic.Value // imageKey
	// stable tracks last stable offset moves for read_committed waiters
	// (partition_txn.go).
	stable stableTracker

	mu struct {
		sync.Mutex
		// unreleased counts the bytes appended above the high watermark
		// since it last moved; a move hands them to the waiting fetches
		// as the bytes it made readable. Invariant: 0 whenever the high
		// watermark equals the log end offset.
		unreleased int64
		// hwWaiters are acks=all produces waiting for the high watermark.
		// Invariant: every waiter's offset is above the high watermark
		// (a move calls and drops those it reaches), and the list is
		// empty while the partition is not the leader.
		hwWaiters []hwWaiter
		// holdHW stands in, for tests, for an in-sync follower that has
		// not fetched yet: while set the high watermark does not move.
		holdHW bool
		// leader is the replication state while this broker leads.
		// Invariant: non-nil exactly when role.leader (after the first
		// role), and its epoch is role.epoch.
		leader *replication.Leader
		// follower is the replication state while this broker follows a
		// leader (role.leaderID >= 0); nil otherwise.
		follower *replication.Follower
	}
}

// partitionRole says who leads the partition and at which epoch.
type partitionRole struct {
	leader bool // this broker leads the partition
	// leaderID is the broker a follower fetches from; -1 for a leader
	// (this broker) and before any role is set.
	leaderID int32
	// epoch is the leader epoch. Invariant: it never decreases from one
	// role of the partition to the next; -1 only before the first role.
	epoch int32
	// self is this broker's id (-1 before the first applyImage), and
	// replicas the partition's replica set as the image said.
	self     int32
	replicas []int32
}

// imageKey identifies what applyImage acts on in a partition's image:
// every change of it bumps the partition epoch.
type imageKey struct {
	self, leader, leaderEpoch, partitionEpoch int32
}

// hwWaiter is an acks=all produce waiting for the high watermark to reach
// offset (its batch's last offset + 1).
type hwWaiter struct {
	offset int64
	done   func(code int16) // 0, or why the wait ended without the offset
	code   int16            // the answer, set when the watermark reaches offset
}

// fetchIsolation is how far a read may go, as Kafka's FetchIsolation.
type fetchIsolation int8

const (
	fetchHighWatermark fetchIsolation = iota // read_uncommitted consumers
	fetchTxnCommitted                        // read_committed consumers: up to the last stable offset
	fetchLogEnd                              // follower replicas: up to the log end offset
)

// isolationFor is the isolation of a fetch by a follower replica or by a
// consumer with the given isolation level (1 = read_committed).
func isolationFor(follower bool, isolationLevel int8) fetchIsolation {
	switch {
	case follower:
		return fetchLogEnd
	case isolationLevel == 1:
		return fetchTxnCommitted
	}
	return fetchHighWatermark
}

// newPartition wraps an opened log. The partition has no role until
// applyImage (or becomeLeader / becomeFollower); single-node Sluice makes
// every partition it opens the leader (openPartition).
func newPartition(t *Topic, index int32, l *storage.Log, waiters *fetchPurgatory, replicas *replicaManager) *Partition {
	p := &Partition{Topic: t, Index: index, log: l, waiters: waiters, replicas: replicas}
	p.role.Store(&partitionRole{leaderID: -1, epoch: -1, self: -1})
	return p
}

// storedEpoch is the latest leader epoch the log recorded (0 for a new
// log): the epoch a single node leads at after a restart.
func (p *Partition) storedEpoch() int32 { return max(p.log.LatestEpoch(), 0) }

// ---- role ----

// applyImage makes the partition what the image says: the partition
// manager calls it on every image change. Leading at a new epoch starts a
// new replication.Leader; an ISR change at the same epoch is the
// controller committing what the Leader proposed (or a change of its own);
// following starts a replication.Follower and hands the partition to the
// fetcher of its leader.
func (p *Partition) applyImage(self int32, pi *metadata.PartitionImage) {
	// The partition manager calls this on every image change, for every
	// partition: an unchanged partition costs one atomic load.
	key := imageKey{self: self, leader: pi.Leader, leaderEpoch: pi.LeaderEpoch, partitionEpoch: pi.PartitionEpoch}
	if p.applied.Load() == key {
		return
	}
	p.applied.Store(key)
	switch {
	case pi.Leader == self:
		p.lead(self, pi)
	case !pi.Hosts(self):
		// Moved away (reassignment): nothing to fetch; the partition
		// manager closes it.
		p.becomeFollower(-1, pi.LeaderEpoch)
	default:
		p.follow(self, pi)
	}
}

// lead applies an image in which this broker leads. As Kafka's leader does
// when it takes over, the high watermark moves to what the ISR has reached
// at once; with one replica that is the recovered log end, and without
// this move every acknowledged record above a lagging checkpointed
// watermark (an unclean stop) would stay invisible.
func (p *Partition) lead(self int32, pi *metadata.PartitionImage) {
	// The log may have recorded a later epoch than the image: single-node
	// epochs were only ever kept in the log's leader-epoch file.
	epoch := max(pi.LeaderEpoch, p.storedEpoch())
	p.mu.Lock()
	r := p.role.Load()
	if epoch < r.epoch {
		p.mu.Unlock()
		return // an older image than the role we have
	}
	l := p.mu.leader
	if l != nil && l.Epoch() == epoch {
		if !slices.Equal(l.Replicas(), pi.Replicas) { // a reassignment adds or drops followers
			l.SetReplicas(pi.Replicas)
			p.role.Store(&partitionRole{leader: true, leaderID: -1, epoch: epoch, self: self, replicas: slices.Clone(pi.Replicas)})
		}
		if pi.PartitionEpoch > l.PartitionEpoch() {
			l.OnISRCommitted(pi.ISR, pi.PartitionEpoch)
		}
	} else {
		leo := p.log.LogEndOffset()
		l = replication.NewLeader(p.leaderConfig(), self, epoch, pi.PartitionEpoch, pi.Replicas, pi.ISR, leo, p.log.HighWatermark(), wallMs())
		l.OnAppend(leo)
		p.mu.leader, p.mu.follower = l, nil
		p.role.Store(&partitionRole{leader: true, leaderID: -1, epoch: epoch, self: self, replicas: slices.Clone(pi.Replicas)})
	}
	moved, due := p.moveHighWatermarkLocked()
	p.mu.Unlock()
	p.released(moved, due)
	if p.replicas != nil {
		p.replicas.lead(p, len(pi.Replicas) > 1)
	}
}

// follow applies an image in which another broker (or none) leads.
func (p *Partition) follow(self int32, pi *metadata.PartitionImage) {
	p.mu.Lock()
	r := p.role.Load()
	same := !r.leader && r.leaderID == pi.Leader && r.epoch == pi.LeaderEpoch && r.self == self
	if same || pi.LeaderEpoch < r.epoch {
		p.mu.Unlock()
		return
	}
	due := p.becomeFollowerLocked(self, pi.Leader, pi.LeaderEpoch, pi.Replicas)
	if pi.Leader >= 0 {
		p.mu.follower, _ = replication.NewFetchingFollower(pi.Leader, pi.LeaderEpoch, p.log)
	}
	p.mu.Unlock()
	p.releaseWaiters(due)
	if p.replicas != nil {
		p.replicas.follow(p, pi.Leader)
	}
}

// becomeLeader makes this broker the partition's only replica and leader
// at epoch (tests, and the epoch bumps of a single node).
func (p *Partition) becomeLeader(epoch int32) {
	self := max(p.role.Load().self, 0)
	p.lead(self, &metadata.PartitionImage{Replicas: []int32{self}, ISR: []int32{self}, Leader: self, LeaderEpoch: epoch})
}

// becomeFollower makes the partition follow broker leaderID at epoch
// without fetching (tests, and closing: leaderID -1): it refuses client
// appends and reads, and the acks=all produces waiting on it are answered
// NOT_LEADER_OR_FOLLOWER.
func (p *Partition) becomeFollower(leaderID, epoch int32) {
	p.mu.Lock()
	r := p.role.Load()
	due := p.becomeFollowerLocked(r.self, leaderID, max(epoch, r.epoch), r.replicas)
	p.mu.Unlock()
	p.releaseWaiters(due)
	if p.replicas != nil {
		p.replicas.follow(p, -1)
	}
}

// becomeFollowerLocked drops the leader state and returns the acks=all
// waiters to answer NOT_LEADER_OR_FOLLOWER.
func (p *Partition) becomeFollowerLocked(self, leaderID, epoch int32, replicas []int32) []hwWaiter {
	p.role.Store(&partitionRole{leaderID: leaderID, epoch: epoch, self: self, replicas: slices.Clone(replicas)})
	p.mu.leader, p.mu.follower = nil, nil
	due := p.mu.hwWaiters
	p.mu.hwWaiters = nil
	return due
}

func (p *Partition) releaseWaiters(due []hwWaiter) {
	for _, w := range due {
		w.done(kerr.NotLeaderForPartition.Code)
	}
}

// leaderConfig is the replication settings of the partition now.
func (p *Partition) leaderConfig() replication.LeaderConfig {
	cfg := replication.LeaderConfig{LagTimeMaxMs: 30_000, MinISR: 1}
	if p.replicas != nil {
		cfg.LagTimeMaxMs = p.replicas.lagTimeMaxMs()
	}
	if p.Topic != nil && p.Topic.Settings() != nil {
		cfg.MinISR = int(max(p.Topic.Settings().MinInsyncReplicas, 1))
	}
	return cfg
}

func wallMs() int64 { return time.Now().UnixMilli() }

// isLeader reports whether this broker leads the partition.
func (p *Partition) isLeader() bool { return p.role.Load().leader }

// LeaderEpoch is the partition's current leader epoch.
func (p *Partition) LeaderEpoch() int32 { return p.role.Load().epoch }

// checkLeader is the check of every handler that needs the leader:
// NOT_LEADER_OR_FOLLOWER when this broker is not, then KIP-320 fencing of
// a request that names a leader epoch: an older epoch than the partition's
// means the client's metadata is stale (FENCED_LEADER_EPOCH), a newer one
// that this broker is behind (UNKNOWN_LEADER_EPOCH). -1 skips the fencing.
func (p *Partition) checkLeader(epoch int32) int16 {
	r := p.role.Load()
	if !r.leader {
		return kerr.NotLeaderForPartition.Code
	}
	switch {
	case epoch < 0:
		return 0
	case epoch < r.epoch:
		return kerr.FencedLeaderEpoch.Code
	case epoch > r.epoch:
		return kerr.UnknownLeaderEpoch.Code
	}
	return 0
}

// acceptsFollower reports whether broker replicaID is an assigned follower
// allowed to fetch the partition: a replica other than this leader.
func (p *Partition) acceptsFollower(replicaID int32) bool {
	r := p.role.Load()
	return r.leader && replicaID != r.self && slices.Contains(r.replicas, replicaID)
}

// ---- offsets ----

// HighWatermark is the offset below which every record is committed.
func (p *Partition) HighWatermark() int64 { return p.log.HighWatermark() }

// LastStableOffset is the offset below which every transaction is
// decided: min(high watermark, first offset of the oldest transaction
// open or decided above the high watermark).
func (p *Partition) LastStableOffset() int64 { return p.log.LastStableOffset() }

// LogStartOffset is the first offset still in the log.
func (p *Partition) LogStartOffset() int64 { return p.log.LogStartOffset() }

// LogEndOffset is the offset the next append gets.
func (p *Partition) LogEndOffset() int64 { return p.log.LogEndOffset() }

// fetchableOffset is the end of what a reader with isolation iso may read.
func (p *Partition) fetchableOffset(iso fetchIsolation) int64 {
	switch iso {
	case fetchLogEnd:
		return p.LogEndOffset()
	case fetchTxnCommitted:
		return p.LastStableOffset()
	}
	return p.HighWatermark()
}

// latestEpoch is the newest leader epoch in the log's epoch file, -1 if none.
func (p *Partition) latestEpoch() int32 { return p.log.LatestEpoch() }

// endOffsetForEpoch is the largest epoch <= epoch the log knows and the
// offset where it ended (the log end for the latest), or -1, -1.
func (p *Partition) endOffsetForEpoch(epoch int32) (int32, int64) {
	return p.log.EndOffsetForEpoch(epoch)
}

// epochForOffset is the leader epoch that wrote offset: the smallest epoch
// whose end offset lies past it, found by binary search over the epochs the
// log knows (endOffsetForEpoch is monotonic in the epoch asked). -1 when the
// log has no epochs.
func (p *Partition) epochForOffset(offset int64) int32 {
	latest := p.latestEpoch()
	if latest < 0 {
		return -1
	}
	lo, hi := int32(0), latest
	for lo < hi {
		mid := lo + (hi-lo)/2
		if _, end := p.endOffsetForEpoch(mid); end > offset {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	found, _ := p.endOffsetForEpoch(lo)
	return found
}

// offsetForTimestamp is the base offset and max timestamp of the first
// batch whose max timestamp is >= ts.
func (p *Partition) offsetForTimestamp(ts int64) (offset, timestamp int64, ok bool) {
	return p.log.OffsetForTimestamp(ts)
}

// maxTimestamp is the offset of the batch holding the largest timestamp.
func (p *Partition) maxTimestamp() (offset, timestamp int64) { return p.log.MaxTimestamp() }

// size is the bytes the log's segments hold.
func (p *Partition) size() int64 { return p.log.Size() }

// producers lists the idempotent producers the log tracks.
func (p *Partition) producers() []storage.ProducerInfo { return p.log.Producers() }

// ---- append ----

// checkMinInsyncLocked is the one place an acks=all append is refused
// because the committed ISR is smaller than min.insync.replicas
// (NOT_ENOUGH_REPLICAS, before anything is written, as Kafka's leader).
func (p *Partition) checkMinInsyncLocked(acks int16) error {
	if l := p.mu.leader; acks == -1 && l != nil && l.CheckAcksAll() != nil {
		return kerr.NotEnoughReplicas
	}
	return nil
}

// append writes a client's record sets as the leader (storage.Append
// semantics: each entry gets its Result or Err) and moves the high
// watermark. acks=-1 callers then wait for it with awaitHighWatermark.
func (p *Partition) append(entries []storage.AppendEntry, acks int16, nowMs int64) error {
	return p.appendAs(entries, storage.AppendOptions{NowMs: nowMs}, acks)
}

// appendInternal writes one batch of the broker's own (a coordinator's
// record, e.g. __consumer_offsets) and moves the high watermark, waking the
// fetches waiting on the partition, exactly as a produce does.
func (p *Partition) appendInternal(batch []byte, nowMs int64) (storage.AppendResult, error) {
	entries := []storage.AppendEntry{{Records: batch}}
	if err := p.appendAs(entries, storage.AppendOptions{NowMs: nowMs}, 1); err != nil {
		return storage.AppendResult{}, err
	}
	return entries[0].Result, entries[0].Err
}

// appendAs appends under mu, so that the bytes it counts as unreleased are
// exactly those between the high watermark and the log end it leaves.
// Parked follower fetches read to the log end, so the append wakes them
// with every byte it wrote; consumers wait for the high watermark.
func (p *Partition) appendAs(entries []storage.AppendEntry, opt storage.AppendOptions, acks int16) error {
	p.mu.Lock()
	if err := p.appendableLocked(acks); err != nil {
		p.mu.Unlock()
		for i := range entries {
			entries[i].Err = err
		}
		return err
	}
	opt.LeaderEpoch = p.LeaderEpoch()
	err := p.log.Append(entries, opt)
	var appended int64
	for i := range entries {
		if e := &entries[i]; e.Err == nil && !e.Result.Duplicate {
			appended += int64(len(e.Records))
		}
	}
	p.mu.unreleased += appended
	if l := p.mu.leader; l != nil {
		l.OnAppend(p.log.LogEndOffset())
	}
	moved, due := p.moveHighWatermarkLocked()
	p.mu.Unlock()
	if appended > 0 && p.waiters != nil {
		p.waiters.wakeReplicas(p, appended)
	}
	p.released(moved, due)
	return err
}

func (p *Partition) appendableLocked(acks int16) error {
	if !p.isLeader() {
		return kerr.NotLeaderForPartition
	}
	return p.checkMinInsyncLocked(acks)
}

// ---- high watermark ----

// highWatermarkTarget is the offset every in-sync replica has reached:
// the Leader's high watermark (the smallest log end over the maximal ISR;
// the local log end while the ISR is this broker alone). Called under mu.
func (p *Partition) highWatermarkTarget() int64 {
	if l := p.mu.leader; l != nil {
		return l.HighWatermark()
	}
	return p.log.LogEndOffset()
}

// advanceHighWatermark moves the high watermark to what the ISR has
// reached and wakes what waits on it. Anything that may have let the ISR
// progress calls it: an append, a leader change, later a follower fetch.
func (p *Partition) advanceHighWatermark() {
	p.mu.Lock()
	moved, due := p.moveHighWatermarkLocked()
	p.mu.Unlock()
	p.released(moved, due)
}

// moveHighWatermarkLocked moves the watermark up (never down: reading the
// target and storing it are one step under mu, so racing appenders cannot
// store an older end after a newer one). It returns the bytes it made
// readable (0 if it did not move) and the acks=all waiters it satisfied.
func (p *Partition) moveHighWatermarkLocked() (readable int64, due []hwWaiter) {
	old, target := p.log.HighWatermark(), p.highWatermarkTarget()
	if p.mu.holdHW || !p.isLeader() || target <= old {
		return 0, nil
	}
	p.log.SetHighWatermark(target)
	// A move made at least one byte readable, even one whose bytes were
	// appended before the partition was opened.
	readable = max(p.mu.unreleased, 1)
	if target == p.log.LogEndOffset() {
		p.mu.unreleased = 0
	}
	if len(p.mu.hwWaiters) > 0 {
		due = p.takeReachedLocked(target)
	}
	return readable, due
}

// takeReachedLocked removes and returns the waiters whose offset is at or
// below hw, each with its answer.
func (p *Partition) takeReachedLocked(hw int64) []hwWaiter {
	var due []hwWaiter
	keep := p.mu.hwWaiters[:0]
	for _, w := range p.mu.hwWaiters {
		if w.offset <= hw {
			w.code = p.acksAllCodeLocked(w.offset)
			due = append(due, w)
		} else {
			keep = append(keep, w)
		}
	}
	clear(p.mu.hwWaiters[len(keep):])
	p.mu.hwWaiters = keep
	return due
}

// released tells the waiters of a high watermark move about it, outside
// mu: their callbacks read the partition and answer requests.
func (p *Partition) released(readable int64, due []hwWaiter) {
	if readable > 0 && p.waiters != nil {
		p.wakeConsumers(readable)
	}
	for _, w := range due {
		w.done(w.code)
	}
}

// acksAllDone reports whether an acks=all append ending at offset can be
// answered now (the high watermark has passed it), and with which code:
// NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank below
// min.insync.replicas while it waited, as Kafka answers.
func (p *Partition) acksAllDone(offset int64) (done bool, code int16) {
	if p.log.HighWatermark() < offset {
		return false, 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return true, p.acksAllCodeLocked(offset)
}

// acksAllCodeLocked is the answer of an acks=all append ending at offset
// that the high watermark has passed.
func (p *Partition) acksAllCodeLocked(offset int64) int16 {
	l := p.mu.leader
	if l == nil {
		return kerr.NotLeaderForPartition.Code
	}
	if _, err := l.AcksAllDone(offset); err != nil {
		return kerr.NotEnoughReplicasAfterAppend.Code
	}
	return 0
}

// awaitHighWatermark waits for the high watermark to reach offset (an
// acks=all produce: its batch's last offset + 1). When it cannot wait it
// returns waiting false with the answer: 0 if the watermark is there
// already, NOT_LEADER_OR_FOLLOWER if the partition is not led here.
// Otherwise done is called exactly once, from the goroutine that moves the
// watermark (code 0) or that takes the leadership away (its error code).
func (p *Partition) awaitHighWatermark(offset int64, done func(code int16)) (code int16, waiting bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case !p.isLeader():
		return kerr.NotLeaderForPartition.Code, false
	case p.log.HighWatermark() >= offset:
		return p.acksAllCodeLocked(offset), false
	}
	p.mu.hwWaiters = append(p.mu.hwWaiters, hwWaiter{offset: offset, done: done})
	return 0, true
}

// holdHighWatermark stops (hold) or resumes high watermark moves; tests use
// it to stand for an in-sync follower that has not caught up.
func (p *Partition) holdHighWatermark(hold bool) {
	p.mu.Lock()
	p.mu.holdHW = hold
	p.mu.Unlock()
	if !hold {
		p.advanceHighWatermark()
	}
}

// ---- read ----

// read returns the batches from the one holding offset, up to maxBytes
// (the first batch whole, KIP-74) and no further than iso allows (the
// log end, the high watermark, the last stable offset), as a region of
// the segment file: the fetch path splices it to the socket.
func (p *Partition) read(offset int64, maxBytes int32, iso fetchIsolation) (storage.Region, error) {
	if iso == fetchTxnCommitted {
		return p.log.ReadCommitted(offset, maxBytes)
	}
	return p.log.Read(offset, maxBytes, iso == fetchLogEnd)
}

// checkFetchOffset validates where a reader fetches from: an offset outside
// [log start, log end] is OFFSET_OUT_OF_RANGE, as in Kafka.
func (p *Partition) checkFetchOffset(offset int64) int16 {
	if offset < p.LogStartOffset() || offset > p.LogEndOffset() {
		return kerr.OffsetOutOfRange.Code
	}
	return 0
}

// scan feeds the log from its start to its end to fn, in chunks of whole
// batches of up to chunk bytes (a larger batch comes alone); fn returns the
// offset after the last batch it used, where the next chunk starts. The
// group coordinator replays __consumer_offsets with it.
func (p *Partition) scan(chunk int32, fn func(batches []byte) (next int64, err error)) error {
	off, end := p.LogStartOffset(), p.LogEndOffset()
	var buf []byte
	for off < end {
		reg, err := p.read(off, chunk, fetchLogEnd)
		if err != nil {
			return fmt.Errorf("read offset %d: %w", off, err)
		}
		if reg.Len == 0 {
			return fmt.Errorf("read offset %d: nothing before end offset %d", off, end)
		}
		if int64(cap(buf)) < reg.Len {
			buf = make([]byte, reg.Len)
		}
		buf = buf[:reg.Len]
		n, err := reg.File.ReadAt(buf, reg.Pos)
		reg.Release()
		if n < len(buf) {
			return fmt.Errorf("read offset %d: %w", off, errors.Join(err, io.ErrUnexpectedEOF))
		}
		next, err := fn(buf)
		if err != nil {
			return fmt.Errorf("batch at offset %d: %w", off, err)
		}
		if next <= off {
			return fmt.Errorf("no progress at offset %d", off)
		}
		off = next
	}
	return nil
}

// ---- housekeeping ----

// setConfig applies new topic settings to the log and to the leader's
// replication state (min.insync.replicas).
func (p *Partition) setConfig(cfg storage.Config) {
	p.log.SetConfig(cfg)
	p.mu.Lock()
	if l := p.mu.leader; l != nil {
		l.SetConfig(p.leaderConfig())
	}
	p.mu.Unlock()
}

// maybeRoll rolls the active segment if segment.ms says so.
func (p *Partition) maybeRoll(nowMs int64) error { return p.log.MaybeRoll(nowMs) }

// enforceRetention deletes the segments retention.ms/bytes let go.
func (p *Partition) enforceRetention(nowMs int64) (deletedSegments int, err error) {
	return p.log.EnforceRetention(nowMs)
}

// deleteRecordsBefore moves the log start up to offset (-1: the high
// watermark) and returns the new log start (DeleteRecords).
func (p *Partition) deleteRecordsBefore(offset int64) (int64, error) {
	return p.log.DeleteRecordsBefore(offset)
}

// compactionDue reports whether the log cleaner should compact the log now.
func (p *Partition) compactionDue(nowMs int64) bool { return p.log.CompactionDue(nowMs) }

// compact runs one log-cleaner pass over the log.
func (p *Partition) compact(nowMs int64) (storage.CompactStats, error) {
	return p.log.Compact(nowMs)
}

// close gives up the partition (answering its waiting produces) and closes
// its log.
func (p *Partition) close() error { return p.stop().Close() }

// stop gives up the partition's role and returns its log for the caller
// to close.
func (p *Partition) stop() *storage.Log {
	p.becomeFollower(-1, p.LeaderEpoch())
	return p.log
}

// delete gives up the partition and removes its data.
func (p *Partition) delete() error {
	p.becomeFollower(-1, p.LeaderEpoch())
	return p.log.Delete()
}

// lookupPartition returns partition idx of t, or UNKNOWN_TOPIC_OR_PARTITION
// when t is nil or has no such partition.
func lookupPartition(t *Topic, idx int32) (*Partition, int16) {
	if t == nil {
		return nil, kerr.UnknownTopicOrPartition.Code
	}
	if p := t.Partition(idx); p != nil {
		return p, 0
	}
	return nil, kerr.UnknownTopicOrPartition.Code
}
