package group

// Online migration between the classic and the consumer protocol (KIP-848,
// group.consumer.migration.policy), as Kafka 4 runs it:
//
//   - upgrade: the first ConsumerGroupHeartbeat to a classic consumer
//     group with members converts it to a consumer group. Its members
//     stay, as consumer-group members that speak the classic protocol,
//     keeping their assignments (epoch = the generation); the joiner bumps
//     the group epoch and a new target is computed.
//   - classic members of a consumer group: JoinGroup, SyncGroup,
//     Heartbeat and LeaveGroup are served by the consumer group. A join
//     reconciles the member at once (its subscription's owned partitions
//     tell what it gave up) and answers with its member epoch as the
//     generation and no leader; SyncGroup hands it its assigned partitions;
//     Heartbeat answers REBALANCE_IN_PROGRESS while the member is behind
//     the group epoch, must revoke, or may take partitions others
//     released, so that it joins again. A partition still goes to a
//     member only once no one else holds it.
//   - downgrade: when the last consumer-protocol member leaves (or is
//     fenced) and classic members remain, the group becomes a classic
//     group with them and their assignments (generation = the group
//     epoch) and starts a rebalance.
//
// The policy: bidirectional (Kafka's default), upgrade, downgrade, or
// disabled. Classic members may join a consumer group whatever the
// policy, as in Kafka. Empty groups change type whatever the policy too.

import (
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Migration policies (group.consumer.migration.policy).
const (
	MigrationBidirectional = "bidirectional"
	MigrationUpgrade       = "upgrade"
	MigrationDowngrade     = "downgrade"
	MigrationDisabled      = "disabled"
)

// classicMeta is what a member using the classic protocol joined with.
// Immutable: a rejoin replaces it.
type classicMeta struct {
	session   time.Duration
	protocols []Protocol
}

func (a *classicMeta) equal(b *classicMeta) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.session == b.session && slices.EqualFunc(a.protocols, b.protocols, func(x, y Protocol) bool {
		return x.Name == y.Name && string(x.Metadata) == string(y.Metadata)
	})
}

func (c *Coordinator) migration() string {
	if p := c.cfg.Consumer.MigrationPolicy; p != "" {
		return p
	}
	return MigrationBidirectional
}

func (c *Coordinator) upgradeEnabled() bool {
	p := c.migration()
	return p == MigrationBidirectional || p == MigrationUpgrade
}

func (c *Coordinator) downgradeEnabled() bool {
	p := c.migration()
	return p == MigrationBidirectional || p == MigrationDowngrade
}

// sessionOf is the member's session timeout: its own for a classic
// member, the group's otherwise.
func (g *group) sessionOf(m *cgMember) time.Duration {
	if m.classic != nil {
		return m.classic.session
	}
	s, _ := g.c.intervals(g.name)
	return s
}

// ---- upgrade ----

// canUpgrade reports whether a classic group with members may become a
// consumer group.
func (g *group) canUpgrade() bool {
	if !g.c.upgradeEnabled() || g.protocolType != consumerProtocolType || len(g.pending) > 0 {
		return false
	}
	for _, m := range g.members {
		if _, ok := parseSubscription(m.metadataFor(g.protocol)); !ok {
			return false
		}
	}
	return true
}

// upgrade turns the classic group into a consumer group whose members use
// the classic protocol; an error code if its records were not written.
func (g *group) upgrade() int16 {
	now := g.c.clock.Now()
	st := newCGState()
	st.epoch, st.targetEpoch = g.generation, g.generation
	for _, cm := range g.sortedMembers() {
		sub, _ := parseSubscription(cm.metadataFor(g.protocol))
		m := &cgMember{id: cm.id, instanceID: cm.instanceID, clientID: cm.clientID, clientHost: cm.clientHost,
			rackID: str(sub.Rack), topics: sortedUnique(sub.Topics), rebalance: cm.rebalance,
			epoch: g.generation, prevEpoch: g.generation, state: memberStable, pending: assignment{},
			classic: &classicMeta{session: cm.session, protocols: cm.protocols}}
		m.assigned = g.assignmentIDs(cm.assignment)
		m.deadline = now.Add(cm.session)
		st.add(m)
		if m.instanceID != "" {
			st.static[m.instanceID] = m.id
		}
		st.target[m.id] = m.assigned.clone()
	}
	g.refreshTopics(st)
	recs := append([]offsetsRecord{{key: groupMetadataKey(g.name)}}, cgDiffRecords(g.name, newCGState(), st)...)
	if err := g.append(recs); err != nil {
		return appendErrorCode(err, false)
	}
	g.dropClassicState(kerr.RebalanceInProgress.Code)
	g.cons = &consumerGroup{st: st, timers: map[string]*memberTimer{}}
	g.afterConsumerChange()
	g.c.log.Info("classic group upgraded to a consumer group", "group", g.name, "members", len(st.members))
	return 0
}

