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
)

func init() { register(kmsg.OffsetDelete, 0, 0, (*Broker).handleOffsetDelete) }

func (b *Broker) handleOffsetDelete(r *Request) {
	req := r.Msg.(*kmsg.OffsetDeleteRequest)
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	resp.ErrorCode = b.groups.offsetDelete(req, resp)
	if resp.ErrorCode != 0 {
		resp.Topics = nil
	}
	r.Respond(resp)
}

func (c *groupCoordinator) offsetDelete(req *kmsg.OffsetDeleteRequest, resp *kmsg.OffsetDeleteResponse) int16 {
	if req.Group == "" {
		return kerr.InvalidGroupID.Code
	}
	g := c.lockGroup(req.Group, false)
	if g == nil {
		return kerr.GroupIDNotFound.Code
	}
	defer g.unlock()
	if g.state != groupEmpty && g.protocolType != consumerProtocolType {
		return kerr.NonEmptyGroup.Code
	}
	var eligible []offsetTP
	var codes []*int16
	for _, t := range req.Topics {
		rt := kmsg.OffsetDeleteResponseTopic{Topic: t.Topic, Partitions: make([]kmsg.OffsetDeleteResponseTopicPartition, len(t.Partitions))}
		topic := c.b.Topic(t.Topic)
		for j, p := range t.Partitions {
			out := &rt.Partitions[j]
			out.Partition = p.Partition
			switch {
			case topic == nil || topic.Partition(p.Partition) == nil:
				out.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case g.state != groupEmpty && g.subscribed[t.Topic]:
				out.ErrorCode = kerr.GroupSubscribedToTopic.Code
			default:
				eligible = append(eligible, offsetTP{t.Topic, p.Partition})
				codes = append(codes, &out.ErrorCode)
			}
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if err := g.deleteOffsets(eligible); err != nil {
		c.b.log.Error("deleting offsets failed", "group", g.name, "err", err)
		code := coordinatorAppendError(err, false)
		for _, p := range codes {
			*p = code
		}
	}
	return 0
}
