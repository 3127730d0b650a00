package engine

// OffsetDelete (key 47), version 0.
//
// Deletes committed offsets of a group (KIP-496). An Empty group may lose
// any of them. A group with members may lose only offsets of topics its
// members do not subscribe to (GROUP_SUBSCRIBED_TO_TOPIC for the others),
// and only if it is a consumer group whose subscriptions can be read;
// other groups with members answer NON_EMPTY_GROUP. Group errors:
// INVALID_GROUP_ID, GROUP_ID_NOT_FOUND. Per partition:
// UNKNOWN_TOPIC_OR_PARTITION. Deleting a partition without a committed
// offset succeeds. The tombstones are written before the answer.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/engine/group"
)

func init() { register(kmsg.OffsetDelete, 0, 0, (*Broker).handleOffsetDelete) }

func (b *Broker) handleOffsetDelete(r *Request) {
	req := r.Msg.(*kmsg.OffsetDeleteRequest)
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	var offsets []group.OffsetToDelete
	for _, t := range req.Topics {
		topic := b.Topic(t.Topic)
		for _, p := range t.Partitions {
			o := group.OffsetToDelete{Topic: t.Topic, Partition: p.Partition}
			if topic == nil || topic.Partition(p.Partition) == nil {
				o.ErrorCode = kerr.UnknownTopicOrPartition.Code
			}
			offsets = append(offsets, o)
		}
	}
	resp.ErrorCode = b.groups.DeleteOffsets(req.Group, offsets)
	if resp.ErrorCode != 0 {
		r.Respond(resp)
		return
	}
	k := 0
	for _, t := range req.Topics {
		rt := kmsg.OffsetDeleteResponseTopic{Topic: t.Topic, Partitions: make([]kmsg.OffsetDeleteResponseTopicPartition, len(t.Partitions))}
		for j, p := range t.Partitions {
			rt.Partitions[j] = kmsg.OffsetDeleteResponseTopicPartition{Partition: p.Partition, ErrorCode: offsets[k].ErrorCode}
			k++
		}
		resp.Topics = append(resp.Topics, rt)
	}
	r.Respond(resp)
}
