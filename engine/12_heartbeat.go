package engine

// Heartbeat (key 12), versions 0-4.
//
// Keeps a member's session alive. The answer tells the member what the
// group is doing: NONE while Stable or CompletingRebalance (a member may
// heartbeat between its JoinGroup and SyncGroup), REBALANCE_IN_PROGRESS
// during a join phase (rejoin now). A heartbeat never waits.
//
// Errors: INVALID_GROUP_ID, UNKNOWN_MEMBER_ID (unknown group or member,
// Empty group), FENCED_INSTANCE_ID (v3+ instance now held by another member
// id), ILLEGAL_GENERATION.

import "github.com/twmb/franz-go/pkg/kmsg"

func init() { register(kmsg.Heartbeat, 0, 4, (*Broker).handleHeartbeat) }

func (b *Broker) handleHeartbeat(r *Request) {
	req := r.Msg.(*kmsg.HeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	instanceID := ""
	if req.InstanceID != nil {
		instanceID = *req.InstanceID
	}
	resp.ErrorCode = b.groups.Heartbeat(req.Group, req.MemberID, instanceID, req.Generation)
	r.Respond(resp)
}
