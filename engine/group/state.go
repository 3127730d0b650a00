package group

// One classic group's state machine, as Kafka's coordinator runs it:
//
//	        join (initial delay)             all rejoined, or rebalance timeout
//	Empty ───────────────────▶ PreparingRebalance ─────────────────▶ CompletingRebalance
//	  ▲                           ▲        │ nobody left                 │ leader's SyncGroup
//	  │                           │        ▼                             ▼
//	  │                           │   Empty (next generation)          Stable
//	  │                           └──── join, leave, expiry, leader rejoin ┘
//	  │
//	Empty ── DeleteGroups, or all offsets expired ──▶ Dead (removed from the coordinator)
//
// Timers, never a polling loop: each member has a session timer that fires
// at its deadline (heartbeats only move the deadline; the timer re-arms
// itself for the remainder), and the group has one rebalance timer for the
// join phase (initial delay or rebalance timeout) and the wait for SyncGroups.

import (
	"bytes"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

type groupState int8

const (
	groupEmpty groupState = iota
	groupPreparingRebalance
	groupCompletingRebalance
	groupStable
	groupDead
)

var groupStateNames = [...]string{"Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"}

func (s groupState) String() string { return groupStateNames[s] }

// newMemberJoinTimeout bounds how long a new member may wait in a join that
// does not complete (Kafka's 5 minutes): its connection may be gone, and
// it cannot heartbeat before it has a member id.
const newMemberJoinTimeout = 5 * time.Minute

// consumerProtocolType is the protocol type of Kafka consumers; only their
// subscriptions can be parsed (to protect offsets of subscribed topics).
const consumerProtocolType = "consumer"

// group is one consumer group. Every field below mu is guarded by it.
type group struct {
	c    *Coordinator
	name string
	part *partition // the __consumer_offsets partition of this group

	mu    sync.Mutex
	state groupState
	// stateSince is when the state last changed (Kafka's
	// currentStateTimestamp): the start of an Empty group's retention.
	stateSince time.Time
	generation int32
	// protocolType is set by the first member to join; "" for a group that
	// only stores offsets (a "simple" group).
	protocolType string
	// protocol is the generation's selected protocol; "" when Empty.
	protocol string
	// leader is a member id. Invariant: leader == "" iff len(members) == 0.
	leader  string
	members map[string]*groupMember
	// static maps group.instance.id to the member id that holds it.
	// Invariant: static[id] == m.id iff m.instanceID == id.
	static map[string]string
	// pending holds member ids handed out with MEMBER_ID_REQUIRED that have
	// not joined yet; each expires after its session timeout.
	pending map[string]Timer
	// subscribed is the union of the members' subscribed topics when every
	// member is a parsable consumer; nil when unknown.
	subscribed map[string]bool

	// The rebalance timer runs during PreparingRebalance (join deadline)
	// and while SyncGroups are awaited. timerSeq invalidates callbacks of
	// timers that were stopped or replaced.
	timer    Timer
	timerSeq uint64
	// initialDelay: the join phase of an Empty group waits
	// group.initial.rebalance.delay.ms, extended while members keep
	// arriving, up to delayLeft more.
	initialDelay   bool
	delayLeft      time.Duration
	newMemberAdded bool

	offsets map[offsetTP]*committedOffset

	// cons is set for a consumer-protocol group (consumer.go); nil for a
	// classic one.
	cons *consumerGroup

	out []func() // completions to run once mu is released
}

// groupMember is one member of a group.
type groupMember struct {
	id         string
	instanceID string // group.instance.id; "" for dynamic members
	clientID   string
	clientHost string
	session    time.Duration
	rebalance  time.Duration
	// protocols are the member's supported protocols, in its preference
	// order, with metadata copied out of the request frame.
	protocols []Protocol
	// assignment is what the leader assigned for the current generation.
	assignment []byte

	join func(JoinResult) // JoinGroup waiting for the join phase to end
	sync func(SyncResult) // SyncGroup waiting for the leader's assignment
	// awaitingSync: the member is in the current generation but has not
	// sent SyncGroup yet; it is removed if it does not within the
	// rebalance timeout.
	awaitingSync bool
	// isNew: joined during the current join phase (its session cannot run
	// before it has an id, so newMemberJoinTimeout applies instead).
	isNew bool

	deadline time.Time // session expiry
	timer    Timer     // session timer; Invariant: timerAt <= deadline
	timerAt  time.Time // when timer is due
}

func newGroup(c *Coordinator, p *partition, name string, now time.Time) *group {
	return &group{
		c: c, name: name, part: p,
		state: groupEmpty, stateSince: now,
		members: map[string]*groupMember{}, static: map[string]string{},
		pending: map[string]Timer{}, offsets: map[offsetTP]*committedOffset{},
	}
}

// reply queues a completion; it runs in unlock.
func (g *group) reply(f func()) {
	g.out = append(g.out, f)
}

// unlock releases the group and then runs the queued completions, so no
// response is encoded or written under the lock.
func (g *group) unlock() {
	out := g.out
	g.out = nil
	g.mu.Unlock()
	for _, f := range out {
		f()
	}
}

func (g *group) transition(s groupState) {
	g.state = s
	g.stateSince = g.c.clock.Now()
}

// markDead ends the group: it leaves the coordinator's map, and any later
// lookup creates a fresh one.
func (g *group) markDead() {
	g.stopConsumer()
	g.stopTimer()
	for _, t := range g.pending {
		t.Stop()
	}
	g.transition(groupDead)
	g.c.forget(g)
}

// unload answers parked requests with NOT_COORDINATOR and stops every
// timer: its partition was unloaded, or the coordinator closed.
// The group is Dead from then on, so timer callbacks already waiting for
// the lock do nothing.
func (g *group) unload() {
	g.state = groupDead
	g.stopConsumer()
	g.stopTimer()
	for _, t := range g.pending {
		t.Stop()
	}
	for _, m := range g.members {
		g.failParked(m, kerr.NotCoordinator.Code)
		if m.timer != nil {
			m.timer.Stop()
		}
	}
}

// failParked answers the member's parked JoinGroup and SyncGroup with code.
func (g *group) failParked(m *groupMember, code int16) {
	if m.join != nil {
		g.replyJoinError(m.join, code, m.id)
		m.join = nil
	}
	if m.sync != nil {
		g.replySyncError(m.sync, code)
		m.sync = nil
	}
}

// ---- timers ----

// armTimer (re)starts the group's rebalance timer.
func (g *group) armTimer(d time.Duration) {
	g.stopTimer()
	seq := g.timerSeq
	g.timer = g.c.clock.AfterFunc(d, func() { g.onTimer(seq) })
}

func (g *group) stopTimer() {
	g.timerSeq++
	if g.timer != nil {
		g.timer.Stop()
		g.timer = nil
	}
}

func (g *group) onTimer(seq uint64) {
	g.mu.Lock()
	defer g.unlock()
	if seq != g.timerSeq || g.state == groupDead {
		return
	}
	g.timer = nil
	switch g.state {
	case groupPreparingRebalance:
		g.joinDeadline()
	case groupCompletingRebalance, groupStable:
		g.syncDeadline()
	}
}

// touch restarts the member's session. A later deadline only moves the
// deadline (the timer re-arms itself for the remainder when it fires), so
// heartbeats cost no timer operation; an earlier one re-arms the timer.
func (g *group) touch(m *groupMember, d time.Duration) {
	m.deadline = g.c.clock.Now().Add(d)
	switch {
	case m.timer == nil:
		m.timer = g.c.clock.AfterFunc(d, func() { g.onSessionTimer(m) })
		m.timerAt = m.deadline
	case m.deadline.Before(m.timerAt):
		m.timer.Reset(d)
		m.timerAt = m.deadline
	}
}

func (g *group) onSessionTimer(m *groupMember) {
	g.mu.Lock()
	defer g.unlock()
	if g.state == groupDead || g.members[m.id] != m {
		return
	}
	now := g.c.clock.Now()
	if left := m.deadline.Sub(now); left > 0 {
		m.timer.Reset(left)
		m.timerAt = m.deadline
		return
	}
	// A known member parked in a rebalance heartbeats implicitly; the
	// rebalance timeout, not the session, bounds its wait.
	if (m.join != nil && !m.isNew) || m.sync != nil {
		m.deadline = now.Add(m.session)
		m.timer.Reset(m.session)
		m.timerAt = m.deadline
		return
	}
	g.c.log.Info("group member session expired", "group", g.name, "member", m.id, "generation", g.generation)
	g.removeMemberAndUpdate(m)
}

// ---- membership ----

// rebalanceTimeout is the longest rebalance timeout of the members.
func (g *group) rebalanceTimeout() time.Duration {
	var d time.Duration
	for _, m := range g.members {
		d = max(d, m.rebalance)
	}
	return d
}

func (g *group) allJoined() bool {
	if len(g.pending) > 0 {
		return false
	}
	for _, m := range g.members {
		if m.join == nil {
			return false
		}
	}
	return true
}

// supportsProtocols reports whether a member (self, nil if new) with
// protocolType and protocols can be part of the group: the type matches and
// at least one protocol is supported by every other member.
func (g *group) supportsProtocols(self *groupMember, protocolType string, protocols []Protocol) bool {
	if protocolType == "" || len(protocols) == 0 {
		return false
	}
	others := len(g.members)
	if self != nil {
		others--
	}
	if others == 0 {
		return true
	}
	if protocolType != g.protocolType {
		return false
	}
	for _, p := range protocols {
		n := 0
		for _, m := range g.members {
			if m != self && m.supports(p.Name) {
				n++
			}
		}
		if n == others {
			return true
		}
	}
	return false
}

func (m *groupMember) supports(name string) bool {
	return m.metadataFor(name) != nil
}

// metadataFor returns the member's metadata for a protocol, nil if the
// member does not support it (an empty metadata is a non-nil empty slice).
func (m *groupMember) metadataFor(name string) []byte {
	for _, p := range m.protocols {
		if p.Name == name {
			if p.Metadata == nil {
				return []byte{}
			}
			return p.Metadata
		}
	}
	return nil
}

// sameProtocols reports whether a rejoin carries exactly the member's
// current protocols and metadata (then it changes nothing).
func (m *groupMember) sameProtocols(ps []Protocol) bool {
	if len(ps) != len(m.protocols) {
		return false
	}
	for i, p := range ps {
		if p.Name != m.protocols[i].Name || !bytes.Equal(p.Metadata, m.protocols[i].Metadata) {
			return false
		}
	}
	return true
}

// selectProtocol lets every member vote for its most preferred protocol
// among those all members support; most votes wins, ties go to the
// leader's preference order.
func (g *group) selectProtocol() string {
	votes := map[string]int{}
	for _, m := range g.members {
		for _, p := range m.protocols {
			if g.allSupport(p.Name) {
				votes[p.Name]++
				break
			}
		}
	}
	best, bestVotes := "", -1
	for _, p := range g.members[g.leader].protocols {
		if v, ok := votes[p.Name]; ok && v > bestVotes {
			best, bestVotes = p.Name, v
		}
	}
	return best
}

func (g *group) allSupport(name string) bool {
	for _, m := range g.members {
		if !m.supports(name) {
			return false
		}
	}
	return true
}

// sortedMembers returns the members ordered by id (a stable order for
// responses and records).
func (g *group) sortedMembers() []*groupMember {
	ms := make([]*groupMember, 0, len(g.members))
	for _, m := range g.members {
		ms = append(ms, m)
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].id < ms[j].id })
	return ms
}