// dropClassicState forgets the classic members (their parked requests
// answered code) and timers.
func (g *group) dropClassicState(code int16) {
	g.stopTimer()
	for id, t := range g.pending {
		t.Stop()
		delete(g.pending, id)
	}
	for _, m := range g.members {
		g.failParked(m, code)
		if m.timer != nil {
			m.timer.Stop()
		}
	}
	g.members = map[string]*groupMember{}
	g.static = map[string]string{}
	g.leader, g.protocol = "", ""
}

// assignmentIDs decodes a classic assignment into topic ids (topics that
// no longer exist are left out).
func (g *group) assignmentIDs(b []byte) assignment {
	a := assignment{}
	var ca kmsg.ConsumerMemberAssignment
	if len(b) == 0 || ca.ReadFrom(b) != nil {
		return a
	}
	topics := g.c.cfg.Consumer.Topics
	for _, t := range ca.Topics {
		if topics == nil {
			break
		}
		meta, ok := topics.ByName(t.Topic)
		if !ok {
			continue
		}
		for _, p := range t.Partitions {
			if p >= 0 && p < meta.Partitions {
				a.add(meta.ID, p)
			}
		}
	}
	a.sortAll()
	return a
}

func parseSubscription(b []byte) (kmsg.ConsumerMemberMetadata, bool) {
	var s kmsg.ConsumerMemberMetadata
	return s, len(b) > 0 && s.ReadFrom(b) == nil
}

func sortedUnique(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return slices.Compact(out)
}

// ---- classic members in a consumer group ----

// classicJoin serves a JoinGroup from a classic member of a consumer
// group; g.mu is held.
func (g *group) classicJoin(req *JoinRequest, done func(JoinResult)) {
	fail := func(code int16, id string) { g.replyJoinError(done, code, id) }
	if req.ProtocolType != consumerProtocolType || len(req.Protocols) == 0 {
		fail(kerr.InconsistentGroupProtocol.Code, req.MemberID)
		return
	}
	sub, ok := parseSubscription(req.Protocols[0].Metadata)
	if !ok {
		fail(kerr.InconsistentGroupProtocol.Code, req.MemberID)
		return
	}
	id := req.MemberID
	if id == "" {
		id = newMemberID(req.ClientID)
		if req.InstanceID == "" && req.RequireMemberID {
			fail(kerr.MemberIDRequired.Code, id)
			return
		}
	}
	old := g.cons.st
	st := old.clone()
	m, fresh, code := st.classicMember(id, req)
	if code != 0 {
		fail(code, req.MemberID)
		return
	}
	changed := m.applyClassicJoin(req, sub)
	if g.refreshTopics(st) || changed || fresh {
		st.epoch++
	}
	if st.epoch > st.targetEpoch {
		g.computeTarget(st)
	}
	g.dropDeletedTopics(st)
	st.reconcile(m, g.ownedIDs(st, sub.OwnedPartitions))
	m.deadline = g.c.clock.Now().Add(req.SessionTimeout)
	g.setRevokeBy(m)
	if code := g.commitConsumer(old, st); code != 0 {
		fail(code, req.MemberID)
		return
	}
	res := JoinResult{Generation: m.epoch, ProtocolType: consumerProtocolType, Protocol: req.Protocols[0].Name, MemberID: m.id}
	g.reply(func() { done(res) })
}

// classicMember finds or creates a joining classic member in st: a static
// member joining without its member id replaces its previous incarnation.
func (st *cgState) classicMember(id string, req *JoinRequest) (*cgMember, bool, int16) {
	if req.InstanceID != "" {
		if cur, ok := st.static[req.InstanceID]; ok && cur != id {
			if req.MemberID != "" {
				return nil, false, kerr.FencedInstanceID.Code
			}
			old := st.members[cur]
			m := old.clone()
			m.id = id
			tgt := st.target[cur]
			st.removeMember(old)
			st.add(m)
			st.static[req.InstanceID] = id
			if tgt != nil {
				st.target[id] = tgt
			}
			return m, false, 0
		}
	}
	if m := st.members[id]; m != nil {
		if m.classic == nil {
			return nil, false, kerr.UnknownMemberID.Code // a consumer-protocol member
		}
		return st.own(id), false, 0
	}
	if req.MemberID != "" && req.InstanceID == "" {
		return nil, false, kerr.UnknownMemberID.Code
	}
	m := &cgMember{id: id, instanceID: req.InstanceID, assigned: assignment{}, pending: assignment{}}
	st.add(m)
	if req.InstanceID != "" {
		st.static[req.InstanceID] = id
	}
	return m, true, 0
}

