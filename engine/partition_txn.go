package engine

// The partition side of transactions: the end-of-transaction markers the
// transaction coordinator has written (WriteTxnMarkers), and what
// read_committed readers see (the last stable offset, aborted
// transactions). The log keeps the transaction state (storage/txn.go).

import (
	"errors"
	"math"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-broker/sluice/storage"
)

// writeTxnMarker appends producerID's commit or abort marker as the
// leader, as Kafka's WriteTxnMarkers does: the producer's open transaction
// in this partition ends, an abort is recorded in the transaction index,
// and the last stable offset moves once the high watermark passes the
// marker. The append is an acks=all one (NOT_ENOUGH_REPLICAS under
// min.insync.replicas); the caller that must answer only once the marker
// is replicated waits with awaitHighWatermark(p.LogEndOffset(), …) after
// this returns (the log end is then past the marker).
//
// Errors are *kerr.Error where Kafka has a code: NOT_LEADER_OR_FOLLOWER,
// NOT_ENOUGH_REPLICAS, TRANSACTION_COORDINATOR_FENCED (a coordinator epoch
// older than the last marker's for the producer), INVALID_PRODUCER_EPOCH
// (an epoch older than the producer's, or under transactions version tv 2
// not newer than an open transaction's); anything else is a storage error
// (ErrorCode maps it).
func (p *Partition) writeTxnMarker(producerID int64, producerEpoch int16, coordinatorEpoch int32, commit bool, tv int8, nowMs int64) error {
	p.mu.Lock()
	if err := p.appendableLocked(-1); err != nil {
		p.mu.Unlock()
		return err
	}
	opt := storage.AppendOptions{LeaderEpoch: p.LeaderEpoch(), NowMs: nowMs, TransactionVersion: tv}
	res, err := p.log.AppendMarker(producerID, producerEpoch, coordinatorEpoch, commit, opt)
	if err != nil {
		p.mu.Unlock()
		return markerError(err)
	}
	p.mu.unreleased += res.Bytes
	if l := p.mu.leader; l != nil {
		l.OnAppend(p.log.LogEndOffset())
	}
	moved, due := p.moveHighWatermarkLocked()
	p.mu.Unlock()
	if p.waiters != nil {
		p.waiters.wakeReplicas(p, res.Bytes)
	}
	p.released(moved, due)
	return nil
}

// markerError maps the log's marker refusals to Kafka's errors.
func markerError(err error) error {
	switch {
	case errors.Is(err, storage.ErrTransactionCoordinatorFenced):
		return kerr.TransactionCoordinatorFenced
	case errors.Is(err, storage.ErrInvalidProducerEpoch):
		return kerr.InvalidProducerEpoch
	}
	return err
}

// abortedTxns appends to dst the aborted transactions a read_committed
// read of [from, to) overlaps.
func (p *Partition) abortedTxns(dst []storage.AbortedTxn, from, to int64) []storage.AbortedTxn {
	return p.log.AbortedTxns(dst, from, to)
}

// stableTracker remembers the last stable offset the waiters were last
// told about, so that a high watermark move wakes parked read_committed
// fetches only when it moved the last stable offset too.
type stableTracker struct {
	last atomic.Int64 // the last stable offset at the last move
	held atomic.Bool  // it was below the high watermark then
}

// stableReadable returns how many bytes a move to lso (with the high
// watermark at hw) made readable to read_committed readers, given that
// the move made n readable to the others: 0 if the last stable offset
// did not move; n if nothing was held back from them; otherwise an
// unknown amount (the transactions decided now), counted as enough for
// any waiter.
func (s *stableTracker) stableReadable(lso, hw, n int64) int64 {
	old := s.last.Swap(lso)
	held := s.held.Swap(lso < hw)
	switch {
	case lso <= old:
		return 0
	case held:
		return math.MaxInt32
	}
	return n
}

// wakeConsumers tells the parked consumer fetches that a high watermark
// move made n bytes readable.
func (p *Partition) wakeConsumers(n int64) {
	p.waiters.wake(p, n)
	if m := p.stable.stableReadable(p.LastStableOffset(), p.HighWatermark(), n); m > 0 {
		p.waiters.wakeCommitted(p, m)
	}
}