// addMember puts a new member in the group and starts a rebalance.
func (g *group) addMember(m *groupMember, protocolType string, done func(JoinResult)) {
	if len(g.members) == 0 {
		g.protocolType = protocolType
		g.subscribed = nil
	}
	g.members[m.id] = m
	if m.instanceID != "" {
		g.static[m.instanceID] = m.id
	}
	if g.leader == "" {
		g.leader = m.id
	}
	m.join = done
	m.isNew = true
	g.newMemberAdded = true
	g.touch(m, newMemberJoinTimeout)
	g.maybePrepareRebalance()
	g.maybeCompleteJoin()
}

// updateMember records a known member's rejoin and (re)starts a rebalance.
func (g *group) updateMember(m *groupMember, done func(JoinResult), p *JoinRequest) {
	p.applyTo(m)
	g.park(m, done)
	g.maybePrepareRebalance()
	g.maybeCompleteJoin()
}

// park makes done the member's JoinGroup awaiting the end of the join
// phase. A JoinGroup it supersedes (the member retried on another
// connection) is told to rejoin.
func (g *group) park(m *groupMember, done func(JoinResult)) {
	if m.join != nil {
		g.replyJoinError(m.join, kerr.RebalanceInProgress.Code, m.id)
	}
	m.join = done
}

