package engine_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/engine"
	"github.com/sluice-broker/sluice/internal/testbroker"
)

// groupBroker starts a broker whose session-timeout floor allows the short
// timeouts these tests use.
func groupBroker(t *testing.T, mutators ...func(*engine.Config)) *testbroker.Broker {
	t.Helper()
	short := func(c *engine.Config) { c.GroupMinSessionTimeout = 100 * time.Millisecond }
	return testbroker.Start(t, append([]func(*engine.Config){short}, mutators...)...)
}

func groupCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func groupTopic(t *testing.T, tb *testbroker.Broker, name string, partitions int32) {
	t.Helper()
	resp, err := tb.Admin(t).CreateTopic(groupCtx(t), partitions, 1, nil, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
}

// waitGroup polls DescribeGroups until cond holds.
func waitGroup(t *testing.T, adm *kadm.Client, group string, what string, cond func(kadm.DescribedGroup) bool) kadm.DescribedGroup {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var last kadm.DescribedGroup
	for time.Now().Before(deadline) {
		described, err := adm.DescribeGroups(groupCtx(t), group)
		if err == nil {
			last = described[group]
			if last.Err == nil && cond(last) {
				return last
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("group %s never reached %s; last: state %s, %d members, err %v", group, what, last.State, len(last.Members), last.Err)
	return last
}

// assignedTo returns a described member's partitions of topic.
func assignedTo(m kadm.DescribedGroupMember, topic string) []int32 {
	a, ok := m.Assigned.AsConsumer()
	if !ok {
		return nil
	}
	for _, t := range a.Topics {
		if t.Topic == topic {
			ps := append([]int32(nil), t.Partitions...)
			sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
			return ps
		}
	}
	return nil
}

// balanced reports whether a Stable group of n members splits all
// partitions of topic between them, each member getting some.
func balanced(d kadm.DescribedGroup, topic string, n, partitions int) bool {
	if d.State != "Stable" || len(d.Members) != n {
		return false
	}
	seen := map[int32]bool{}
	for _, m := range d.Members {
		ps := assignedTo(m, topic)
		if len(ps) == 0 {
			return false
		}
		for _, p := range ps {
			if seen[p] {
				return false
			}
			seen[p] = true
		}
	}
	return len(seen) == partitions
}

// trackedConsumer is a kgo group member that records what it owns.
type trackedConsumer struct {
	cl *kgo.Client
	mu sync.Mutex
	// owned is what the client believes it is assigned.
	owned   map[int32]bool
	revokes int
}

func newTrackedConsumer(t *testing.T, tb *testbroker.Broker, group, topic string, opts ...kgo.Opt) *trackedConsumer {
	t.Helper()
	tc := &trackedConsumer{owned: map[int32]bool{}}
	all := []kgo.Opt{
		kgo.SeedBrokers(tb.Addr),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.SessionTimeout(6 * time.Second),
		kgo.RebalanceTimeout(6 * time.Second),
		kgo.HeartbeatInterval(100 * time.Millisecond),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			tc.mu.Lock()
			defer tc.mu.Unlock()
			for _, p := range m[topic] {
				tc.owned[p] = true
			}
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { tc.drop(m[topic], true) }),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { tc.drop(m[topic], false) }),
	}
	cl, err := kgo.NewClient(append(all, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	tc.cl = cl
	t.Cleanup(tc.close)
	return tc
}

func (tc *trackedConsumer) drop(ps []int32, revoke bool) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if revoke && len(ps) > 0 {
		tc.revokes++
	}
	for _, p := range ps {
		delete(tc.owned, p)
	}
}

func (tc *trackedConsumer) close() { tc.cl.Close() }

func (tc *trackedConsumer) ownedSorted() []int32 {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	var ps []int32
	for p := range tc.owned {
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
	return ps
}

// agrees reports whether every consumer's own view matches the broker's.
func agrees(d kadm.DescribedGroup, topic string, tcs ...*trackedConsumer) bool {
	for _, tc := range tcs {
		id, _ := tc.cl.GroupMetadata()
		found := false
		for _, m := range d.Members {
			if m.MemberID == id {
				found = fmt.Sprint(assignedTo(m, topic)) == fmt.Sprint(tc.ownedSorted())
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func TestGroupBalancers(t *testing.T) {
	tb := groupBroker(t)
	const topic, partitions = "balanced", 6
	groupTopic(t, tb, topic, partitions)
	adm := tb.Admin(t)
	for _, bc := range []struct {
		protocol string
		balancer kgo.GroupBalancer
	}{
		{"range", kgo.RangeBalancer()},
		{"roundrobin", kgo.RoundRobinBalancer()},
		{"sticky", kgo.StickyBalancer()},
		{"cooperative-sticky", kgo.CooperativeStickyBalancer()},
	} {
		t.Run(bc.protocol, func(t *testing.T) {
			group := "g-" + bc.protocol
			join := func() *trackedConsumer {
				return newTrackedConsumer(t, tb, group, topic, kgo.Balancers(bc.balancer))
			}
			expect := func(what string, tcs ...*trackedConsumer) {
				t.Helper()
				d := waitGroup(t, adm, group, what, func(d kadm.DescribedGroup) bool {
					return balanced(d, topic, len(tcs), partitions) && agrees(d, topic, tcs...)
				})
				if d.Protocol != bc.protocol || d.ProtocolType != "consumer" {
					t.Fatalf("protocol %q type %q, want %q consumer", d.Protocol, d.ProtocolType, bc.protocol)
				}
			}
			a := join()
			expect("one member owning everything", a)
			b := join()
			expect("two members", a, b)
			c := join()
			expect("three members", a, b, c)
			c.close() // leaves the group
			expect("two members after a leave", a, b)
		})
	}
}

func TestGroupStaticMembershipRejoinWithoutRebalance(t *testing.T) {
	tb := groupBroker(t)
	const topic, group = "static", "static-group"
	groupTopic(t, tb, topic, 4)
	adm := tb.Admin(t)
	a := newTrackedConsumer(t, tb, group, topic, kgo.InstanceID("a"))
	b := newTrackedConsumer(t, tb, group, topic, kgo.InstanceID("b"))
	d := waitGroup(t, adm, group, "two static members", func(d kadm.DescribedGroup) bool {
		return balanced(d, topic, 2, 4) && agrees(d, topic, a, b)
	})
	idA, genA := a.cl.GroupMetadata()
	_, genB := b.cl.GroupMetadata()
	before := map[string][]int32{}
	for _, m := range d.Members {
		before[*m.InstanceID] = assignedTo(m, topic)
	}
	b.mu.Lock()
	revokesB := b.revokes
	b.mu.Unlock()

	a.close() // a static member does not leave: its instance stays in the group
	a2 := newTrackedConsumer(t, tb, group, topic, kgo.InstanceID("a"))
	d = waitGroup(t, adm, group, "the restarted static member back", func(d kadm.DescribedGroup) bool {
		id, _ := a2.cl.GroupMetadata()
		return id != "" && id != idA && balanced(d, topic, 2, 4) && agrees(d, topic, a2, b)
	})
	if _, gen := a2.cl.GroupMetadata(); gen != genA {
		t.Errorf("restarted member is in generation %d, want %d (no rebalance)", gen, genA)
	}
	if _, gen := b.cl.GroupMetadata(); gen != genB {
		t.Errorf("other member moved from generation %d to %d", genB, gen)
	}
	b.mu.Lock()
	if b.revokes != revokesB {
		t.Errorf("other member had partitions revoked")
	}
	b.mu.Unlock()
	for _, m := range d.Members {
		if got := assignedTo(m, topic); fmt.Sprint(got) != fmt.Sprint(before[*m.InstanceID]) {
			t.Errorf("instance %s assigned %v after the restart, %v before", *m.InstanceID, got, before[*m.InstanceID])
		}
	}
}

// ---- raw protocol tests ----

// groupConn is one raw connection speaking exact request versions, as old
// clients (kafkajs, sarama) do.
type groupConn struct {
	conn net.Conn
	corr int32
	mu   sync.Mutex
}

func dialGroup(t *testing.T, addr string) *groupConn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &groupConn{conn: conn}
}

// roundTrip sends req at its set version and reads the answer.
func (c *groupConn) roundTrip(req kmsg.Request) (kmsg.Response, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.corr++
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("raw-group-test")).AppendRequest(nil, req, c.corr)
	_ = c.conn.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := c.conn.Write(frame); err != nil {
		return nil, err
	}
	var size [4]byte
	if _, err := io.ReadFull(c.conn, size[:]); err != nil {
		return nil, err
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c.conn, body); err != nil {
		return nil, err
	}
	if got := int32(binary.BigEndian.Uint32(body)); got != c.corr {
		return nil, fmt.Errorf("correlation %d, want %d", got, c.corr)
	}
	body = body[4:]
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if resp.IsFlexible() {
		body = body[1:]
	}
	return resp, resp.ReadFrom(body)
}

func (c *groupConn) do(t *testing.T, req kmsg.Request) kmsg.Response {
	t.Helper()
	resp, err := c.roundTrip(req)
	if err != nil {
		t.Fatalf("%s v%d: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return resp
}

type asyncResp struct {
	resp kmsg.Response
	err  error
}

// start sends req from another goroutine (a JoinGroup that will wait).
func (c *groupConn) start(req kmsg.Request) <-chan asyncResp {
	ch := make(chan asyncResp, 1)
	go func() {
		resp, err := c.roundTrip(req)
		ch <- asyncResp{resp, err}
	}()
	return ch
}

func awaitJoin(t *testing.T, ch <-chan asyncResp) *kmsg.JoinGroupResponse {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("join: %v", r.err)
		}
		return r.resp.(*kmsg.JoinGroupResponse)
	case <-time.After(15 * time.Second):
		t.Fatal("join never answered")
		return nil
	}
}

type joinOpts struct {
	version            int16
	member, instance   string
	session, rebalance time.Duration
	protocols          []string
	topics             []string
}

func joinRequest(group string, o joinOpts) *kmsg.JoinGroupRequest {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version = o.version
	req.Group = group
	req.MemberID = o.member
	req.SessionTimeoutMillis = int32(o.session.Milliseconds())
	req.RebalanceTimeoutMillis = int32(o.rebalance.Milliseconds())
	if o.instance != "" {
		req.InstanceID = kmsg.StringPtr(o.instance)
	}
	req.ProtocolType = "consumer"
	if o.protocols == nil {
		o.protocols = []string{"range"}
	}
	meta := kmsg.ConsumerMemberMetadata{Topics: o.topics}
	for _, name := range o.protocols {
		req.Protocols = append(req.Protocols, kmsg.JoinGroupRequestProtocol{Name: name, Metadata: meta.AppendTo(nil)})
	}
	return req
}

func syncRequest(version int16, group, member string, gen int32, assign map[string]string) *kmsg.SyncGroupRequest {
	req := kmsg.NewPtrSyncGroupRequest()
	req.Version = version
	req.Group = group
	req.MemberID = member
	req.Generation = gen
	for id, a := range assign {
		req.GroupAssignment = append(req.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: id, MemberAssignment: []byte(a)})
	}
	return req
}

func heartbeat(t *testing.T, c *groupConn, version int16, group, member, instance string, gen int32) int16 {
	t.Helper()
	req := kmsg.NewPtrHeartbeatRequest()
	req.Version = version
	req.Group = group
	req.MemberID = member
	req.Generation = gen
	if instance != "" {
		req.InstanceID = kmsg.StringPtr(instance)
	}
	return c.do(t, req).(*kmsg.HeartbeatResponse).ErrorCode
}

func describeState(t *testing.T, c *groupConn, group string) kmsg.DescribeGroupsResponseGroup {
	t.Helper()
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Version = 5
	req.Groups = []string{group}
	return c.do(t, req).(*kmsg.DescribeGroupsResponse).Groups[0]
}

func waitState(t *testing.T, c *groupConn, group, state string, members int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		d := describeState(t, c, group)
		if d.State == state && len(d.Members) == members {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s: state %s with %d members, want %s with %d", group, d.State, len(d.Members), state, members)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func wantCode(t *testing.T, what string, got int16, want *kerr.Error) {
	t.Helper()
	var w int16
	if want != nil {
		w = want.Code
	}
	if got != w {
		t.Fatalf("%s: error %v, want %v", what, kerr.ErrorForCode(got), kerr.ErrorForCode(w))
	}
}

// TestGroupOldVersions walks a group through the versions kafkajs and
// sarama speak: JoinGroup v0/v1, SyncGroup v0, Heartbeat v0, LeaveGroup v0,
// OffsetCommit v2, OffsetFetch v1.
func TestGroupOldVersions(t *testing.T) {
	tb := groupBroker(t)
	groupTopic(t, tb, "old", 2)
	const group = "old-clients"
	ca, cb := dialGroup(t, tb.Addr), dialGroup(t, tb.Addr)

	ja := awaitJoin(t, ca.start(joinRequest(group, joinOpts{version: 0, session: 10 * time.Second, topics: []string{"old"}})))
	wantCode(t, "join v0", ja.ErrorCode, nil)
	if ja.Generation != 1 || ja.LeaderID != ja.MemberID || len(ja.Members) != 1 || *ja.Protocol != "range" {
		t.Fatalf("join v0: generation %d leader %q member %q members %d", ja.Generation, ja.LeaderID, ja.MemberID, len(ja.Members))
	}
	sa := ca.do(t, syncRequest(0, group, ja.MemberID, 1, map[string]string{ja.MemberID: "all-of-it"})).(*kmsg.SyncGroupResponse)
	if sa.ErrorCode != 0 || string(sa.MemberAssignment) != "all-of-it" {
		t.Fatalf("sync v0: %v %q", kerr.ErrorForCode(sa.ErrorCode), sa.MemberAssignment)
	}
	wantCode(t, "heartbeat v0", heartbeat(t, ca, 0, group, ja.MemberID, "", 1), nil)

	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Version = 2
	commit.Group, commit.Generation, commit.MemberID = group, 1, ja.MemberID
	commit.RetentionTimeMillis = -1
	commit.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "old", Partitions: []kmsg.OffsetCommitRequestTopicPartition{
		{Partition: 0, Offset: 42, Metadata: kmsg.StringPtr("m0")}, {Partition: 1, Offset: 7},
	}}}
	cr := ca.do(t, commit).(*kmsg.OffsetCommitResponse)
	for _, p := range cr.Topics[0].Partitions {
		wantCode(t, "commit v2", p.ErrorCode, nil)
	}
	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Version = 1
	fetch.Group = group
	fetch.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "old", Partitions: []int32{0, 1, 5}}}
	fr := ca.do(t, fetch).(*kmsg.OffsetFetchResponse)
	got := map[int32]int64{}
	for _, p := range fr.Topics[0].Partitions {
		got[p.Partition] = p.Offset
	}
	if got[0] != 42 || got[1] != 7 || got[5] != -1 || *fr.Topics[0].Partitions[0].Metadata != "m0" {
		t.Fatalf("fetch v1: %v", got)
	}

	// A second member (JoinGroup v1) waits while the first is told to rejoin.
	jbCh := cb.start(joinRequest(group, joinOpts{version: 1, session: 10 * time.Second, rebalance: 5 * time.Second, topics: []string{"old"}}))
	waitState(t, ca, group, "PreparingRebalance", 2)
	wantCode(t, "heartbeat during rebalance", heartbeat(t, ca, 0, group, ja.MemberID, "", 1), kerr.RebalanceInProgress)
	ja2 := awaitJoin(t, ca.start(joinRequest(group, joinOpts{version: 0, member: ja.MemberID, session: 10 * time.Second, topics: []string{"old"}})))
	jb := awaitJoin(t, jbCh)
	if ja2.Generation != 2 || jb.Generation != 2 || ja2.LeaderID != ja.MemberID || len(ja2.Members) != 2 || len(jb.Members) != 0 {
		t.Fatalf("rejoin: generations %d/%d leader %q, members %d/%d", ja2.Generation, jb.Generation, ja2.LeaderID, len(ja2.Members), len(jb.Members))
	}
	// The follower's sync waits for the leader's.
	sbCh := cb.start(syncRequest(0, group, jb.MemberID, 2, nil))
	ca.do(t, syncRequest(0, group, ja.MemberID, 2, map[string]string{ja.MemberID: "p0", jb.MemberID: "p1"}))
	select {
	case r := <-sbCh:
		if r.err != nil || string(r.resp.(*kmsg.SyncGroupResponse).MemberAssignment) != "p1" {
			t.Fatalf("follower sync: %v %+v", r.err, r.resp)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("follower sync never answered")
	}
	cr = ca.do(t, commit).(*kmsg.OffsetCommitResponse)
	wantCode(t, "commit with a stale generation", cr.Topics[0].Partitions[0].ErrorCode, kerr.IllegalGeneration)

	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Version = 0
	leave.Group, leave.MemberID = group, jb.MemberID
	wantCode(t, "leave v0", cb.do(t, leave).(*kmsg.LeaveGroupResponse).ErrorCode, nil)
	wantCode(t, "leave v0 again", cb.do(t, leave).(*kmsg.LeaveGroupResponse).ErrorCode, kerr.UnknownMemberID)
	wantCode(t, "heartbeat after a leave", heartbeat(t, ca, 0, group, ja.MemberID, "", 2), kerr.RebalanceInProgress)
}

func TestGroupMemberIDRequired(t *testing.T) {
	tb := groupBroker(t)
	c := dialGroup(t, tb.Addr)
	o := joinOpts{version: 4, session: 10 * time.Second, rebalance: 5 * time.Second}
	first := c.do(t, joinRequest("kip394", o)).(*kmsg.JoinGroupResponse)
	wantCode(t, "first join v4", first.ErrorCode, kerr.MemberIDRequired)
	if first.MemberID == "" {
		t.Fatal("MEMBER_ID_REQUIRED without a member id")
	}
	o.member = first.MemberID
	second := awaitJoin(t, c.start(joinRequest("kip394", o)))
	wantCode(t, "second join", second.ErrorCode, nil)
	if second.MemberID != first.MemberID || second.Generation != 1 {
		t.Fatalf("second join: member %q generation %d", second.MemberID, second.Generation)
	}
	o.member = "made-up"
	wantCode(t, "join with an unknown member id", c.do(t, joinRequest("kip394", o)).(*kmsg.JoinGroupResponse).ErrorCode, kerr.UnknownMemberID)
	o.member, o.version, o.protocols = "", 3, []string{"roundrobin"}
	wantCode(t, "join with no common protocol", c.do(t, joinRequest("kip394", o)).(*kmsg.JoinGroupResponse).ErrorCode, kerr.InconsistentGroupProtocol)
}

// Session timeouts through the wire: out-of-range timeouts are refused,
// and a member that stops heartbeating leaves the group. (How long
// heartbeats keep it and exactly when it expires is pinned on a fake
// clock in engine/group: TestSessionTimeouts.)
func TestGroupSessionTimeouts(t *testing.T) {
	tb := groupBroker(t, func(c *engine.Config) { c.GroupMaxSessionTimeout = time.Minute })
	c := dialGroup(t, tb.Addr)
	const group = "sessions"
	for _, d := range []time.Duration{50 * time.Millisecond, 2 * time.Minute} {
		resp := c.do(t, joinRequest(group, joinOpts{version: 5, session: d, rebalance: time.Second})).(*kmsg.JoinGroupResponse)
		wantCode(t, fmt.Sprintf("session %v", d), resp.ErrorCode, kerr.InvalidSessionTimeout)
	}
	j := awaitJoin(t, c.start(joinRequest(group, joinOpts{version: 3, session: 300 * time.Millisecond, rebalance: time.Second})))
	c.do(t, syncRequest(2, group, j.MemberID, j.Generation, map[string]string{j.MemberID: "x"}))
	wantCode(t, "heartbeat", heartbeat(t, c, 3, group, j.MemberID, "", j.Generation), nil)
	waitState(t, c, group, "Empty", 0)
	wantCode(t, "heartbeat of an expired member", heartbeat(t, c, 3, group, j.MemberID, "", j.Generation), kerr.UnknownMemberID)
}

func TestGroupRebalanceTimeoutKicksLaggards(t *testing.T) {
	tb := groupBroker(t)
	const group = "laggards"
	ca, cb, cc := dialGroup(t, tb.Addr), dialGroup(t, tb.Addr), dialGroup(t, tb.Addr)
	o := joinOpts{version: 3, session: 10 * time.Second, rebalance: time.Second}
	ja := awaitJoin(t, ca.start(joinRequest(group, o)))
	ca.do(t, syncRequest(2, group, ja.MemberID, ja.Generation, nil))
	jbCh := cb.start(joinRequest(group, o))
	waitState(t, ca, group, "PreparingRebalance", 2)
	o.member = ja.MemberID
	jaCh := ca.start(joinRequest(group, o))
	jb, ja2 := awaitJoin(t, jbCh), awaitJoin(t, jaCh)
	sbCh := cb.start(syncRequest(2, group, jb.MemberID, jb.Generation, nil)) // waits for the leader's
	ca.do(t, syncRequest(2, group, ja2.MemberID, ja2.Generation, nil))
	if r := <-sbCh; r.err != nil || r.resp.(*kmsg.SyncGroupResponse).ErrorCode != 0 {
		t.Fatalf("follower sync: %v %+v", r.err, r.resp)
	}
	waitState(t, ca, group, "Stable", 2)

	// C joins; A rejoins; B (alive by session) never does and is dropped
	// when the rebalance timeout ends the join phase (that it is the
	// timeout, not sooner, is pinned in engine/group:
	// TestRebalanceTimeoutKicksLaggards).
	jcCh := cc.start(joinRequest(group, joinOpts{version: 3, session: 10 * time.Second, rebalance: time.Second}))
	waitState(t, ca, group, "PreparingRebalance", 3)
	ja3 := awaitJoin(t, ca.start(joinRequest(group, o)))
	jc := awaitJoin(t, jcCh)
	if ja3.Generation != jb.Generation+1 || jc.Generation != ja3.Generation || len(ja3.Members)+len(jc.Members) != 2 {
		t.Fatalf("after the timeout: generations %d/%d, members %d/%d", ja3.Generation, jc.Generation, len(ja3.Members), len(jc.Members))
	}
	wantCode(t, "heartbeat of the dropped member", heartbeat(t, cb, 3, group, jb.MemberID, "", jb.Generation), kerr.UnknownMemberID)

	// A member that never sends SyncGroup is dropped after the rebalance timeout too.
	ca.do(t, syncRequest(2, group, ja3.MemberID, ja3.Generation, nil))
	waitState(t, ca, group, "PreparingRebalance", 1)
}

// Members starting together land in one generation thanks to the initial
// rebalance delay. (Its length, and its extension by each new arrival, are
// pinned on a fake clock in engine/group: TestInitialRebalanceDelay.)
func TestGroupInitialRebalanceDelay(t *testing.T) {
	// The delay is long next to the time between the joins, so that a
	// loaded machine cannot make the second join miss it.
	const delay = 2 * time.Second
	tb := groupBroker(t, func(c *engine.Config) { c.GroupInitialRebalanceDelay = delay })
	const group = "delayed"
	ca, cb := dialGroup(t, tb.Addr), dialGroup(t, tb.Addr)
	o := joinOpts{version: 3, session: 20 * time.Second, rebalance: 15 * time.Second}
	jaCh := ca.start(joinRequest(group, o))
	waitState(t, cb, group, "PreparingRebalance", 1)
	jbCh := cb.start(joinRequest(group, o))
	ja, jb := awaitJoin(t, jaCh), awaitJoin(t, jbCh)
	if ja.Generation != 1 || jb.Generation != 1 || len(ja.Members)+len(jb.Members) != 2 {
		t.Fatalf("both members should land in generation 1: %d/%d, members %d/%d", ja.Generation, jb.Generation, len(ja.Members), len(jb.Members))
	}
}

func TestGroupStaticFencing(t *testing.T) {
	tb := groupBroker(t)
	const group = "fencing"
	c1, c2 := dialGroup(t, tb.Addr), dialGroup(t, tb.Addr)
	o := joinOpts{version: 5, instance: "s", session: 10 * time.Second, rebalance: 5 * time.Second}
	j1 := awaitJoin(t, c1.start(joinRequest(group, o)))
	wantCode(t, "static join", j1.ErrorCode, nil) // static members skip MEMBER_ID_REQUIRED
	s1 := syncRequest(3, group, j1.MemberID, j1.Generation, map[string]string{j1.MemberID: "mine"})
	s1.InstanceID = kmsg.StringPtr("s")
	c1.do(t, s1)

	// The same instance restarts: it replaces the old member id at once.
	j2 := c2.do(t, joinRequest(group, o)).(*kmsg.JoinGroupResponse)
	wantCode(t, "static rejoin", j2.ErrorCode, nil)
	if j2.MemberID == j1.MemberID || j2.Generation != j1.Generation || j2.LeaderID == j2.MemberID {
		t.Fatalf("static rejoin: member %q (old %q), generation %d (old %d), leader %q", j2.MemberID, j1.MemberID, j2.Generation, j1.Generation, j2.LeaderID)
	}
	wantCode(t, "old incarnation heartbeat", heartbeat(t, c1, 3, group, j1.MemberID, "s", j1.Generation), kerr.FencedInstanceID)
	wantCode(t, "new incarnation heartbeat", heartbeat(t, c2, 3, group, j2.MemberID, "s", j2.Generation), nil)
	s2 := syncRequest(3, group, j2.MemberID, j2.Generation, nil)
	s2.InstanceID = kmsg.StringPtr("s")
	if a := c2.do(t, s2).(*kmsg.SyncGroupResponse); string(a.MemberAssignment) != "mine" {
		t.Fatalf("the new incarnation should keep the assignment, got %q", a.MemberAssignment)
	}
	// v3+ leave by instance id alone (what admin tools do).
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Version = 3
	leave.Group = group
	leave.Members = []kmsg.LeaveGroupRequestMember{{InstanceID: kmsg.StringPtr("s")}, {MemberID: "nobody"}}
	lr := c2.do(t, leave).(*kmsg.LeaveGroupResponse)
	wantCode(t, "leave by instance", lr.Members[0].ErrorCode, nil)
	wantCode(t, "leave of an unknown member", lr.Members[1].ErrorCode, kerr.UnknownMemberID)
	waitState(t, c2, group, "Empty", 0)
}

func TestGroupFindCoordinator(t *testing.T) {
	tb := groupBroker(t)
	c := dialGroup(t, tb.Addr)
	for v := int16(0); v <= 3; v++ {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.Version = v
		req.CoordinatorKey = "some-group"
		resp := c.do(t, req).(*kmsg.FindCoordinatorResponse)
		if resp.ErrorCode != 0 || resp.NodeID != tb.Broker.Config().NodeID || net.JoinHostPort(resp.Host, fmt.Sprint(resp.Port)) != tb.Addr {
			t.Fatalf("v%d: %+v", v, resp)
		}
	}
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.Version = 3
	req.CoordinatorType = 1
	req.CoordinatorKey = "txn"
	if resp := c.do(t, req).(*kmsg.FindCoordinatorResponse); resp.ErrorCode != 0 || resp.NodeID != tb.Broker.Config().NodeID {
		t.Fatalf("transaction coordinator: %+v", resp)
	}
	req = kmsg.NewPtrFindCoordinatorRequest()
	req.Version = 6
	req.CoordinatorKeys = []string{"a", "b"}
	resp := c.do(t, req).(*kmsg.FindCoordinatorResponse)
	if len(resp.Coordinators) != 2 || resp.Coordinators[1].Key != "b" || resp.Coordinators[1].NodeID != tb.Broker.Config().NodeID {
		t.Fatalf("batched: %+v", resp.Coordinators)
	}
}

func TestGroupAdmin(t *testing.T) {
	tb := groupBroker(t)
	const topic = "admin-topic"
	groupTopic(t, tb, topic, 3)
	adm := tb.Admin(t)
	ctx := groupCtx(t)

	// A standalone (simple) group: offsets only.
	var os kadm.Offsets
	for p := int32(0); p < 3; p++ {
		os.Add(kadm.Offset{Topic: topic, Partition: p, At: int64(10 * (p + 1)), LeaderEpoch: -1, Metadata: fmt.Sprint("meta", p)})
	}
	if err := adm.CommitAllOffsets(ctx, "simple", os); err != nil {
		t.Fatal(err)
	}
	fetched, err := adm.FetchOffsets(ctx, "simple")
	if err != nil || fetched.Error() != nil {
		t.Fatal(err, fetched.Error())
	}
	if o, _ := fetched.Lookup(topic, 2); o.At != 30 || o.Metadata != "meta2" {
		t.Fatalf("fetched %+v", o)
	}

	// A live consumer group.
	live := newTrackedConsumer(t, tb, "live", topic)
	waitGroup(t, adm, "live", "one member", func(d kadm.DescribedGroup) bool { return balanced(d, topic, 1, 3) })

	listed, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s := listed["simple"]; s.State != "Empty" || s.ProtocolType != "" || s.GroupType != "classic" {
		t.Fatalf("listed simple: %+v", s)
	}
	if l := listed["live"]; l.State != "Stable" || l.ProtocolType != "consumer" {
		t.Fatalf("listed live: %+v", l)
	}
	if stable, _ := adm.ListGroups(ctx, "stable"); len(stable) != 1 || stable["live"].Group != "live" {
		t.Fatalf("state filter: %v", stable.Groups())
	}
	described, err := adm.DescribeGroups(ctx, "simple", "live", "missing")
	if err != nil {
		t.Fatal(err)
	}
	if d := described["missing"]; d.State != "Dead" || len(d.Members) != 0 {
		t.Fatalf("missing group: %+v", d)
	}
	if d := described["live"]; len(d.Members) != 1 || d.Members[0].ClientHost != "/127.0.0.1" {
		t.Fatalf("live group: %+v", d)
	}

	// Offsets of a group with members: only the members commit, and
	// subscribed topics cannot lose their offsets.
	if resps, _ := adm.CommitOffsets(ctx, "live", os); !errors.Is(resps.Error(), kerr.UnknownMemberID) {
		t.Fatalf("admin commit to an active group: %v", resps.Error())
	}
	del, err := adm.DeleteOffsets(ctx, "live", kadm.TopicsSet{topic: {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	if err, _ := del.Lookup(topic, 0); !errors.Is(err, kerr.GroupSubscribedToTopic) {
		t.Fatalf("delete subscribed offset: %v", err)
	}
	if _, err := adm.DeleteGroup(ctx, "live"); !errors.Is(err, kerr.NonEmptyGroup) {
		t.Fatalf("delete active group: %v", err)
	}
	live.close()
	waitGroup(t, adm, "live", "empty", func(d kadm.DescribedGroup) bool { return d.State == "Empty" })

	// Offset and group deletion.
	del, err = adm.DeleteOffsets(ctx, "simple", kadm.TopicsSet{topic: {0: {}}})
	if err != nil || del.Error() != nil {
		t.Fatal(err, del.Error())
	}
	fetched, _ = adm.FetchOffsets(ctx, "simple")
	if _, ok := fetched.Lookup(topic, 0); ok {
		t.Fatal("deleted offset still fetched")
	}
	if _, ok := fetched.Lookup(topic, 1); !ok {
		t.Fatal("offset deleted along with another")
	}
	for _, g := range []string{"simple", "live"} {
		if r, err := adm.DeleteGroup(ctx, g); err != nil || r.Err != nil {
			t.Fatalf("delete %s: %v %v", g, err, r.Err)
		}
	}
	if _, err := adm.DeleteGroup(ctx, "simple"); !errors.Is(err, kerr.GroupIDNotFound) {
		t.Fatalf("delete a deleted group: %v", err)
	}
	if listed, _ := adm.ListGroups(ctx); len(listed) != 0 {
		t.Fatalf("groups left after deletion: %v", listed.Groups())
	}
	if fetched, _ := adm.FetchOffsets(ctx, "simple"); len(fetched) != 0 {
		t.Fatalf("offsets of a deleted group: %v", fetched)
	}
}

// A shutdown answers JoinGroups parked in a rebalance instead of waiting
// out the rebalance timeout while draining in-flight requests. (The
// unload itself is pinned in engine/group: TestUnloadAnswersParkedJoin.)
func TestGroupShutdownReleasesParkedJoin(t *testing.T) {
	tb := groupBroker(t)
	const group = "parked"
	ca, cb := dialGroup(t, tb.Addr), dialGroup(t, tb.Addr)
	o := joinOpts{version: 3, session: 30 * time.Second, rebalance: 30 * time.Second}
	ja := awaitJoin(t, ca.start(joinRequest(group, o)))
	ca.do(t, syncRequest(2, group, ja.MemberID, ja.Generation, nil))
	jbCh := cb.start(joinRequest(group, o)) // waits for A to rejoin, up to 30s
	waitState(t, ca, group, "PreparingRebalance", 2)
	tb.Stop(t)
	select {
	case r := <-jbCh:
		if r.err == nil && r.resp.(*kmsg.JoinGroupResponse).ErrorCode != kerr.NotCoordinator.Code {
			t.Fatalf("parked join answered %v", kerr.ErrorForCode(r.resp.(*kmsg.JoinGroupResponse).ErrorCode))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("parked join neither answered nor closed")
	}
}
