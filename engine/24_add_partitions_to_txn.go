package engine

// AddPartitionsToTxn (key 24), versions 0-5.
//
// v0-3 (producers): adds partitions to the transactional id's open
// transaction, beginning one if none is open. Partitions of topics that do
// not exist answer UNKNOWN_TOPIC_OR_PARTITION and the others
// OPERATION_NOT_ATTEMPTED, as Kafka does; otherwise every partition gets
// the coordinator's code: NOT_COORDINATOR, CONCURRENT_TRANSACTIONS (a
// commit still writing markers), INVALID_PRODUCER_ID_MAPPING,
// PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v2).
//
// v4+ (brokers) batch several transactional ids, each answered on its
// own; v5 adds for a producer on transactions version 2 (KIP-890 part 2:
// its partition leaders and group coordinator add for it); VerifyOnly asks, without adding, whether each partition is in the
// open transaction (INVALID_TXN_STATE if not): KIP-890's check a partition
// leader makes before a transactional produce (txn_verify.go). Kafka
// requires CLUSTER_ACTION for v4+; without ACLs any client may send it.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/engine/txn"
)

func init() { register(kmsg.AddPartitionsToTxn, 0, 5, (*Broker).handleAddPartitionsToTxn) }

func (b *Broker) handleAddPartitionsToTxn(r *Request) {
	req := r.Msg.(*kmsg.AddPartitionsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	if r.Version >= 4 {
		for i := range req.Transactions {
			resp.Transactions = append(resp.Transactions, b.addPartitionsBatched(r.Version, &req.Transactions[i]))
		}
		r.Respond(resp)
		return
	}
	resp.Topics = b.addPartitions(r.Version, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Topics)
	r.Respond(resp)
}

func (b *Broker) addPartitionsBatched(version int16, t *kmsg.AddPartitionsToTxnRequestTransaction) kmsg.AddPartitionsToTxnResponseTransaction {
	out := kmsg.NewAddPartitionsToTxnResponseTransaction()
	out.TransactionalID = t.TransactionalID
	topics := make([]kmsg.AddPartitionsToTxnRequestTopic, len(t.Topics))
	for i, rt := range t.Topics {
		topics[i] = kmsg.AddPartitionsToTxnRequestTopic{Topic: rt.Topic, Partitions: rt.Partitions}
	}
	var answered []kmsg.AddPartitionsToTxnResponseTopic
	if t.VerifyOnly {
		codes, code := b.txns.Verify(t.TransactionalID, t.ProducerID, t.ProducerEpoch, txnPartitions(topics))
		answered = partitionCodes(topics, func(i int) int16 {
			if code != 0 {
				return code
			}
			return codes[i]
		})
	} else {
		answered = b.addPartitions(version, t.TransactionalID, t.ProducerID, t.ProducerEpoch, topics)
	}
	for _, at := range answered {
		rt := kmsg.AddPartitionsToTxnResponseTransactionTopic{Topic: at.Topic}
		for _, ap := range at.Partitions {
			rt.Partitions = append(rt.Partitions, kmsg.AddPartitionsToTxnResponseTransactionTopicPartition{Partition: ap.Partition, ErrorCode: ap.ErrorCode})
		}
		out.Topics = append(out.Topics, rt)
	}
	return out
}

// addPartitions adds the partitions and answers each.
func (b *Broker) addPartitions(version int16, id string, pid int64, epoch int16, topics []kmsg.AddPartitionsToTxnRequestTopic) []kmsg.AddPartitionsToTxnResponseTopic {
	unknown := false
	for _, t := range topics {
		unknown = unknown || b.Topic(t.Topic) == nil
	}
	code := int16(0)
	switch {
	case unknown:
	case version >= 5: // a broker adding for a producer on transactions version 2
		code = b.txns.AddPartitionsImplicitly(id, pid, epoch, txnPartitions(topics))
	default:
		code = fencedCode(b.txns.AddPartitions(id, pid, epoch, txnPartitions(topics)), version, 2)
	}
	k := -1
	return partitionCodes(topics, func(int) int16 {
		k++
		switch {
		case !unknown:
			return code
		case b.Topic(topics[topicOf(topics, k)].Topic) == nil:
			return kerr.UnknownTopicOrPartition.Code
		}
		return kerr.OperationNotAttempted.Code
	})
}

// topicOf is the index of the topic holding the k-th partition.
func topicOf(topics []kmsg.AddPartitionsToTxnRequestTopic, k int) int {
	for i, t := range topics {
		if k < len(t.Partitions) {
			return i
		}
		k -= len(t.Partitions)
	}
	return len(topics) - 1
}

// txnPartitions flattens a request's partitions, in request order.
func txnPartitions(topics []kmsg.AddPartitionsToTxnRequestTopic) []txn.TopicPartition {
	var tps []txn.TopicPartition
	for _, t := range topics {
		for _, p := range t.Partitions {
			tps = append(tps, txn.TopicPartition{Topic: t.Topic, Partition: p})
		}
	}
	return tps
}

// partitionCodes answers every partition, code(i) for the i-th in request
// order.
func partitionCodes(topics []kmsg.AddPartitionsToTxnRequestTopic, code func(i int) int16) []kmsg.AddPartitionsToTxnResponseTopic {
	out := make([]kmsg.AddPartitionsToTxnResponseTopic, len(topics))
	i := 0
	for j, t := range topics {
		out[j].Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p, code(i)
			out[j].Partitions = append(out[j].Partitions, rp)
			i++
		}
	}
	return out
}

// fencedCode is the code a call answers for the coordinator's code:
// PRODUCER_FENCED exists from the version given (KIP-588); older versions
// get INVALID_PRODUCER_EPOCH.
func fencedCode(code, version, since int16) int16 {
	if code == kerr.ProducerFenced.Code && version < since {
		return kerr.InvalidProducerEpoch.Code
	}
	return code
}
