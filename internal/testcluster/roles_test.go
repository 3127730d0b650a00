package testcluster

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// dedicated is a cluster of three controller-only nodes (1-3) and two
// broker-only nodes (4, 5) that find the quorum through
// controller.quorum.voters.
var dedicated = []string{"controller", "controller", "controller", "broker", "broker"}

// TestDedicatedControllers: controller-only nodes run the quorum and no
// broker: clients see only the broker-only nodes, which register, place
// and replicate partitions among themselves. A third broker joins through
// controller.quorum.bootstrap.servers. When the active controller is
// killed, another is elected and metadata changes and produce go on.
func TestDedicatedControllers(t *testing.T) {
	c := Start(t, 5, Options{Roles: dedicated})
	adm := kadm.NewClient(c.Client())
	brokers, err := adm.ListBrokers(ctxT(t, 10*time.Second))
	if err != nil || len(brokers) != 2 || brokers[0].NodeID != 4 || brokers[1].NodeID != 5 {
		t.Fatalf("brokers %v, err %v; want 4 and 5 alone", brokers, err)
	}
	c.AddNode(6, c.ClusterID)
	c.WaitBrokers(3, 20*time.Second)

	createTopic(t, adm, "dedicated", 3, 3)
	c.WaitFor(10*time.Second, "leaders on the brokers", func() bool {
		leaders, _ := topicLeaders(t, c, c.Node(4), "dedicated")
		for p := range int32(3) {
			if l, ok := leaders[p]; !ok || l < 4 {
				return false
			}
		}
		return true
	})
	for p := range int32(3) {
		produceConsume(t, c, "dedicated", p)
	}

	var active int32
	c.WaitFor(10*time.Second, "an active controller", func() bool { active = c.ActiveController(); return active > 0 })
	if active > 3 {
		t.Fatalf("broker-only node %d is the active controller", active)
	}
	start := time.Now()
	c.Node(active).Kill()
	var next int32
	c.WaitFor(20*time.Second, "another active controller", func() bool { next = c.ActiveController(); return next > 0 && next != active })
	t.Logf("SIGKILL of controller-only node %d → node %d active after %v", active, next, time.Since(start).Round(time.Millisecond))
	createTopic(t, adm, "after-failover", 2, 2)
	produceConsume(t, c, "after-failover", 0)
	produceConsume(t, c, "after-failover", 1)
	c.WaitBrokers(3, 10*time.Second) // every broker still listed by every broker
}

// TestBrokerOnlyDiesWithController: a broker-only node that leads a
// partition is SIGKILLed at the same moment as the active controller. It
// never heartbeated to the new controller, and it has no raft
// connection; its presence connections to the other voters
// (controller/voters.go) are what tell the new controller it died. With
// broker.session.timeout.ms at 30 s, only that signal can move the
// partition within the test's wait; the time is logged.
func TestBrokerOnlyDiesWithController(t *testing.T) {
	c := Start(t, 5, Options{Roles: dedicated, Extra: []string{"broker.session.timeout.ms=30000"}})
	adm := kadm.NewClient(c.Client())
	createTopic(t, adm, "dies-with", 4, 2)
	var leaders map[int32]int32
	c.WaitFor(10*time.Second, "leaders", func() bool {
		leaders, _ = topicLeaders(t, c, c.Node(5), "dies-with")
		return len(leaders) == 4
	})
	part := int32(-1)
	for p, l := range leaders {
		if l == 4 {
			part = p
		}
	}
	if part < 0 {
		t.Fatalf("broker 4 leads nothing: %v", leaders)
	}
	var active int32
	c.WaitFor(10*time.Second, "an active controller", func() bool { active = c.ActiveController(); return active > 0 })
	start := time.Now()
	done := make(chan struct{})
	go func() { c.Node(4).Kill(); close(done) }()
	c.Node(active).Kill()
	<-done
	c.WaitFor(20*time.Second, "a new leader of broker 4's partition", func() bool {
		l, _ := topicLeaders(t, c, c.Node(5), "dies-with")
		return ledByOther(l, part, 4)
	})
	t.Logf("SIGKILL of broker-only node 4 (leader of dies-with-%d) with the active controller %d → leader 5 after %v (broker.session.timeout.ms 30000)",
		part, active, time.Since(start).Round(time.Millisecond))
	produceConsume(t, c, "dies-with", part)
}
