package engine

// TxnOffsetCommit (key 28), versions 0-4.
//
// Offsets a consume-transform-produce application commits inside its
// transaction (after AddOffsetsToTxn put the group's offsets partition
// into it). They are written to __consumer_offsets at once as the
// producer's transactional batch and become the group's committed offsets
// only when the transaction commits (engine/group/txn_offsets.go; the
// commit marker on the offsets partition applies them, an abort marker
// drops them). v3+ carry the member's generation, member id and instance
// id, checked as OffsetCommit checks them (ILLEGAL_GENERATION,
// UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID); without them no member check is
// made, as in Kafka. Per partition: UNKNOWN_TOPIC_OR_PARTITION,
// OFFSET_METADATA_TOO_LARGE; the group's partition not loaded here is
// NOT_COORDINATOR. v5 is transactions version 2 (KIP-890 part 2): the
// producer sends no AddOffsetsToTxn, so this broker adds the group's offsets
// partition to the transaction with the coordinator first (its refusal,
// e.g. PRODUCER_FENCED, answers every partition). v6 (topic ids) is not
// advertised.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/engine/group"
	"github.com/sluice-broker/sluice/engine/txn"
)

func init() { register(kmsg.TxnOffsetCommit, 0, 5, (*Broker).handleTxnOffsetCommit) }

func (b *Broker) handleTxnOffsetCommit(r *Request) {
	req := r.Msg.(*kmsg.TxnOffsetCommitRequest)
	c := &group.TxnCommitRequest{
		Group: req.Group, ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch,
		Generation: -1, Now: r.Received,
	}
	if r.Version >= 3 {
		c.Generation, c.MemberID = req.Generation, req.MemberID
		if req.InstanceID != nil {
			c.InstanceID = *req.InstanceID
		}
	}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			o := group.CommitOffset{Topic: t.Topic, Partition: p.Partition, Offset: p.Offset, LeaderEpoch: -1}
			if r.Version >= 2 {
				o.LeaderEpoch = p.LeaderEpoch
			}
			if p.Metadata != nil {
				o.Metadata = *p.Metadata
			}
			if b.Topic(t.Topic) == nil {
				o.ErrorCode = kerr.UnknownTopicOrPartition.Code
			}
			c.Offsets = append(c.Offsets, o)
		}
	}
	if r.Version >= 5 {
		b.addOffsetsImplicitly(req, c.Offsets)
	}
	b.groups.TxnCommit(c)
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	k := 0
	for _, t := range req.Topics {
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, c.Offsets[k].ErrorCode
			rt.Partitions = append(rt.Partitions, rp)
			k++
		}
		resp.Topics = append(resp.Topics, rt)
	}
	r.Respond(resp)
}

// addOffsetsImplicitly adds the group's offsets partition to the
// transaction for a producer on transactions version 2; a refusal fails
// every offset.
func (b *Broker) addOffsetsImplicitly(req *kmsg.TxnOffsetCommitRequest, offsets []group.CommitOffset) {
	tp := txn.TopicPartition{Topic: offsetsTopic, Partition: b.groups.PartitionFor(req.Group)}
	code := b.askCoordinator(req.TransactionalID, req.ProducerID, req.ProducerEpoch, tp, true)
	for i := range offsets {
		if offsets[i].ErrorCode == 0 {
			offsets[i].ErrorCode = code
		}
	}
}
