package replication

// Phase is where a follower is in joining its leader.
type Phase int8

const (
	// Truncating: waiting for the leader's end offset of an epoch
	// (OffsetForLeaderEpoch) before the local log may be cut and fetched.
	Truncating Phase = iota
	// Fetching: the log agrees with the leader's up to FetchOffset.
	Fetching
)

// EpochLog is what the follower state machine reads of its local log.
type EpochLog interface {
	LogEndOffset() int64
	LogStartOffset() int64
	// LatestEpoch is the newest leader epoch in the log (-1: none).
	LatestEpoch() int32
	// EndOffsetForEpoch answers as Kafka's leader does: the largest epoch
	// <= epoch that the log has, and the start offset of the epoch after
	// it (or the log end). (-1, -1) when the log has none.
	EndOffsetForEpoch(epoch int32) (foundEpoch int32, endOffset int64)
}

// Follower is a partition's replication state on a follower.
type Follower struct {
	Leader int32
	Epoch  int32 // the leader epoch this follower follows
	phase  Phase
	// askedEpoch is the epoch of the outstanding OffsetForLeaderEpoch.
	askedEpoch int32
	// fetchOffset is the next offset to fetch. Valid in Fetching.
	fetchOffset int64
	// onFetch: the leader answers fetches with DivergingEpoch (Fetch
	// v12+, KIP-595 as Kafka 2.7+ replicas use it), so fetches name the
	// log's latest epoch and truncation waits for the leader's answer.
	onFetch bool
}

// Step is what the driver must do next.
type Step struct {
	// AskEpoch >= 0: send OffsetForLeaderEpoch for this epoch.
	AskEpoch int32
	// TruncateTo >= 0: truncate the log (and its indexes, epoch file and
	// producer state) to this offset before fetching.
	TruncateTo int64
	// ResetTo >= 0: the leader no longer has the follower's next offset:
	// drop the whole log and restart it at this offset.
	ResetTo int64
	// FetchFrom >= 0: fetch from this offset.
	FetchFrom int64
}

func none() Step { return Step{AskEpoch: -1, TruncateTo: -1, ResetTo: -1, FetchFrom: -1} }

// NewFollower starts following leader at epoch. A log with leader epochs
// asks the leader where its latest epoch ends; an empty log without any
// has nothing to disagree on and fetches from its end at once.
func NewFollower(leader, epoch int32, log EpochLog) (*Follower, Step) {
	f := &Follower{Leader: leader, Epoch: epoch}
	latest := log.LatestEpoch()
	if latest < 0 {
		return f, f.fetchFrom(log.LogEndOffset())
	}
	return f, f.ask(latest)
}

// NewFetchingFollower starts following leader at epoch by fetching at once
// from the log end, naming the log's latest epoch (LastFetchedEpoch): the
// leader answers where the histories part if they do (DivergingEpoch,
// OnDivergingEpoch), which saves the OffsetForLeaderEpoch round trip of
// every partition on every leader change. Nothing is truncated before
// that answer, so nothing below the high watermark is cut without the
// leader's word. OffsetForLeaderEpoch remains for what a fetch answer
// cannot settle: an epoch of the leader's that this log lacks (KIP-279)
// and an offset the leader reports out of range.
func NewFetchingFollower(leader, epoch int32, log EpochLog) (*Follower, Step) {
	f := &Follower{Leader: leader, Epoch: epoch, onFetch: true}
	return f, f.fetchFrom(log.LogEndOffset())
}

// LastFetchedEpoch is the epoch a fetch names for the log's tail (Fetch
// v12+): the log's latest epoch for a follower truncating on fetch, -1
// (none) otherwise or for a log without epochs.
func (f *Follower) LastFetchedEpoch(log EpochLog) int32 {
	if !f.onFetch {
		return -1
	}
	return log.LatestEpoch()
}

// Phase reports the follower's phase.
func (f *Follower) Phase() Phase { return f.phase }

// FetchOffset is the next offset to fetch (Fetching only).
func (f *Follower) FetchOffset() int64 { return f.fetchOffset }

func (f *Follower) ask(epoch int32) Step {
	f.phase, f.askedEpoch = Truncating, epoch
	s := none()
	s.AskEpoch = epoch
	return s
}

func (f *Follower) fetchFrom(offset int64) Step {
	f.phase, f.fetchOffset = Fetching, offset
	s := none()
	s.FetchFrom = offset
	return s
}

// OnEpochEndOffset takes the leader's answer to OffsetForLeaderEpoch:
// leaderEpoch is the largest epoch <= the asked one that the leader has
// and endOffset where it ends on the leader (-1, -1 when the leader has no
// epoch that old). hw is the follower's high watermark.
func (f *Follower) OnEpochEndOffset(leaderEpoch int32, endOffset int64, log EpochLog, hw int64) Step {
	if f.phase != Truncating {
		return none()
	}
	if leaderEpoch < 0 || endOffset < 0 {
		// The leader knows nothing as old as our history: everything we
		// have above the committed high watermark is suspect, and nothing
		// below it can differ (it was committed on every ISR member).
		return f.truncate(min(hw, log.LogEndOffset()))
	}
	if leaderEpoch == f.askedEpoch {
		return f.truncate(min(endOffset, log.LogEndOffset()))
	}
	// The leader does not have our epoch (KIP-279): find where our
	// history of the leader's epoch ends, and ask again if we lack it too.
	found, localEnd := log.EndOffsetForEpoch(leaderEpoch)
	if found == leaderEpoch || found < 0 {
		if found < 0 {
			localEnd = log.LogEndOffset()
		}
		return f.truncate(min(endOffset, localEnd, log.LogEndOffset()))
	}
	return f.ask(found)
}

func (f *Follower) truncate(offset int64) Step {
	s := f.fetchFrom(offset)
	s.TruncateTo = offset
	return s
}

// OnFetched records records appended from a fetch response: the new log
// end. It returns the follower's high watermark: the leader's, bounded by
// what this follower has.
func (f *Follower) OnFetched(newLEO, leaderHW int64) int64 {
	f.fetchOffset = newLEO
	return min(leaderHW, newLEO)
}

// OnOutOfRange handles OFFSET_OUT_OF_RANGE from the leader for the fetch
// offset: below the leader's log start, the follower resets to it (it fell
// behind retention); above the leader's log end, its tail diverges and it
// truncates again by epoch.
func (f *Follower) OnOutOfRange(leaderLogStart, leaderLEO int64, log EpochLog) Step {
	if f.fetchOffset < leaderLogStart {
		s := f.fetchFrom(leaderLogStart)
		s.ResetTo = leaderLogStart
		return s
	}
	if latest := log.LatestEpoch(); latest >= 0 {
		return f.ask(latest)
	}
	return f.truncate(min(leaderLEO, log.LogEndOffset()))
}

// OnDivergingEpoch handles a fetch response that says the follower's log
// diverges from the leader's at epoch/endOffset (Fetch v12+'s
// DivergingEpoch, the leader's answer for lastFetchedEpoch, the epoch the
// fetch named): the same truncation as an OffsetForLeaderEpoch answer for
// it, or one more question when the leader's epoch is one this log lacks.
func (f *Follower) OnDivergingEpoch(lastFetchedEpoch, epoch int32, endOffset int64, log EpochLog, hw int64) Step {
	f.phase, f.askedEpoch = Truncating, lastFetchedEpoch
	return f.OnEpochEndOffset(epoch, endOffset, log, hw)
}

// AskedEpoch is the epoch of the outstanding OffsetForLeaderEpoch
// (Truncating only).
func (f *Follower) AskedEpoch() int32 { return f.askedEpoch }