// removeMember takes m out of the group, answering its parked requests.
func (g *group) removeMember(m *groupMember) {
	g.failParked(m, kerr.UnknownMemberID.Code)
	if m.timer != nil {
		m.timer.Stop()
	}
	delete(g.members, m.id)
	if m.instanceID != "" && g.static[m.instanceID] == m.id {
		delete(g.static, m.instanceID)
	}
	if g.leader == m.id {
		g.leader = ""
		if ms := g.sortedMembers(); len(ms) > 0 {
			g.leader = ms[0].id
		}
	}
}

// removeMemberAndUpdate removes m (leave, expiry) and moves the group on.
func (g *group) removeMemberAndUpdate(m *groupMember) {
	g.removeMember(m)
	switch g.state {
	case groupStable, groupCompletingRebalance:
		g.prepareRebalance()
	case groupPreparingRebalance:
		g.maybeCompleteJoin()
	}
}

// ---- rebalance phases ----

func (g *group) maybePrepareRebalance() {
	switch g.state {
	case groupEmpty, groupStable, groupCompletingRebalance:
		g.prepareRebalance()
	}
}

// prepareRebalance opens a join phase. An Empty group waits the initial
// rebalance delay so that a whole fleet starting together lands in one
// generation; otherwise members get the rebalance timeout to rejoin.
func (g *group) prepareRebalance() {
	if g.state == groupCompletingRebalance {
		for _, m := range g.members {
			m.assignment = nil
			if m.sync != nil {
				g.replySyncError(m.sync, kerr.RebalanceInProgress.Code)
				m.sync = nil
			}
		}
	}
	for _, m := range g.members {
		m.awaitingSync = false
	}
	if g.state == groupEmpty {
		delay := g.c.cfg.InitialRebalanceDelay
		g.initialDelay = true
		g.newMemberAdded = false
		g.delayLeft = max(g.rebalanceTimeout()-delay, 0)
		g.armTimer(delay)
	} else {
		g.initialDelay = false
		g.armTimer(g.rebalanceTimeout())
	}
	g.transition(groupPreparingRebalance)
	// Nobody may need to rejoin (the last member just left).
	g.maybeCompleteJoin()
}

