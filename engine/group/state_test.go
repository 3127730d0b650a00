package group

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Heartbeats keep a member in past its session timeout, and their absence
// expires it exactly one session after the last.
func TestSessionTimeouts(t *testing.T) {
	h := newHarness(t)
	const group = "sessions"
	for _, d := range []time.Duration{50 * time.Millisecond, 2 * time.Minute} {
		j := h.join(group, joinOpts{session: d, rebalance: time.Second})
		if j.res == nil || j.res.ErrorCode != kerr.InvalidSessionTimeout.Code {
			t.Fatalf("session %v: %+v", d, j.res)
		}
	}
	const session = 300 * time.Millisecond
	m := h.stable(group, joinOpts{session: session, rebalance: time.Second})
	for i := 0; i < 6; i++ {
		wantCode(t, "heartbeat", h.c.Heartbeat(group, m.MemberID, "", m.Generation), nil)
		h.clock.Advance(100 * time.Millisecond)
	}
	h.wantState(group, "Stable", 1)
	h.clock.Advance(session - 100*time.Millisecond - time.Millisecond)
	h.wantState(group, "Stable", 1)
	h.clock.Advance(time.Millisecond)
	h.wantState(group, "Empty", 0)
	wantCode(t, "heartbeat of an expired member", h.c.Heartbeat(group, m.MemberID, "", m.Generation), kerr.UnknownMemberID)
}

// A member parked in a join phase heartbeats implicitly: the rebalance
// timeout, not its session, bounds its wait.
func TestParkedJoinOutlivesSession(t *testing.T) {
	h := newHarness(t)
	const group = "parked-session"
	long := joinOpts{session: 10 * time.Second, rebalance: time.Second}
	ms := h.stableN(group, long, long)
	c := h.join(group, long) // opens a join phase
	// The member rejoins with a session much shorter than the phase.
	a := h.join(group, joinOpts{member: ms[0].MemberID, session: 200 * time.Millisecond, rebalance: time.Second})
	h.clock.Advance(time.Second - time.Millisecond)
	h.waiting(a, "rejoined member past its session")
	h.clock.Advance(time.Millisecond)
	ra, rc := h.joined(a, "rejoined member"), h.joined(c, "new member")
	if len(ra.Members)+len(rc.Members) != 2 || ra.Generation != ms[0].Generation+1 {
		t.Fatalf("after the join phase: %+v %+v", ra, rc)
	}
	wantCode(t, "member that did not rejoin", h.c.Heartbeat(group, ms[1].MemberID, "", ms[1].Generation), kerr.UnknownMemberID)
}

func TestRebalanceTimeoutKicksLaggards(t *testing.T) {
	h := newHarness(t)
	const group = "laggards"
	o := joinOpts{session: 10 * time.Second, rebalance: time.Second}
	a := h.stable(group, o)
	jb := h.join(group, o)
	h.wantState(group, "PreparingRebalance", 2)
	oa := o
	oa.member = a.MemberID
	ja := h.join(group, oa)
	b, a2 := h.joined(jb, "B"), h.joined(ja, "A rejoin")
	if a2.Generation != a.Generation+1 || b.Generation != a2.Generation || a2.Leader != a.MemberID {
		t.Fatalf("generation %d/%d after %d, leader %q", a2.Generation, b.Generation, a.Generation, a2.Leader)
	}
	sb := h.sync(group, b, nil) // waits for the leader's
	if sb.res != nil {
		t.Fatalf("follower sync answered before the leader's: %+v", *sb.res)
	}
	h.synced(h.sync(group, a2, map[string]string{b.MemberID: "b-share"}), "leader sync")
	if got := h.synced(sb, "follower sync"); string(got.Assignment) != "b-share" {
		t.Fatalf("follower assignment %q", got.Assignment)
	}
	h.wantState(group, "Stable", 2)

	// C joins; A rejoins; B (alive by session) never does and is dropped
	// when the rebalance timeout ends the join phase, not a moment before.
	jc := h.join(group, o)
	h.wantState(group, "PreparingRebalance", 3)
	ja3 := h.join(group, oa)
	h.clock.Advance(time.Second - time.Millisecond)
	h.waiting(ja3, "A in the join phase")
	h.waiting(jc, "C in the join phase")
	h.clock.Advance(time.Millisecond)
	a3, c := h.joined(ja3, "A"), h.joined(jc, "C")
	if a3.Generation != b.Generation+1 || c.Generation != a3.Generation || len(a3.Members)+len(c.Members) != 2 {
		t.Fatalf("after the timeout: generations %d/%d, members %d/%d", a3.Generation, c.Generation, len(a3.Members), len(c.Members))
	}
	wantCode(t, "heartbeat of the dropped member", h.c.Heartbeat(group, b.MemberID, "", b.Generation), kerr.UnknownMemberID)

	// A member that never sends SyncGroup is dropped after the rebalance
	// timeout too.
	h.synced(h.sync(group, a3, nil), "A sync")
	h.clock.Advance(time.Second - time.Millisecond)
	h.wantState(group, "Stable", 2)
	h.clock.Advance(time.Millisecond)
	h.wantState(group, "PreparingRebalance", 1)
}

