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

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.Heartbeat, 0, 4, (*Broker).handleHeartbeat) }

func (b *Broker) handleHeartbeat(r *Request) {
	req := r.Msg.(*kmsg.HeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	resp.ErrorCode = b.groups.heartbeat(req)
	r.Respond(resp)
}

func (c *groupCoordinator) heartbeat(req *kmsg.HeartbeatRequest) int16 {
	if req.Group == "" {
		return kerr.InvalidGroupID.Code
	}
	g := c.lockGroup(req.Group, false)
	if g == nil {
		return kerr.UnknownMemberID.Code
	}
	defer g.unlock()
	instanceID := ""
	if req.InstanceID != nil {
		instanceID = *req.InstanceID
	}
	if code := g.checkMember(req.MemberID, instanceID); code != 0 {
		return code
	}
	if req.Generation != g.generation {
		return kerr.IllegalGeneration.Code
	}
	m := g.members[req.MemberID]
	switch g.state {
	case groupPreparingRebalance:
		g.touch(m, m.session)
		return kerr.RebalanceInProgress.Code
	case groupCompletingRebalance, groupStable:
		g.touch(m, m.session)
		return 0
	default: // Empty
		return kerr.UnknownMemberID.Code
	}
}
