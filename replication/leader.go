package replication

import (
	"errors"
	"slices"
)

// LeaderConfig holds the topic and broker settings the leader applies.
type LeaderConfig struct {
	// LagTimeMaxMs is replica.lag.time.max.ms (Kafka's default 30000).
	LagTimeMaxMs int64
	// MinISR is min.insync.replicas: acks=all needs an ISR this large.
	MinISR int
}

// ISRProposal is an ISR change for the controller (AlterPartition). The
// leader sends one at a time and keeps it pending until the controller's
// answer comes back through metadata (Committed) or an error (Rejected).
type ISRProposal struct {
	LeaderEpoch    int32
	PartitionEpoch int32 // the partition epoch the change is based on
	ISR            []int32
}

// Leader is a partition's replication state on its leader.
type Leader struct {
	cfg      LeaderConfig
	self     int32
	epoch    int32
	replicas []int32
	// isr is the committed ISR as the controller last published it.
	// Invariant: self ∈ isr; isr ⊆ replicas.
	isr            []int32
	partitionEpoch int32
	// pending is the in-flight ISR proposal, nil when none.
	pending *ISRProposal
	// followers holds every replica but self.
	followers map[int32]*follower
	// leo is the leader's own log end offset.
	leo int64
	// hw is the high watermark. Invariant: hw <= leo; it never decreases.
	hw int64
	// epochStart is the leader's log end when it took this epoch: a
	// follower joins the ISR only once it has everything before it.
	epochStart int64
}

// follower is what the leader knows of one follower.
type follower struct {
	// leo is the follower's log end offset, from its last fetch (-1:
	// unknown since this leader took over).
	leo int64
	// lastCaughtUpMs is the last time the follower was caught up.
	lastCaughtUpMs int64
	// lastFetchMs and lastFetchLeaderLEO are the time of its previous
	// fetch and the leader's log end offset then.
	lastFetchMs        int64
	lastFetchLeaderLEO int64
}

// NewLeader starts leading at epoch. Members of the committed ISR count as
// caught up now, as in Kafka, so none is dropped before it had the chance
// to fetch from the new leader.
func NewLeader(cfg LeaderConfig, self, epoch, partitionEpoch int32, replicas, isr []int32, leo, hw, nowMs int64) *Leader {
	l := &Leader{cfg: cfg, self: self, epoch: epoch, partitionEpoch: partitionEpoch,
		replicas: slices.Clone(replicas), isr: slices.Clone(isr), leo: leo, hw: min(hw, leo), epochStart: leo,
		followers: map[int32]*follower{}}
	for _, r := range replicas {
		if r == self {
			continue
		}
		f := &follower{leo: -1, lastFetchLeaderLEO: -1}
		if slices.Contains(isr, r) {
			f.lastCaughtUpMs = nowMs
		}
		l.followers[r] = f
	}
	return l
}

// Epoch is the leader epoch.
func (l *Leader) Epoch() int32 { return l.epoch }

// HighWatermark is the offset below which records are committed.
func (l *Leader) HighWatermark() int64 { return l.hw }

// ISR is the committed in-sync replica set (do not modify).
func (l *Leader) ISR() []int32 { return l.isr }

// Pending is the in-flight ISR proposal, or nil.
func (l *Leader) Pending() *ISRProposal { return l.pending }

// FollowerLEO is what the leader knows of a follower's log end (-1: unknown).
func (l *Leader) FollowerLEO(id int32) int64 {
	if f := l.followers[id]; f != nil {
		return f.leo
	}
	return -1
}

// OnAppend records the leader's new log end offset and reports whether
// the high watermark moved (with an ISR of one, every append commits).
func (l *Leader) OnAppend(leo int64) bool {
	l.leo = leo
	return l.updateHW()
}

// OnFollowerFetch records a fetch from follower id at fetchOffset (its
// log end) at nowMs. It reports whether the high watermark moved, and an
// ISR expansion to propose when the follower has just caught up.
func (l *Leader) OnFollowerFetch(id int32, fetchOffset, nowMs int64) (hwMoved bool, expand *ISRProposal) {
	f := l.followers[id]
	if f == nil {
		return false, nil
	}
	switch {
	case fetchOffset >= l.leo:
		f.lastCaughtUpMs = max(f.lastCaughtUpMs, nowMs)
	case fetchOffset >= f.lastFetchLeaderLEO && f.lastFetchLeaderLEO >= 0:
		f.lastCaughtUpMs = max(f.lastCaughtUpMs, f.lastFetchMs)
	}
	f.leo, f.lastFetchMs, f.lastFetchLeaderLEO = fetchOffset, nowMs, l.leo
	hwMoved = l.updateHW()
	return hwMoved, l.maybeExpand(id, f)
}

