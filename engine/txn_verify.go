package engine

// KIP-890 part 1 on the partition leader: a transactional produce is
// accepted only for a partition the producer added to its open
// transaction, which the leader asks the transactional id's coordinator
// (in-process, or AddPartitionsToTxn verify-only to its broker). Without
// it a producer's late or misdirected batch could open a transaction on a
// partition its coordinator never writes a marker to: a hanging
// transaction that holds the last stable offset forever. Once verified,
// a (partition, producer) pair is remembered at its producer epoch and the
// partition's leader epoch until the producer's marker is written here, so
// only the first batch of a transaction on a partition asks.
//
// A batch whose verification fails retriably (the coordinator busy with
// another partition of the transaction, moving, or unreachable) is
// remembered too, by its sequence: until it is verified, the producer's
// later batches on the partition are refused (retriably) rather than
// verified and appended ahead of it. A partition with no state for the
// producer accepts any first sequence, so a later batch appended first
// would leave the earlier one out of order for good (Kafka: KAFKA-14884).

import (
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/engine/txn"
	"github.com/sluice-broker/sluice/record"
)

// verifiedTxns is the leader's memory of verified transactions. A typed
// map under a read lock: the check on every transactional batch allocates
// nothing (a sync.Map would box its key).
type verifiedTxns struct {
	mu sync.RWMutex
	m  map[verifiedKey]verifiedAt
	// sweepAt is the map size at which failed records older than
	// failedVerificationHold are next swept out: a failure whose batch
	// never comes back (its producer gone) gets no marker to forget it.
	sweepAt int
}

// failedVerificationHold is how long a failed verification holds the
// producer's later batches back: a client gives a batch up after its
// delivery.timeout.ms (Kafka's default, 2 minutes).
const failedVerificationHold = 2 * time.Minute

type verifiedKey struct {
	p   *Partition
	pid int64
}

type verifiedAt struct {
	epoch       int16 // the producer's
	leaderEpoch int32 // the partition's: a leadership change forgets
	// failedSeq is -1 once verified; otherwise the lowest sequence of the
	// producer's batches whose verification failed at this epoch, the
	// first of them at failedMs (0 once verified).
	failedSeq int32
	failedMs  int64
}

func (v *verifiedTxns) ok(p *Partition, pid int64, epoch int16) bool {
	v.mu.RLock()
	at, found := v.m[verifiedKey{p, pid}]
	v.mu.RUnlock()
	return found && at == verifiedAt{epoch, p.LeaderEpoch(), -1, 0}
}

func (v *verifiedTxns) set(p *Partition, pid int64, epoch int16) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.m == nil {
		v.m = map[verifiedKey]verifiedAt{}
	}
	v.m[verifiedKey{p, pid}] = verifiedAt{epoch, p.LeaderEpoch(), -1, 0}
}

// failed remembers that the batch at seq failed its verification at nowMs.
func (v *verifiedTxns) failed(p *Partition, pid int64, epoch int16, seq int32, nowMs int64) {
	at := verifiedAt{epoch, p.LeaderEpoch(), seq, nowMs}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.m == nil {
		v.m = map[verifiedKey]verifiedAt{}
	}
	k := verifiedKey{p, pid}
	if old, found := v.m[k]; found && old.holds(at.epoch, at.leaderEpoch, nowMs) {
		at.failedSeq, at.failedMs = min(old.failedSeq, seq), old.failedMs
	}
	v.m[k] = at
	if len(v.m) >= v.sweepAt {
		for k, at := range v.m {
			if at.failedSeq >= 0 && !at.holds(at.epoch, at.leaderEpoch, nowMs) {
				delete(v.m, k)
			}
		}
		v.sweepAt = max(2*len(v.m), 1024)
	}
}

// holds reports whether at is a failed verification at this producer
// epoch and leader epoch that still holds later batches back at nowMs.
func (at verifiedAt) holds(epoch int16, leaderEpoch int32, nowMs int64) bool {
	return at.failedSeq >= 0 && at.epoch == epoch && at.leaderEpoch == leaderEpoch &&
		nowMs-at.failedMs < failedVerificationHold.Milliseconds()
}

// heldBehind returns the sequence of an earlier batch of the producer's
// transaction that failed its verification here and is not verified yet,
// when seq comes after it.
func (v *verifiedTxns) heldBehind(p *Partition, pid int64, epoch int16, seq int32, nowMs int64) (int32, bool) {
	v.mu.RLock()
	at, found := v.m[verifiedKey{p, pid}]
	v.mu.RUnlock()
	return at.failedSeq, found && at.holds(epoch, p.LeaderEpoch(), nowMs) && seq > at.failedSeq
}

// forget drops a pair once its marker is written: the entries live only
// as long as a transaction.
func (v *verifiedTxns) forget(p *Partition, pid int64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.m, verifiedKey{p, pid})
}

