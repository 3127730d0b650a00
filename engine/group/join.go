package group

// The membership calls: JoinGroup, SyncGroup, Heartbeat and LeaveGroup.
// Which Kafka versions carry what, and the errors each answers, are told
// in the engine's handlers (11_join_group.go …); here is what they do to a
// group.

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Protocol is one protocol a member supports, with its metadata.
type Protocol struct {
	Name     string
	Metadata []byte
}

// JoinRequest is a JoinGroup. The coordinator keeps Protocols (and their
// metadata) past the call: the caller passes copies it will not reuse.
type JoinRequest struct {
	Group      string
	MemberID   string // "" for a new member
	InstanceID string // group.instance.id; "" for a dynamic member
	ClientID   string
	ClientHost string // as Kafka reports it: "/" + IP
	// SessionTimeout and RebalanceTimeout (the session timeout stands in
	// for JoinGroup v0, which has none).
	SessionTimeout   time.Duration
	RebalanceTimeout time.Duration
	ProtocolType     string
	Protocols        []Protocol // in the member's preference order
	// RequireMemberID: a new dynamic member first gets MEMBER_ID_REQUIRED
	// and its id, and joins again with it (KIP-394, JoinGroup v4+).
	RequireMemberID bool
}

// JoinMember is one member as the leader's JoinGroup answer lists it.
type JoinMember struct {
	MemberID   string
	InstanceID string // "" for a dynamic member
	Metadata   []byte // for the selected protocol
}

// JoinResult answers a JoinGroup. With an ErrorCode only MemberID is set.
type JoinResult struct {
	ErrorCode    int16
	Generation   int32
	ProtocolType string
	Protocol     string
	Leader       string
	MemberID     string
	Members      []JoinMember // the leader's answer only
}

// Join handles a JoinGroup. done is called exactly once, outside any lock:
// at once when the answer is known, or when the join phase ends (the last
// member's join, a leave, a timer, or the group's unloading).
func (c *Coordinator) Join(req *JoinRequest, done func(JoinResult)) {
	fail := func(code int16) { done(JoinResult{ErrorCode: code, MemberID: req.MemberID}) }
	if req.Group == "" {
		fail(kerr.InvalidGroupID.Code)
		return
	}
	if req.SessionTimeout < c.cfg.MinSessionTimeout || req.SessionTimeout > c.cfg.MaxSessionTimeout {
		fail(kerr.InvalidSessionTimeout.Code)
		return
	}
	g, m := c.lockGroup(req.Group, req.MemberID == "")
	if g == nil {
		closing := kerr.UnknownMemberID.Code
		if req.MemberID == "" {
			closing = kerr.CoordinatorNotAvailable.Code
		}
		fail(m.code(kerr.UnknownMemberID.Code, closing))
		return
	}
	if code, served := g.joinConsumerGroup(req, done); served || code != 0 {
		g.unlock()
		if code != 0 {
			fail(code)
		}
		return
	}
	if req.MemberID == "" {
		g.joinNew(req, done)
	} else {
		g.joinKnown(req, done)
	}
	g.unlock()
}

func (p *JoinRequest) newMember(id string) *groupMember {
	m := &groupMember{id: id, instanceID: p.InstanceID}
	p.applyTo(m)
	return m
}

func (p *JoinRequest) applyTo(m *groupMember) {
	m.clientID = p.ClientID
	m.clientHost = p.ClientHost
	m.session = p.SessionTimeout
	m.rebalance = p.RebalanceTimeout
	m.protocols = p.Protocols
}

// joinNew handles a join without a member id.
func (g *group) joinNew(p *JoinRequest, done func(JoinResult)) {
	if p.InstanceID != "" {
		if old := g.members[g.static[p.InstanceID]]; old != nil {
			if !g.supportsProtocols(old, p.ProtocolType, p.Protocols) {
				g.replyJoinError(done, kerr.InconsistentGroupProtocol.Code, "")
				return
			}
			g.replaceStatic(done, old, p)
			return
		}
	}
	if !g.supportsProtocols(nil, p.ProtocolType, p.Protocols) {
		g.replyJoinError(done, kerr.InconsistentGroupProtocol.Code, "")
		g.dropIfUnused()
		return
	}
	if len(g.members) >= int(g.c.cfg.MaxSize) {
		g.replyJoinError(done, kerr.GroupMaxSizeReached.Code, "")
		return
	}
	prefix := p.ClientID
	if p.InstanceID != "" {
		prefix = p.InstanceID
	}
	id := newMemberID(prefix)
	if p.InstanceID == "" && p.RequireMemberID {
		g.addPending(id, p.SessionTimeout)
		g.replyJoinError(done, kerr.MemberIDRequired.Code, id)
		return
	}
	g.addMember(p.newMember(id), p.ProtocolType, done)
}

