package engine

// LeaveGroup (key 13), versions 0-5.
//
// v0-2 name one member id; v3+ carry a batch of members, each by member id
// and/or group.instance.id (KIP-345: an admin can remove static members by
// instance id alone), with a result per member. Each removal answers the
// member's parked JoinGroup/SyncGroup with UNKNOWN_MEMBER_ID and starts a
// rebalance (or lets a join phase in progress complete without it). A
// member id still pending its second join (MEMBER_ID_REQUIRED) is simply
// forgotten. v5's reason is only logged.
//
// Errors: INVALID_GROUP_ID; per member UNKNOWN_MEMBER_ID and
// FENCED_INSTANCE_ID (instance held by another member id). For v0-2 the
// member's error is the top-level error.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/engine/group"
)

func init() { register(kmsg.LeaveGroup, 0, 5, (*Broker).handleLeaveGroup) }

func (b *Broker) handleLeaveGroup(r *Request) {
	req := r.Msg.(*kmsg.LeaveGroupRequest)
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	leaving := req.Members
	if r.Version < 3 {
		leaving = []kmsg.LeaveGroupRequestMember{{MemberID: req.MemberID}}
	}
	if req.Group == "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		r.Respond(resp)
		return
	}
	ls := make([]group.Leaving, len(leaving))
	for i, l := range leaving {
		ls[i] = group.Leaving{MemberID: l.MemberID, InstanceID: deref(l.InstanceID), Reason: deref(l.Reason)}
	}
	codes := b.groups.Leave(req.Group, ls)
	if r.Version < 3 {
		resp.ErrorCode = codes[0]
		r.Respond(resp)
		return
	}
	for i, l := range leaving {
		resp.Members = append(resp.Members, kmsg.LeaveGroupResponseMember{MemberID: l.MemberID, InstanceID: l.InstanceID, ErrorCode: codes[i]})
	}
	r.Respond(resp)
}

// deref is *s, or "" for nil.
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