// maybeCompleteJoin ends the join phase early once every member has
// rejoined (never during the initial delay).
func (g *group) maybeCompleteJoin() {
	if g.state == groupPreparingRebalance && !g.initialDelay && g.allJoined() {
		g.completeJoin()
	}
}

// joinDeadline: the join phase's timer fired.
func (g *group) joinDeadline() {
	if g.initialDelay && g.newMemberAdded && g.delayLeft > 0 {
		d := min(g.c.cfg.InitialRebalanceDelay, g.delayLeft)
		g.delayLeft -= d
		g.newMemberAdded = false
		g.armTimer(d)
		return
	}
	g.completeJoin()
}

// completeJoin ends the join phase: dynamic members that did not rejoin
// are dropped, the next generation starts, and every parked JoinGroup is
// answered (the leader's with the members and their metadata).
func (g *group) completeJoin() {
	g.stopTimer()
	g.initialDelay = false
	for _, m := range g.members {
		if m.join == nil && m.instanceID == "" {
			g.removeMember(m)
		}
	}
	if len(g.members) > 0 && !g.electJoinedLeader() {
		// Only static members that have not rejoined are left: wait for them
		// (or for their sessions to end).
		g.armTimer(g.rebalanceTimeout())
		return
	}
	g.nextGeneration()
	if g.state == groupEmpty {
		if err := g.storeGroup(); err != nil {
			g.c.log.Warn("writing empty group metadata failed", "group", g.name, "err", err)
		}
		return
	}
	for _, m := range g.members {
		if m.join != nil {
			g.replyJoin(m.join, m, m.id == g.leader, g.leader)
			m.join = nil
		}
		m.isNew = false
		m.awaitingSync = true
		g.touch(m, m.session)
	}
	g.armTimer(g.rebalanceTimeout())
}

