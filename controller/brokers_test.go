package controller

import (
	"math"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestRegister(t *testing.T) {
	h := newHarness(t)
	for _, tc := range []struct {
		name string
		req  Registration
		err  *kerr.Error
	}{
		{"other cluster", Registration{BrokerID: 1, ClusterID: "other"}, kerr.InconsistentClusterID},
		{"no cluster", Registration{BrokerID: 1}, kerr.InconsistentClusterID},
		{"negative id", Registration{BrokerID: -1, ClusterID: cluster}, kerr.InvalidRequest},
		{"negative offset", Registration{BrokerID: 1, ClusterID: cluster, NextOffset: -1}, kerr.InvalidRequest},
	} {
		if res := h.c.Register(h.img, tc.req, 0); res.Err != tc.err || res.Records != nil {
			t.Errorf("%s: %v %v, want %v", tc.name, res.Err, res.Records, tc.err)
		}
	}

	// A new registration's epoch is the offset of its record; it is fenced.
	res := h.register(1, 1, rack("a"))
	if res.Err != nil || res.BrokerEpoch != 1 || h.epoch(1) != 1 {
		t.Fatalf("register: %+v, epoch %d", res, h.epoch(1))
	}
	h.wantBroker(1, true, false)
	if br, _ := h.img.Broker(1); *br.Rack != "a" || br.Endpoints[0].Port != 9091 || br.IncarnationID != [16]byte{1, 1} {
		t.Errorf("registration %+v", br)
	}

	// The cluster id of the image wins over the config.
	h.c.cfg.ClusterID = "stale"
	if res := h.c.Register(h.img, Registration{BrokerID: 2, ClusterID: cluster, NextOffset: h.next}, 0); res.Err != nil {
		t.Errorf("image's cluster id: %v", res.Err)
	}
}

// A registration of a registered id (a restarted process) replaces the
// old one: a new, higher epoch, fenced, and the old one's leaderships and
// ISR memberships are handed over in the same batch.
func TestReregistrationReplaces(t *testing.T) {
	h := newHarness(t)
	h.brokers(3)
	h.topic("t", ints(1, 2, 3), ints(2, 3, 1))
	old := h.epoch(1)
	res := h.register(1, 2, nil)
	if res.BrokerEpoch <= old || h.epoch(1) != res.BrokerEpoch || res.BrokerEpoch != h.next-1 {
		t.Fatalf("epoch %d after %d (log end %d)", res.BrokerEpoch, old, h.next)
	}
	h.wantBroker(1, true, false)
	h.wantState("t", 0, "leader 2 isr [2 3] epochs 1/1")
	h.wantState("t", 1, "leader 2 isr [2 3] epochs 0/1")
	// Its old epoch is stale now.
	if res := h.c.Heartbeat(h.img, Heartbeat{BrokerID: 1, BrokerEpoch: old}, h.now); res.Err != kerr.StaleBrokerEpoch {
		t.Errorf("old epoch's heartbeat: %v", res.Err)
	}
	// An epoch is always above the one it replaces, whatever offset the
	// caller passes.
	low := h.c.Register(h.img, Registration{BrokerID: 2, ClusterID: cluster, NextOffset: 0}, h.now)
	if low.BrokerEpoch != h.epoch(2)+1 {
		t.Errorf("epoch %d replacing %d", low.BrokerEpoch, h.epoch(2))
	}
	// Registering again with the same incarnation (a retry) also gets a
	// new epoch: the response to the first may have been lost.
	again := h.register(1, 2, nil)
	if again.BrokerEpoch <= res.BrokerEpoch {
		t.Errorf("retry epoch %d after %d", again.BrokerEpoch, res.BrokerEpoch)
	}
}

func TestHeartbeat(t *testing.T) {
	for _, tc := range []struct {
		name     string
		fenced   bool // broker 1's state before the heartbeat
		shutdown bool
		req      func(*Heartbeat)
		err      *kerr.Error
		want     HeartbeatResult // IsCaughtUp, IsFenced, ShouldShutDown
	}{
		{"unknown broker", false, false, func(r *Heartbeat) { r.BrokerID = 9 }, kerr.BrokerIDNotRegistered, HeartbeatResult{}},
		{"stale epoch", false, false, func(r *Heartbeat) { r.BrokerEpoch-- }, kerr.StaleBrokerEpoch, HeartbeatResult{}},
		{"fenced, not caught up, stays fenced", true, false, func(r *Heartbeat) { r.CurrentMetadataOffset = r.BrokerEpoch - 1 }, nil,
			HeartbeatResult{IsFenced: true}},
		{"fenced, caught up, unfenced", true, false, nil, nil, HeartbeatResult{IsCaughtUp: true}},
		{"fenced, caught up exactly with its registration", true, false, func(r *Heartbeat) { r.CurrentMetadataOffset = r.BrokerEpoch }, nil,
			HeartbeatResult{IsCaughtUp: true}},
		{"fenced, wants to stay fenced", true, false, func(r *Heartbeat) { r.WantFence = true }, nil,
			HeartbeatResult{IsCaughtUp: true, IsFenced: true}},
		{"fenced, wants to shut down: at once", true, false, func(r *Heartbeat) { r.WantShutDown = true }, nil,
			HeartbeatResult{IsCaughtUp: true, IsFenced: true, ShouldShutDown: true}},
		{"unfenced stays unfenced", false, false, nil, nil, HeartbeatResult{IsCaughtUp: true}},
		{"unfenced, wants fence", false, false, func(r *Heartbeat) { r.WantFence = true }, nil,
			HeartbeatResult{IsCaughtUp: true, IsFenced: true}},
		{"unfenced, wants to shut down", false, false, func(r *Heartbeat) { r.WantShutDown = true }, nil,
			HeartbeatResult{IsCaughtUp: true, ShouldShutDown: true}},
		{"shutting down, heartbeats on", false, true, func(r *Heartbeat) { r.WantShutDown = true }, nil,
			HeartbeatResult{IsCaughtUp: true, ShouldShutDown: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.register(1, 1, nil)
			if !tc.fenced {
				h.heartbeat(1, nil)
			}
			if tc.shutdown {
				h.heartbeat(1, func(r *Heartbeat) { r.WantShutDown = true })
			}
			got := h.heartbeat(1, tc.req)
			if got.Err != tc.err {
				t.Fatalf("err %v, want %v", got.Err, tc.err)
			}
			if tc.err != nil {
				if got.Records != nil {
					t.Errorf("refused heartbeat proposes %v", got.Records)
				}
				return
			}
			if got.IsCaughtUp != tc.want.IsCaughtUp || got.IsFenced != tc.want.IsFenced || got.ShouldShutDown != tc.want.ShouldShutDown {
				t.Errorf("caught up %v fenced %v shut down %v, want %v %v %v", got.IsCaughtUp, got.IsFenced, got.ShouldShutDown,
					tc.want.IsCaughtUp, tc.want.IsFenced, tc.want.ShouldShutDown)
			}
			if br, _ := h.img.Broker(1); br.Fenced != got.IsFenced {
				t.Errorf("image says fenced %v, answer %v", br.Fenced, got.IsFenced)
			}
		})
	}
}

// A broker that stops heartbeating is fenced when its session times out,
// not before; heartbeats keep it alive indefinitely.
func TestSessionExpiry(t *testing.T) {
	h := newHarness(t)
	if next := h.c.NextTickMs(); next != math.MaxInt64 {
		t.Errorf("next tick %d with no brokers", next)
	}
	h.brokers(3)
	h.topic("t", ints(1, 2, 3))
	for range 10 {
		h.tick(2000)
		h.heartbeat(1, nil)
		h.heartbeat(2, nil)
		h.heartbeat(3, nil)
	}
	h.wantBroker(1, false, false)
	// Broker 1 goes silent; 2 and 3 go on.
	for range 4 {
		if res := h.tick(2000); len(res.Records) != 0 {
			t.Fatalf("fenced before the timeout: %v", res.Records)
		}
		h.heartbeat(2, nil)
		h.heartbeat(3, nil)
	}
	if next := h.c.NextTickMs(); next != h.now+1000 {
		t.Errorf("next tick at %d, want %d", next, h.now+1000)
	}
	h.tick(999)
	h.wantBroker(1, false, false)
	h.tick(1)
	h.wantBroker(1, true, false)
	h.wantState("t", 0, "leader 2 isr [2 3] epochs 1/1")
	// A fenced broker's heartbeat (the network healed) unfences it.
	h.heartbeat(1, nil)
	h.wantBroker(1, false, false)
}

// The fast path: a closed heartbeat connection fences after the grace,
// unless the broker heartbeats or registers again first.
func TestConnectionLost(t *testing.T) {
	grace := DefaultConfig("").ConnectionLostGraceMs
	for _, tc := range []struct {
		name   string
		then   func(h *harness)
		fenced bool
		leader int32
	}{
		{"fenced after the grace", func(h *harness) { h.tick(grace) }, true, 2},
		{"not before", func(h *harness) { h.tick(grace - 1) }, false, 1},
		{"a heartbeat within the grace keeps it", func(h *harness) { h.tick(grace - 1); h.heartbeat(1, nil); h.tick(1) }, false, 1},
		// A restarted process hands its leadership over at once; it is
		// unfenced, as a follower, once caught up.
		{"a registration within the grace replaces it", func(h *harness) {
			h.tick(grace - 1)
			h.register(1, 2, nil)
			h.tick(1)
			h.heartbeat(1, nil)
			h.tick(grace)
		}, false, 2},
		{"the close of an older registration's connection is ignored", func(h *harness) {
			h.register(1, 2, nil)
			h.heartbeat(1, nil)
			h.c.ConnectionLost(1, h.epoch(1)-100, h.now)
			h.tick(grace)
		}, false, 2},
		{"losing it twice keeps the first time", func(h *harness) {
			h.tick(grace - 1)
			h.c.ConnectionLost(1, h.epoch(1), h.now)
			h.tick(1)
		}, true, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.brokers(3)
			h.topic("t", ints(1, 2, 3))
			h.c.ConnectionLost(1, h.epoch(1), h.now)
			tc.then(h)
			if br, _ := h.img.Broker(1); br.Fenced != tc.fenced {
				t.Errorf("fenced %v, want %v", br.Fenced, tc.fenced)
			}
			if lead := h.part("t", 0).Leader; lead != tc.leader {
				t.Errorf("leader %d, want %d", lead, tc.leader)
			}
		})
	}
}

