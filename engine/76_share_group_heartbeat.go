package engine

// ShareGroupHeartbeat (key 76), version 1 (v0 was Kafka 4.0's early
// access and is gone from Kafka 4.1's clients).
//
// A share-group member joins (epoch 0, with its subscription), heartbeats
// (the epoch it was given; a new subscription when it changed) and leaves
// (epoch -1); engine/share's Groups holds the protocol. The answer carries
// the member's epoch, the heartbeat interval (share.heartbeat.interval.ms)
// and its assignment when it changed.
//
// Errors: INVALID_REQUEST (no group or member id, no subscription on
// join), GROUP_ID_NOT_FOUND (the id belongs to a classic group),
// UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH, GROUP_MAX_SIZE_REACHED,
// NOT_COORDINATOR. Rack ids are stored and described; the simple
// assignor does not use them.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/engine/share"
)

func init() { register(kmsg.ShareGroupHeartbeat, 1, 1, (*Broker).handleShareGroupHeartbeat) }

func (b *Broker) handleShareGroupHeartbeat(r *Request) {
	req := r.Msg.(*kmsg.ShareGroupHeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
	res := b.share.groups.Heartbeat(share.HeartbeatRequest{
		Group: req.GroupID, Member: req.MemberID, Epoch: req.MemberEpoch, Rack: req.RackID,
		Subscribed: req.SubscribedTopicNames, ClientID: r.ClientID, ClientHost: clientHost(r),
	})
	resp.ErrorCode = res.Code
	if res.Message != "" {
		resp.ErrorMessage = kmsg.StringPtr(res.Message)
	}
	if res.Code == 0 {
		resp.MemberID = kmsg.StringPtr(req.MemberID)
		resp.MemberEpoch = res.Epoch
		resp.HeartbeatIntervalMillis = int32(res.Heartbeat.Milliseconds())
		if res.Assignment != nil {
			resp.Assignment = &kmsg.ShareGroupHeartbeatResponseAssignment{}
			for _, tp := range res.Assignment {
				resp.Assignment.TopicPartitions = append(resp.Assignment.TopicPartitions,
					kmsg.ShareGroupHeartbeatResponseAssignmentTopicPartition{TopicID: tp.TopicID, Partitions: tp.Partitions})
			}
		}
	}
	r.Respond(resp)
}