// joinKnown handles a join with a member id: the second step of a
// two-phase join, or a member rejoining.
func (g *group) joinKnown(p *JoinRequest, done func(JoinResult)) {
	id := p.MemberID
	self := g.members[id]
	if !g.supportsProtocols(self, p.ProtocolType, p.Protocols) {
		g.replyJoinError(done, kerr.InconsistentGroupProtocol.Code, id)
		return
	}
	if t, ok := g.pending[id]; ok {
		t.Stop()
		delete(g.pending, id)
		g.addMember(p.newMember(id), p.ProtocolType, done)
		return
	}
	if code := g.checkMember(id, p.InstanceID); code != 0 {
		g.replyJoinError(done, code, id)
		return
	}
	switch g.state {
	case groupPreparingRebalance:
		g.updateMember(self, done, p)
	case groupCompletingRebalance:
		if self.sameProtocols(p.Protocols) {
			// It lost the JoinGroup response: repeat it.
			g.touch(self, self.session)
			g.replyJoin(done, self, id == g.leader, g.leader)
			return
		}
		g.updateMember(self, done, p)
	case groupStable:
		if id == g.leader || !self.sameProtocols(p.Protocols) {
			g.updateMember(self, done, p)
			return
		}
		g.touch(self, self.session)
		g.replyJoin(done, self, false, g.leader)
	default:
		g.replyJoinError(done, kerr.UnknownMemberID.Code, id)
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
	g.pending[id] = g.c.clock.AfterFunc(session, func() {
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
func (g *group) replaceStatic(done func(JoinResult), m *groupMember, p *JoinRequest) {
	oldLeader := g.leader
	g.failParked(m, kerr.FencedInstanceID.Code)
	delete(g.members, m.id)
	newID := newMemberID(p.InstanceID)
	if g.leader == m.id {
		g.leader = newID
	}
	m.id = newID
	g.members[newID] = m
	g.static[p.InstanceID] = newID
	p.applyTo(m)
	g.touch(m, m.session)
	switch g.state {
	case groupStable:
		if g.selectProtocol() != g.protocol {
			g.park(m, done)
			g.prepareRebalance()
			return
		}
		if err := g.storeGroup(); err != nil {
			g.replyJoinError(done, appendErrorCode(err, false), "")
			return
		}
		// The old leader id is returned, so that even a replaced leader
		// does not run an assignment a Stable group would not distribute;
		// it picks up its assignment with SyncGroup.
		g.replyJoin(done, m, false, oldLeader)
	case groupCompletingRebalance:
		// The leader may be assigning to the old id: start over.
		g.park(m, done)
		g.prepareRebalance()
	default: // PreparingRebalance
		g.park(m, done)
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

// newMemberID is Kafka's form: the instance id (static members) or client
// id, a dash, and a random UUID.
func newMemberID(prefix string) string {
	var u [16]byte
	_, _ = rand.Read(u[:])
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return fmt.Sprintf("%s-%x-%x-%x-%x-%x", prefix, u[0:4], u[4:6], u[6:8], u[8:10], u[10:])
}

// ---- SyncGroup ----

// SyncRequest is a SyncGroup; ProtocolType and Protocol are nil when the
// request does not carry them (before v5).
type SyncRequest struct {
	Group        string
	MemberID     string
	InstanceID   string
	Generation   int32
	ProtocolType *string
	Protocol     *string
	Assignments  []Assignment // the leader's; the coordinator copies them
}

// Assignment is what the leader assigns one member.
type Assignment struct {
	MemberID   string
	Assignment []byte
}

// SyncResult answers a SyncGroup; Assignment is never nil.
type SyncResult struct {
	ErrorCode    int16
	ProtocolType string
	Protocol     string
	Assignment   []byte
}

// Sync handles a SyncGroup. done is called exactly once, outside any lock:
// at once, or when the leader's assignment arrives (or the phase fails).
func (c *Coordinator) Sync(req *SyncRequest, done func(SyncResult)) {
	fail := func(code int16) { done(SyncResult{ErrorCode: code, Assignment: []byte{}}) }
	if req.Group == "" {
		fail(kerr.InvalidGroupID.Code)
		return
	}
	g, m := c.lockGroup(req.Group, false)
	if g == nil {
		fail(m.code(kerr.UnknownMemberID.Code, kerr.UnknownMemberID.Code))
		return
	}
	if g.cons != nil {
		g.classicSync(req, done)
	} else {
		g.sync(req, done)
	}
	g.unlock()
}

func (g *group) sync(req *SyncRequest, done func(SyncResult)) {
	if code := g.checkSync(req); code != 0 {
		g.replySyncError(done, code)
		return
	}
	m := g.members[req.MemberID]
	switch g.state {
	case groupPreparingRebalance:
		g.replySyncError(done, kerr.RebalanceInProgress.Code)
	case groupCompletingRebalance:
		if m.sync != nil {
			g.replySyncError(m.sync, kerr.RebalanceInProgress.Code)
		}
		m.sync = done
		m.awaitingSync = false
		g.touch(m, m.session)
		if m.id == g.leader {
			g.completeSync(req.Assignments)
		}
		g.stopSyncTimerIfDone()
	case groupStable:
		m.awaitingSync = false
		g.touch(m, m.session)
		g.replySync(done, m.assignment)
		g.stopSyncTimerIfDone()
	default: // Empty
		g.replySyncError(done, kerr.UnknownMemberID.Code)
	}
}

func (g *group) checkSync(req *SyncRequest) int16 {
	if code := g.checkMember(req.MemberID, req.InstanceID); code != 0 {
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
func (g *group) completeSync(assignments []Assignment) {
	for _, m := range g.members {
		m.assignment = []byte{}
	}
	for _, a := range assignments {
		if m := g.members[a.MemberID]; m != nil {
			m.assignment = bytes.Clone(a.Assignment)
		}
	}
	if err := g.storeGroup(); err != nil {
		g.c.log.Error("writing group assignment failed", "group", g.name, "generation", g.generation, "err", err)
		code := appendErrorCode(err, false)
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

// ---- Heartbeat ----

// Heartbeat handles a Heartbeat and returns its error code.
func (c *Coordinator) Heartbeat(groupID, memberID, instanceID string, generation int32) int16 {
	if groupID == "" {
		return kerr.InvalidGroupID.Code
	}
	g, why := c.lockGroup(groupID, false)
	if g == nil {
		return why.code(kerr.UnknownMemberID.Code, kerr.UnknownMemberID.Code)
	}
	defer g.unlock()
	if g.cons != nil {
		return g.classicHeartbeat(memberID, instanceID, generation)
	}
	if code := g.checkMember(memberID, instanceID); code != 0 {
		return code
	}
	if generation != g.generation {
		return kerr.IllegalGeneration.Code
	}
	m := g.members[memberID]
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

// ---- LeaveGroup ----

// Leaving names one member leaving, by member id and/or instance id.
type Leaving struct {
	MemberID   string
	InstanceID string
	Reason     string // only logged
}

// Leave removes members from a group and returns each one's error code.
// An unknown group (or one not coordinated here) fails every member.
func (c *Coordinator) Leave(groupID string, leaving []Leaving) []int16 {
	codes := make([]int16, len(leaving))
	g, m := c.lockGroup(groupID, false)
	if g == nil {
		for i := range codes {
			codes[i] = m.code(kerr.UnknownMemberID.Code, kerr.UnknownMemberID.Code)
		}
		return codes
	}
	for i, l := range leaving {
		if g.cons != nil {
			codes[i] = g.classicLeave(l)
		} else {
			codes[i] = g.leave(l)
		}
	}
	g.unlock()
	return codes
}

// leave removes one member, named by member id and/or instance id.
func (g *group) leave(l Leaving) int16 {
	id := l.MemberID
	if l.InstanceID != "" {
		cur, ok := g.static[l.InstanceID]
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
	g.c.log.Info("group member left", "group", g.name, "member", id, "reason", l.Reason)
	g.removeMemberAndUpdate(m)
	return 0
}