// verifyTxnProduce is the produce path's check of a transactional batch
// (00_produce.go calls it once the batch is parsed). Errors are as Kafka
// answers a produce: INVALID_TXN_STATE for a partition not in the
// transaction, INVALID_PRODUCER_EPOCH for a fenced producer,
// INVALID_PRODUCER_ID_MAPPING, and NOT_ENOUGH_REPLICAS (retriable) while
// the coordinator cannot answer.
func (b *Broker) verifyTxnProduce(r *Request, p *Partition, h *record.Header) error {
	req := r.Msg.(*kmsg.ProduceRequest)
	if req.TransactionID == nil || b.txnVerified.ok(p, h.ProducerID, h.ProducerEpoch) {
		return nil
	}
	id, tp := *req.TransactionID, txn.TopicPartition{Topic: p.Topic.Name, Partition: p.Index}
	nowMs := time.Now().UnixMilli()
	if seq, held := b.txnVerified.heldBehind(p, h.ProducerID, h.ProducerEpoch, h.BaseSequence, nowMs); held {
		return produceErr(kerr.NotEnoughReplicas, "the batch at sequence %d waits for the transaction's earlier batch at sequence %d to be verified", h.BaseSequence, seq)
	}
	add := b.txnV2Produce(r)
	code := b.askCoordinator(id, h.ProducerID, h.ProducerEpoch, tp, add)
	switch code {
	case 0:
		b.txnVerified.set(p, h.ProducerID, h.ProducerEpoch)
		return nil
	case kerr.InvalidTxnState.Code:
		// Fatal to the producer; a chaos run saw it from a version 2
		// producer, which should never take the verify-only path: say
		// which path this was (RELIABILITY.md, "Over SASL_SSL").
		b.log.Warn("transactional produce refused: partition not in the transaction",
			"transactional_id", id, "producer_id", h.ProducerID, "epoch", h.ProducerEpoch,
			"topic", tp.Topic, "partition", tp.Partition, "produce_version", r.Version, "added", add)
		return produceErr(kerr.InvalidTxnState, "partition %s-%d was not added to the transaction of %q (Produce v%d)", tp.Topic, tp.Partition, id, r.Version)
	case kerr.ProducerFenced.Code, kerr.InvalidProducerEpoch.Code:
		return produceErr(kerr.InvalidProducerEpoch, "producer epoch %d of %q is fenced", h.ProducerEpoch, id)
	case kerr.InvalidProducerIDMapping.Code:
		return produceErr(kerr.InvalidProducerIDMapping, "producer id %d is not that of %q", h.ProducerID, id)
	}
	b.txnVerified.failed(p, h.ProducerID, h.ProducerEpoch, h.BaseSequence, nowMs)
	return produceErr(kerr.NotEnoughReplicas, "cannot verify the transaction of %q: %v", id, kerr.ErrorForCode(code))
}

// txnV2Produce reports whether the transactional produce r comes from a
// producer on transactions version 2 (Produce v12+ with the cluster's
// transaction.version at 2): it no longer adds partitions itself, the
// leader adds them for it, and each transaction starts its sequences at 0.
func (b *Broker) txnV2Produce(r *Request) bool {
	return r.Version >= 12 && b.txnVersion() >= 2
}

// askCoordinator asks the id's coordinator whether tp is in the
// producer's open transaction, or (add, transactions version 2) to add it.
func (b *Broker) askCoordinator(id string, pid int64, epoch int16, tp txn.TopicPartition, add bool) int16 {
	leader, ok := b.txnLeader(id)
	switch {
	case !ok:
		return kerr.CoordinatorNotAvailable.Code
	case leader == b.cfg.NodeID && add:
		return b.txns.AddPartitionsImplicitly(id, pid, epoch, []txn.TopicPartition{tp})
	case leader == b.cfg.NodeID:
		codes, code := b.txns.Verify(id, pid, epoch, []txn.TopicPartition{tp})
		if code != 0 {
			return code
		}
		return codes[0]
	}
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	rt := kmsg.NewAddPartitionsToTxnRequestTransaction()
	rt.TransactionalID, rt.ProducerID, rt.ProducerEpoch, rt.VerifyOnly = id, pid, epoch, !add
	rt.Topics = []kmsg.AddPartitionsToTxnRequestTransactionTopic{{Topic: tp.Topic, Partitions: []int32{tp.Partition}}}
	req.Transactions = []kmsg.AddPartitionsToTxnRequestTransaction{rt}
	resp := new(kmsg.AddPartitionsToTxnResponse)
	if err := b.peers.call(b, leader, req, 5, resp); err != nil {
		b.log.Debug("transaction verification failed", "coordinator", leader, "err", err)
		return kerr.CoordinatorNotAvailable.Code
	}
	if resp.ErrorCode != 0 {
		return resp.ErrorCode
	}
	for _, t := range resp.Transactions {
		for _, rt := range t.Topics {
			for _, p := range rt.Partitions {
				return p.ErrorCode
			}
		}
	}
	return kerr.UnknownServerError.Code
}

// txnProduceChains keeps a cluster's transactional produces of one
// connection in request order while they run off the network loop (their
// verification may ask another broker): each waits for the one before.
type txnProduceChains struct {
	mu   sync.Mutex
	last map[uint64]chan struct{} // by session: the latest one's done
}

// isTxnProduce reports whether r is a transactional Produce.
func isTxnProduce(r *Request) bool {
	req, ok := r.Msg.(*kmsg.ProduceRequest)
	return ok && req.TransactionID != nil
}

// serveTxnProduce runs a cluster's transactional produce off the network
// loop, after the connection's previous one.
func (b *Broker) serveTxnProduce(r *Request, a *api) {
	c := &b.txnChains
	done := make(chan struct{})
	// The session id is read now: a produce Request is pooled and goes
	// back to its pool once answered, before this goroutine is done with
	// the chain (TestOpenTransactionAtSIGKILL found the nil Session).
	sid := r.Session.ID
	r.offLoop = true // not the loop's ProduceBatch: this runs on its own goroutine
	c.mu.Lock()
	if c.last == nil {
		c.last = map[uint64]chan struct{}{}
	}
	prev := c.last[sid]
	c.last[sid] = done
	c.mu.Unlock()
	go func() {
		if prev != nil {
			<-prev
		}
		b.serve(r, a)
		close(done)
		c.mu.Lock()
		if c.last[sid] == done {
			delete(c.last, sid)
		}
		c.mu.Unlock()
	}()
}