// A network hiccup is silence, not a close: it waits out the session.
func TestHiccupWaitsForTheSession(t *testing.T) {
	h := newHarness(t)
	h.brokers(2)
	h.topic("t", ints(1, 2))
	h.tick(8000)
	h.heartbeat(2, nil)
	h.wantBroker(1, false, false)
	h.heartbeat(1, nil) // back after 8 s: nothing moved
	h.tick(8999)
	h.heartbeat(2, nil)
	h.wantBroker(1, false, false)
	h.wantState("t", 0, "leader 1 isr [1 2] epochs 0/0")
}

// A newly active controller gives every broker a fresh session, so a
// failover never fences the brokers that heartbeated to the old one.
func TestFailoverStartsFreshSessions(t *testing.T) {
	h := newHarness(t)
	h.brokers(2)
	h.now += 60_000
	h.c = New(h.c.cfg)
	if res := h.tick(0); len(res.Records) != 0 {
		t.Fatalf("new controller fenced at once: %v", res.Records)
	}
	h.tick(h.c.cfg.SessionTimeoutMs)
	h.wantBroker(1, true, false)
}

func TestControlledShutdown(t *testing.T) {
	h := newHarness(t)
	h.brokers(3)
	h.topic("t", ints(1, 2, 3), ints(2, 1, 3), ints(1, 3, 2), ints(3, 2, 1))
	h.topic("one", ints(1))
	res := h.heartbeat(1, func(r *Heartbeat) { r.WantShutDown = true })
	if !res.ShouldShutDown || res.IsFenced {
		t.Errorf("answer %+v", res)
	}
	h.wantBroker(1, false, true)
	h.wantState("t", 0, "leader 2 isr [2 3] epochs 1/1")
	h.wantState("t", 1, "leader 2 isr [2 3] epochs 0/1")
	h.wantState("t", 2, "leader 3 isr [3 2] epochs 1/1")
	h.wantState("t", 3, "leader 3 isr [3 2] epochs 0/1")
	h.wantState("one", 0, "leader -1 isr [1] epochs 1/1") // its only replica: offline, waiting for it
	// Shutting down, it is neither elected nor let back into an ISR.
	if r := h.c.ElectLeaders(h.img, ElectPreferred, []TopicPartition{{"t", 0}}); r.Partitions[0].Err != kerr.PreferredLeaderNotAvailable {
		t.Errorf("preferred election of a shutting-down broker: %v", r.Partitions[0].Err)
	}
	p := h.part("t", 1)
	ap := h.c.AlterPartition(h.img, AlterPartition{BrokerID: 2, BrokerEpoch: h.epoch(2), Partitions: []AlterPartitionItem{
		{TopicID: h.img.Topic("t").ID, Partition: 1, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, NewISR: ints(2, 1, 3)}}})
	if ap.Partitions[0].Err != kerr.IneligibleReplica {
		t.Errorf("ISR expansion to a shutting-down broker: %v", ap.Partitions[0].Err)
	}
	// Heartbeating on proposes nothing more.
	if again := h.heartbeat(1, func(r *Heartbeat) { r.WantShutDown = true }); len(again.Records) != 0 || !again.ShouldShutDown {
		t.Errorf("second shutdown heartbeat: %+v", again)
	}
	// The broker restarts: a new registration leaves controlled shutdown.
	h.register(1, 2, nil)
	h.heartbeat(1, nil)
	h.wantBroker(1, false, false)
	h.wantState("one", 0, "leader 1 isr [1] epochs 2/2")
}

