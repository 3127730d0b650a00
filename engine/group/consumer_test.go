package group

import (
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fakeTopics is a Topics the test changes as it goes (topics created).
type fakeTopics struct{ byName map[string]TopicMeta }

func (f *fakeTopics) add(name string, parts int32, racks ...[]string) [16]byte {
	var id [16]byte
	copy(id[:], name)
	id[15] = byte(len(f.byName) + 1)
	f.byName[name] = TopicMeta{Name: name, ID: id, Partitions: parts, Racks: racks}
	return id
}

func (f *fakeTopics) ByName(n string) (TopicMeta, bool) { t, ok := f.byName[n]; return t, ok }

func (f *fakeTopics) ByID(id [16]byte) (TopicMeta, bool) {
	for _, t := range f.byName {
		if t.ID == id {
			return t, true
		}
	}
	return TopicMeta{}, false
}

func (f *fakeTopics) Names() []string {
	var out []string
	for n := range f.byName {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// consumerHarness drives consumer-protocol members like a client would:
// each holds what its last answer assigned (revoking before taking).
type consumerHarness struct {
	*harness
	topics  *fakeTopics
	members map[string]*fakeMember
}

type fakeMember struct {
	id, group, instance string
	topics              []string
	regex               string
	rack                string
	epoch               int32
	owned               []TopicPartitions
}

func newConsumerHarness(t testing.TB, mutate ...func(*Config)) *consumerHarness {
	ft := &fakeTopics{byName: map[string]TopicMeta{}}
	all := append([]func(*Config){func(c *Config) {
		c.Consumer.Topics = ft
		c.Consumer.SessionTimeout = 10 * time.Second
		c.Consumer.HeartbeatInterval = time.Second
	}}, mutate...)
	return &consumerHarness{harness: newHarness(t, all...), topics: ft, members: map[string]*fakeMember{}}
}

func (h *consumerHarness) member(group, id string, topics ...string) *fakeMember {
	m := &fakeMember{id: id, group: group, topics: topics}
	h.members[id] = m
	return m
}

// hb sends the member's heartbeat (a full one when joining) and applies
// the answer as a client would.
func (h *consumerHarness) hb(m *fakeMember) ConsumerHeartbeatResult {
	h.t.Helper()
	res := h.c.ConsumerHeartbeat(h.request(m))
	h.applyAnswer(m, res)
	h.checkDisjoint()
	checkOneOwner(h.t, h.c)
	return res
}

// request is the member's next heartbeat.
func (h *consumerHarness) request(m *fakeMember) *ConsumerHeartbeat {
	req := &ConsumerHeartbeat{Group: m.group, MemberID: m.id, MemberEpoch: m.epoch, RebalanceTimeout: -1,
		Owned: m.owned, ClientID: "c-" + m.id, ClientHost: "/127.0.0.1"}
	if m.owned == nil {
		req.Owned = []TopicPartitions{}
	}
	if m.instance != "" {
		req.InstanceID = &m.instance
	}
	if m.epoch == 0 {
		req.RebalanceTimeout = 30 * time.Second
		req.SubscribedTopics = m.topics
		if m.topics == nil {
			req.SubscribedTopics = []string{}
		}
		if m.regex != "" {
			req.SubscribedRegex = &m.regex
		}
		if m.rack != "" {
			req.RackID = &m.rack
		}
	}
	return req
}

// applyAnswer takes a heartbeat's answer as a client would.
func (h *consumerHarness) applyAnswer(m *fakeMember, res ConsumerHeartbeatResult) {
	if res.ErrorCode == 0 {
		m.epoch = res.MemberEpoch
		if res.HasAssignment {
			m.owned = res.Assignment
		}
	}
}

func (h *consumerHarness) ok(m *fakeMember) ConsumerHeartbeatResult {
	h.t.Helper()
	res := h.hb(m)
	if res.ErrorCode != 0 {
		h.t.Fatalf("heartbeat of %s: %v %s", m.id, kerr.ErrorForCode(res.ErrorCode), res.ErrorMessage)
	}
	return res
}

// checkDisjoint fails if two members hold one partition.
func (h *consumerHarness) checkDisjoint() {
	h.t.Helper()
	seen := map[tidp]string{}
	for _, m := range h.members {
		for _, t := range m.owned {
			for _, p := range t.Partitions {
				if o, dup := seen[tidp{t.TopicID, p}]; dup {
					h.t.Fatalf("partition %x/%d owned by %s and %s", t.TopicID[:4], p, o, m.id)
				}
				seen[tidp{t.TopicID, p}] = m.id
			}
		}
	}
}

func count(tps []TopicPartitions) int {
	n := 0
	for _, t := range tps {
		n += len(t.Partitions)
	}
	return n
}

// settle heartbeats every member in turn until nothing changes.
func (h *consumerHarness) settle(ms ...*fakeMember) {
	h.t.Helper()
	for round := 0; round < 20; round++ {
		changed := false
		for _, m := range ms {
			before := fmt.Sprint(m.epoch, m.owned)
			h.ok(m)
			changed = changed || before != fmt.Sprint(m.epoch, m.owned)
		}
		if !changed {
			return
		}
	}
	h.t.Fatal("group did not settle in 20 rounds")
}

func (h *consumerHarness) describe(group string) ConsumerDescription {
	h.t.Helper()
	d := h.c.ConsumerDescribe(group)
	if d.ErrorCode != 0 {
		h.t.Fatalf("describe %s: %v", group, kerr.ErrorForCode(d.ErrorCode))
	}
	return d
}

func TestConsumerJoinGetsEveryPartition(t *testing.T) {
	h := newConsumerHarness(t)
	h.topics.add("t", 6)
	a := h.member("g", "a", "t")
	res := h.ok(a)
	if res.MemberEpoch != 1 || count(res.Assignment) != 6 || res.HeartbeatInterval != time.Second {
		t.Fatalf("first heartbeat: %+v", res)
	}
	if res = h.ok(a); res.HasAssignment {
		t.Fatalf("an unchanged assignment was sent again: %+v", res)
	}
	d := h.describe("g")
	if d.State != "Stable" || d.Epoch != 1 || d.AssignmentEpoch != 1 || d.Assignor != AssignorUniform {
		t.Fatalf("describe: %+v", d)
	}
}

// A second member gets nothing until the first has revoked: the two never
// hold a partition at once (checkDisjoint runs after every heartbeat).
func TestConsumerRevokeBeforeAssign(t *testing.T) {
	h := newConsumerHarness(t)
	h.topics.add("t", 6)
	a, b := h.member("g", "a", "t"), h.member("g", "b", "t")
	h.ok(a)
	res := h.ok(b)
	if res.MemberEpoch != 2 || count(res.Assignment) != 0 {
		t.Fatalf("b before a revoked: %+v", res)
	}
	if d := h.describe("g"); d.State != "Reconciling" {
		t.Fatalf("state %s, want Reconciling", d.State)
	}
	res = h.ok(a)
	if res.MemberEpoch != 1 || count(res.Assignment) != 3 {
		t.Fatalf("a asked to revoke: %+v", res)
	}
	res = h.ok(a) // reports owning 3: revocation done
	if res.MemberEpoch != 2 {
		t.Fatalf("a after revoking: %+v", res)
	}
	res = h.ok(b)
	if count(res.Assignment) != 3 {
		t.Fatalf("b after a revoked: %+v", res)
	}
	if d := h.describe("g"); d.State != "Stable" {
		t.Fatalf("state %s, want Stable", d.State)
	}
}

// Members join and leave while others are still reconciling; the group
// converges to a balanced assignment of every partition.
func TestConsumerJoinsAndLeavesDuringReconciliation(t *testing.T) {
	h := newConsumerHarness(t)
	h.topics.add("t", 12)
	var ms []*fakeMember
	for i := range 5 {
		m := h.member("g", fmt.Sprintf("m%d", i), "t")
		ms = append(ms, m)
		h.ok(m)
		if i > 0 {
			h.ok(ms[i-1]) // one step of the previous member only
		}
	}
	leave := ms[2]
	leave.epoch = epochLeave
	if res := h.hb(leave); res.ErrorCode != 0 || res.MemberEpoch != epochLeave {
		t.Fatalf("leave: %+v", res)
	}
	delete(h.members, leave.id)
	rest := []*fakeMember{ms[0], ms[1], ms[3], ms[4]}
	h.settle(rest...)
	total := 0
	for _, m := range rest {
		if n := count(m.owned); n != 3 {
			t.Errorf("%s holds %d partitions, want 3", m.id, n)
		}
		total += count(m.owned)
	}
	if total != 12 {
		t.Fatalf("%d partitions held, want 12", total)
	}
	if d := h.describe("g"); d.State != "Stable" || len(d.Members) != 4 {
		t.Fatalf("describe: %+v", d)
	}
}

func TestConsumerFencing(t *testing.T) {
	h := newConsumerHarness(t)
	h.topics.add("t", 2)
	a := h.member("g", "a", "t")
	h.ok(a)
	a.epoch = 5
	wantCode(t, "epoch ahead", h.hb(a).ErrorCode, kerr.FencedMemberEpoch)
	a.epoch = 1
	ghost := h.member("g", "ghost", "t")
	ghost.epoch = 1
	wantCode(t, "unknown member", h.hb(ghost).ErrorCode, kerr.UnknownMemberID)
	delete(h.members, "ghost")
	// The session expires: the member is fenced and its next heartbeat
	// learns it.
	h.clock.Advance(11 * time.Second)
	wantCode(t, "after session expiry", h.hb(a).ErrorCode, kerr.UnknownMemberID)
	if d := h.describe("g"); d.State != "Empty" || d.Epoch != 2 {
		t.Fatalf("after expiry: %+v", d)
	}
	// Rejoining with epoch 0 starts over.
	a.epoch, a.owned = 0, nil
	if res := h.ok(a); count(res.Assignment) != 2 || res.MemberEpoch != 3 {
		t.Fatalf("rejoin: %+v", res)
	}
}

func TestConsumerInvalidRequests(t *testing.T) {
	h := newConsumerHarness(t)
	bad := func(what string, req ConsumerHeartbeat, want *kerr.Error) {
		t.Helper()
		wantCode(t, what, h.c.ConsumerHeartbeat(&req).ErrorCode, want)
	}
	join := ConsumerHeartbeat{Group: "g", MemberID: "m", RebalanceTimeout: time.Second, Owned: []TopicPartitions{}, SubscribedTopics: []string{"t"}}
	r := join
	r.Group = ""
	bad("empty group", r, kerr.InvalidRequest)
	r = join
	r.MemberID = ""
	bad("empty member id (v1)", r, kerr.InvalidRequest)
	r = join
	r.RebalanceTimeout = -1
	bad("no rebalance timeout", r, kerr.InvalidRequest)
	r = join
	r.SubscribedTopics = nil
	bad("no subscription", r, kerr.InvalidRequest)
	r = join
	r.ServerAssignor = ptr("sticky")
	bad("unknown assignor", r, kerr.UnsupportedAssignor)
	r = join
	r.SubscribedRegex = ptr("(")
	bad("bad regex", r, kerr.InvalidRegularExpression)
	r = join
	r.MemberEpoch = -3
	bad("epoch -3", r, kerr.InvalidRequest)
	r = join
	r.Group = "nope"
	r.MemberEpoch = 4
	bad("unknown group", r, kerr.GroupIDNotFound)
}

func ptr(s string) *string { return &s }

func TestConsumerStaticMembership(t *testing.T) {
	h := newConsumerHarness(t)
	h.topics.add("t", 4)
	a := h.member("g", "a1", "t")
	a.instance = "inst"
	h.ok(a)
	b := h.member("g", "b", "t")
	h.settle(a, b)
	held := fmt.Sprint(a.owned)
	// A second incarnation while the first has not left.
	a2 := h.member("g", "a2", "t")
	a2.instance = "inst"
	wantCode(t, "instance in use", h.hb(a2).ErrorCode, kerr.UnreleasedInstanceID)
	// The first leaves for now (epoch -2): it keeps its partitions, and
	// the next incarnation takes them over with no rebalance.
	epochBefore := h.describe("g").Epoch
	a.epoch = epochStaticLeave
	if res := h.hb(a); res.ErrorCode != 0 || res.MemberEpoch != epochStaticLeave {
		t.Fatalf("static leave: %+v", res)
	}
	delete(h.members, "a1")
	res := h.ok(a2)
	if fmt.Sprint(res.Assignment) != held {
		t.Fatalf("new incarnation got %v, want %v", res.Assignment, held)
	}
	h.settle(a2, b)
	if d := h.describe("g"); len(d.Members) != 2 || d.State != "Stable" {
		t.Fatalf("describe: %+v (epoch before %d)", d, epochBefore)
	}
}

// A regex subscription takes topics created later.
func TestConsumerRegexReevaluatedOnTopicCreation(t *testing.T) {
	h := newConsumerHarness(t)
	h.topics.add("logs-a", 2)
	h.topics.add("other", 2)
	m := h.member("g", "m")
	m.regex = "logs-.*"
	if res := h.ok(m); count(res.Assignment) != 2 {
		t.Fatalf("first: %+v", res)
	}
	id := h.topics.add("logs-b", 3)
	res := h.ok(m)
	if count(res.Assignment) != 5 {
		t.Fatalf("after logs-b was created: %+v", res)
	}
	found := false
	for _, tp := range res.Assignment {
		found = found || tp.TopicID == id
	}
	if !found {
		t.Fatal("logs-b not assigned")
	}
}

// A member that does not revoke within its rebalance timeout is fenced,
// and its partitions go to the others.
func TestConsumerRevocationTimeout(t *testing.T) {
	h := newConsumerHarness(t, func(c *Config) { c.Consumer.SessionTimeout = time.Hour })
	h.topics.add("t", 4)
	a, b := h.member("g", "a", "t"), h.member("g", "b", "t")
	h.ok(a)
	h.ok(b)
	h.ok(a) // told to revoke two; never confirms
	h.clock.Advance(31 * time.Second)
	wantCode(t, "a after the rebalance timeout", h.hb(a).ErrorCode, kerr.UnknownMemberID)
	delete(h.members, "a")
	if res := h.ok(b); count(res.Assignment) != 4 {
		t.Fatalf("b: %+v", res)
	}
}

// State survives an unload and a load elsewhere: members keep their
// epochs and assignments and heartbeat on without errors.
func TestConsumerGroupSurvivesReload(t *testing.T) {
	h := newConsumerHarness(t)
	h.topics.add("t", 6)
	a, b := h.member("g", "a", "t"), h.member("g", "b", "t")
	h.ok(a)
	h.ok(b)
	h.ok(a) // mid-reconciliation: a must still confirm its revocation
	before := h.describe("g")
	p := h.c.PartitionFor("g")
	h.c.UnloadPartition(p)
	wantCode(t, "while unloaded", h.hb(a).ErrorCode, kerr.NotCoordinator)
	h.load(p)
	after := h.describe("g")
	if fmt.Sprintf("%+v", before) != fmt.Sprintf("%+v", after) {
		t.Fatalf("after reload:\n%+v\nwant\n%+v", after, before)
	}
	h.settle(a, b)
	if count(a.owned) != 3 || count(b.owned) != 3 {
		t.Fatalf("after settling: a %v b %v", a.owned, b.owned)
	}
}

func TestConsumerGroupTypeConflicts(t *testing.T) {
	h := newConsumerHarness(t, func(c *Config) { c.Consumer.MigrationPolicy = MigrationDisabled })
	h.topics.add("t", 1)
	h.stable("classic", joinOpts{})
	m := h.member("classic", "m", "t")
	wantCode(t, "heartbeat to a classic group without migration", h.hb(m).ErrorCode, kerr.GroupIDNotFound)
	c := h.member("cons", "c", "t")
	h.ok(c)
	c.epoch = epochLeave
	h.ok(c)
	// Empty now: a JoinGroup turns it into a classic group.
	h.stable("cons", joinOpts{})
	if l := h.c.List(); len(l) != 2 || l[0].Type != TypeClassic || l[1].Type != TypeClassic {
		t.Fatalf("list: %+v", l)
	}
}

// classicMember is a classic-protocol client in the migration test: it
// holds what its last SyncGroup gave it, by partition of topic t.
type classicMember struct {
	id    string
	gen   int32
	owned []int32
}

func (h *consumerHarness) classicJoin(cm *classicMember) JoinResult {
	h.t.Helper()
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Version, meta.Topics = 1, []string{"t"}
	if len(cm.owned) > 0 {
		meta.OwnedPartitions = []kmsg.ConsumerMemberMetadataOwnedPartition{{Topic: "t", Partitions: cm.owned}}
	}
	req := &JoinRequest{Group: "g", MemberID: cm.id, ClientID: "classic", SessionTimeout: 10 * time.Second,
		RebalanceTimeout: 10 * time.Second, ProtocolType: "consumer",
		Protocols: []Protocol{{Name: "cooperative-sticky", Metadata: meta.AppendTo(nil)}}}
	j := &joinCall{}
	h.c.Join(req, j.done)
	h.clock.Advance(0)
	res := h.joined(j, "classic join of "+cm.id)
	cm.id, cm.gen = res.MemberID, res.Generation
	return res
}

// classicSync takes the assignment the coordinator gives (a cooperative
// client: what it no longer has is revoked at once).
func (h *consumerHarness) classicSync(cm *classicMember, leaderAssign map[string][]int32) {
	h.t.Helper()
	req := &SyncRequest{Group: "g", MemberID: cm.id, Generation: cm.gen}
	for id, ps := range leaderAssign {
		a := kmsg.NewConsumerMemberAssignment()
		a.Topics = []kmsg.ConsumerMemberAssignmentTopic{{Topic: "t", Partitions: ps}}
		req.Assignments = append(req.Assignments, Assignment{MemberID: id, Assignment: a.AppendTo(nil)})
	}
	s := &syncCall{}
	h.c.Sync(req, s.done)
	res := h.synced(s, "classic sync of "+cm.id)
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(res.Assignment); err != nil {
		h.t.Fatalf("assignment of %s: %v", cm.id, err)
	}
	cm.owned = nil
	for _, t := range a.Topics {
		cm.owned = append(cm.owned, t.Partitions...)
	}
}

// A classic group is upgraded by a consumer-protocol member joining, its
// classic members reconcile through JoinGroup/SyncGroup, and when the
// consumer-protocol member leaves it is a classic group again. No
// partition is held by two members at any step.
func TestConsumerGroupOnlineUpgradeAndDowngrade(t *testing.T) {
	h := newConsumerHarness(t)
	tid := h.topics.add("t", 4)
	l, f := &classicMember{}, &classicMember{}
	jl, jf := &joinCall{}, &joinCall{}
	for _, x := range []struct {
		cm *classicMember
		j  *joinCall
	}{{l, jl}, {f, jf}} {
		meta := kmsg.NewConsumerMemberMetadata()
		meta.Version, meta.Topics = 1, []string{"t"}
		h.c.Join(&JoinRequest{Group: "g", ClientID: "classic", SessionTimeout: 10 * time.Second, RebalanceTimeout: 10 * time.Second,
			ProtocolType: "consumer", Protocols: []Protocol{{Name: "cooperative-sticky", Metadata: meta.AppendTo(nil)}}}, x.j.done)
	}
	h.clock.Advance(0)
	rl, rf := h.joined(jl, "leader"), h.joined(jf, "follower")
	if rl.Leader != rl.MemberID {
		rl, rf = rf, rl
	}
	l.id, l.gen, f.id, f.gen = rl.MemberID, rl.Generation, rf.MemberID, rf.Generation
	h.classicSync(l, map[string][]int32{l.id: {0, 1}, f.id: {2, 3}})
	h.classicSync(f, nil)
	check := func(step string, c *fakeMember) {
		t.Helper()
		seen := map[int32]string{}
		own := map[string][]int32{l.id: l.owned, f.id: f.owned}
		if c != nil {
			for _, tp := range c.owned {
				own[c.id] = append(own[c.id], tp.Partitions...)
			}
		}
		for id, ps := range own {
			for _, p := range ps {
				if o, dup := seen[p]; dup {
					t.Fatalf("%s: partition %d held by %s and %s", step, p, o, id)
				}
				seen[p] = id
			}
		}
	}
	check("classic", nil)

	c := h.member("g", "c", "t")
	if res := h.ok(c); count(res.Assignment) != 0 {
		t.Fatalf("the joiner got partitions still held: %+v", res)
	}
	d := h.describe("g")
	if len(d.Members) != 3 || !d.Members[0].Classic && !d.Members[1].Classic {
		t.Fatalf("after the upgrade: %+v", d)
	}
	// The classic members learn of the rebalance by heartbeat and rejoin
	// until their assignment settles.
	for round := 0; round < 6; round++ {
		for _, cm := range []*classicMember{l, f} {
			if h.c.Heartbeat("g", cm.id, "", cm.gen) == kerr.RebalanceInProgress.Code {
				h.classicJoin(cm)
				h.classicSync(cm, nil)
				check("classic rejoin", c)
			}
		}
		h.ok(c)
		check("consumer heartbeat", c)
	}
	for _, cm := range []*classicMember{l, f} {
		wantCode(t, "settled classic heartbeat", h.c.Heartbeat("g", cm.id, "", cm.gen), nil)
	}
	if n := len(l.owned) + len(f.owned) + count(c.owned); n != 4 || count(c.owned) == 0 {
		t.Fatalf("settled: classic %v %v, consumer %v", l.owned, f.owned, c.owned)
	}
	if d := h.describe("g"); d.State != "Stable" {
		t.Fatalf("after settling: %+v", d)
	}
	// A classic member commits with its member epoch as the generation.
	req := &CommitRequest{Group: "g", Generation: l.gen, MemberID: l.id, Now: h.clock.Now(), RetentionMs: -1,
		Offsets: []CommitOffset{{Topic: "t", Partition: l.owned[0], Offset: 3, LeaderEpoch: -1}}}
	h.c.Commit(req)
	wantCode(t, "classic member's commit", req.Offsets[0].ErrorCode, nil)

	// The consumer-protocol member leaves: the group is classic again and
	// rebalances its two members.
	c.epoch = epochLeave
	h.ok(c)
	delete(h.members, "c")
	if l := h.c.List(); len(l) != 1 || l[0].Type != TypeClassic || l[0].State != "PreparingRebalance" {
		t.Fatalf("after the downgrade: %+v", l)
	}
	h.wantState("g", "PreparingRebalance", 2)
	_ = tid
}

func TestConsumerOffsetCommitChecksEpoch(t *testing.T) {
	h := newConsumerHarness(t)
	h.topics.add("t", 1)
	a := h.member("g", "a", "t")
	h.ok(a)
	commit := func(epoch int32, member string) int16 {
		req := &CommitRequest{Group: "g", Generation: epoch, MemberID: member, Now: h.clock.Now(), RetentionMs: -1,
			GroupIDNotFound: true, Offsets: []CommitOffset{{Topic: "t", Offset: 5, LeaderEpoch: -1}}}
		h.c.Commit(req)
		return req.Offsets[0].ErrorCode
	}
	wantCode(t, "current epoch", commit(1, "a"), nil)
	wantCode(t, "epoch ahead", commit(2, "a"), kerr.StaleMemberEpoch)
	wantCode(t, "unknown member", commit(1, "b"), kerr.UnknownMemberID)
	wantCode(t, "admin while members", commit(-1, ""), kerr.UnknownMemberID)
	if got := h.fetched("g", "t"); got != 5 {
		t.Fatalf("fetched %d, want 5", got)
	}
}

func TestAssignorsDeterministic(t *testing.T) {
	topics := map[[16]byte]TopicMeta{}
	var ids [][16]byte
	for i, n := range []int32{7, 3, 10} {
		id := [16]byte{byte(i + 1)}
		ids = append(ids, id)
		topics[id] = TopicMeta{Name: fmt.Sprint("t", i), ID: id, Partitions: n}
	}
	mk := func(order []int) *assignInput {
		in := &assignInput{topics: topics}
		for _, i := range order {
			in.members = append(in.members, assignMember{id: fmt.Sprint("m", i), topics: ids[:1+i%3]})
		}
		sort.Slice(in.members, func(a, b int) bool { return in.members[a].id < in.members[b].id })
		return in
	}
	for _, name := range []string{AssignorUniform, AssignorRange} {
		x := runAssignor(name, mk([]int{0, 1, 2, 3, 4}))
		y := runAssignor(name, mk([]int{4, 2, 0, 3, 1}))
		if fmt.Sprint(x) != fmt.Sprint(y) {
			t.Fatalf("%s not deterministic:\n%v\n%v", name, x, y)
		}
		total := 0
		for _, a := range x {
			total += a.count()
		}
		if total != 20 {
			t.Fatalf("%s assigned %d of 20 partitions", name, total)
		}
	}
}

func TestUniformAssignorBalancedAndSticky(t *testing.T) {
	id := [16]byte{1}
	in := &assignInput{topics: map[[16]byte]TopicMeta{id: {Name: "t", ID: id, Partitions: 100}}}
	for i := range 10 {
		in.members = append(in.members, assignMember{id: fmt.Sprintf("m%02d", i), topics: [][16]byte{id}})
	}
	first := runAssignor(AssignorUniform, in)
	for i := range in.members {
		in.members[i].prev = first[in.members[i].id]
	}
	in.members = append(in.members, assignMember{id: "m10", topics: [][16]byte{id}})
	second := runAssignor(AssignorUniform, in)
	moved := 0
	for mid, a := range second {
		if n := a.count(); n < 9 || n > 10 {
			t.Errorf("%s has %d partitions", mid, n)
		}
		for _, p := range a[id] {
			if !first[mid].has(id, p) {
				moved++
			}
		}
	}
	if moved != 9 {
		t.Fatalf("%d partitions moved when an 11th member joined, want 9", moved)
	}
}

func TestRangeAssignorContiguous(t *testing.T) {
	id := [16]byte{1}
	in := &assignInput{topics: map[[16]byte]TopicMeta{id: {Name: "t", ID: id, Partitions: 7}}}
	for _, m := range []string{"a", "b", "c"} {
		in.members = append(in.members, assignMember{id: m, topics: [][16]byte{id}})
	}
	got := runAssignor(AssignorRange, in)
	want := map[string][]int32{"a": {0, 1, 2}, "b": {3, 4}, "c": {5, 6}}
	for m, ps := range want {
		if !slices.Equal(got[m][id], ps) {
			t.Fatalf("%s got %v, want %v", m, got[m][id], ps)
		}
	}
}

// With room to choose, the uniform assignor gives a partition to a member
// in a rack holding one of its replicas.
func TestUniformAssignorRackAware(t *testing.T) {
	id := [16]byte{1}
	racks := [][]string{{"r1"}, {"r2"}, {"r1"}, {"r2"}}
	in := &assignInput{topics: map[[16]byte]TopicMeta{id: {Name: "t", ID: id, Partitions: 4, Racks: racks}}}
	in.members = []assignMember{{id: "a", rack: "r2", topics: [][16]byte{id}}, {id: "b", rack: "r1", topics: [][16]byte{id}}}
	got := runAssignor(AssignorUniform, in)
	if !slices.Equal(got["a"][id], []int32{1, 3}) || !slices.Equal(got["b"][id], []int32{0, 2}) {
		t.Fatalf("rack-aware: %v", got)
	}
}

func FuzzConsumerRecords(f *testing.F) {
	m := &cgMember{id: "m", instanceID: "i", topics: []string{"a"}, regex: "x.*", assigned: assignment{{1}: {0, 1}}, pending: assignment{}}
	for _, r := range []offsetsRecord{cgEpochRecord("g", 3), cgMemberRecord("g", m), cgCurrentRecord("g", m),
		cgTargetMemberRecord("g", "m", m.assigned), cgPartitionMetadataRecord("g", map[string]topicSnapshot{"a": {partitions: 2}})} {
		f.Add(r.key, r.value)
	}
	f.Fuzz(func(t *testing.T, key, value []byte) {
		loaded := map[string]*loadedGroup{}
		_ = loadConsumerRecord(loaded, key, value)
	})
}

// An empty consumer group is deleted with all its records: a reload
// finds nothing of it.
func TestConsumerGroupDeleteTombstonesRecords(t *testing.T) {
	h := newConsumerHarness(t)
	h.topics.add("t", 2)
	a := h.member("g", "a", "t")
	h.ok(a)
	wantCode(t, "delete with a member", h.c.DeleteGroup("g"), kerr.NonEmptyGroup)
	a.epoch = epochLeave
	h.ok(a)
	wantCode(t, "delete", h.c.DeleteGroup("g"), nil)
	p := h.c.PartitionFor("g")
	h.c.UnloadPartition(p)
	if n := h.load(p); n != 0 {
		t.Fatalf("%d groups loaded after the delete", n)
	}
	wantCode(t, "describe after delete", h.c.ConsumerDescribe("g").ErrorCode, kerr.GroupIDNotFound)
}

// FuzzConsumerHeartbeat feeds decoded ConsumerGroupHeartbeat requests of
// any content to a coordinator: every one gets an answer, none a panic,
// and no two members ever hold one partition.
func FuzzConsumerHeartbeat(f *testing.F) {
	seed := kmsg.NewConsumerGroupHeartbeatRequest()
	seed.Version = 1
	seed.Group, seed.MemberID, seed.RebalanceTimeoutMillis = "g", "m", 1000
	seed.SubscribedTopicNames = []string{"t"}
	seed.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	f.Add(seed.AppendTo(nil))
	seed.MemberEpoch, seed.SubscribedTopicRegex = 1, kmsg.StringPtr("t.*")
	f.Add(seed.AppendTo(nil))
	f.Fuzz(func(t *testing.T, data []byte) {
		h := newConsumerHarness(t)
		h.topics.add("t", 3)
		for range 3 {
			req := kmsg.NewConsumerGroupHeartbeatRequest()
			req.Version = 1
			if req.ReadFrom(data) != nil {
				return
			}
			hb := &ConsumerHeartbeat{Group: req.Group, MemberID: req.MemberID, MemberEpoch: req.MemberEpoch,
				InstanceID: req.InstanceID, RackID: req.RackID, SubscribedTopics: req.SubscribedTopicNames,
				SubscribedRegex: req.SubscribedTopicRegex, ServerAssignor: req.ServerAssignor,
				RebalanceTimeout: time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond}
			if req.Topics != nil {
				hb.Owned = []TopicPartitions{}
				for _, tp := range req.Topics {
					hb.Owned = append(hb.Owned, TopicPartitions{TopicID: tp.TopicID, Partitions: tp.Partitions})
				}
			}
			h.c.ConsumerHeartbeat(hb)
			h.clock.Advance(time.Second)
			checkOneOwner(t, h.c)
		}
	})
}

// checkOneOwner fails if two members of a consumer group hold (or still
// revoke) one partition, as the coordinator's own state has it.
func checkOneOwner(t testing.TB, c *Coordinator) {
	t.Helper()
	c.eachGroup(func(g *group) {
		if g.cons == nil {
			return
		}
		seen := map[tidp]string{}
		for id, m := range g.cons.st.members {
			for _, a := range []assignment{m.assigned, m.pending} {
				for tid, ps := range a {
					for _, p := range ps {
						if o, dup := seen[tidp{tid, p}]; dup {
							t.Fatalf("group %s: partition %d held by %s and %s", g.name, p, o, id)
						}
						seen[tidp{tid, p}] = id
					}
				}
			}
		}
	})
}

// Partitions of a deleted topic leave the members' assignments at once:
// a member that still reports them is not kept waiting to revoke them,
// and nobody else waits for them.
func TestConsumerTopicDeletedLeavesAssignment(t *testing.T) {
	h := newConsumerHarness(t)
	h.topics.add("t", 2)
	h.topics.add("x", 2)
	a, b := h.member("g", "a", "t", "x"), h.member("g", "b", "t", "x")
	h.settle(a, b)
	stale := a.owned // still naming x's partition
	delete(h.topics.byName, "x")
	h.ok(a)
	a.owned = stale // a client that has not noticed the deletion
	h.ok(a)
	d := h.describe("g")
	for _, m := range d.Members {
		if m.MemberID == "a" && m.MemberEpoch != d.AssignmentEpoch {
			t.Fatalf("a waits to revoke a deleted topic: %+v", d)
		}
	}
	h.settle(a, b)
	if count(a.owned) != 1 || count(b.owned) != 1 {
		t.Fatalf("after x was deleted: a %v b %v", a.owned, b.owned)
	}
	if d := h.describe("g"); d.State != "Stable" {
		t.Fatalf("after x was deleted: %+v", d)
	}
}

// An empty classic group that had members becomes a consumer group with
// its offsets, and stays one across a reload (its classic metadata record
// is tombstoned).
func TestConsumerGroupFromEmptyClassicSurvivesReload(t *testing.T) {
	h := newConsumerHarness(t)
	h.topics.add("t", 1)
	j := h.stable("g", joinOpts{})
	h.commit("g", j.Generation, j.MemberID, map[string]int64{"t": 7})
	wantCode(t, "leave", h.c.Leave("g", []Leaving{{MemberID: j.MemberID}})[0], nil)
	m := h.member("g", "m", "t")
	h.ok(m)
	p := h.c.PartitionFor("g")
	h.c.UnloadPartition(p)
	h.load(p)
	if l := h.c.List(); len(l) != 1 || l[0].Type != TypeConsumer {
		t.Fatalf("after reload: %+v", l)
	}
	if got := h.fetched("g", "t"); got != 7 {
		t.Fatalf("offset after the conversion and reload: %d, want 7", got)
	}
	h.ok(m)
}

// A heartbeat whose records cannot be written changes nothing: the group
// is as before, and the member may try again.
func TestConsumerFailedWriteChangesNothing(t *testing.T) {
	h := newConsumerHarness(t)
	h.topics.add("t", 4)
	a, b := h.member("g", "a", "t"), h.member("g", "b", "t")
	h.ok(a)
	before := fmt.Sprintf("%+v", h.describe("g"))
	h.logFor("g").fail = fmt.Errorf("disk gone")
	wantCode(t, "join while the log fails", h.hb(b).ErrorCode, kerr.NotCoordinator)
	a.epoch = 1
	if after := fmt.Sprintf("%+v", h.describe("g")); after != before {
		t.Fatalf("a failed write changed the group:\n%s\nwas\n%s", after, before)
	}
	h.logFor("g").fail = nil
	h.settle(a, b)
	if count(a.owned) != 2 || count(b.owned) != 2 {
		t.Fatalf("after the log recovered: a %v b %v", a.owned, b.owned)
	}
}
