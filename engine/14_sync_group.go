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
	"bytes"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.SyncGroup, 0, 5, (*Broker).handleSyncGroup) }

func (b *Broker) handleSyncGroup(r *Request) {
	req := r.Msg.(*kmsg.SyncGroupRequest)
	respond := func(code int16) {
		resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.ErrorCode = code
		resp.MemberAssignment = []byte{}
		r.Respond(resp)
	}
	if req.Group == "" {
		respond(kerr.InvalidGroupID.Code)
		return
	}
	g := b.groups.lockGroup(req.Group, false)
	if g == nil {
		respond(kerr.UnknownMemberID.Code)
		return
	}
	g.sync(r, req)
	g.unlock()
}

func (g *group) sync(r *Request, req *kmsg.SyncGroupRequest) {
	instanceID := ""
	if req.InstanceID != nil {
		instanceID = *req.InstanceID
	}
	if code := g.checkSync(req, instanceID); code != 0 {
		g.replySyncError(r, code)
		return
	}
	m := g.members[req.MemberID]
	switch g.state {
	case groupPreparingRebalance:
		g.replySyncError(r, kerr.RebalanceInProgress.Code)
	case groupCompletingRebalance:
		if m.sync != nil {
			g.replySyncError(m.sync, kerr.RebalanceInProgress.Code)
		}
		m.sync = r
		m.awaitingSync = false
		g.touch(m, m.session)
		if m.id == g.leader {
			g.completeSync(req.GroupAssignment)
		}
		g.stopSyncTimerIfDone()
	case groupStable:
		m.awaitingSync = false
		g.touch(m, m.session)
		g.replySync(r, m.assignment)
		g.stopSyncTimerIfDone()
	default: // Empty
		g.replySyncError(r, kerr.UnknownMemberID.Code)
	}
}

func (g *group) checkSync(req *kmsg.SyncGroupRequest, instanceID string) int16 {
	if code := g.checkMember(req.MemberID, instanceID); code != 0 {
		return code
	}
	if req.Generation != g.generation {
		return kerr.IllegalGeneration.Code
	}
	if req.ProtocolType != nil && *req.ProtocolType != g.protocolType ||
		req.Protocol != nil && *req.Protocol != g.protocol {
		return kerr.InconsistentGroupProtocol.Code
	}
	return 0
}

// completeSync distributes the leader's assignment: persist it with the
// generation, then answer every parked SyncGroup and become Stable.
func (g *group) completeSync(assignments []kmsg.SyncGroupRequestGroupAssignment) {
	for _, m := range g.members {
		m.assignment = []byte{}
	}
	for _, a := range assignments {
		if m := g.members[a.MemberID]; m != nil {
			m.assignment = bytes.Clone(a.MemberAssignment)
		}
	}
	if err := g.storeGroup(); err != nil {
		g.c.b.log.Error("writing group assignment failed", "group", g.name, "generation", g.generation, "err", err)
		code := coordinatorAppendError(err, false)
		for _, m := range g.members {
			m.assignment = nil
			if m.sync != nil {
				g.replySyncError(m.sync, code)
				m.sync = nil
			}
		}
		g.prepareRebalance()
		return
	}
	for _, m := range g.members {
		if m.sync != nil {
			g.replySync(m.sync, m.assignment)
			m.sync = nil
		}
	}
	g.transition(groupStable)
}
