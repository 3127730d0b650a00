package engine

// JoinGroup (key 11), versions 0-9.
//
// A member joins (or rejoins) a classic group; the response waits until the
// join phase ends and is sent from whatever completes it (the last member's
// join, a leave, or a timer), never by blocking this goroutine.
//
//   - v4+: a member without an id gets MEMBER_ID_REQUIRED and its new id,
//     and must join again with it within its session timeout (KIP-394).
//     Static members (group.instance.id, v5+) skip this step.
//   - A static member joining without a member id replaces its previous
//     incarnation, whose parked requests get FENCED_INSTANCE_ID. In a Stable
//     group whose selected protocol would not change, it gets the current
//     generation back without a rebalance (KIP-345).
//   - The protocol is chosen by vote among those every member supports.
//   - An Empty group's first join phase lasts group.initial.rebalance.delay.ms,
//     extended while new members keep arriving, up to the rebalance timeout.
//   - v0 has no rebalance timeout: the session timeout stands in (as in Kafka).
//   - v7+ carries ProtocolType; v9 SkipAssignment is always false (it only
//     matters to KIP-848 server-side assignors, which Sluice does not run).
//
// Errors: INVALID_GROUP_ID, INVALID_SESSION_TIMEOUT (outside
// group.{min,max}.session.timeout.ms), INCONSISTENT_GROUP_PROTOCOL,
// UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, GROUP_MAX_SIZE_REACHED.

import (
	"bytes"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.JoinGroup, 0, 9, (*Broker).handleJoinGroup) }

func (b *Broker) handleJoinGroup(r *Request) {
	req := r.Msg.(*kmsg.JoinGroupRequest)
	c := b.groups
	if req.Group == "" {
		respondJoinError(r, kerr.InvalidGroupID.Code)
		return
	}
	session := msDuration(req.SessionTimeoutMillis)
	if session < c.cfg.GroupMinSessionTimeout || session > c.cfg.GroupMaxSessionTimeout {
		respondJoinError(r, kerr.InvalidSessionTimeout.Code)
		return
	}
	g := c.lockGroup(req.Group, req.MemberID == "")
	if g == nil {
		code := kerr.UnknownMemberID.Code
		if req.MemberID == "" {
			code = kerr.CoordinatorNotAvailable.Code // shutting down
		}
		respondJoinError(r, code)
		return
	}
	p := newJoinParams(r, req)
	if req.MemberID == "" {
		g.joinNew(r, p)
	} else {
		g.joinKnown(r, p)
	}
	g.unlock()
}

func respondJoinError(r *Request, code int16) {
	req := r.Msg.(*kmsg.JoinGroupRequest)
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	resp.ErrorCode = code
	resp.MemberID = req.MemberID
	r.Respond(resp)
}

// joinParams are the member settings a JoinGroup carries, with the
// protocol metadata copied out of the request frame (which is reused once
// the request is answered).
type joinParams struct {
	memberID     string
	instanceID   string
	clientID     string
	clientHost   string
	session      time.Duration
	rebalance    time.Duration
	protocolType string
	protocols    []kmsg.JoinGroupRequestProtocol
}

func newJoinParams(r *Request, req *kmsg.JoinGroupRequest) joinParams {
	p := joinParams{
		memberID:     req.MemberID,
		clientID:     r.ClientID,
		clientHost:   clientHost(r),
		session:      msDuration(req.SessionTimeoutMillis),
		rebalance:    msDuration(req.RebalanceTimeoutMillis),
		protocolType: req.ProtocolType,
		protocols:    make([]kmsg.JoinGroupRequestProtocol, len(req.Protocols)),
	}
	if r.Version == 0 || req.RebalanceTimeoutMillis < 0 {
		p.rebalance = p.session
	}
	if req.InstanceID != nil {
		p.instanceID = *req.InstanceID
	}
	for i, pr := range req.Protocols {
		p.protocols[i] = kmsg.JoinGroupRequestProtocol{Name: pr.Name, Metadata: bytes.Clone(pr.Metadata)}
	}
	return p
}

func (p *joinParams) newMember(id string) *groupMember {
	m := &groupMember{id: id, instanceID: p.instanceID}
	p.applyTo(m)
	return m
}

func (p *joinParams) applyTo(m *groupMember) {
	m.clientID = p.clientID
	m.clientHost = p.clientHost
	m.session = p.session
	m.rebalance = p.rebalance
	m.protocols = p.protocols
}

