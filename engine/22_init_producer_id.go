package engine

// InitProducerId (key 22), versions 0-5.
//
// Idempotent producers (no transactional id) get a producer id never handed
// out before, with epoch 0 (producer_ids.go keeps ids unique across
// restarts). As in Kafka, the ProducerID/ProducerEpoch a v3+ client passes
// are ignored when it has no transactional id: KIP-360's epoch bump is a
// transaction-coordinator operation, and idempotent clients bump their epoch
// locally instead.
//
// With a transactional id the request goes to the transaction
// coordinator (engine/txn, txns.go): the id gets its producer id (a new
// one the first time) and the next epoch, which fences every older
// producer of the id; an open transaction is aborted first and the call
// answers CONCURRENT_TRANSACTIONS until it is (the client retries). v3+
// ProducerID/ProducerEpoch are KIP-360's recovery: the pair the producer
// had is bumped, a retry of the last bump is answered again, anything else
// is PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v4). A timeout above
// transaction.max.timeout.ms is INVALID_TRANSACTION_TIMEOUT. The first
// transactional request creates __transaction_state. An empty
// transactional id is INVALID_REQUEST, as in Kafka.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/engine/txn"
)

func init() { register(kmsg.InitProducerID, 0, 5, (*Broker).handleInitProducerID) }

func (b *Broker) handleInitProducerID(r *Request) {
	req := r.Msg.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	switch {
	case req.TransactionalID == nil:
		id, err := b.pids.next()
		if err != nil {
			r.logger().Error("cannot persist producer id block", "err", err)
			resp.ErrorCode = kerr.KafkaStorageError.Code
			break
		}
		resp.ProducerID, resp.ProducerEpoch = id, 0
	case *req.TransactionalID == "":
		resp.ErrorCode = kerr.InvalidRequest.Code
	case !b.ensureTxnTopic():
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
	default:
		res := b.txns.InitProducerID(txn.InitRequest{
			TransactionalID: *req.TransactionalID, TimeoutMs: req.TransactionTimeoutMillis,
			ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch,
		})
		resp.ProducerID, resp.ProducerEpoch = res.ProducerID, res.ProducerEpoch
		resp.ErrorCode = fencedCode(res.ErrorCode, r.Version, 4)
	}
	r.Respond(resp)
}
