package engine

// AlterShareGroupOffsets (key 91), version 0.
//
// Sets the start offset of a share group's share-partitions (what
// kafka-share-groups --reset-offsets does): the share coordinator's state
// is replaced by the new start offset with nothing in flight, at a new
// state epoch, and a share-partition loaded on this broker is dropped so
// that its next use starts from the new state.
//
// Errors: GROUP_ID_NOT_FOUND (no share group of that id), NON_EMPTY_GROUP
// (it has members: Kafka only resets an empty group), NOT_COORDINATOR;
// per partition UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST for a
// negative offset.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/engine/share"
)

func init() { register(kmsg.AlterShareGroupOffsets, 0, 0, (*Broker).handleAlterShareGroupOffsets) }

func (b *Broker) handleAlterShareGroupOffsets(r *Request) {
	req := r.Msg.(*kmsg.AlterShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.AlterShareGroupOffsetsResponse)
	if resp.ErrorCode = b.checkEmptyShareGroup(req.GroupID); resp.ErrorCode != 0 {
		r.Respond(resp)
		return
	}
	for _, t := range req.Topics {
		ot := kmsg.AlterShareGroupOffsetsResponseTopic{Topic: t.Topic}
		ti := b.image().Topic(t.Topic)
		if ti != nil {
			ot.TopicID = ti.ID
		}
		for _, p := range t.Partitions {
			op := kmsg.AlterShareGroupOffsetsResponseTopicPartition{Partition: p.Partition}
			switch {
			case ti == nil || p.Partition < 0 || int(p.Partition) >= len(ti.Partitions):
				op.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case p.StartOffset < 0:
				op.ErrorCode = kerr.InvalidRequest.Code
			default:
				op.ErrorCode = b.share.resetState(share.SPKey{Group: req.GroupID, TopicID: ti.ID, Partition: p.Partition}, p.StartOffset)
			}
			ot.Partitions = append(ot.Partitions, op)
		}
		resp.Topics = append(resp.Topics, ot)
	}
	r.Respond(resp)
}

// checkEmptyShareGroup is the group-level check of the offset admin APIs.
func (b *Broker) checkEmptyShareGroup(group string) int16 {
	if d := b.share.groups.Describe(group); d.Code != 0 {
		return d.Code
	}
	if _, empty := b.share.groups.IsEmpty(group); !empty {
		return kerr.NonEmptyGroup.Code
	}
	return b.share.ensureStates()
}

// resetState replaces a share-partition's state by start with nothing in
// flight, at the next state epoch.
func (s *shareBroker) resetState(k share.SPKey, start int64) int16 {
	s.dropParts(func(o share.SPKey) bool { return o == k })
	cur, _, code := s.readState(k)
	if code != 0 {
		return code
	}
	return s.writeState(k, share.SnapshotValue{StateEpoch: cur.StateEpoch + 1, LeaderEpoch: -1, StartOffset: start, DeliveryCompleteCount: 0})
}