// joinNew handles a join without a member id.
func (g *group) joinNew(r *Request, p joinParams) {
	if p.instanceID != "" {
		if old := g.members[g.static[p.instanceID]]; old != nil {
			if !g.supportsProtocols(old, p.protocolType, p.protocols) {
				g.replyJoinError(r, kerr.InconsistentGroupProtocol.Code, "")
				return
			}
			g.replaceStatic(r, old, p)
			return
		}
	}
	if !g.supportsProtocols(nil, p.protocolType, p.protocols) {
		g.replyJoinError(r, kerr.InconsistentGroupProtocol.Code, "")
		g.dropIfUnused()
		return
	}
	if len(g.members) >= int(g.c.cfg.GroupMaxSize) {
		g.replyJoinError(r, kerr.GroupMaxSizeReached.Code, "")
		return
	}
	prefix := p.clientID
	if p.instanceID != "" {
		prefix = p.instanceID
	}
	id := newMemberID(prefix)
	if p.instanceID == "" && r.Version >= 4 {
		g.addPending(id, p.session)
		g.replyJoinError(r, kerr.MemberIDRequired.Code, id)
		return
	}
	g.addMember(p.newMember(id), r)
}

// joinKnown handles a join with a member id: the second step of a
// two-phase join, or a member rejoining.
func (g *group) joinKnown(r *Request, p joinParams) {
	id := p.memberID
	self := g.members[id]
	if !g.supportsProtocols(self, p.protocolType, p.protocols) {
		g.replyJoinError(r, kerr.InconsistentGroupProtocol.Code, id)
		return
	}
	if t, ok := g.pending[id]; ok {
		t.Stop()
		delete(g.pending, id)
		g.addMember(p.newMember(id), r)
		return
	}
	if code := g.checkMember(id, p.instanceID); code != 0 {
		g.replyJoinError(r, code, id)
		return
	}
	switch g.state {
	case groupPreparingRebalance:
		g.updateMember(self, r, p)
	case groupCompletingRebalance:
		if self.sameProtocols(p.protocols) {
			// It lost the JoinGroup response: repeat it.
			g.touch(self, self.session)
			g.replyJoin(r, self, id == g.leader, g.leader)
			return
		}
		g.updateMember(self, r, p)
	case groupStable:
		if id == g.leader || !self.sameProtocols(p.protocols) {
			g.updateMember(self, r, p)
			return
		}
		g.touch(self, self.session)
		g.replyJoin(r, self, false, g.leader)
	default:
		g.replyJoinError(r, kerr.UnknownMemberID.Code, id)
	}
}

// checkMember validates a request's member id and instance id against the
// group: FENCED_INSTANCE_ID if the instance now belongs to another member
// id, UNKNOWN_MEMBER_ID if the member is not in the group.
func (g *group) checkMember(id, instanceID string) int16 {
	if instanceID != "" {
		cur, ok := g.static[instanceID]
		if !ok {
			return kerr.UnknownMemberID.Code
		}
		if cur != id {
			return kerr.FencedInstanceID.Code
		}
	}
	if g.members[id] == nil {
		return kerr.UnknownMemberID.Code
	}
	return 0
}

// addPending remembers a member id handed out with MEMBER_ID_REQUIRED; it
// is forgotten if the member does not join with it within its session.
func (g *group) addPending(id string, session time.Duration) {
	g.pending[id] = time.AfterFunc(session, func() {
		g.mu.Lock()
		defer g.unlock()
		if _, ok := g.pending[id]; !ok || g.state == groupDead {
			return
		}
		delete(g.pending, id)
		g.maybeCompleteJoin()
		g.dropIfUnused()
	})
}

// replaceStatic gives a static member's instance to a new member id: the
// old incarnation is fenced and the new one takes its place, its
// assignment and, if it led, its leadership.
func (g *group) replaceStatic(r *Request, m *groupMember, p joinParams) {
	oldLeader := g.leader
	g.failParked(m, kerr.FencedInstanceID.Code)
	delete(g.members, m.id)
	newID := newMemberID(p.instanceID)
	if g.leader == m.id {
		g.leader = newID
	}
	m.id = newID
	g.members[newID] = m
	g.static[p.instanceID] = newID
	p.applyTo(m)
	g.touch(m, m.session)
	switch g.state {
	case groupStable:
		if g.selectProtocol() != g.protocol {
			g.park(m, r)
			g.prepareRebalance()
			return
		}
		if err := g.storeGroup(); err != nil {
			g.replyJoinError(r, coordinatorAppendError(err, false), "")
			return
		}
		// The old leader id is returned, so that even a replaced leader
		// does not run an assignment a Stable group would not distribute;
		// it picks up its assignment with SyncGroup.
		g.replyJoin(r, m, false, oldLeader)
	case groupCompletingRebalance:
		// The leader may be assigning to the old id: start over.
		g.park(m, r)
		g.prepareRebalance()
	default: // PreparingRebalance
		g.park(m, r)
		g.maybeCompleteJoin()
	}
}

// dropIfUnused removes a group that a failed request created: no members,
// no offsets, never persisted.
func (g *group) dropIfUnused() {
	if g.state == groupEmpty && len(g.members) == 0 && len(g.pending) == 0 &&
		len(g.offsets) == 0 && g.generation == 0 && g.protocolType == "" {
		g.markDead()
	}
}

func msDuration(ms int32) time.Duration { return time.Duration(ms) * time.Millisecond }