// applyClassicJoin updates a classic member from its JoinGroup and
// reports whether its subscription changed.
func (m *cgMember) applyClassicJoin(req *JoinRequest, sub kmsg.ConsumerMemberMetadata) bool {
	changed := false
	if topics := sortedUnique(sub.Topics); !slices.Equal(topics, m.topics) {
		m.topics, changed = topics, true
	}
	if rack := str(sub.Rack); rack != m.rackID {
		m.rackID, changed = rack, true
	}
	m.clientID, m.clientHost, m.rebalance = req.ClientID, req.ClientHost, req.RebalanceTimeout
	m.classic = &classicMeta{session: req.SessionTimeout, protocols: req.Protocols}
	return changed
}

// ownedIDs converts a classic subscription's owned partitions to ids.
func (g *group) ownedIDs(st *cgState, owned []kmsg.ConsumerMemberMetadataOwnedPartition) []TopicPartitions {
	out := []TopicPartitions{}
	for _, o := range owned {
		if t, ok := st.subscribed[o.Topic]; ok {
			out = append(out, TopicPartitions{TopicID: t.id, Partitions: o.Partitions})
		}
	}
	return out
}

// setRevokeBy starts or clears the member's revocation deadline.
func (g *group) setRevokeBy(m *cgMember) {
	switch {
	case m.state != memberUnrevoked:
		m.revokeBy = time.Time{}
	case m.revokeBy.IsZero():
		m.revokeBy = g.c.clock.Now().Add(m.rebalance)
	}
}

// classicMemberOf validates a classic request's member and generation.
func (g *group) classicMemberOf(id, instanceID string, generation int32) (*cgMember, int16) {
	st := g.cons.st
	if instanceID != "" {
		cur, ok := st.static[instanceID]
		if !ok {
			return nil, kerr.UnknownMemberID.Code
		}
		if cur != id {
			return nil, kerr.FencedInstanceID.Code
		}
	}
	m := st.members[id]
	if m == nil || m.classic == nil {
		return nil, kerr.UnknownMemberID.Code
	}
	if generation != m.epoch {
		return nil, kerr.IllegalGeneration.Code
	}
	return m, 0
}

// classicSync serves a SyncGroup of a classic member: its assignment.
func (g *group) classicSync(req *SyncRequest, done func(SyncResult)) {
	m, code := g.classicMemberOf(req.MemberID, req.InstanceID, req.Generation)
	switch {
	case code != 0:
	case req.ProtocolType != nil && *req.ProtocolType != consumerProtocolType,
		req.Protocol != nil && *req.Protocol != m.classic.protocols[0].Name:
		code = kerr.InconsistentGroupProtocol.Code
	case g.cons.st.epoch > m.epoch && m.state != memberUnrevoked:
		code = kerr.RebalanceInProgress.Code
	}
	if code != 0 {
		g.replySyncError(done, code)
		return
	}
	m.deadline = g.c.clock.Now().Add(m.classic.session)
	res := SyncResult{ProtocolType: consumerProtocolType, Protocol: m.classic.protocols[0].Name, Assignment: g.classicAssignment(m)}
	g.reply(func() { done(res) })
}

// classicAssignment encodes the member's assigned partitions in the
// consumer protocol, at its subscription's version.
func (g *group) classicAssignment(m *cgMember) []byte {
	a := kmsg.NewConsumerMemberAssignment()
	if sub, ok := parseSubscription(m.classic.protocols[0].Metadata); ok {
		a.Version = min(sub.Version, 3)
	}
	for _, tp := range m.assigned.toTopicPartitions() {
		if name, ok := g.topicName(tp.TopicID); ok {
			a.Topics = append(a.Topics, kmsg.ConsumerMemberAssignmentTopic{Topic: name, Partitions: tp.Partitions})
		}
	}
	slices.SortFunc(a.Topics, func(x, y kmsg.ConsumerMemberAssignmentTopic) int {
		if x.Topic < y.Topic {
			return -1
		}
		if x.Topic > y.Topic {
			return 1
		}
		return 0
	})
	return a.AppendTo(nil)
}

