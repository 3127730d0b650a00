package engine

// AddOffsetsToTxn (key 25), versions 0-4.
//
// Adds the group's __consumer_offsets partition to the transactional id's
// open transaction, so that its TxnOffsetCommits (key 28) commit or abort
// with it: the coordinator writes the marker there too. The partition is
// Kafka's (abs(group.hashCode()) % offsets partitions). Errors are
// AddPartitionsToTxn's; PRODUCER_FENCED from v2 (INVALID_PRODUCER_EPOCH
// before), COORDINATOR_NOT_AVAILABLE while __consumer_offsets does not
// exist yet in a cluster.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/engine/txn"
)

func init() { register(kmsg.AddOffsetsToTxn, 0, 4, (*Broker).handleAddOffsetsToTxn) }

func (b *Broker) handleAddOffsetsToTxn(r *Request) {
	req := r.Msg.(*kmsg.AddOffsetsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	if b.image().Topic(offsetsTopic) == nil && b.Topic(offsetsTopic) == nil {
		if b.cluster != nil {
			b.ensureOffsetsTopic()
		}
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		r.Respond(resp)
		return
	}
	tp := txn.TopicPartition{Topic: offsetsTopic, Partition: b.groups.PartitionFor(req.Group)}
	code := b.txns.AddPartitions(req.TransactionalID, req.ProducerID, req.ProducerEpoch, []txn.TopicPartition{tp})
	resp.ErrorCode = fencedCode(code, r.Version, 2)
	r.Respond(resp)
}