// electJoinedLeader keeps the leader if it rejoined, or else hands the
// role to any member that did; false if none did.
func (g *group) electJoinedLeader() bool {
	if l := g.members[g.leader]; l != nil && l.join != nil {
		return true
	}
	for _, m := range g.sortedMembers() {
		if m.join != nil {
			g.leader = m.id
			return true
		}
	}
	return false
}

func (g *group) nextGeneration() {
	g.generation++
	if len(g.members) == 0 {
		g.protocol = ""
		g.subscribed = nil
		g.transition(groupEmpty)
		return
	}
	g.protocol = g.selectProtocol()
	g.subscribed = g.computeSubscribed()
	g.transition(groupCompletingRebalance)
}

// syncDeadline: members that joined the generation but did not send
// SyncGroup within the rebalance timeout are removed.
func (g *group) syncDeadline() {
	kicked := false
	for _, m := range g.members {
		if m.awaitingSync {
			g.c.log.Info("group member did not sync in time", "group", g.name, "member", m.id)
			g.removeMember(m)
			kicked = true
		}
	}
	if kicked {
		g.prepareRebalance()
	}
}

// stopSyncTimerIfDone stops the SyncGroup deadline once every member
// synced. (During PreparingRebalance the timer is the join deadline.)
func (g *group) stopSyncTimerIfDone() {
	if g.state != groupCompletingRebalance && g.state != groupStable {
		return
	}
	for _, m := range g.members {
		if m.awaitingSync {
			return
		}
	}
	g.stopTimer()
}

// computeSubscribed parses the consumer subscriptions of the selected
// protocol; nil when any member's metadata cannot be read.
func (g *group) computeSubscribed() map[string]bool {
	if g.protocolType != consumerProtocolType {
		return nil
	}
	topics := map[string]bool{}
	for _, m := range g.members {
		var meta kmsg.ConsumerMemberMetadata
		if err := meta.ReadFrom(m.metadataFor(g.protocol)); err != nil {
			return nil
		}
		for _, t := range meta.Topics {
			topics[t] = true
		}
	}
	return topics
}

// ---- responses ----

func (g *group) replyJoin(done func(JoinResult), m *groupMember, withMembers bool, leader string) {
	res := JoinResult{
		Generation: g.generation, ProtocolType: g.protocolType, Protocol: g.protocol,
		Leader: leader, MemberID: m.id,
	}
	if withMembers {
		for _, o := range g.sortedMembers() {
			res.Members = append(res.Members, JoinMember{MemberID: o.id, InstanceID: o.instanceID, Metadata: o.metadataFor(g.protocol)})
		}
	}
	g.reply(func() { done(res) })
}

func (g *group) replyJoinError(done func(JoinResult), code int16, memberID string) {
	g.reply(func() { done(JoinResult{ErrorCode: code, MemberID: memberID}) })
}

func (g *group) replySync(done func(SyncResult), assignment []byte) {
	if assignment == nil {
		assignment = []byte{}
	}
	res := SyncResult{ProtocolType: g.protocolType, Protocol: g.protocol, Assignment: assignment}
	g.reply(func() { done(res) })
}

func (g *group) replySyncError(done func(SyncResult), code int16) {
	g.reply(func() { done(SyncResult{ErrorCode: code, Assignment: []byte{}}) })
}
