package controller

import (
	"maps"
	"slices"
	"testing"
)

// Which voters count as gone: every raft connection they opened here was
// closed by their side, and none opened since.
func TestVoterConns(t *testing.T) {
	type step struct {
		op   string // "open", "fin" (closed by the peer), "local" (closed here)
		id   int32
		atMs int64
	}
	for _, tc := range []struct {
		name  string
		steps []step
		want  map[int32]int64
	}{
		{"a closed connection", []step{{"open", 1, 0}, {"fin", 1, 100}}, map[int32]int64{1: 100}},
		{"closed here is not a death", []step{{"open", 1, 0}, {"local", 1, 100}}, map[int32]int64{}},
		{"reopened: alive", []step{{"open", 1, 0}, {"fin", 1, 100}, {"open", 1, 150}}, map[int32]int64{}},
		{"one of two still open", []step{{"open", 1, 0}, {"open", 1, 10}, {"fin", 1, 100}}, map[int32]int64{}},
		{"both closed: the last close counts", []step{{"open", 1, 0}, {"open", 1, 10}, {"fin", 1, 100}, {"fin", 1, 120}}, map[int32]int64{1: 120}},
		{"only the voter whose connections closed", []step{{"open", 1, 0}, {"open", 2, 0}, {"fin", 2, 50}}, map[int32]int64{2: 50}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := newVoterConns()
			for _, s := range tc.steps {
				switch s.op {
				case "open":
					v.opened(s.id)
				case "fin":
					v.closed(s.id, true, s.atMs, 50)
				case "local":
					v.closed(s.id, false, s.atMs, 50)
				}
			}
			got := map[int32]int64{}
			for id, l := range v.losses() {
				got[id] = l.AtMs
			}
			if !maps.Equal(got, tc.want) {
				t.Errorf("lost %v, want %v", got, tc.want)
			}
		})
	}
}

// A newly active controller given the voters that died fences their
// brokers after the grace from the close, unless they are heard first;
// every other broker keeps a full session (KRaft's rule). Broker 1 died
// with the old controller and leads t-0; broker 2 is alive.
func TestVotersLostAfterFailover(t *testing.T) {
	cfg := DefaultConfig(cluster)
	grace, session := cfg.ConnectionLostGraceMs, cfg.SessionTimeoutMs
	for _, tc := range []struct {
		name string
		// lostAgoMs is how long before activation voter 1's connections
		// closed; -1: they did not.
		lostAgoMs int64
		then      func(h *harness)
		fenced    bool
		leader    int32
	}{
		{"fenced at the first tick past the grace", 800, func(h *harness) { h.tick(0) }, true, 2},
		{"not before the grace", 100, func(h *harness) { h.tick(grace - 101) }, false, 1},
		{"at the grace", 100, func(h *harness) { h.tick(grace - 100) }, true, 2},
		{"a heartbeat first keeps it", 100, func(h *harness) { h.heartbeat(1, nil); h.tick(session - 1) }, false, 1},
		// A restarted process registers again: its old leadership moves,
		// and it is unfenced as a follower.
		{"a registration first replaces it", 100, func(h *harness) {
			h.register(1, 2, nil)
			h.heartbeat(1, nil)
			h.tick(grace)
		}, false, 2},
		// A voter that only went silent (paused, cut off) is not lost: a
		// full session, as KRaft gives every broker after a failover.
		{"a silent voter keeps a full session", -1, func(h *harness) {
			h.tick(0)
			h.tick(session - 1)
		}, false, 1},
		{"and is fenced at its end", -1, func(h *harness) {
			h.tick(0)
			h.tick(session - 100)
			h.heartbeat(2, nil)
			h.tick(100)
		}, true, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.brokers(2)
			h.topic("t", ints(1, 2))
			h.now += 60_000 // the old controller heard them a minute ago
			h.c = New(h.c.cfg)
			lost := map[int32]VoterLoss{}
			if tc.lostAgoMs >= 0 {
				lost[1] = VoterLoss{AtMs: h.now - tc.lostAgoMs, LogEnd: h.next}
			}
			want := []int32{}
			if tc.lostAgoMs >= 0 {
				want = []int32{1}
			}
			if got := h.c.VotersLost(h.img, lost, h.now); !slices.Equal(append([]int32{}, got...), want) {
				t.Errorf("suspected %v, want %v", got, want)
			}
			tc.then(h)
			if br, _ := h.img.Broker(1); br.Fenced != tc.fenced {
				t.Errorf("fenced %v, want %v", br.Fenced, tc.fenced)
			}
			if lead := h.part("t", 0).Leader; lead != tc.leader {
				t.Errorf("leader %d, want %d", lead, tc.leader)
			}
			if br, _ := h.img.Broker(2); br.Fenced && tc.name != "and is fenced at its end" {
				t.Errorf("live broker 2 fenced")
			}
		})
	}
}

