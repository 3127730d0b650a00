package share

// The share-group coordinator's membership (ShareGroupHeartbeat, key 76;
// ShareGroupDescribe, key 77), KIP-932's protocol:
//
//   - A member joins with epoch 0 and its subscription, heartbeats with the
//     epoch it was last given, and leaves with epoch -1. Every change of
//     membership, subscription or subscribed topics' partitions bumps the
//     group epoch and recomputes the target assignment (the simple
//     assignor: every subscribed partition to at least one member, spread
//     evenly; with more members than partitions, members share them).
//   - Share groups revoke nothing: a member's next heartbeat moves it to
//     the target assignment and the assignment epoch at once.
//   - A member that does not heartbeat within its session timeout is
//     removed as if it had left; its acquired records are released
//     (Config.MemberGone).
//
// Every change is written to the group's partition of __consumer_offsets
// (records.go) before it is answered, and LoadPartition rebuilds the
// groups from those records, each member's session starting anew.

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-broker/sluice/engine/group"
	"github.com/sluice-broker/sluice/record"
)

// TopicInfo is what the assignor needs of a topic.
type TopicInfo struct {
	ID         [16]byte
	Name       string
	Partitions int32
}

// Timing is a group's session timeout and heartbeat interval
// (share.session.timeout.ms, share.heartbeat.interval.ms).
type Timing struct {
	Session, Heartbeat time.Duration
}

// GroupsConfig wires the membership coordinator to the broker.
type GroupsConfig struct {
	Partitions int32        // __consumer_offsets partitions; > 0
	Clock      group.Clock  // nil: group.RealClock
	Log        *slog.Logger // nil: slog.Default()
	// Topic looks a topic up by name, TopicByID by id.
	Topic     func(name string) (TopicInfo, bool)
	TopicByID func(id [16]byte) (TopicInfo, bool)
	// Timing gives a group's session timeout and heartbeat interval.
	Timing func(group string) Timing
	// OtherGroup reports whether a group of another type holds the id.
	OtherGroup func(group string) bool
	// MemberGone is called (outside any lock) when a member left or its
	// session expired: its acquired records go back.
	MemberGone func(group, member string)
	// MaxSize bounds a group's members (group.share.max.size).
	MaxSize int
}

// Groups owns the share groups of the __consumer_offsets partitions
// loaded here.
type Groups struct {
	cfg GroupsConfig
	mu  struct {
		sync.Mutex
		parts map[int32]*groupPart
		// groups of the loaded partitions. Invariant: parts[partition of
		// name] != nil for every name in groups.
		groups map[string]*Group
		closed bool
	}
}

// groupPart is one loaded partition of __consumer_offsets.
type groupPart struct {
	index int32
	log   group.PartitionLog
}

// Group is one share group. Its fields are guarded by Groups.mu.
type Group struct {
	name string
	part *groupPart
	// epoch is the group epoch; assignmentEpoch the epoch of target.
	// Invariant: assignmentEpoch <= epoch, equal once a heartbeat has
	// recomputed the target after a change.
	epoch, assignmentEpoch int32
	members                map[string]*Member
	target                 map[string][]TopicPartitions
	// topicsSig sums the subscribed topics' partition counts at the last
	// assignment, so a heartbeat notices partitions added or topics made.
	topicsSig string
}

// Member is one share-group member.
type Member struct {
	id, clientID, clientHost string
	rack                     *string
	subscribed               []string // sorted
	epoch, prevEpoch         int32
	assigned                 []TopicPartitions
	session                  group.Timer
}