func TestUnregister(t *testing.T) {
	h := newHarness(t)
	h.brokers(3)
	h.topic("t", ints(1, 2, 3))
	h.topic("one", ints(1))
	if res := h.c.Unregister(h.img, 9); res.Err != kerr.BrokerIDNotRegistered {
		t.Errorf("unknown broker: %v", res.Err)
	}
	res := h.c.Unregister(h.img, 1)
	h.commit(res.Records...)
	if _, ok := h.img.Broker(1); ok || res.Err != nil {
		t.Fatalf("still registered (%v)", res.Err)
	}
	h.wantState("t", 0, "leader 2 isr [2 3] epochs 1/1")
	h.wantState("one", 0, "leader -1 isr [1] epochs 1/1")
	if _, ok := h.c.sessions[1]; ok {
		t.Errorf("session kept")
	}
	// It can register again later, at a higher epoch than ever.
	if r := h.register(1, 2, nil); r.Err != nil || r.BrokerEpoch != h.next-1 {
		t.Errorf("re-register: %+v", r)
	}
	if _, ok := h.img.Broker(1); !ok {
		t.Errorf("not registered")
	}
}

// Regression: a broker whose idle heartbeat connection was reset while
// it lives reconnects and heartbeats at once; the close of the old
// connection, whichever order it reaches the controller in, must not
// fence it after the grace.
func TestHeartbeatConnResetWithinGrace(t *testing.T) {
	grace := DefaultConfig("").ConnectionLostGraceMs
	const oldConn, newConn = 7, 8
	hb := func(conn uint64) func(h *harness) {
		return func(h *harness) { h.heartbeat(1, func(r *Heartbeat) { r.Conn = conn }) }
	}
	closed := func(conn uint64) func(h *harness) {
		return func(h *harness) { h.c.HeartbeatConnClosed(1, h.epoch(1), conn, h.now) }
	}
	wait := func(ms int64) func(h *harness) { return func(h *harness) { h.tick(ms) } }
	for _, tc := range []struct {
		name   string
		steps  []func(h *harness)
		fenced bool
	}{
		{"close, then a heartbeat on a new connection", []func(*harness){closed(oldConn), wait(5), hb(newConn), wait(grace), wait(grace)}, false},
		{"a heartbeat on a new connection, then the old close", []func(*harness){hb(newConn), wait(5), closed(oldConn), wait(grace), wait(grace)}, false},
		{"the close and no heartbeat", []func(*harness){closed(oldConn), wait(grace)}, true},
		{"the new connection's close still counts", []func(*harness){hb(newConn), closed(oldConn), wait(5), closed(newConn), wait(grace)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.brokers(2)
			h.topic("t", ints(1, 2))
			hb(oldConn)(h)
			h.tick(1500) // idle, mid-interval
			for _, s := range tc.steps {
				s(h)
			}
			if br, _ := h.img.Broker(1); br.Fenced != tc.fenced {
				t.Errorf("fenced %v, want %v", br.Fenced, tc.fenced)
			}
		})
	}
}
