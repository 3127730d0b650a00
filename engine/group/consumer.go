package group

// Consumer-protocol groups (KIP-848, group.protocol=consumer): the
// coordinator assigns partitions itself and members converge on the
// assignment heartbeat by heartbeat, with no stop-the-world rebalance.
//
// Three epochs order everything:
//
//	group epoch        bumped by every change of membership, subscription
//	                   or the metadata of subscribed topics
//	assignment epoch   the group epoch the target assignment was computed
//	                   at (Invariant: assignment epoch <= group epoch); a
//	                   heartbeat that finds it behind recomputes the target
//	member epoch       the epoch of the assignment the member holds; it
//	                   moves to the assignment epoch as the member reconciles
//
// Reconciliation (reconcile.go) revokes before it assigns: a partition the
// target moves away from a member is first pending revocation (the member
// keeps its epoch until its heartbeat no longer reports owning it), and a
// partition is handed to its new member only once no other member holds
// it or has it pending revocation. So no partition ever has two owners.
//
// A consumer group is a group (state.go) with cons set: the offsets, the
// partition of __consumer_offsets, the lookups and the retention sweep are
// shared with classic groups; the classic member map stays empty, so
// classic Heartbeat, SyncGroup and LeaveGroup answer UNKNOWN_MEMBER_ID.
// Kafka's group-type rules apply: a ConsumerGroupHeartbeat converts an
// empty classic group, upgrades one with members when
// group.consumer.migration.policy allows and is refused
// GROUP_ID_NOT_FOUND otherwise; a JoinGroup converts an empty consumer
// group, and joins one with members as a classic member (online
// migration, consumer_classic.go).
//
// The target is recomputed at the heartbeat that finds it behind the
// group epoch (group.consumer.assignment.interval.ms is not applied:
// assignment is cheap here and runs at once).
//
// Each heartbeat works on a copy of the group's state; the records that
// turn the old state into the new one (consumer_records.go) are appended
// to __consumer_offsets, and only then does the copy replace the state and
// the member get its answer. A failed append changes nothing.

