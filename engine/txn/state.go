package txn

import (
	"math"
	"sort"
)

// State is a transaction's state, numbered as in Kafka's
// TransactionLogValue.TransactionStatus.
type State int8

const (
	Empty             State = 0
	Ongoing           State = 1
	PrepareCommit     State = 2
	PrepareAbort      State = 3
	CompleteCommit    State = 4
	CompleteAbort     State = 5
	Dead              State = 6
	PrepareEpochFence State = 7
)

var stateNames = [...]string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence"}

// String is Kafka's name of the state (DescribeTransactions and
// ListTransactions answer with it).
func (s State) String() string {
	if s < 0 || int(s) >= len(stateNames) {
		return "Unknown"
	}
	return stateNames[s]
}

// ParseState is the state of a Kafka state name; false for none.
func ParseState(name string) (State, bool) {
	for i, n := range stateNames {
		if n == name {
			return State(i), true
		}
	}
	return 0, false
}

func (s State) preparing() bool { return s == PrepareCommit || s == PrepareAbort }

// complete: no transaction is open (a new one may begin).
func (s State) complete() bool { return s == Empty || s == CompleteCommit || s == CompleteAbort }

// noEpoch is Kafka's RecordBatch.NO_PRODUCER_EPOCH.
const noEpoch int16 = -1

// epochExhausted: bumping e again would reach the largest epoch, which
// Kafka keeps out of use; the producer id is replaced instead.
func epochExhausted(e int16) bool { return e >= math.MaxInt16-1 }

// txnMeta is one transactional id's state. Fields are guarded by the
// coordinator's mu.
type txnMeta struct {
	id   string
	part *partition // the loaded partition it belongs to

	pid, prevPid, nextPid int64 // prevPid/nextPid: KIP-890's, -1 when unset
	epoch                 int16
	// lastEpoch is the epoch before the last bump (-1 when unknown), so a
	// retried InitProducerId or TV2 EndTxn whose answer was lost is told
	// the current epoch rather than fenced (KIP-360). Not persisted, as in
	// Kafka.
	lastEpoch int16
	timeoutMs int32
	state     State
	parts     map[TopicPartition]struct{}
	startMs   int64 // when the open transaction began; -1 when none
	updateMs  int64
	tv2       bool // the client runs transactions version 2 (KIP-890 part 2)
	// waiting: in a Prepare state whose markers are out, the partitions
	// whose marker is not written yet (sorted), which DescribeTransactions
	// lists as Kafka does; nil before the first round and after Complete.
	// Not persisted: a new coordinator sends every marker again.
	waiting []TopicPartition

	// pending: a record is being written or a commit's markers are out.
	// Invariant: while pending, only the writer that set it changes the
	// fields above; every other call answers CONCURRENT_TRANSACTIONS.
	pending bool
	// completed is closed when the commit or abort in flight completes
	// (its markers and Complete record written); nil when none is.
	completed chan struct{}
}

// snapshot is the value a transition would write: txnMeta's persisted
// fields, copied so the write can happen outside the lock.
type snapshot struct {
	pid, prevPid, nextPid int64
	epoch, lastEpoch      int16
	timeoutMs             int32
	state                 State
	parts                 []TopicPartition
	startMs, updateMs     int64
	tv2                   bool
}

func (m *txnMeta) snapshot() snapshot {
	return snapshot{
		pid: m.pid, prevPid: m.prevPid, nextPid: m.nextPid, epoch: m.epoch, lastEpoch: m.lastEpoch,
		timeoutMs: m.timeoutMs, state: m.state, parts: m.sortedParts(),
		startMs: m.startMs, updateMs: m.updateMs, tv2: m.tv2,
	}
}

// apply makes s the current state.
func (m *txnMeta) apply(s snapshot) {
	m.pid, m.prevPid, m.nextPid, m.epoch, m.lastEpoch = s.pid, s.prevPid, s.nextPid, s.epoch, s.lastEpoch
	m.timeoutMs, m.state, m.startMs, m.updateMs, m.tv2 = s.timeoutMs, s.state, s.startMs, s.updateMs, s.tv2
	m.parts = make(map[TopicPartition]struct{}, len(s.parts))
	for _, tp := range s.parts {
		m.parts[tp] = struct{}{}
	}
}

func (m *txnMeta) sortedParts() []TopicPartition {
	out := make([]TopicPartition, 0, len(m.parts))
	for tp := range m.parts {
		out = append(out, tp)
	}
	sortParts(out)
	return out
}

func sortParts(tps []TopicPartition) {
	sort.Slice(tps, func(i, j int) bool {
		if tps[i].Topic != tps[j].Topic {
			return tps[i].Topic < tps[j].Topic
		}
		return tps[i].Partition < tps[j].Partition
	})
}

func (m *txnMeta) has(tp TopicPartition) bool {
	_, ok := m.parts[tp]
	return ok
}

// bumpedForMarkers is s at the next epoch, the one its transaction's
// markers carry. The markers must carry the producer id of the
// transaction's records, so when the epoch runs out the id is not replaced
// now, as bumped would, but once the transaction completes (nextPid): the
// markers go out at the largest epoch, which nothing else uses.
func (s snapshot) bumpedForMarkers(newPid func() (int64, error)) (snapshot, error) {
	if epochExhausted(s.epoch) {
		pid, err := newPid()
		if err != nil {
			return s, err
		}
		s.nextPid = pid
	}
	s.lastEpoch, s.epoch = s.epoch, s.epoch+1
	return s, nil
}

// abortBumped is s aborting its open transaction at the next epoch, which
// fences the producer that opened it (InitProducerId from another
// instance, or the transaction timing out).
func (s snapshot) abortBumped(newPid func() (int64, error), now int64) (snapshot, error) {
	s, err := s.bumpedForMarkers(newPid)
	s.state, s.updateMs = PrepareAbort, now
	return s, err
}

// bumped is s with the next epoch of the same producer id, or a new
// producer id at epoch 0 when the epoch is exhausted.
func (s snapshot) bumped(newPid func() (int64, error)) (snapshot, error) {
	if !epochExhausted(s.epoch) {
		s.lastEpoch, s.epoch = s.epoch, s.epoch+1
		return s, nil
	}
	pid, err := newPid()
	if err != nil {
		return s, err
	}
	s.prevPid, s.pid, s.epoch, s.lastEpoch = s.pid, pid, 0, noEpoch
	return s, nil
}