// Not suspected: a fenced broker, an unregistered one, a registration
// made after the loss (the process restarted and registered while another
// controller was active), a loss older than a session.
func TestVotersLostSkips(t *testing.T) {
	h := newHarness(t)
	h.brokers(3)
	h.heartbeat(2, func(r *Heartbeat) { r.WantFence = true })
	lossBefore := h.next
	h.register(3, 2, nil) // restarted after the loss
	h.heartbeat(3, nil)
	h.now += 60_000
	h.c = New(h.c.cfg)
	losses := map[int32]VoterLoss{
		1: {AtMs: h.now - h.c.cfg.SessionTimeoutMs - 1, LogEnd: h.next},
		2: {AtMs: h.now, LogEnd: h.next},
		3: {AtMs: h.now - 1000, LogEnd: lossBefore},
		7: {AtMs: h.now, LogEnd: h.next},
	}
	if got := h.c.VotersLost(h.img, losses, h.now); len(got) != 0 {
		t.Errorf("suspected %v", got)
	}
	h.tick(h.c.cfg.ConnectionLostGraceMs)
	h.wantBroker(1, false, false)
	h.wantBroker(3, false, false)
}

// Which nodes count as gone when both kinds of connection are watched: a
// node lost on one kind and holding none of the other (a broker-only node
// has only presence connections; a combined node has both).
func TestNodeConnsLosses(t *testing.T) {
	type step struct {
		kind string // "raft" or "presence"
		op   string // "open", "fin"
		id   int32
		atMs int64
	}
	for _, tc := range []struct {
		name  string
		steps []step
		want  map[int32]int64
	}{
		{"a broker-only node's presence closed", []step{{"presence", "open", 4, 0}, {"presence", "fin", 4, 100}}, map[int32]int64{4: 100}},
		{"presence reopened: alive", []step{{"presence", "open", 4, 0}, {"presence", "fin", 4, 100}, {"presence", "open", 4, 101}}, map[int32]int64{}},
		{"raft closed, presence still open: alive", []step{{"raft", "open", 1, 0}, {"presence", "open", 1, 0}, {"raft", "fin", 1, 100}}, map[int32]int64{}},
		{"presence closed, raft still open: alive", []step{{"raft", "open", 1, 0}, {"presence", "open", 1, 0}, {"presence", "fin", 1, 100}}, map[int32]int64{}},
		{"both closed: the later close", []step{{"raft", "open", 1, 0}, {"presence", "open", 1, 0}, {"raft", "fin", 1, 100}, {"presence", "fin", 1, 130}}, map[int32]int64{1: 130}},
		{"both closed, raft last", []step{{"raft", "open", 1, 0}, {"presence", "open", 1, 0}, {"presence", "fin", 1, 100}, {"raft", "fin", 1, 120}}, map[int32]int64{1: 120}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNodeConns()
			for _, s := range tc.steps {
				v := &n.raft
				if s.kind == "presence" {
					v = &n.presence
				}
				if s.op == "open" {
					v.opened(s.id)
				} else {
					v.closed(s.id, true, s.atMs, 50)
				}
			}
			got := map[int32]int64{}
			for id, l := range n.losses() {
				got[id] = l.AtMs
			}
			if !maps.Equal(got, tc.want) {
				t.Errorf("lost %v, want %v", got, tc.want)
			}
		})
	}
}

// A broker-only node (no raft connection) whose presence connections
// closed is suspected by a newly active controller exactly as a lost
// voter is: fenced at the grace from the close, unless it is heard from.
// One whose presence connection is open (paused, cut off) keeps a full
// session.
func TestPresenceLossAfterFailover(t *testing.T) {
	cfg := DefaultConfig(cluster)
	grace, session := cfg.ConnectionLostGraceMs, cfg.SessionTimeoutMs
	for _, tc := range []struct {
		name   string
		closed bool // broker 4's presence connection closed by its peer
		then   func(h *harness)
		fenced bool
	}{
		{"closed: fenced at the grace", true, func(h *harness) { h.tick(grace - 200) }, true},
		{"closed: not before", true, func(h *harness) { h.tick(grace - 201) }, false},
		{"closed, then a heartbeat", true, func(h *harness) { h.heartbeat(4, nil); h.tick(session - 1) }, false},
		{"open: a full session", false, func(h *harness) { h.tick(0); h.tick(session - 1) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.brokers(4)
			h.topic("t", ints(4, 1))
			h.now += 60_000
			h.c = New(h.c.cfg)
			n := newNodeConns()
			n.presence.opened(4)
			if tc.closed {
				n.presence.closed(4, true, h.now-200, h.next)
			}
			h.c.VotersLost(h.img, n.losses(), h.now)
			tc.then(h)
			if br, _ := h.img.Broker(4); br.Fenced != tc.fenced {
				t.Errorf("fenced %v, want %v", br.Fenced, tc.fenced)
			}
			want := int32(4)
			if tc.fenced {
				want = 1
			}
			if lead := h.part("t", 0).Leader; lead != want {
				t.Errorf("leader %d, want %d", lead, want)
			}
		})
	}
}