// classicHeartbeat serves a Heartbeat of a classic member; it answers
// REBALANCE_IN_PROGRESS when the member must join again to move on.
func (g *group) classicHeartbeat(memberID, instanceID string, generation int32) int16 {
	m, code := g.classicMemberOf(memberID, instanceID, generation)
	if code != 0 {
		return code
	}
	m.deadline = g.c.clock.Now().Add(m.classic.session)
	st := g.cons.st
	if m.epoch < st.epoch || m.state == memberUnrevoked || m.state == memberUnreleased && st.releasedFor(m) {
		return kerr.RebalanceInProgress.Code
	}
	return 0
}

// releasedFor reports whether a partition of m's target that m waits
// for is free now.
func (st *cgState) releasedFor(m *cgMember) bool {
	held := st.heldByOthers(m.id)
	for tid, ps := range st.target[m.id] {
		for _, p := range ps {
			if !m.assigned.has(tid, p) && !held[tidp{tid, p}] {
				return true
			}
		}
	}
	return false
}

// classicLeave removes a member of a consumer group by LeaveGroup.
func (g *group) classicLeave(l Leaving) int16 {
	st := g.cons.st
	id := l.MemberID
	if l.InstanceID != "" {
		cur, ok := st.static[l.InstanceID]
		if !ok {
			return kerr.UnknownMemberID.Code
		}
		if id != "" && id != cur {
			return kerr.FencedInstanceID.Code
		}
		id = cur
	}
	m := st.members[id]
	if m == nil {
		return kerr.UnknownMemberID.Code
	}
	next := st.clone()
	next.removeMember(next.members[id])
	if code := g.commitConsumer(st, next); code != 0 {
		return code
	}
	g.c.log.Info("consumer group member left", "group", g.name, "member", id, "reason", l.Reason)
	g.maybeDowngrade()
	return 0
}

// ---- downgrade ----

// maybeDowngrade turns a consumer group left with only classic members
// into a classic group, which then rebalances.
func (g *group) maybeDowngrade() {
	st := g.cons.st
	if len(st.members) == 0 || !g.c.downgradeEnabled() || len(st.members) > int(g.c.cfg.MaxSize) {
		return
	}
	for _, m := range st.members {
		if m.classic == nil {
			return
		}
	}
	protocol, ok := st.commonProtocol()
	if !ok {
		return
	}
	v := g.classicValue(st, protocol)
	recs := append(cgTombstones(g.name, st), offsetsRecord{key: groupMetadataKey(g.name), value: v.AppendTo(nil)})
	if err := g.append(recs); err != nil {
		g.c.log.Error("downgrading a consumer group failed", "group", g.name, "err", err)
		return
	}
	g.stopConsumer()
	g.cons = nil
	g.restore(v)
	g.c.log.Info("consumer group downgraded to a classic group", "group", g.name, "members", len(g.members))
	g.prepareRebalance()
}

// commonProtocol is the first protocol of the first member (by id) that
// every member supports.
func (st *cgState) commonProtocol() (string, bool) {
	ids := st.sortedMemberIDs()
	for _, p := range st.members[ids[0]].classic.protocols {
		all := true
		for _, id := range ids[1:] {
			all = all && slices.ContainsFunc(st.members[id].classic.protocols, func(q Protocol) bool { return q.Name == p.Name })
		}
		if all {
			return p.Name, true
		}
	}
	return "", false
}

// classicValue is the classic group metadata the consumer group becomes:
// generation = the group epoch, each member with its assignment.
func (g *group) classicValue(st *cgState, protocol string) *kmsg.GroupMetadataValue {
	v := new(kmsg.GroupMetadataValue)
	v.Default()
	v.Version = 3
	v.ProtocolType, v.Generation, v.Protocol = consumerProtocolType, st.epoch, kmsg.StringPtr(protocol)
	v.CurrentStateTimestamp = g.c.clock.Now().UnixMilli()
	ids := st.sortedMemberIDs()
	v.Leader = kmsg.StringPtr(ids[0])
	for _, id := range ids {
		m := st.members[id]
		vm := kmsg.NewGroupMetadataValueMember()
		vm.MemberID, vm.ClientID, vm.ClientHost = m.id, m.clientID, m.clientHost
		if m.instanceID != "" {
			vm.InstanceID = kmsg.StringPtr(m.instanceID)
		}
		vm.SessionTimeoutMillis = int32(m.classic.session.Milliseconds())
		vm.RebalanceTimeoutMillis = int32(m.rebalance.Milliseconds())
		for _, p := range m.classic.protocols {
			if p.Name == protocol {
				vm.Subscription = p.Metadata
			}
		}
		vm.Assignment = g.classicAssignment(m)
		v.Members = append(v.Members, vm)
	}
	return v
}