// An Empty group's first join phase lasts the initial rebalance delay, and
// a member arriving during it extends the phase by another delay.
func TestInitialRebalanceDelay(t *testing.T) {
	const delay = 1500 * time.Millisecond
	h := newHarness(t, func(c *Config) { c.InitialRebalanceDelay = delay })
	o := joinOpts{session: 20 * time.Second, rebalance: 15 * time.Second}

	alone := h.join("alone", o)
	h.clock.Advance(delay - time.Millisecond)
	h.waiting(alone, "alone before the delay")
	h.clock.Advance(time.Millisecond)
	if r := h.joined(alone, "alone"); r.Generation != 1 || len(r.Members) != 1 {
		t.Fatalf("alone: %+v", r)
	}

	ja := h.join("delayed", o)
	h.clock.Advance(200 * time.Millisecond)
	jb := h.join("delayed", o)
	h.clock.Advance(delay - 200*time.Millisecond)
	h.waiting(ja, "A when the first delay ends") // B arrived: one more delay
	h.clock.Advance(delay - time.Millisecond)
	h.waiting(ja, "A before the second delay ends")
	h.clock.Advance(time.Millisecond)
	a, b := h.joined(ja, "A"), h.joined(jb, "B")
	if a.Generation != 1 || b.Generation != 1 || len(a.Members)+len(b.Members) != 2 {
		t.Fatalf("both members should land in generation 1: %d/%d, members %d/%d", a.Generation, b.Generation, len(a.Members), len(b.Members))
	}
}

// The initial delay never outlasts the rebalance timeout, however many
// members keep arriving.
func TestInitialRebalanceDelayBoundedByRebalanceTimeout(t *testing.T) {
	const delay = time.Second
	h := newHarness(t, func(c *Config) { c.InitialRebalanceDelay = delay })
	o := joinOpts{session: 20 * time.Second, rebalance: 3 * time.Second}
	first := h.join("busy", o)
	for i := 0; i < 10; i++ {
		h.clock.Advance(500 * time.Millisecond)
		if first.res != nil {
			break
		}
		h.join("busy", o)
	}
	// delay, then up to rebalance-delay more, in steps of delay.
	if r := h.joined(first, "first"); r.Generation != 1 {
		t.Fatalf("first: %+v", r)
	}
	if elapsed := h.clock.Now().Sub(epoch); elapsed > 3*time.Second {
		t.Fatalf("initial join phase lasted %v with a 3s rebalance timeout", elapsed)
	}
}

// A static member that stops heartbeating expires like any other, and its
// instance id is free again.
func TestStaticMemberExpiry(t *testing.T) {
	h := newHarness(t)
	const group = "static-expiry"
	o := joinOpts{instance: "s", session: 500 * time.Millisecond, rebalance: time.Second}
	m := h.stable(group, o)
	wantCode(t, "heartbeat", h.c.Heartbeat(group, m.MemberID, "s", m.Generation), nil)
	h.clock.Advance(500*time.Millisecond - time.Millisecond)
	h.wantState(group, "Stable", 1)
	h.clock.Advance(time.Millisecond)
	h.wantState(group, "Empty", 0)
	wantCode(t, "heartbeat of the expired instance", h.c.Heartbeat(group, m.MemberID, "s", m.Generation), kerr.UnknownMemberID)
	again := h.join(group, o)
	h.clock.Advance(0)
	if r := h.joined(again, "instance rejoins"); r.MemberID == m.MemberID || r.Generation != m.Generation+2 {
		t.Fatalf("rejoin: %+v (expired member %q, generation %d)", r, m.MemberID, m.Generation)
	}
}

// A static member's restart replaces its old member id at once, with no
// rebalance; the old incarnation is fenced.
func TestStaticMemberReplaced(t *testing.T) {
	h := newHarness(t)
	const group = "fencing"
	o := joinOpts{instance: "s", requireMemberID: true}
	j1 := h.join(group, o)
	h.clock.Advance(0)
	m1 := h.joined(j1, "static join") // static members skip MEMBER_ID_REQUIRED
	h.synced(h.sync(group, m1, map[string]string{m1.MemberID: "mine"}), "sync")
	j2 := h.join(group, o)
	m2 := h.joined(j2, "static rejoin")
	if m2.MemberID == m1.MemberID || m2.Generation != m1.Generation || m2.Leader == m2.MemberID {
		t.Fatalf("static rejoin: %+v after %+v", m2, m1)
	}
	wantCode(t, "old incarnation", h.c.Heartbeat(group, m1.MemberID, "s", m1.Generation), kerr.FencedInstanceID)
	wantCode(t, "new incarnation", h.c.Heartbeat(group, m2.MemberID, "s", m2.Generation), nil)
	if a := h.synced(h.sync(group, m2, nil), "sync"); string(a.Assignment) != "mine" {
		t.Fatalf("assignment %q", a.Assignment)
	}
	codes := h.c.Leave(group, []Leaving{{InstanceID: "s"}, {MemberID: "nobody"}})
	wantCode(t, "leave by instance", codes[0], nil)
	wantCode(t, "leave of an unknown member", codes[1], kerr.UnknownMemberID)
	h.wantState(group, "Empty", 0)
}

