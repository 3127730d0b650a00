package engine

// DeleteShareGroupOffsets (key 92), version 0.
//
// Deletes a share group's state for whole topics (kafka-share-groups
// --delete-offsets): the share coordinator's records are tombstoned and
// the share-partitions dropped, so the group starts such a topic again at
// share.auto.offset.reset.
//
// Errors: GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, NOT_COORDINATOR;
// UNKNOWN_TOPIC_OR_PARTITION per topic.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.DeleteShareGroupOffsets, 0, 0, (*Broker).handleDeleteShareGroupOffsets) }

func (b *Broker) handleDeleteShareGroupOffsets(r *Request) {
	req := r.Msg.(*kmsg.DeleteShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteShareGroupOffsetsResponse)
	if resp.ErrorCode = b.checkEmptyShareGroup(req.GroupID); resp.ErrorCode != 0 {
		r.Respond(resp)
		return
	}
	for _, t := range req.Topics {
		ot := kmsg.DeleteShareGroupOffsetsResponseTopic{Topic: t.Topic}
		ti := b.image().Topic(t.Topic)
		if ti == nil {
			ot.ErrorCode = kerr.UnknownTopicOrPartition.Code
		} else {
			ot.TopicID = ti.ID
			ot.ErrorCode = b.share.deleteStates(req.GroupID, map[[16]byte]bool{ti.ID: true})
		}
		resp.Topics = append(resp.Topics, ot)
	}
	r.Respond(resp)
}
