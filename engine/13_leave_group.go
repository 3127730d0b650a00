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
)

func init() { register(kmsg.LeaveGroup, 0, 5, (*Broker).handleLeaveGroup) }

func (b *Broker) handleLeaveGroup(r *Request) {
	req := r.Msg.(*kmsg.LeaveGroupRequest)
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	leaving := req.Members
	if r.Version < 3 {
		leaving = []kmsg.LeaveGroupRequestMember{{MemberID: req.MemberID}}
	}
	for _, l := range leaving {
		resp.Members = append(resp.Members, kmsg.LeaveGroupResponseMember{MemberID: l.MemberID, InstanceID: l.InstanceID})
	}
	if req.Group == "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		resp.Members = nil
		r.Respond(resp)
		return
	}
	if g := b.groups.lockGroup(req.Group, false); g != nil {
		for i, l := range leaving {
			resp.Members[i].ErrorCode = g.leave(l)
		}
		g.unlock()
	} else {
		for i := range resp.Members {
			resp.Members[i].ErrorCode = kerr.UnknownMemberID.Code
		}
	}
	if r.Version < 3 {
		resp.ErrorCode = resp.Members[0].ErrorCode
		resp.Members = nil
	}
	r.Respond(resp)
}

// leave removes one member, named by member id and/or instance id.
func (g *group) leave(l kmsg.LeaveGroupRequestMember) int16 {
	id := l.MemberID
	if l.InstanceID != nil && *l.InstanceID != "" {
		cur, ok := g.static[*l.InstanceID]
		if !ok {
			return kerr.UnknownMemberID.Code
		}
		if id != "" && id != cur {
			return kerr.FencedInstanceID.Code
		}
		id = cur
	}
	if t, ok := g.pending[id]; ok {
		t.Stop()
		delete(g.pending, id)
		g.maybeCompleteJoin()
		return 0
	}
	m := g.members[id]
	if m == nil {
		return kerr.UnknownMemberID.Code
	}
	reason := ""
	if l.Reason != nil {
		reason = *l.Reason
	}
	g.c.b.log.Info("group member left", "group", g.name, "member", id, "reason", reason)
	g.removeMemberAndUpdate(m)
	return 0
}
