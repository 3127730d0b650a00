package txn

// The second phase of ending a transaction. Once the Prepare record is in
// the log the outcome is decided: the coordinator writes a marker (a
// control batch, COMMIT or ABORT, at the producer id and epoch) on every
// partition of the transaction, retrying the partitions that fail for as
// long as it remains the coordinator, and then writes the Complete record.
// A coordinator that loses its partition stops; its successor finds the
// Prepare record at load and starts the markers again (writing a marker
// twice is harmless: the second closes no transaction).

import "slices"

// MarkerRequest is one round of markers of one transaction.
type MarkerRequest struct {
	TransactionalID  string
	ProducerID       int64
	ProducerEpoch    int16
	CoordinatorEpoch int32 // refuses the markers of a coordinator that lost its place
	Commit           bool
	// TransactionVersion is 2 for a transaction on version 2 (its epoch
	// was bumped for the markers), 0 otherwise; WriteTxnMarkers v2 carries it.
	TransactionVersion int8
	Partitions         []TopicPartition
}

// MarkerWriter writes markers on the partitions' leaders. Write must not
// block its caller; it calls done once every partition was tried, with
// those that failed and are to be tried again (a partition that no longer
// exists is not one of them: Kafka drops those).
type MarkerWriter interface {
	Write(req MarkerRequest, done func(retry []TopicPartition))
}

// sendMarkers starts m's markers; m is pending in a Prepare state.
func (c *Coordinator) sendMarkers(m *txnMeta) {
	c.mu.Lock()
	req, ok := c.markerRequestLocked(m)
	c.mu.Unlock()
	if ok {
		c.writeMarkers(m, req)
	}
}

// markerRequestLocked is the round of markers m's Prepare state calls for;
// false once m is no longer the coordinator's. c.mu is held.
func (c *Coordinator) markerRequestLocked(m *txnMeta) (MarkerRequest, bool) {
	if !c.ownedLocked(m) || !m.state.preparing() {
		return MarkerRequest{}, false
	}
	r := MarkerRequest{
		TransactionalID: m.id, ProducerID: m.pid, ProducerEpoch: m.epoch,
		CoordinatorEpoch: m.part.epoch, Commit: m.state == PrepareCommit, Partitions: m.sortedParts(),
	}
	if m.tv2 {
		r.TransactionVersion = 2
	}
	m.waiting = r.Partitions
	return r, true
}

func (c *Coordinator) writeMarkers(m *txnMeta, req MarkerRequest) {
	if len(req.Partitions) == 0 {
		c.complete(m)
		return
	}
	c.cfg.Markers.Write(req, func(retry []TopicPartition) {
		if len(retry) == 0 {
			c.complete(m)
			return
		}
		c.noteWaiting(m, retry)
		c.log.Debug("transaction markers to retry", "transactional_id", m.id, "partitions", len(retry))
		c.clock.AfterFunc(c.cfg.MarkerRetryBackoff, func() {
			c.mu.Lock()
			owned := c.ownedLocked(m)
			c.mu.Unlock()
			if owned {
				req.Partitions = retry
				c.writeMarkers(m, req)
			}
		})
	})
}

// noteWaiting records the partitions a round of m's markers left to
// retry (a copy, sorted: the writer owns retry).
func (c *Coordinator) noteWaiting(m *txnMeta, retry []TopicPartition) {
	w := slices.Clone(retry)
	sortParts(w)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ownedLocked(m) && m.state.preparing() {
		m.waiting = w
	}
}

// complete writes the Complete record once every marker is written, and
// retries that write while the coordinator keeps the partition.
func (c *Coordinator) complete(m *txnMeta) {
	c.mu.Lock()
	if !c.ownedLocked(m) || !m.state.preparing() {
		c.mu.Unlock()
		return
	}
	s := m.snapshot()
	s.state, s.parts, s.updateMs = CompleteAbort, nil, c.clock.Now().UnixMilli()
	if m.state == PrepareCommit {
		s.state = CompleteCommit
	}
	if s.nextPid >= 0 { // transactions version 2 ran out of epochs
		s.prevPid, s.pid, s.nextPid, s.epoch, s.lastEpoch = s.pid, s.nextPid, -1, 0, noEpoch
	}
	c.mu.Unlock()
	err := c.appendRecord(m.part, m.id, recordValue(s))
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.ownedLocked(m) {
		return
	}
	if err != nil {
		c.log.Warn("writing a transaction's completion failed; retrying", "transactional_id", m.id, "err", err)
		c.clock.AfterFunc(c.cfg.MarkerRetryBackoff, func() { c.complete(m) })
		return
	}
	m.apply(s)
	m.pending, m.waiting = false, nil
	if m.completed != nil {
		close(m.completed)
		m.completed = nil
	}
}
