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
// Transactions are not served yet. A request with a transactional id gets
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED, which every client (Java,
// librdkafka, franz-go, sarama) treats as fatal and reports at once. The
// alternatives Kafka uses for a coordinator that is not ready
// (COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR) are retriable: a producer
// would spin until max.block.ms before failing with a timeout that says
// nothing about the cause. An empty transactional id is INVALID_REQUEST, as
// in Kafka.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
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
	default:
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
	}
	r.Respond(resp)
}