func (l *Leader) maybeExpand(id int32, f *follower) *ISRProposal {
	if l.pending != nil || slices.Contains(l.isr, id) {
		return nil
	}
	if f.leo < l.hw || f.leo < l.epochStart {
		return nil
	}
	isr := append(slices.Clone(l.isr), id)
	slices.Sort(isr)
	return l.propose(isr)
}

// Tick looks for ISR members that have not been caught up for
// replica.lag.time.max.ms and proposes their removal.
func (l *Leader) Tick(nowMs int64) *ISRProposal {
	if l.pending != nil {
		return nil
	}
	var keep []int32
	shrink := false
	for _, r := range l.isr {
		if f := l.followers[r]; f != nil && nowMs-f.lastCaughtUpMs > l.cfg.LagTimeMaxMs {
			shrink = true
			continue
		}
		keep = append(keep, r)
	}
	if !shrink {
		return nil
	}
	return l.propose(keep)
}

func (l *Leader) propose(isr []int32) *ISRProposal {
	l.pending = &ISRProposal{LeaderEpoch: l.epoch, PartitionEpoch: l.partitionEpoch, ISR: isr}
	return l.pending
}

// OnISRCommitted applies the ISR the controller committed (from the
// metadata image) and reports whether the high watermark moved. A change
// from a newer leader epoch is not this leader's business: the caller
// replaces the Leader instead.
func (l *Leader) OnISRCommitted(isr []int32, partitionEpoch int32) bool {
	if partitionEpoch < l.partitionEpoch {
		return false
	}
	l.isr, l.partitionEpoch, l.pending = slices.Clone(isr), partitionEpoch, nil
	return l.updateHW()
}

// OnISRRejected drops the pending proposal (the controller refused it, for
// instance a stale partition epoch); the next Tick or fetch proposes again
// from the state then.
func (l *Leader) OnISRRejected() { l.pending = nil }

// maximalISR is the set the high watermark must wait for: the committed
// ISR plus members whose addition is pending. A pending removal still
// counts the removed member until the controller commits it.
func (l *Leader) maximalISR(yield func(int32) bool) {
	for _, r := range l.isr {
		if !yield(r) {
			return
		}
	}
	if l.pending == nil {
		return
	}
	for _, r := range l.pending.ISR {
		if !slices.Contains(l.isr, r) && !yield(r) {
			return
		}
	}
}

func (l *Leader) updateHW() bool {
	hw := l.leo
	for r := range l.maximalISR {
		if r == l.self {
			continue
		}
		if f := l.followers[r]; f != nil {
			hw = min(hw, f.leo)
		}
	}
	if hw <= l.hw {
		return false
	}
	l.hw = hw
	return true
}

// Errors for acks=all produce, named after Kafka's codes.
var (
	ErrNotEnoughReplicas            = errors.New("NOT_ENOUGH_REPLICAS")
	ErrNotEnoughReplicasAfterAppend = errors.New("NOT_ENOUGH_REPLICAS_AFTER_APPEND")
)

// CheckAcksAll refuses an acks=all append when the ISR is smaller than
// min.insync.replicas, before anything is written.
func (l *Leader) CheckAcksAll() error {
	if len(l.isr) < l.cfg.MinISR {
		return ErrNotEnoughReplicas
	}
	return nil
}

// AcksAllDone reports whether an acks=all append ending at endOffset
// (exclusive) can be answered: once the high watermark has passed it, with
// nil, or with NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR that
// committed it is smaller than min.insync.replicas (it shrank while the
// produce waited), as Kafka answers.
func (l *Leader) AcksAllDone(endOffset int64) (bool, error) {
	if l.hw < endOffset {
		return false, nil
	}
	if len(l.isr) < l.cfg.MinISR {
		return true, ErrNotEnoughReplicasAfterAppend
	}
	return true, nil
}

// SetConfig applies changed topic or broker settings (min.insync.replicas
// is a topic config and may change while the leader leads).
func (l *Leader) SetConfig(cfg LeaderConfig) { l.cfg = cfg }

// Replicas is the partition's replica set (do not modify).
func (l *Leader) Replicas() []int32 { return l.replicas }

// PartitionEpoch is the partition epoch of the committed ISR.
func (l *Leader) PartitionEpoch() int32 { return l.partitionEpoch }

// SetReplicas applies a change of the replica set at the same leader
// epoch (a reassignment adding or dropping replicas): a new replica starts
// as a follower whose log end is unknown and that has never caught up, so
// it joins the ISR only by fetching up to the high watermark; a removed
// one is forgotten. The caller applies the committed ISR after it
// (OnISRCommitted), which the controller keeps within the new set.
func (l *Leader) SetReplicas(replicas []int32) {
	l.replicas = slices.Clone(replicas)
	for id := range l.followers {
		if !slices.Contains(replicas, id) {
			delete(l.followers, id)
		}
	}
	for _, r := range replicas {
		if r != l.self && l.followers[r] == nil {
			l.followers[r] = &follower{leo: -1, lastFetchLeaderLEO: -1}
		}
	}
}