// A member id handed out with MEMBER_ID_REQUIRED is forgotten if the
// member does not join with it within its session.
func TestPendingMemberIDExpires(t *testing.T) {
	h := newHarness(t)
	const group = "kip394"
	o := joinOpts{requireMemberID: true, session: time.Second}
	first := h.join(group, o)
	if first.res == nil || first.res.ErrorCode != kerr.MemberIDRequired.Code || first.res.MemberID == "" {
		t.Fatalf("first join: %+v", first.res)
	}
	o.member = first.res.MemberID
	h.clock.Advance(time.Second)
	late := h.join(group, o)
	if late.res == nil || late.res.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("join after the pending id expired: %+v", late.res)
	}

	first = h.join(group, joinOpts{requireMemberID: true, session: time.Second})
	o.member = first.res.MemberID
	h.clock.Advance(time.Second - time.Millisecond)
	second := h.join(group, o)
	h.clock.Advance(0)
	if r := h.joined(second, "second join in time"); r.MemberID != o.member {
		t.Fatalf("second join: %+v", r)
	}
}

// A superseded JoinGroup (the member retried on another connection) is
// told to rejoin; every completion runs exactly once.
func TestSupersededJoin(t *testing.T) {
	h := newHarness(t)
	const group = "retry"
	ms := h.stableN(group, joinOpts{}, joinOpts{})
	o := joinOpts{member: ms[0].MemberID}
	first := h.join(group, o) // opens a join phase; the other member must rejoin
	second := h.join(group, o)
	if first.res == nil || first.res.ErrorCode != kerr.RebalanceInProgress.Code {
		t.Fatalf("superseded join: %+v", first.res)
	}
	h.waiting(second, "retry")
	other := h.join(group, joinOpts{member: ms[1].MemberID})
	_, _ = h.joined(second, "retry"), h.joined(other, "other")
	if first.runs != 1 {
		t.Fatalf("superseded join answered %d times", first.runs)
	}
}

func TestJoinErrors(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxSize = 1 })
	for _, c := range []struct {
		group string
		o     joinOpts
		want  *kerr.Error
	}{
		{"", joinOpts{}, kerr.InvalidGroupID},
		{"g", joinOpts{member: "made-up"}, kerr.UnknownMemberID},
	} {
		j := h.join(c.group, c.o)
		if j.res == nil {
			t.Fatalf("%+v: not answered", c)
		}
		wantCode(t, fmt.Sprintf("join %q", c.group), j.res.ErrorCode, c.want)
	}
	h.stable("full", joinOpts{})
	j := h.join("full", joinOpts{})
	wantCode(t, "join a full group", j.res.ErrorCode, kerr.GroupMaxSizeReached)
	j = h.join("full", joinOpts{protocols: []string{"roundrobin"}})
	wantCode(t, "join with no common protocol", j.res.ErrorCode, kerr.InconsistentGroupProtocol)
}

// The fake clock runs timers in deadline order, each seeing its own
// deadline as now, including timers armed by another timer's callback.
func TestFakeClock(t *testing.T) {
	c := NewFakeClock(epoch)
	var fired []time.Duration
	at := func(d time.Duration) func() { return func() { fired = append(fired, c.Now().Sub(epoch)) } }
	c.AfterFunc(3*time.Second, at(3*time.Second))
	stopped := c.AfterFunc(time.Second, at(time.Second))
	c.AfterFunc(2*time.Second, func() {
		fired = append(fired, c.Now().Sub(epoch))
		c.AfterFunc(500*time.Millisecond, at(0))
	})
	if !stopped.Stop() || stopped.Stop() {
		t.Fatal("Stop should report true once")
	}
	c.Advance(5 * time.Second)
	want := []time.Duration{2 * time.Second, 2500 * time.Millisecond, 3 * time.Second}
	if fmt.Sprint(fired) != fmt.Sprint(want) || c.Now().Sub(epoch) != 5*time.Second || c.Pending() != 0 {
		t.Fatalf("fired at %v, want %v; now %v", fired, want, c.Now().Sub(epoch))
	}
}