// NewGroups returns a membership coordinator with nothing loaded.
func NewGroups(cfg GroupsConfig) *Groups {
	if cfg.Clock == nil {
		cfg.Clock = group.RealClock{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.MaxSize <= 0 {
		cfg.MaxSize = 200 // group.share.max.size
	}
	g := &Groups{cfg: cfg}
	g.mu.parts = map[int32]*groupPart{}
	g.mu.groups = map[string]*Group{}
	return g
}

// HeartbeatRequest is one ShareGroupHeartbeat.
type HeartbeatRequest struct {
	Group, Member string
	Epoch         int32
	Rack          *string
	Subscribed    []string // nil: unchanged
	ClientID      string
	ClientHost    string
}

// HeartbeatResult answers it. Assignment is nil when unchanged.
type HeartbeatResult struct {
	Code       int16
	Message    string
	Epoch      int32
	Heartbeat  time.Duration
	Assignment []TopicPartitions
}

// ErrNotLoaded is a Groups write after its partition was unloaded.
var errNotLoaded = errors.New("partition not loaded")

// Heartbeat runs one ShareGroupHeartbeat.
func (gs *Groups) Heartbeat(req HeartbeatRequest) HeartbeatResult {
	if code, msg := checkHeartbeat(req); code != 0 {
		return HeartbeatResult{Code: code, Message: msg}
	}
	if gs.cfg.OtherGroup != nil && gs.cfg.OtherGroup(req.Group) {
		return HeartbeatResult{Code: kerr.GroupIDNotFound.Code, Message: "Group " + req.Group + " is not a share group."}
	}
	timing := gs.cfg.Timing(req.Group)
	gs.mu.Lock()
	res, recs, gone := gs.heartbeatLocked(req, timing)
	part := gs.partLocked(req.Group)
	gs.mu.Unlock()
	if res.Code == 0 && len(recs) > 0 {
		if err := gs.append(part, recs); err != nil {
			gs.cfg.Log.Warn("cannot write share group", "group", req.Group, "err", err)
			return HeartbeatResult{Code: kerr.NotCoordinator.Code}
		}
	}
	if gone && gs.cfg.MemberGone != nil {
		gs.cfg.MemberGone(req.Group, req.Member)
	}
	res.Heartbeat = timing.Heartbeat
	return res
}

func checkHeartbeat(req HeartbeatRequest) (int16, string) {
	switch {
	case req.Group == "":
		return kerr.InvalidRequest.Code, "GroupId can't be empty."
	case req.Member == "" || len(req.Member) > 36*4:
		return kerr.InvalidRequest.Code, "MemberId can't be empty."
	case req.Epoch < -1:
		return kerr.InvalidRequest.Code, "MemberEpoch is invalid."
	case req.Epoch == 0 && len(req.Subscribed) == 0:
		return kerr.InvalidRequest.Code, "SubscribedTopicNames must be set in first request."
	}
	return 0, ""
}

// partLocked is the loaded partition of a group, nil if not loaded.
func (gs *Groups) partLocked(name string) *groupPart {
	if gs.mu.closed {
		return nil
	}
	return gs.mu.parts[group.PartitionFor(name, gs.cfg.Partitions)]
}

func (gs *Groups) heartbeatLocked(req HeartbeatRequest, timing Timing) (HeartbeatResult, []offsetsRecord, bool) {
	part := gs.partLocked(req.Group)
	if part == nil {
		return HeartbeatResult{Code: kerr.NotCoordinator.Code}, nil, false
	}
	g := gs.mu.groups[req.Group]
	if req.Epoch == -1 {
		return gs.leaveLocked(g, req.Member)
	}
	if g == nil {
		if req.Epoch != 0 {
			return HeartbeatResult{Code: kerr.UnknownMemberID.Code}, nil, false
		}
		g = &Group{name: req.Group, part: part, members: map[string]*Member{}, target: map[string][]TopicPartitions{}}
		gs.mu.groups[req.Group] = g
	}
	m := g.members[req.Member]
	var recs []offsetsRecord
	switch {
	case req.Epoch == 0:
		if m == nil && len(g.members) >= gs.cfg.MaxSize {
			return HeartbeatResult{Code: kerr.GroupMaxSizeReached.Code}, nil, false
		}
		m, recs = gs.joinLocked(g, m, req)
	case m == nil:
		return HeartbeatResult{Code: kerr.UnknownMemberID.Code}, nil, false
	case req.Epoch != m.epoch && req.Epoch != m.prevEpoch:
		return HeartbeatResult{Code: kerr.FencedMemberEpoch.Code}, nil, false
	case req.Subscribed != nil && !slices.Equal(sortedCopy(req.Subscribed), m.subscribed):
		m.subscribed = sortedCopy(req.Subscribed)
		g.epoch++
		recs = append(recs, g.memberRecord(m, req), g.epochRecord())
	}
	gs.touchLocked(g, m, timing.Session)
	recs = append(recs, gs.reconcileLocked(g, m)...)
	res := HeartbeatResult{Epoch: m.epoch}
	if req.Epoch != m.epoch || req.Subscribed != nil {
		res.Assignment = m.assigned
		if res.Assignment == nil {
			res.Assignment = []TopicPartitions{}
		}
	}
	return res, recs, false
}

// joinLocked adds (or resets) a member joining with epoch 0.
func (gs *Groups) joinLocked(g *Group, m *Member, req HeartbeatRequest) (*Member, []offsetsRecord) {
	if m == nil {
		m = &Member{id: req.Member}
		g.members[m.id] = m
	}
	m.clientID, m.clientHost, m.rack = req.ClientID, req.ClientHost, req.Rack
	m.subscribed = sortedCopy(req.Subscribed)
	m.epoch, m.prevEpoch = 0, 0
	g.epoch++
	return m, []offsetsRecord{g.memberRecord(m, req), g.epochRecord()}
}

// leaveLocked removes a member leaving with epoch -1.
func (gs *Groups) leaveLocked(g *Group, member string) (HeartbeatResult, []offsetsRecord, bool) {
	if g == nil || g.members[member] == nil {
		return HeartbeatResult{Code: kerr.UnknownMemberID.Code}, nil, false
	}
	return HeartbeatResult{Epoch: -1}, g.removeLocked(member), true
}

// removeLocked drops a member and bumps the epoch; the records tombstone
// it.
func (g *Group) removeLocked(member string) []offsetsRecord {
	m := g.members[member]
	if m.session != nil {
		m.session.Stop()
	}
	delete(g.members, member)
	delete(g.target, member)
	g.epoch++
	return append(g.memberTombstones(member), g.epochRecord())
}

// touchLocked (re)starts a member's session.
func (gs *Groups) touchLocked(g *Group, m *Member, session time.Duration) {
	if m.session != nil {
		m.session.Reset(session)
		return
	}
	name, id := g.name, m.id
	m.session = gs.cfg.Clock.AfterFunc(session, func() { gs.expire(name, id) })
}

// expire removes a member whose session ran out.
func (gs *Groups) expire(name, member string) {
	gs.mu.Lock()
	g := gs.mu.groups[name]
	if g == nil || g.members[member] == nil || gs.partLocked(name) != g.part {
		gs.mu.Unlock()
		return
	}
	recs := g.removeLocked(member)
	part := g.part
	gs.mu.Unlock()
	if err := gs.append(part, recs); err != nil {
		gs.cfg.Log.Warn("cannot write share group member expiry", "group", name, "err", err)
	}
	if gs.cfg.MemberGone != nil {
		gs.cfg.MemberGone(name, member)
	}
}

// reconcileLocked recomputes the target assignment if anything it depends
// on changed, and moves m to it.
func (gs *Groups) reconcileLocked(g *Group, m *Member) []offsetsRecord {
	var recs []offsetsRecord
	topics, sig := gs.subscribedTopics(g)
	if sig != g.topicsSig {
		g.topicsSig = sig
		if g.assignmentEpoch == g.epoch {
			g.epoch++
			recs = append(recs, g.epochRecord())
		}
	}
	if g.assignmentEpoch < g.epoch {
		g.target = assign(g.members, topics)
		g.assignmentEpoch = g.epoch
		recs = append(recs, g.targetRecords()...)
	}
	if m.epoch != g.assignmentEpoch {
		m.prevEpoch, m.epoch = m.epoch, g.assignmentEpoch
		m.assigned = g.target[m.id]
		recs = append(recs, g.currentRecord(m))
	}
	return recs
}

// subscribedTopics resolves the group's subscribed topics that exist, and
// a signature of their partition counts.
func (gs *Groups) subscribedTopics(g *Group) ([]TopicInfo, string) {
	names := map[string]bool{}
	for _, m := range g.members {
		for _, t := range m.subscribed {
			names[t] = true
		}
	}
	var out []TopicInfo
	sig := ""
	for _, n := range sortedKeys(names) {
		if ti, ok := gs.cfg.Topic(n); ok {
			out = append(out, ti)
			sig += n + ":" + strconv.Itoa(int(ti.Partitions)) + ","
		}
	}
	return out, sig
}

// assign is the simple assignor: per topic, its partitions spread over
// its subscribers in member-id order; when there are more subscribers
// than partitions each member gets one partition and partitions are
// shared.
func assign(members map[string]*Member, topics []TopicInfo) map[string][]TopicPartitions {
	ids := sortedKeys(members)
	out := map[string][]TopicPartitions{}
	for _, t := range topics {
		var subs []string
		for _, id := range ids {
			if slices.Contains(members[id].subscribed, t.Name) {
				subs = append(subs, id)
			}
		}
		if len(subs) == 0 || t.Partitions <= 0 {
			continue
		}
		per := map[string][]int32{}
		if int(t.Partitions) >= len(subs) {
			for p := int32(0); p < t.Partitions; p++ {
				id := subs[int(p)%len(subs)]
				per[id] = append(per[id], p)
			}
		} else {
			for i, id := range subs {
				per[id] = []int32{int32(i) % t.Partitions}
			}
		}
		for _, id := range subs {
			if ps := per[id]; len(ps) > 0 {
				out[id] = append(out[id], TopicPartitions{TopicID: t.ID, Partitions: ps})
			}
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func sortedCopy(ss []string) []string {
	out := slices.Clone(ss)
	slices.Sort(out)
	return slices.Compact(out)
}

// ---- records ----

// offsetsRecord is one record for __consumer_offsets; nil value =
// tombstone.
type offsetsRecord struct{ key, value []byte }

func (g *Group) memberRecord(m *Member, req HeartbeatRequest) offsetsRecord {
	v := MemberValue{RackID: m.rack, ClientID: m.clientID, ClientHost: m.clientHost, Subscribed: m.subscribed}
	_ = req
	return offsetsRecord{Key{Type: TypeMemberMetadata, Group: g.name, Member: m.id}.AppendTo(nil), v.AppendTo(nil)}
}

func (g *Group) epochRecord() offsetsRecord {
	v := GroupValue{Epoch: g.epoch}
	return offsetsRecord{Key{Type: TypeGroupMetadata, Group: g.name}.AppendTo(nil), v.AppendTo(nil)}
}

func (g *Group) targetRecords() []offsetsRecord {
	var recs []offsetsRecord
	for _, id := range sortedKeys(g.members) {
		v := AssignmentValue{Partitions: g.target[id]}
		recs = append(recs, offsetsRecord{Key{Type: TypeTargetAssignmentMember, Group: g.name, Member: id}.AppendTo(nil), v.AppendTo(nil)})
	}
	meta := TargetMetaValue{AssignmentEpoch: g.assignmentEpoch}
	return append(recs, offsetsRecord{Key{Type: TypeTargetAssignmentMeta, Group: g.name}.AppendTo(nil), meta.AppendTo(nil)})
}

func (g *Group) currentRecord(m *Member) offsetsRecord {
	v := CurrentValue{MemberEpoch: m.epoch, PreviousMemberEpoch: m.prevEpoch, Partitions: m.assigned}
	return offsetsRecord{Key{Type: TypeCurrentMemberAssign, Group: g.name, Member: m.id}.AppendTo(nil), v.AppendTo(nil)}
}

func (g *Group) memberTombstones(member string) []offsetsRecord {
	var recs []offsetsRecord
	for _, t := range []int16{TypeCurrentMemberAssign, TypeTargetAssignmentMember, TypeMemberMetadata} {
		recs = append(recs, offsetsRecord{key: Key{Type: t, Group: g.name, Member: member}.AppendTo(nil)})
	}
	return recs
}

// groupTombstones delete an empty group.
func (g *Group) groupTombstones() []offsetsRecord {
	var recs []offsetsRecord
	for _, t := range []int16{TypeTargetAssignmentMeta, TypeStatePartitionMeta, TypeGroupMetadata} {
		recs = append(recs, offsetsRecord{key: Key{Type: t, Group: g.name}.AppendTo(nil)})
	}
	return recs
}

// append writes recs as one batch (CreateTime now, no producer id), as
// the classic coordinator writes its records.
func (gs *Groups) append(part *groupPart, recs []offsetsRecord) error {
	if part == nil {
		return errNotLoaded
	}
	h := record.NewHeader()
	h.FirstTimestamp = gs.cfg.Clock.Now().UnixMilli()
	var b record.Builder
	b.Reset(h)
	for i, r := range recs {
		b.Add(&record.Record{OffsetDelta: int32(i), Key: r.key, Value: r.value})
	}
	batch, err := b.AppendTo(nil)
	if err != nil {
		return err
	}
	_, err = part.log.Append(batch)
	return err
}

// ---- describe, list, delete ----

// MemberDescription is one member as ShareGroupDescribe shows it.
type MemberDescription struct {
	ID, ClientID, ClientHost string
	Rack                     *string
	Epoch                    int32
	Subscribed               []string
	Assigned                 []TopicPartitions
}

// Description is a group as ShareGroupDescribe shows it.
type Description struct {
	Code                   int16
	State                  string // Empty, Stable or Dead
	Epoch, AssignmentEpoch int32
	Members                []MemberDescription
}

// Describe describes a share group: GROUP_ID_NOT_FOUND if there is none
// (or it is of another type), NOT_COORDINATOR if its partition is not
// loaded here.
func (gs *Groups) Describe(name string) Description {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if gs.partLocked(name) == nil {
		return Description{Code: kerr.NotCoordinator.Code}
	}
	g := gs.mu.groups[name]
	if g == nil {
		return Description{Code: kerr.GroupIDNotFound.Code, State: "Dead"}
	}
	d := Description{State: g.state(), Epoch: g.epoch, AssignmentEpoch: g.assignmentEpoch}
	for _, id := range sortedKeys(g.members) {
		m := g.members[id]
		d.Members = append(d.Members, MemberDescription{ID: m.id, ClientID: m.clientID, ClientHost: m.clientHost,
			Rack: m.rack, Epoch: m.epoch, Subscribed: m.subscribed, Assigned: m.assigned})
	}
	return d
}

func (g *Group) state() string {
	if len(g.members) == 0 {
		return "Empty"
	}
	return "Stable"
}

// Listed is one group in ListGroups.
type Listed struct{ Name, State string }

// List returns the loaded share groups, sorted by name.
func (gs *Groups) List() []Listed {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	out := make([]Listed, 0, len(gs.mu.groups))
	for _, name := range sortedKeys(gs.mu.groups) {
		out = append(out, Listed{name, gs.mu.groups[name].state()})
	}
	return out
}

// Exists reports whether a share group of this name is loaded here.
func (gs *Groups) Exists(name string) bool {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	return gs.mu.groups[name] != nil
}

// IsEmpty reports whether the group exists here and has no member.
func (gs *Groups) IsEmpty(name string) (exists, empty bool) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	g := gs.mu.groups[name]
	return g != nil, g != nil && len(g.members) == 0
}

// Delete removes an empty share group: GROUP_ID_NOT_FOUND if there is
// none, NON_EMPTY_GROUP while it has members.
func (gs *Groups) Delete(name string) int16 {
	gs.mu.Lock()
	part := gs.partLocked(name)
	g := gs.mu.groups[name]
	switch {
	case part == nil:
		gs.mu.Unlock()
		return kerr.NotCoordinator.Code
	case g == nil:
		gs.mu.Unlock()
		return kerr.GroupIDNotFound.Code
	case len(g.members) > 0:
		gs.mu.Unlock()
		return kerr.NonEmptyGroup.Code
	}
	delete(gs.mu.groups, name)
	gs.mu.Unlock()
	if err := gs.append(part, g.groupTombstones()); err != nil {
		return kerr.NotCoordinator.Code
	}
	return 0
}

// ---- load and unload ----

// loadedShare collects one group's records during replay.
type loadedShare struct {
	epoch, assignmentEpoch int32
	members                map[string]*MemberValue
	current                map[string]*CurrentValue
	target                 map[string][]TopicPartitions
	exists                 bool
}

// LoadPartition replays partition p of __consumer_offsets and takes the
// share groups hashing to it; it returns how many. Records of other
// group types are skipped. A malformed share record fails the load.
func (gs *Groups) LoadPartition(p int32, log group.PartitionLog) (int, error) {
	loaded := map[string]*loadedShare{}
	if err := log.Replay(func(k, v []byte) error { return loadShareRecord(loaded, k, v) }); err != nil {
		return 0, err
	}
	part := &groupPart{index: p, log: log}
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if gs.mu.closed || gs.mu.parts[p] != nil {
		return 0, fmt.Errorf("partition %d: already loaded, or closed", p)
	}
	gs.mu.parts[p] = part
	n := 0
	for name, ls := range loaded {
		if !ls.exists || group.PartitionFor(name, gs.cfg.Partitions) != p {
			continue
		}
		gs.mu.groups[name] = gs.buildLocked(name, part, ls)
		n++
	}
	return n, nil
}

func loadShareRecord(loaded map[string]*loadedShare, key, value []byte) error {
	if len(key) < 2 || !IsShareGroupKey(int16(key[0])<<8|int16(key[1])) {
		return nil
	}
	k, err := ParseKey(key)
	if err != nil {
		return err
	}
	ls := loaded[k.Group]
	if ls == nil {
		ls = &loadedShare{members: map[string]*MemberValue{}, current: map[string]*CurrentValue{}, target: map[string][]TopicPartitions{}}
		loaded[k.Group] = ls
	}
	return ls.apply(k, value)
}

// apply one record; a nil value tombstones.
func (ls *loadedShare) apply(k Key, value []byte) error {
	switch k.Type {
	case TypeGroupMetadata:
		ls.exists = value != nil
		if value == nil {
			*ls = loadedShare{members: map[string]*MemberValue{}, current: map[string]*CurrentValue{}, target: map[string][]TopicPartitions{}}
			return nil
		}
		var v GroupValue
		err := v.ReadFrom(value)
		ls.epoch = v.Epoch
		return err
	case TypeTargetAssignmentMeta:
		var v TargetMetaValue
		if value == nil {
			return nil
		}
		err := v.ReadFrom(value)
		ls.assignmentEpoch = v.AssignmentEpoch
		return err
	case TypeMemberMetadata:
		return loadInto(ls.members, k.Member, value)
	case TypeCurrentMemberAssign:
		return loadInto(ls.current, k.Member, value)
	case TypeTargetAssignmentMember:
		if value == nil {
			delete(ls.target, k.Member)
			return nil
		}
		var v AssignmentValue
		err := v.ReadFrom(value)
		ls.target[k.Member] = v.Partitions
		return err
	}
	return nil
}

func loadInto[V any, P interface {
	*V
	ReadFrom([]byte) error
}](m map[string]*V, member string, value []byte) error {
	if value == nil {
		delete(m, member)
		return nil
	}
	v := P(new(V))
	if err := v.ReadFrom(value); err != nil {
		return err
	}
	m[member] = (*V)(v)
	return nil
}

// buildLocked makes the group the records describe; members' sessions
// start now.
func (gs *Groups) buildLocked(name string, part *groupPart, ls *loadedShare) *Group {
	g := &Group{name: name, part: part, epoch: ls.epoch, assignmentEpoch: ls.assignmentEpoch,
		members: map[string]*Member{}, target: ls.target}
	timing := gs.cfg.Timing(name)
	for id, mv := range ls.members {
		m := &Member{id: id, clientID: mv.ClientID, clientHost: mv.ClientHost, rack: mv.RackID, subscribed: mv.Subscribed}
		if cv := ls.current[id]; cv != nil {
			m.epoch, m.prevEpoch, m.assigned = cv.MemberEpoch, cv.PreviousMemberEpoch, cv.Partitions
		}
		g.members[id] = m
		gs.touchLocked(g, m, timing.Session)
	}
	// Recompute on the next heartbeat if topics changed meanwhile.
	_, g.topicsSig = gs.subscribedTopics(g)
	return g
}

// UnloadPartition gives up partition p's share groups.
func (gs *Groups) UnloadPartition(p int32) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	part := gs.mu.parts[p]
	if part == nil {
		return
	}
	delete(gs.mu.parts, p)
	for name, g := range gs.mu.groups {
		if g.part == part {
			g.stopTimers()
			delete(gs.mu.groups, name)
		}
	}
}

// Loaded reports whether partition p is loaded.
func (gs *Groups) Loaded(p int32) bool {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	return gs.mu.parts[p] != nil
}

// Close unloads everything.
func (gs *Groups) Close() {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	gs.mu.closed = true
	for _, g := range gs.mu.groups {
		g.stopTimers()
	}
	gs.mu.groups = map[string]*Group{}
	gs.mu.parts = map[int32]*groupPart{}
}

func (g *Group) stopTimers() {
	for _, m := range g.members {
		if m.session != nil {
			m.session.Stop()
		}
	}
}

// TopicName names a topic id for descriptions ("" if unknown).
func (gs *Groups) TopicName(id [16]byte) string {
	if ti, ok := gs.cfg.TopicByID(id); ok {
		return ti.Name
	}
	return ""
}
