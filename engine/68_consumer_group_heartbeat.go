package engine

// ConsumerGroupHeartbeat (key 68), versions 0-1.
//
// The one request of a KIP-848 consumer-protocol member: it joins (epoch
// 0), heartbeats with its member epoch and the partitions it owns, and
// leaves (-1, or -2 for a static member coming back). The coordinator
// (engine/group, consumer.go) answers with the member's epoch, the
// heartbeat interval and, when it changed, the partitions the member may
// hold now. v0 lets the coordinator name a joining member; v1 (the
// version clients use) has the client generate its member id and adds
// SubscribedTopicRegex (RE2, matched against whole topic names).
//
// Errors: INVALID_REQUEST (Kafka's rules on which fields a join, leave or
// heartbeat must carry), UNSUPPORTED_ASSIGNOR, INVALID_REGULAR_EXPRESSION,
// UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH, FENCED_INSTANCE_ID,
// UNRELEASED_INSTANCE_ID, GROUP_ID_NOT_FOUND (an unknown group when not
// joining, or a classic group with members that may not be upgraded:
// group.consumer.migration.policy, consumer_classic.go), NOT_COORDINATOR.
// Left out: group.consumer.max.size.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/engine/group"
)

func init() { register(kmsg.ConsumerGroupHeartbeat, 0, 1, (*Broker).handleConsumerGroupHeartbeat) }

func (b *Broker) handleConsumerGroupHeartbeat(r *Request) {
	req := r.Msg.(*kmsg.ConsumerGroupHeartbeatRequest)
	res := b.groups.ConsumerHeartbeat(consumerHeartbeat(r, req))
	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	resp.ErrorCode = res.ErrorCode
	if res.ErrorMessage != "" {
		resp.ErrorMessage = kmsg.StringPtr(res.ErrorMessage)
	}
	if res.ErrorCode == 0 {
		resp.MemberID = kmsg.StringPtr(res.MemberID)
		resp.MemberEpoch = res.MemberEpoch
		resp.HeartbeatIntervalMillis = int32(res.HeartbeatInterval.Milliseconds())
	}
	if res.HasAssignment {
		a := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
		a.Topics = make([]kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic, 0, len(res.Assignment))
		for _, t := range res.Assignment {
			a.Topics = append(a.Topics, kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{TopicID: t.TopicID, Partitions: t.Partitions})
		}
		resp.Assignment = &a
	}
	r.Respond(resp)
}

// consumerHeartbeat translates the request; nil fields stay nil
// ("unchanged"), and strings are copied out of the request frame.
func consumerHeartbeat(r *Request, req *kmsg.ConsumerGroupHeartbeatRequest) *group.ConsumerHeartbeat {
	h := &group.ConsumerHeartbeat{
		Group: req.Group, MemberID: req.MemberID, MemberEpoch: req.MemberEpoch,
		InstanceID: req.InstanceID, RackID: req.RackID, SubscribedRegex: req.SubscribedTopicRegex,
		ServerAssignor: req.ServerAssignor, RebalanceTimeout: -1,
		ClientID: r.ClientID, ClientHost: clientHost(r), GenerateMemberID: r.Version == 0,
	}
	if req.RebalanceTimeoutMillis >= 0 {
		h.RebalanceTimeout = msDuration(req.RebalanceTimeoutMillis)
	}
	if req.SubscribedTopicNames != nil {
		h.SubscribedTopics = append([]string{}, req.SubscribedTopicNames...)
	}
	if req.Topics != nil {
		h.Owned = make([]group.TopicPartitions, 0, len(req.Topics))
		for _, t := range req.Topics {
			h.Owned = append(h.Owned, group.TopicPartitions{TopicID: t.TopicID, Partitions: t.Partitions})
		}
	}
	return h
}
