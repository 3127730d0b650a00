package txn

// The producer's calls, with Kafka's checks in Kafka's order. Errors that
// a client retries: NOT_COORDINATOR (look for the coordinator again),
// CONCURRENT_TRANSACTIONS (a write or a commit is in flight). Fatal to a
// producer: PRODUCER_FENCED (a newer epoch exists), and
// INVALID_PRODUCER_ID_MAPPING / INVALID_TXN_STATE (a confused client).

import (
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// InitRequest is a transactional InitProducerId.
type InitRequest struct {
	TransactionalID string
	TimeoutMs       int32
	// ProducerID and ProducerEpoch are KIP-360's: the id and epoch the
	// producer had (-1 and -1 for a new producer). A known pair is bumped,
	// a retry of the last bump answered again, anything else fenced.
	ProducerID    int64
	ProducerEpoch int16
}

// ProducerResult is a producer id and epoch, or an error code.
type ProducerResult struct {
	ProducerID    int64
	ProducerEpoch int16
	ErrorCode     int16
	// Completed, from an EndTxn that began a commit or abort, is closed
	// once its markers and Complete record are written. A caller may wait
	// for it before answering, so that the producer's next transaction
	// does not find this one still completing (CONCURRENT_TRANSACTIONS).
	Completed <-chan struct{}
}

func failed(code int16) ProducerResult {
	return ProducerResult{ProducerID: -1, ProducerEpoch: -1, ErrorCode: code}
}

// InitProducerID gives the transactional id its producer id and the next
// epoch, fencing every older producer of the id. An open transaction is
// aborted first (at a bumped epoch, so the zombie's writes are refused),
// and the call answers CONCURRENT_TRANSACTIONS until that is done.
func (c *Coordinator) InitProducerID(req InitRequest) ProducerResult {
	if req.TimeoutMs <= 0 || time.Duration(req.TimeoutMs)*time.Millisecond > c.cfg.MaxTimeout {
		return failed(kerr.InvalidTransactionTimeout.Code)
	}
	m, code := c.metaForInit(req.TransactionalID)
	if code != 0 {
		return failed(code)
	}
	c.mu.Lock()
	if !c.ownedLocked(m) {
		c.mu.Unlock()
		return failed(kerr.NotCoordinator.Code)
	}
	s, fence, code := c.initTransitionLocked(m, req)
	if code != 0 || s == nil {
		r := ProducerResult{ProducerID: m.pid, ProducerEpoch: m.epoch, ErrorCode: code}
		c.mu.Unlock()
		if code != 0 {
			r = failed(code)
		}
		return r
	}
	m.pending = true
	c.mu.Unlock()
	if fence {
		if code := c.persist(m, *s, true); code != 0 {
			return failed(code)
		}
		c.sendMarkers(m)
		return failed(kerr.ConcurrentTransactions.Code)
	}
	if code := c.persist(m, *s, false); code != 0 {
		return failed(code)
	}
	return ProducerResult{ProducerID: s.pid, ProducerEpoch: s.epoch}
}

// metaForInit finds the id's metadata or creates it, with a new producer
// id at no epoch yet (what the first transition bumps to 0). As in Kafka
// the placeholder stays if its first write fails: the retry bumps it.
func (c *Coordinator) metaForInit(id string) (*txnMeta, int16) {
	c.mu.Lock()
	m, _, code := c.lookupLocked(id)
	c.mu.Unlock()
	if code != 0 || m != nil {
		return m, code
	}
	pid, err := c.cfg.NewProducerID()
	if err != nil {
		c.log.Error("cannot allocate a producer id", "err", err)
		return nil, kerr.CoordinatorNotAvailable.Code
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	m, part, code := c.lookupLocked(id)
	if code != 0 || m != nil {
		return m, code // lost a race with another InitProducerId: its id wins
	}
	m = &txnMeta{id: id, part: part, pid: pid, prevPid: -1, nextPid: -1, epoch: noEpoch, lastEpoch: noEpoch,
		state: Empty, startMs: -1, parts: map[TopicPartition]struct{}{}}
	c.mu.txns[id] = m
	return m, 0
}

// initTransitionLocked decides what an InitProducerId does to m: the
// state to write (nil with code 0: answer the current id and epoch, a
// retry) and whether it fences an open transaction. c.mu is held.
func (c *Coordinator) initTransitionLocked(m *txnMeta, req InitRequest) (*snapshot, bool, int16) {
	switch {
	case m.pending:
		return nil, false, kerr.ConcurrentTransactions.Code
	case req.ProducerID >= 0 && !validPidForInit(m, req):
		return nil, false, kerr.ProducerFenced.Code
	case m.state.preparing():
		return nil, false, kerr.ConcurrentTransactions.Code
	}
	s := m.snapshot()
	now := c.clock.Now().UnixMilli()
	s.updateMs = now
	if m.state == Ongoing {
		// Fence the producer: abort at the next epoch. That epoch is never
		// handed out; the client's retry bumps again.
		s, err := s.abortBumped(c.cfg.NewProducerID, now)
		if err != nil {
			return nil, false, kerr.CoordinatorNotAvailable.Code
		}
		return &s, true, 0
	}
	if req.ProducerID >= 0 && m.epoch != noEpoch && req.ProducerEpoch != m.epoch {
		if req.ProducerEpoch == m.lastEpoch || req.ProducerID == m.prevPid {
			return nil, false, 0 // a retry of the bump we already made
		}
		return nil, false, kerr.ProducerFenced.Code
	}
	s, err := s.bumped(c.cfg.NewProducerID)
	if err != nil {
		return nil, false, kerr.CoordinatorNotAvailable.Code
	}
	s.state, s.parts, s.startMs, s.timeoutMs = Empty, nil, -1, req.TimeoutMs
	return &s, false, 0
}

// validPidForInit is KIP-360's check of the id a producer says it had:
// the current one (its epoch is checked next), any when the id was just
// created, or the previous one after a rotation whose answer was lost.
func validPidForInit(m *txnMeta, req InitRequest) bool {
	return m.epoch == noEpoch || req.ProducerID == m.pid ||
		req.ProducerID == m.prevPid && epochExhausted(req.ProducerEpoch)
}

// checkProducerLocked is the check every call after InitProducerId makes
// of the producer id and epoch it carries. c.mu is held.
func checkProducerLocked(m *txnMeta, pid int64, epoch int16) int16 {
	switch {
	case m == nil || m.pid != pid:
		return kerr.InvalidProducerIDMapping.Code
	case m.epoch != epoch:
		return kerr.ProducerFenced.Code
	case m.pending, m.state.preparing():
		return kerr.ConcurrentTransactions.Code
	}
	return 0
}

// AddPartitions adds partitions to the id's transaction, beginning one if
// none is open (AddPartitionsToTxn, AddOffsetsToTxn with the group's
// offsets partition).
func (c *Coordinator) AddPartitions(id string, pid int64, epoch int16, tps []TopicPartition) int16 {
	return c.addPartitions(id, pid, epoch, tps, false)
}

// AddPartitionsImplicitly is AddPartitions for a producer on transactions
// version 2 (KIP-890 part 2), whose partitions are added by the brokers
// its produces and offset commits reach rather than by the producer: the
// transaction is recorded as version 2 (its records written as
// TransactionLogValue v1).
func (c *Coordinator) AddPartitionsImplicitly(id string, pid int64, epoch int16, tps []TopicPartition) int16 {
	return c.addPartitions(id, pid, epoch, tps, true)
}

func (c *Coordinator) addPartitions(id string, pid int64, epoch int16, tps []TopicPartition, tv2 bool) int16 {
	c.mu.Lock()
	m, _, code := c.lookupLocked(id)
	if code == 0 {
		code = checkProducerLocked(m, pid, epoch)
	}
	if code != 0 || m.state == Ongoing && m.hasAll(tps) && (m.tv2 || !tv2) {
		c.mu.Unlock()
		return code
	}
	s := m.snapshot()
	s.tv2 = s.tv2 || tv2
	now := c.clock.Now().UnixMilli()
	if m.state != Ongoing {
		s.parts, s.startMs = nil, now
	}
	s.parts = mergeParts(s.parts, tps)
	s.state, s.updateMs = Ongoing, now
	m.pending = true
	c.mu.Unlock()
	return c.persist(m, s, false)
}

func (m *txnMeta) hasAll(tps []TopicPartition) bool {
	for _, tp := range tps {
		if !m.has(tp) {
			return false
		}
	}
	return true
}

// mergeParts adds tps to the sorted parts, once each.
func mergeParts(parts, tps []TopicPartition) []TopicPartition {
	seen := make(map[TopicPartition]struct{}, len(parts)+len(tps))
	out := make([]TopicPartition, 0, len(parts)+len(tps))
	for _, list := range [][]TopicPartition{parts, tps} {
		for _, tp := range list {
			if _, ok := seen[tp]; !ok {
				seen[tp] = struct{}{}
				out = append(out, tp)
			}
		}
	}
	sortParts(out)
	return out
}

// Verify answers AddPartitionsToTxn's verify-only form (KIP-890 part 1),
// which a partition leader sends before it accepts a transactional
// produce: per partition, 0 if it is in the open transaction of this
// producer id and epoch, INVALID_TXN_STATE if not. A non-zero code
// applies to every partition.
func (c *Coordinator) Verify(id string, pid int64, epoch int16, tps []TopicPartition) ([]int16, int16) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m, _, code := c.lookupLocked(id)
	switch {
	case code != 0:
		return nil, code
	case m == nil || m.pid != pid:
		return nil, kerr.InvalidProducerIDMapping.Code
	case m.epoch != epoch:
		return nil, kerr.ProducerFenced.Code
	case m.state.preparing():
		return nil, kerr.ConcurrentTransactions.Code
	}
	codes := make([]int16, len(tps))
	for i, tp := range tps {
		if m.state != Ongoing || !m.has(tp) {
			codes[i] = kerr.InvalidTxnState.Code
		}
	}
	return codes, 0
}

// EndRequest is an EndTxn.
type EndRequest struct {
	TransactionalID string
	ProducerID      int64
	ProducerEpoch   int16
	Commit          bool
	// TV2: transactions version 2 (EndTxn v5+): every transaction ends
	// with an epoch bump, and the answer carries the new id and epoch.
	TV2 bool
}

// EndTxn ends the open transaction: it writes PrepareCommit or
// PrepareAbort and answers; the markers and the Complete record follow
// (markers.go). A retry of an end that already happened answers success.
func (c *Coordinator) EndTxn(req EndRequest) ProducerResult {
	c.mu.Lock()
	m, _, code := c.lookupLocked(req.TransactionalID)
	if code != 0 {
		c.mu.Unlock()
		return failed(code)
	}
	s, code := c.endTransitionLocked(m, req)
	if code != 0 || s == nil {
		r := ProducerResult{ProducerID: m.pid, ProducerEpoch: m.epoch}
		if m.nextPid >= 0 {
			r = ProducerResult{ProducerID: m.nextPid}
		}
		c.mu.Unlock()
		if code != 0 {
			return failed(code)
		}
		return r
	}
	m.pending = true
	completed := make(chan struct{})
	m.completed = completed
	c.mu.Unlock()
	if code := c.persist(m, *s, true); code != 0 {
		return failed(code)
	}
	c.sendMarkers(m)
	if s.nextPid >= 0 {
		return ProducerResult{s.nextPid, 0, 0, completed}
	}
	return ProducerResult{s.pid, s.epoch, 0, completed}
}

// endTransitionLocked decides what an EndTxn does: the Prepare state to
// write, or nil with code 0 for a retry of an end already done.
func (c *Coordinator) endTransitionLocked(m *txnMeta, req EndRequest) (*snapshot, int16) {
	if m == nil {
		return nil, kerr.InvalidProducerIDMapping.Code
	}
	retry := req.TV2 && isTV2Retry(m, req.ProducerID, req.ProducerEpoch)
	switch {
	case m.pid != req.ProducerID && !retry:
		return nil, kerr.InvalidProducerIDMapping.Code
	case m.epoch != req.ProducerEpoch && !retry:
		return nil, kerr.ProducerFenced.Code
	case m.pending:
		return nil, kerr.ConcurrentTransactions.Code
	}
	want := CompleteAbort
	if req.Commit {
		want = CompleteCommit
	}
	switch {
	case m.state == Ongoing && retry:
		return nil, kerr.ProducerFenced.Code // an older epoch of an open transaction
	case m.state == Ongoing:
		return c.prepare(m, req)
	case m.state == want && (retry || !req.TV2):
		return nil, 0 // the end this retry asks for is done
	case req.TV2 && !req.Commit && !retry && m.state.complete():
		// Transactions version 2 aborts with nothing open, to bump the
		// epoch (a producer recovering from an abortable error).
		return c.prepare(m, req)
	case m.state.preparing() && (m.state == PrepareCommit) == req.Commit:
		return nil, kerr.ConcurrentTransactions.Code
	}
	return nil, kerr.InvalidTxnState.Code
}

// isTV2Retry: the id and epoch are those the producer had before its last
// EndTxn bumped them, so this is that EndTxn again.
func isTV2Retry(m *txnMeta, pid int64, epoch int16) bool {
	onBump := m.pid == pid && m.epoch > 0 && epoch == m.epoch-1
	onRotation := m.prevPid == pid && epoch == math.MaxInt16-1 && m.epoch == 0
	return onBump || onRotation
}

// prepare is the Prepare state an EndTxn writes. Under transactions
// version 2 the epoch goes up with it (markers carry the new one); when it
// would be exhausted a new producer id is handed out at completion.
func (c *Coordinator) prepare(m *txnMeta, req EndRequest) (*snapshot, int16) {
	s := m.snapshot()
	s.state, s.updateMs = PrepareAbort, c.clock.Now().UnixMilli()
	if req.Commit {
		s.state = PrepareCommit
	}
	// The EndTxn decides the transaction's version, as in Kafka: an
	// implicit add (Produce v12, TxnOffsetCommit v5) marked it version 2,
	// but a producer ending it with EndTxn v4 gets no epoch bump, so its
	// markers go out as version 1 at the records' epoch (a version 2
	// marker at that epoch is refused by the leaders as a late one).
	s.tv2 = req.TV2
	if !req.TV2 {
		return &s, 0
	}
	s, err := s.bumpedForMarkers(c.cfg.NewProducerID)
	if err != nil {
		return nil, kerr.CoordinatorNotAvailable.Code
	}
	return &s, 0
}
