package testcluster

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// TestControllerAndLeaderKilled: SIGKILL the node that is both the active
// controller and the leader of a partition, with Kafka's default
// broker.session.timeout.ms (9 s) and broker.heartbeat.interval.ms (2 s).
// No broker was heartbeating to the new controller when the node died, so
// no heartbeat connection's close tells it the node is gone; the killed
// voter's raft connections closing does (controller/voters.go). Before
// that, its partitions waited out a whole session (≈9.6 s). The time from the kill to the new leader in the
// image is logged, not asserted (STYLE.md: no timing assertions). The
// survivors, which switch controllers, keep every leadership they had.
func TestControllerAndLeaderKilled(t *testing.T) {
	c := Start(t, 3, Options{})
	adm := kadm.NewClient(c.Client())
	createTopic(t, adm, "both-killed", 3, 3)
	var active int32
	c.WaitFor(10*time.Second, "an active controller", func() bool { active = c.ActiveController(); return active > 0 })
	var leaders map[int32]int32
	c.WaitFor(10*time.Second, "leaders", func() bool {
		leaders, _ = topicLeaders(t, c, c.Node(active), "both-killed")
		return len(leaders) == 3 && leaders[0] >= 0 && leaders[1] >= 0 && leaders[2] >= 0
	})
	part := int32(-1)
	for p, l := range leaders {
		if l == active {
			part = p
		}
	}
	if part < 0 {
		t.Skipf("the active controller %d leads no partition: %v", active, leaders)
	}
	survivor := c.Node(active%3 + 1)
	start := time.Now()
	c.Node(active).Kill()
	var newLeader int32
	c.WaitFor(20*time.Second, "a new leader of the killed node's partition", func() bool {
		l, _ := topicLeaders(t, c, survivor, "both-killed")
		var ok bool
		newLeader, ok = l[part] // absent when the Metadata request failed
		return ok && newLeader >= 0 && newLeader != active
	})
	t.Logf("SIGKILL of node %d (active controller, leader of both-killed-%d) → leader %d in the image after %v (broker.session.timeout.ms 9000)",
		active, part, newLeader, time.Since(start).Round(time.Millisecond))
	time.Sleep(3 * time.Second) // past every first-contact deadline
	after, _ := topicLeaders(t, c, survivor, "both-killed")
	for p, l := range leaders {
		if l != active && after[p] != l {
			t.Errorf("both-killed-%d moved from live broker %d to %d across the controller failover", p, l, after[p])
		}
	}
	produceConsume(t, c, "both-killed", part)
}

// TestBrokerPausedBriefly: a broker that is not the active controller,
// SIGSTOPped for 1 s (below broker.session.timeout.ms, 9 s), keeps every
// leadership: silence without a closed connection is not a crash.
func TestBrokerPausedBriefly(t *testing.T) {
	c := Start(t, 3, Options{})
	adm := kadm.NewClient(c.Client())
	createTopic(t, adm, "paused-briefly", 3, 3)
	var active int32
	c.WaitFor(10*time.Second, "an active controller", func() bool { active = c.ActiveController(); return active > 0 })
	var leaders map[int32]int32
	c.WaitFor(10*time.Second, "leaders", func() bool {
		leaders, _ = topicLeaders(t, c, c.Node(active), "paused-briefly")
		return len(leaders) == 3 && leaders[0] >= 0 && leaders[1] >= 0 && leaders[2] >= 0
	})
	victim := active%3 + 1
	c.Node(victim).Pause()
	time.Sleep(time.Second)
	c.Node(victim).Resume()
	time.Sleep(4 * time.Second) // two heartbeat intervals and more
	after, _ := topicLeaders(t, c, c.Node(active), "paused-briefly")
	for p, l := range leaders {
		if after[p] != l {
			t.Errorf("paused-briefly-%d moved from %d to %d after a 1 s pause of broker %d", p, l, after[p], victim)
		}
	}
	if got := c.ActiveController(); got != active {
		t.Errorf("active controller moved from %d to %d", active, got)
	}
}

// TestControllerPausedBriefly: the active controller, SIGSTOPped for 3 s
// (below broker.session.timeout.ms, 9 s, and long enough for the quorum
// to elect another), closes no connection: the new controller gives its
// broker a full session, it resumes, finds the new controller and keeps
// every leadership — only a closed connection fences early.
func TestControllerPausedBriefly(t *testing.T) {
	c := Start(t, 3, Options{})
	adm := kadm.NewClient(c.Client())
	createTopic(t, adm, "controller-paused", 3, 3)
	var active int32
	c.WaitFor(10*time.Second, "an active controller", func() bool { active = c.ActiveController(); return active > 0 })
	survivor := c.Node(active%3 + 1)
	var leaders map[int32]int32
	c.WaitFor(10*time.Second, "leaders", func() bool {
		leaders, _ = topicLeaders(t, c, survivor, "controller-paused")
		return len(leaders) == 3 && leaders[0] >= 0 && leaders[1] >= 0 && leaders[2] >= 0
	})
	c.Node(active).Pause()
	var next int32
	c.WaitFor(10*time.Second, "a new active controller", func() bool { next = c.ActiveController(); return next > 0 && next != active })
	time.Sleep(3 * time.Second)
	c.Node(active).Resume()
	time.Sleep(4 * time.Second) // two heartbeat intervals and more
	after, _ := topicLeaders(t, c, survivor, "controller-paused")
	for p, l := range leaders {
		if after[p] != l {
			t.Errorf("controller-paused-%d moved from %d to %d after the active controller %d was paused (now %d)", p, l, after[p], active, next)
		}
	}
}