import (
	"regexp"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Member epochs with a meaning of their own (ConsumerGroupHeartbeat).
const (
	epochJoin        = 0
	epochLeave       = -1
	epochStaticLeave = -2 // a static member leaving for now, to come back
)

// memberState is Kafka's MemberState of a reconciling member.
type memberState int8

const (
	memberStable       memberState = 0 // holds its target, or all of it that is free
	memberUnrevoked    memberState = 1 // must give up partitionsPendingRevocation first
	memberUnreleased   memberState = 2 // waits for partitions others still hold
	memberStateUnknown memberState = 127
)

// TopicMeta is what consumer groups need to know of a topic.
type TopicMeta struct {
	Name       string
	ID         [16]byte
	Partitions int32
	// Racks[p] lists the racks of partition p's replicas (nil when the
	// brokers have no racks).
	Racks [][]string
}

// Topics is the coordinator's view of the cluster's topics (the engine
// reads them from its metadata image).
type Topics interface {
	ByName(name string) (TopicMeta, bool)
	ByID(id [16]byte) (TopicMeta, bool)
	// Names lists every topic that a regular expression may match
	// (internal topics excluded).
	Names() []string
}

// ConsumerConfig is the coordinator's share of the group.consumer.* broker
// configuration.
type ConsumerConfig struct {
	SessionTimeout    time.Duration // group.consumer.session.timeout.ms; 0: 45 s
	HeartbeatInterval time.Duration // group.consumer.heartbeat.interval.ms; 0: 5 s
	// Assignors is group.consumer.assignors; the first is the default.
	// Empty: uniform, range.
	Assignors []string
	// MigrationPolicy is group.consumer.migration.policy; "" is
	// bidirectional (consumer_classic.go).
	MigrationPolicy string
	// PerGroup returns a group's own consumer.session.timeout.ms and
	// consumer.heartbeat.interval.ms (0 where it sets none); nil: none.
	PerGroup func(group string) (session, heartbeat time.Duration)
	// Topics is nil in tests that need none: no topic exists.
	Topics Topics
}

// consumerGroup is the consumer-protocol side of a group. Guarded by the
// group's mu.
type consumerGroup struct {
	st *cgState
	// timers holds each member's one timer (session, static-leave and
	// revocation deadlines), by member id; stopped when the member goes.
	timers map[string]*memberTimer
}

// memberTimer is a member's timer and when it is due. Invariant: at <= the
// member's next deadline, so a later deadline (a heartbeat) costs no timer
// operation: the timer re-arms itself for the rest when it fires.
type memberTimer struct {
	t  Timer
	at time.Time
}

// cgState is what the records of a consumer group persist. It is copied
// (clone) before a heartbeat changes it: the maps are copied, the members
// shared until own gives the copy one of its own to change. Invariant: a
// member reached through a clone is changed only after own.
type cgState struct {
	epoch       int32 // group epoch
	targetEpoch int32 // Invariant: targetEpoch <= epoch
	members     map[string]*cgMember
	// static maps an instance id to its member id. Invariant: static[i]
	// == m.id iff m.instanceID == i.
	static map[string]string
	// target is the target assignment by member id, computed at
	// targetEpoch. Invariant: a key for every member once targetEpoch
	// caught up with the last membership change.
	target map[string]assignment
	// subscribed is the metadata of the subscribed topics that exist (by
	// name): a change bumps the group epoch.
	subscribed map[string]topicSnapshot
	// mine holds the ids of the members this copy may change (own, add).
	mine map[string]bool
}

// topicSnapshot is a subscribed topic as the target was computed for it.
type topicSnapshot struct {
	id         [16]byte
	partitions int32
}

// cgMember is one member of a consumer group.
type cgMember struct {
	id         string
	instanceID string // "" for a dynamic member
	rackID     string
	clientID   string
	clientHost string
	topics     []string // subscribed names, sorted
	regex      string   // subscribed_topic_regex; "" for none
	assignor   string   // ServerAssignor the member asked for; "" for none
	rebalance  time.Duration
	// classic is set for a member that speaks the classic protocol
	// (consumer_classic.go); nil for a consumer-protocol member.
	classic *classicMeta

	epoch     int32 // member epoch; epochStaticLeave while a static member is away
	prevEpoch int32
	state     memberState
	assigned  assignment // held (or being given) now
	pending   assignment // pending revocation

	// Runtime only (not persisted): session and revocation deadlines.
	deadline time.Time
	revokeBy time.Time // zero unless state == memberUnrevoked
}

func newCGState() *cgState {
	return &cgState{members: map[string]*cgMember{}, static: map[string]string{},
		target: map[string]assignment{}, subscribed: map[string]topicSnapshot{}, mine: map[string]bool{}}
}

func (s *cgState) clone() *cgState {
	n := &cgState{epoch: s.epoch, targetEpoch: s.targetEpoch,
		members: make(map[string]*cgMember, len(s.members)), static: make(map[string]string, len(s.static)),
		target: make(map[string]assignment, len(s.target)), subscribed: make(map[string]topicSnapshot, len(s.subscribed)),
		mine: map[string]bool{}}
	for id, m := range s.members {
		n.members[id] = m
	}
	for k, v := range s.static {
		n.static[k] = v
	}
	for id, a := range s.target {
		n.target[id] = a // never changed in place: computeTarget makes new ones
	}
	for k, v := range s.subscribed {
		n.subscribed[k] = v
	}
	return n
}

// own replaces member id by a copy that only s holds (once) and returns
// it.
func (s *cgState) own(id string) *cgMember {
	if s.mine[id] {
		return s.members[id]
	}
	m := s.members[id].clone()
	s.members[id], s.mine[id] = m, true
	return m
}

// add puts a member made for s into it.
func (s *cgState) add(m *cgMember) {
	s.members[m.id], s.mine[m.id] = m, true
}

func (m *cgMember) clone() *cgMember {
	c := *m
	c.topics = slices.Clone(m.topics)
	c.assigned = m.assigned.clone()
	c.pending = m.pending.clone()
	return &c
}

// ConsumerHeartbeat is a ConsumerGroupHeartbeat. Pointer and slice fields
// are nil when the request leaves them unchanged.
type ConsumerHeartbeat struct {
	Group       string
	MemberID    string
	MemberEpoch int32
	InstanceID  *string
	RackID      *string
	// RebalanceTimeout < 0: unchanged.
	RebalanceTimeout time.Duration
	SubscribedTopics []string
	SubscribedRegex  *string
	ServerAssignor   *string
	Owned            []TopicPartitions
	ClientID         string
	ClientHost       string
	// GenerateMemberID: v0, where the coordinator names a joining member.
	GenerateMemberID bool
}

// TopicPartitions is partitions of one topic, by id.
type TopicPartitions struct {
	TopicID    [16]byte
	Partitions []int32
}

// ConsumerHeartbeatResult answers a ConsumerGroupHeartbeat.
type ConsumerHeartbeatResult struct {
	ErrorCode         int16
	ErrorMessage      string
	MemberID          string
	MemberEpoch       int32
	HeartbeatInterval time.Duration
	// Assignment is set (possibly empty) when the member must learn it.
	Assignment    []TopicPartitions
	HasAssignment bool
}

func hbError(code int16, msg string) ConsumerHeartbeatResult {
	return ConsumerHeartbeatResult{ErrorCode: code, ErrorMessage: msg}
}

// ConsumerHeartbeat handles a ConsumerGroupHeartbeat.
func (c *Coordinator) ConsumerHeartbeat(req *ConsumerHeartbeat) ConsumerHeartbeatResult {
	if res, bad := c.validateHeartbeat(req); bad {
		return res
	}
	g, why := c.lockGroup(req.Group, req.MemberEpoch == epochJoin)
	if g == nil {
		return hbError(why.code(kerr.GroupIDNotFound.Code, kerr.CoordinatorNotAvailable.Code), "")
	}
	defer g.unlock()
	if g.cons == nil {
		classic := g.state != groupEmpty || len(g.members) > 0 || len(g.pending) > 0
		switch {
		case classic && (req.MemberEpoch != epochJoin || !g.canUpgrade()):
			return hbError(kerr.GroupIDNotFound.Code, "group "+g.name+" is not a consumer group")
		case classic:
			if code := g.upgrade(); code != 0 {
				return hbError(code, "")
			}
		case req.MemberEpoch != epochJoin:
			return hbError(kerr.UnknownMemberID.Code, "")
		default:
			if code := g.dropEmptyClassic(); code != 0 {
				return hbError(code, "")
			}
			g.cons = &consumerGroup{st: newCGState(), timers: map[string]*memberTimer{}}
		}
	}
	res := g.consumerHeartbeat(req)
	if res.ErrorCode != 0 {
		g.dropConsumerIfUnused()
	}
	return res
}

// validateHeartbeat checks what does not depend on the group (Kafka's
// INVALID_REQUEST rules, assignor and regex).
func (c *Coordinator) validateHeartbeat(req *ConsumerHeartbeat) (ConsumerHeartbeatResult, bool) {
	bad := func(msg string) (ConsumerHeartbeatResult, bool) { return hbError(kerr.InvalidRequest.Code, msg), true }
	switch {
	case req.Group == "":
		return bad("GroupId can't be empty.")
	case req.InstanceID != nil && *req.InstanceID == "":
		return bad("InstanceId can't be empty.")
	case req.RackID != nil && *req.RackID == "":
		return bad("RackId can't be empty.")
	case req.MemberEpoch < epochStaticLeave:
		return bad("MemberEpoch is invalid.")
	case req.MemberEpoch == epochStaticLeave && req.InstanceID == nil:
		return bad("InstanceId can't be null when leaving as a static member.")
	case req.MemberID == "" && !(req.MemberEpoch == epochJoin && req.GenerateMemberID):
		return bad("MemberId can't be empty.")
	case req.MemberEpoch == epochJoin && req.RebalanceTimeout < 0:
		return bad("RebalanceTimeoutMs must be provided in first request.")
	case req.MemberEpoch == epochJoin && (req.Owned == nil || len(req.Owned) > 0):
		return bad("TopicPartitions must be empty when (re-)joining.")
	case req.MemberEpoch == epochJoin && req.SubscribedTopics == nil && req.SubscribedRegex == nil:
		return bad("SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
	case len(req.MemberID) > maxNameLen || req.InstanceID != nil && len(*req.InstanceID) > maxNameLen:
		return bad("MemberId or InstanceId too long.")
	}
	if req.ServerAssignor != nil && !c.assignorAllowed(*req.ServerAssignor) {
		return hbError(kerr.UnsupportedAssignor.Code, "ServerAssignor "+*req.ServerAssignor+" is not supported."), true
	}
	if req.SubscribedRegex != nil && *req.SubscribedRegex != "" {
		if _, err := compileRegex(*req.SubscribedRegex); err != nil {
			return hbError(kerr.InvalidRegularExpression.Code, err.Error()), true
		}
	}
	return ConsumerHeartbeatResult{}, false
}

// maxNameLen bounds member and instance ids (they are persisted).
const maxNameLen = 1 << 12

func (c *Coordinator) assignors() []string {
	if len(c.cfg.Consumer.Assignors) == 0 {
		return []string{AssignorUniform, AssignorRange}
	}
	return c.cfg.Consumer.Assignors
}

func (c *Coordinator) assignorAllowed(name string) bool {
	return knownAssignor(name) && slices.Contains(c.assignors(), name)
}

// compileRegex compiles a subscription regex (RE2 syntax, matching a
// whole topic name, as Kafka's RE2J matches()). Every heartbeat of a
// regex subscriber matches it, so compiled ones are kept (up to
// maxCachedRegexes, then the cache starts over).
func compileRegex(s string) (*regexp.Regexp, error) {
	if len(s) > maxNameLen {
		return nil, errRegexTooLong
	}
	regexCache.Lock()
	defer regexCache.Unlock()
	if r := regexCache.m[s]; r != nil {
		return r, nil
	}
	r, err := regexp.Compile("^(?:" + s + ")$")
	if err != nil {
		return nil, err
	}
	if len(regexCache.m) >= maxCachedRegexes {
		clear(regexCache.m)
	}
	regexCache.m[s] = r
	return r, nil
}

const maxCachedRegexes = 1024

// regexCache holds compiled subscription regexes (a *regexp.Regexp is
// safe for concurrent use), by source.
var regexCache = struct {
	sync.Mutex
	m map[string]*regexp.Regexp
}{m: map[string]*regexp.Regexp{}}

type regexErr string

func (e regexErr) Error() string { return string(e) }

const errRegexTooLong = regexErr("regular expression too long")

// intervals are the group's session timeout and heartbeat interval.
func (c *Coordinator) intervals(group string) (session, heartbeat time.Duration) {
	cc := &c.cfg.Consumer
	session, heartbeat = cc.SessionTimeout, cc.HeartbeatInterval
	if session <= 0 {
		session = 45 * time.Second
	}
	if heartbeat <= 0 {
		heartbeat = 5 * time.Second
	}
	if cc.PerGroup != nil {
		s, h := cc.PerGroup(group)
		if s > 0 {
			session = s
		}
		if h > 0 {
			heartbeat = h
		}
	}
	return session, heartbeat
}

// consumerHeartbeat runs a heartbeat on a copy of the state and commits
// the copy once its records are written; g.mu is held.
func (g *group) consumerHeartbeat(req *ConsumerHeartbeat) ConsumerHeartbeatResult {
	old := g.cons.st
	st := old.clone()
	now := g.c.clock.Now()
	session, interval := g.c.intervals(g.name)
	if req.MemberEpoch == epochLeave || req.MemberEpoch == epochStaticLeave {
		return g.consumerLeave(old, st, req)
	}
	m, fresh, res, ok := g.consumerMember(st, req)
	if !ok {
		return res
	}
	if req.MemberEpoch != epochJoin {
		if code := checkMemberEpoch(m, req); code != 0 {
			return hbError(code, "")
		}
	}
	// One bump for whatever changed: membership, subscription, or the
	// subscribed topics' metadata.
	changed := m.applyRequest(req)
	if g.refreshTopics(st) || changed || fresh {
		st.epoch++
	}
	if st.epoch > st.targetEpoch {
		g.computeTarget(st)
	}
	g.dropDeletedTopics(st)
	before := m.assigned.clone()
	st.reconcile(m, req.Owned)
	m.deadline = now.Add(session)
	if m.state == memberUnrevoked && m.revokeBy.IsZero() {
		m.revokeBy = now.Add(m.rebalance)
	} else if m.state != memberUnrevoked {
		m.revokeBy = time.Time{}
	}
	if code := g.commitConsumer(old, st); code != 0 {
		return hbError(code, "")
	}
	res = ConsumerHeartbeatResult{MemberID: m.id, MemberEpoch: m.epoch, HeartbeatInterval: interval}
	if req.MemberEpoch != m.epoch || !before.equal(m.assigned) || req.Owned != nil && !ownedEquals(req.Owned, m.assigned) {
		res.HasAssignment = true
		res.Assignment = m.assigned.toTopicPartitions()
	}
	return res
}

// consumerMember finds or creates the heartbeat's member in st; fresh
// when it joins (the group epoch must move).
func (g *group) consumerMember(st *cgState, req *ConsumerHeartbeat) (m *cgMember, fresh bool, res ConsumerHeartbeatResult, ok bool) {
	id := req.MemberID
	if req.MemberEpoch != epochJoin {
		m := st.members[id]
		if m == nil {
			return nil, false, hbError(kerr.UnknownMemberID.Code, "member "+id+" is not in the group"), false
		}
		if req.InstanceID != nil && *req.InstanceID != m.instanceID {
			return nil, false, hbError(kerr.FencedInstanceID.Code, ""), false
		}
		return st.own(id), false, res, true
	}
	if id == "" {
		id = newUUIDString()
	}
	if req.InstanceID != nil {
		return g.joinStatic(st, id, *req.InstanceID)
	}
	if old := st.members[id]; old != nil {
		// A member rejoining with epoch 0 has given up all it held
		// (after FENCED_MEMBER_EPOCH, for one): it starts over.
		st.removeMember(old)
	}
	m = &cgMember{id: id}
	st.add(m)
	return m, true, res, true
}

// joinStatic joins a static member: a new one, or the incarnation of one
// that left with epoch -2, which takes over its assignment and epochs.
func (g *group) joinStatic(st *cgState, id, instance string) (*cgMember, bool, ConsumerHeartbeatResult, bool) {
	if oldID, ok := st.static[instance]; ok {
		old := st.members[oldID]
		switch {
		case oldID == id:
			st.removeMember(old)
		case old.epoch != epochStaticLeave:
			return nil, false, hbError(kerr.UnreleasedInstanceID.Code, "static member "+instance+" has not left yet"), false
		default:
			m := old.clone()
			m.id = id
			m.epoch, m.prevEpoch = old.prevEpoch, old.prevEpoch
			tgt := st.target[oldID]
			st.removeMember(old)
			st.add(m)
			st.static[instance] = id
			if tgt != nil {
				st.target[id] = tgt
			}
			return m, false, ConsumerHeartbeatResult{}, true
		}
	}
	m := &cgMember{id: id, instanceID: instance}
	st.add(m)
	st.static[instance] = id
	return m, true, ConsumerHeartbeatResult{}, true
}

// removeMember drops m and its target; the group epoch moves so that the
// target is computed without it.
func (s *cgState) removeMember(m *cgMember) {
	delete(s.members, m.id)
	delete(s.target, m.id)
	if m.instanceID != "" && s.static[m.instanceID] == m.id {
		delete(s.static, m.instanceID)
	}
	s.epoch++
}

// checkMemberEpoch fences a member whose epoch is not the one it was
// given, except the previous one when the member reports owning no more
// than it holds (its last answer was lost: Kafka accepts this once).
func checkMemberEpoch(m *cgMember, req *ConsumerHeartbeat) int16 {
	if m.epoch == epochStaticLeave {
		return kerr.FencedMemberEpoch.Code
	}
	switch {
	case req.MemberEpoch == m.epoch:
		return 0
	case req.MemberEpoch == m.prevEpoch && req.Owned != nil && ownedWithin(req.Owned, m.assigned):
		return 0
	}
	return kerr.FencedMemberEpoch.Code
}

// applyRequest updates the member from the request's non-null fields and
// reports whether its subscription changed (which bumps the group epoch).
func (m *cgMember) applyRequest(req *ConsumerHeartbeat) bool {
	changed := false
	if req.RackID != nil && *req.RackID != m.rackID {
		m.rackID, changed = *req.RackID, true
	}
	m.clientID, m.clientHost = req.ClientID, req.ClientHost
	if req.RebalanceTimeout >= 0 {
		m.rebalance = req.RebalanceTimeout
	}
	if req.SubscribedTopics != nil {
		topics := slices.Clone(req.SubscribedTopics)
		sort.Strings(topics)
		topics = slices.Compact(topics)
		if !slices.Equal(topics, m.topics) {
			m.topics, changed = topics, true
		}
	}
	if req.SubscribedRegex != nil && *req.SubscribedRegex != m.regex {
		m.regex, changed = *req.SubscribedRegex, true
	}
	if req.ServerAssignor != nil && *req.ServerAssignor != m.assignor {
		m.assignor, changed = *req.ServerAssignor, true
	}
	return changed
}

// consumerLeave handles epochs -1 (leave) and -2 (a static member leaving
// for now: it keeps its partitions until its session expires or it
// comes back).
func (g *group) consumerLeave(old, st *cgState, req *ConsumerHeartbeat) ConsumerHeartbeatResult {
	m := st.members[req.MemberID]
	if req.InstanceID != nil {
		id, ok := st.static[*req.InstanceID]
		if !ok {
			return hbError(kerr.UnknownMemberID.Code, "")
		}
		if id != req.MemberID {
			return hbError(kerr.FencedInstanceID.Code, "")
		}
		m = st.members[id]
	}
	if m == nil {
		return hbError(kerr.UnknownMemberID.Code, "")
	}
	if req.MemberEpoch == epochStaticLeave {
		m = st.own(m.id)
		m.prevEpoch, m.epoch = m.epoch, epochStaticLeave
	} else {
		st.removeMember(m)
	}
	if code := g.commitConsumer(old, st); code != 0 {
		return hbError(code, "")
	}
	g.c.log.Info("consumer group member left", "group", g.name, "member", m.id, "epoch", req.MemberEpoch)
	if req.MemberEpoch == epochLeave {
		g.maybeDowngrade()
	}
	return ConsumerHeartbeatResult{MemberID: m.id, MemberEpoch: req.MemberEpoch}
}

// commitConsumer writes the records from old to st and then makes st the
// group's state; the error code of a failed write.
func (g *group) commitConsumer(old, st *cgState) int16 {
	if err := g.append(cgDiffRecords(g.name, old, st)); err != nil {
		g.c.log.Error("writing consumer group records failed", "group", g.name, "err", err)
		return appendErrorCode(err, false)
	}
	g.cons.st = st
	g.afterConsumerChange()
	return 0
}
