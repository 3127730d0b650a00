package engine

// SyncGroup (key 14), versions 0-5.
//
// After a join phase every member sends SyncGroup; the leader's carries the
// assignment it computed (client-side assignors: range, roundrobin, sticky,
// cooperative-sticky, anything). Followers' requests wait until the
// leader's arrives; the assignment is then written to __consumer_offsets
// with the generation's membership, and every parked SyncGroup is answered
// with its member's share. The group becomes Stable. A member that syncs
// in a Stable group (it lost the response) gets its assignment again.
// Members left out of the leader's assignment get an empty one.
//
// Errors: UNKNOWN_MEMBER_ID (unknown group or member, Empty group),
// FENCED_INSTANCE_ID, ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS (a new join
// phase began), INCONSISTENT_GROUP_PROTOCOL (v5 protocol type or name that
// differs from the group's), and NOT_COORDINATOR / UNKNOWN_SERVER_ERROR if
// the assignment cannot be written (then the group rebalances).

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/engine/group"
)

func init() { register(kmsg.SyncGroup, 0, 5, (*Broker).handleSyncGroup) }

func (b *Broker) handleSyncGroup(r *Request) {
	req := r.Msg.(*kmsg.SyncGroupRequest)
	s := &group.SyncRequest{
		Group: req.Group, MemberID: req.MemberID, InstanceID: deref(req.InstanceID),
		Generation: req.Generation, ProtocolType: req.ProtocolType, Protocol: req.Protocol,
		Assignments: make([]group.Assignment, len(req.GroupAssignment)),
	}
	for i, a := range req.GroupAssignment {
		s.Assignments[i] = group.Assignment{MemberID: a.MemberID, Assignment: a.MemberAssignment}
	}
	b.groups.Sync(s, func(res group.SyncResult) {
		resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.ErrorCode = res.ErrorCode
		resp.MemberAssignment = res.Assignment
		if res.ErrorCode == 0 {
			resp.ProtocolType = kmsg.StringPtr(res.ProtocolType)
			resp.Protocol = kmsg.StringPtr(res.Protocol)
		}
		r.Respond(resp)
	})
}
