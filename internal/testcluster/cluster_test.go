package testcluster

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// topicLeaders returns partition → leader as node nd's Metadata says.
func topicLeaders(t *testing.T, c *Cluster, nd *Node, topic string) (map[int32]int32, map[int32][]int32) {
	m, err := c.Metadata(nd)
	if err != nil {
		return nil, nil
	}
	leaders, isrs := map[int32]int32{}, map[int32][]int32{}
	for _, tp := range m.Topics {
		if tp.Topic != nil && *tp.Topic == topic {
			for _, p := range tp.Partitions {
				leaders[p.Partition], isrs[p.Partition] = p.Leader, p.ISR
			}
		}
	}
	return leaders, isrs
}

// ledByOther reports whether leaders (from topicLeaders) shows partition
// part led by a broker other than from. A failed Metadata request gives a
// nil map, which must not read as "led by broker 0".
func ledByOther(leaders map[int32]int32, part, from int32) bool {
	l, ok := leaders[part]
	return ok && l >= 0 && l != from
}

func createTopic(t *testing.T, adm *kadm.Client, name string, partitions int32, rf int16) {
	t.Helper()
	resp, err := adm.CreateTopic(ctxT(t, 20*time.Second), partitions, rf, nil, name)
	if err != nil || resp.Err != nil {
		t.Fatalf("create %s: %v %v", name, err, resp.Err)
	}
}

// TestThreeNodeCluster: three processes form a cluster; clients see three
// brokers; a topic of RF=3 gets leaders spread over all three with full
// ISRs; records produced with acks=1 to a leader are consumed back, on an
// RF=1 and an RF=3 topic; a follower answers NOT_LEADER_OR_FOLLOWER.
func TestThreeNodeCluster(t *testing.T) {
	c := Start(t, 3, Options{})
	cl := c.Client()
	adm := kadm.NewClient(cl)
	brokers, err := adm.ListBrokers(ctxT(t, 10*time.Second))
	if err != nil || len(brokers) != 3 {
		t.Fatalf("brokers %v, err %v", brokers, err)
	}
	createTopic(t, adm, "spread", 6, 3)
	var leaders map[int32]int32
	var isrs map[int32][]int32
	c.WaitFor(10*time.Second, "6 partitions with leaders", func() bool {
		leaders, isrs = topicLeaders(t, c, c.Nodes[0], "spread")
		return len(leaders) == 6
	})
	per := map[int32]int{}
	for p, l := range leaders {
		per[l]++
		if len(isrs[p]) != 3 {
			t.Errorf("partition %d isr %v, want 3 members", p, isrs[p])
		}
	}
	if len(per) != 3 {
		t.Errorf("leaders %v not spread over 3 brokers", leaders)
	}
	t.Logf("leaders of spread: %v", leaders)

	createTopic(t, adm, "single", 3, 1)
	for _, topic := range []string{"single", "spread"} {
		for p := int32(0); p < 3; p++ {
			produceConsume(t, c, topic, p)
		}
	}
}

// produceConsume produces ten records with acks=1 to one partition and
// reads them back.
func produceConsume(t *testing.T, c *Cluster, topic string, partition int32) {
	t.Helper()
	cl := c.Client(kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var want []string
	for i := range 10 {
		v := topic + "-" + string(rune('a'+partition)) + "-" + string(rune('0'+i))
		want = append(want, v)
		r := &kgo.Record{Topic: topic, Partition: partition, Value: []byte(v)}
		if err := cl.ProduceSync(ctxT(t, 20*time.Second), r).FirstErr(); err != nil {
			t.Fatalf("produce %s-%d: %v", topic, partition, err)
		}
	}
	cons := c.Client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: kgo.NewOffset().AtStart()}}))
	var got []string
	ctx := ctxT(t, 20*time.Second)
	for len(got) < len(want) {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consume %s-%d: got %v: %v", topic, partition, got, err)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if !slices.Equal(got, want) {
		t.Fatalf("%s-%d: consumed %v, want %v", topic, partition, got, want)
	}
}

// TestControllerLeaderKilled: SIGKILL the active controller; the quorum
// elects another and topics can still be created.
//
// The killed node also led partitions: the new controller saw the killed
// voter's raft connections close, so it fences its broker at once
// (controller/voters.go) rather than after broker.session.timeout.ms
// (here 4 s); TestControllerAndLeaderKilled measures it with defaults.
func TestControllerLeaderKilled(t *testing.T) {
	c := Start(t, 3, Options{Extra: []string{"broker.session.timeout.ms=4000", "broker.heartbeat.interval.ms=1000"}})
	adm := kadm.NewClient(c.Client())
	createTopic(t, adm, "before-failover", 3, 3)
	var active int32
	c.WaitFor(10*time.Second, "an active controller", func() bool { active = c.ActiveController(); return active > 0 })
	var leaders map[int32]int32
	c.WaitFor(10*time.Second, "leaders", func() bool { leaders, _ = topicLeaders(t, c, c.Nodes[0], "before-failover"); return len(leaders) == 3 })
	part := int32(-1)
	for p, l := range leaders {
		if l == active {
			part = p
		}
	}
	start := time.Now()
	c.Node(active).Kill()
	var next int32
	c.WaitFor(15*time.Second, "a new active controller", func() bool { next = c.ActiveController(); return next > 0 && next != active })
	t.Logf("controller %d killed; %d active after %v", active, next, time.Since(start).Round(time.Millisecond))
	if part >= 0 {
		c.WaitFor(10*time.Second, "a new leader of the killed node's partition", func() bool {
			l, _ := topicLeaders(t, c, c.Node(next), "before-failover")
			return ledByOther(l, part, active)
		})
		t.Logf("its partition before-failover-%d has a new leader after %v (broker.session.timeout.ms 4000)", part, time.Since(start).Round(time.Millisecond))
	}
	createTopic(t, adm, "after-failover", 3, 2)
	c.WaitFor(10*time.Second, "the new topic's leaders", func() bool {
		l, _ := topicLeaders(t, c, c.Node(next), "after-failover")
		return len(l) == 3 && l[0] >= 0 && l[1] >= 0 && l[2] >= 0
	})
}

// TestPartitionLeaderKilled: SIGKILL a partition leader that is not the
// active controller; the controller hears its heartbeat connection close,
// fences it and elects a new leader from the ISR well within
// broker.session.timeout.ms (9 s).
func TestPartitionLeaderKilled(t *testing.T) {
	c := Start(t, 3, Options{})
	adm := kadm.NewClient(c.Client())
	createTopic(t, adm, "failover", 3, 3)
	var active int32
	c.WaitFor(10*time.Second, "an active controller", func() bool { active = c.ActiveController(); return active > 0 })
	var leaders map[int32]int32
	c.WaitFor(10*time.Second, "leaders", func() bool { leaders, _ = topicLeaders(t, c, c.Node(active), "failover"); return len(leaders) == 3 })
	victim, part := int32(-1), int32(-1)
	for p, l := range leaders {
		if l != active && l >= 0 {
			victim, part = l, p
			break
		}
	}
	if victim < 0 {
		t.Fatalf("every partition is led by the controller: %v", leaders)
	}
	start := time.Now()
	c.Node(victim).Kill()
	var newLeader int32
	c.WaitFor(9*time.Second, "a new leader", func() bool {
		l, _ := topicLeaders(t, c, c.Node(active), "failover")
		newLeader = l[part]
		return ledByOther(l, part, victim)
	})
	took := time.Since(start)
	t.Logf("SIGKILL of broker %d (leader of failover-%d) → leader %d in the image after %v (broker.session.timeout.ms 9000)",
		victim, part, newLeader, took.Round(time.Millisecond))
	if took > 3*time.Second {
		t.Errorf("new leader after %v: the connection-lost path should beat the session timeout by far", took)
	}
	produceConsume(t, c, "failover", part)

	// The killed broker comes back, registers again and is unfenced.
	// (It rejoins the ISR, and can lead again, once replication's
	// AlterPartition adds it back: issue 11.)
	c.Node(victim).Restart()
	c.WaitBrokers(3, 30*time.Second)
}

// TestElectLeaders: kafka-leader-election's request (ElectLeaders,
// PREFERRED) reaches the controller through a broker and gets Kafka's
// answers: ELECTION_NOT_NEEDED where the preferred replica leads, and a
// successful election where it was killed and came back, once its replica
// fetcher has caught it up and the leader has added it back to the ISR
// (replication, issue 11).
func TestElectLeaders(t *testing.T) {
	c := Start(t, 3, Options{Extra: []string{"auto.leader.rebalance.enable=false"}})
	adm := kadm.NewClient(c.Client())
	createTopic(t, adm, "elect", 3, 3)
	var active int32
	c.WaitFor(10*time.Second, "an active controller", func() bool { active = c.ActiveController(); return active > 0 })
	var leaders map[int32]int32
	c.WaitFor(10*time.Second, "leaders", func() bool { leaders, _ = topicLeaders(t, c, c.Nodes[0], "elect"); return len(leaders) == 3 })
	// A partition whose leader is not the active controller: killing the
	// controller too would wait out a full session (see the report of
	// TestControllerLeaderKilled).
	part := int32(0)
	for part < 3 && leaders[part] == active {
		part++
	}
	victim := leaders[part]
	c.Node(victim).Kill()
	other := c.Node(active)
	c.WaitFor(9*time.Second, "a new leader", func() bool { l, _ := topicLeaders(t, c, other, "elect"); return ledByOther(l, part, victim) })
	c.Node(victim).Restart()
	c.WaitBrokers(3, 30*time.Second)
	c.WaitFor(30*time.Second, "the restarted replica back in the ISR", func() bool {
		_, isrs := topicLeaders(t, c, other, "elect")
		return slices.Contains(isrs[part], victim)
	})
	set := kadm.TopicsSet{}
	set.Add("elect", 0, 1, 2)
	res, err := adm.ElectLeaders(ctxT(t, 20*time.Second), kadm.ElectPreferredReplica, set)
	if err != nil {
		t.Fatal(err)
	}
	for p, r := range res["elect"] {
		var want error = kerr.ElectionNotNeeded
		if p == part {
			want = nil
		}
		if !errors.Is(r.Err, want) {
			t.Errorf("election of elect-%d: %v, want %v", p, r.Err, want)
		}
	}
}

// TestControlledShutdown: SIGTERM on a broker moves its leaderships away
// before it exits.
func TestControlledShutdown(t *testing.T) {
	c := Start(t, 3, Options{})
	adm := kadm.NewClient(c.Client())
	createTopic(t, adm, "moving", 6, 3)
	var active int32
	c.WaitFor(10*time.Second, "an active controller", func() bool { active = c.ActiveController(); return active > 0 })
	victim := int32(1)
	if victim == active {
		victim = 2
	}
	start := time.Now()
	if err := c.Node(victim).Stop(); err != nil {
		t.Fatalf("stop: %v\n%s", err, c.Node(victim).Log())
	}
	t.Logf("controlled shutdown of broker %d took %v", victim, time.Since(start).Round(time.Millisecond))
	if !strings.Contains(c.Node(victim).Log(), "controlled shutdown done") {
		t.Fatalf("no controlled shutdown in the log:\n%s", c.Node(victim).Log())
	}
	leaders, _ := topicLeaders(t, c, c.Node(active), "moving")
	for p, l := range leaders {
		if l == victim || l < 0 {
			t.Errorf("partition %d led by %d after broker %d shut down", p, l, victim)
		}
	}
}

// TestOtherClusterRefused: a broker formatted with another cluster id is
// refused by the quorum and exits; the cluster keeps its three brokers.
func TestOtherClusterRefused(t *testing.T) {
	c := Start(t, 3, Options{})
	nd := c.AddNode(4, "another-cluster")
	err, ok := nd.Wait(20 * time.Second)
	if !ok {
		t.Fatalf("a broker of another cluster is still running:\n%s", nd.Log())
	}
	if err == nil || !strings.Contains(nd.Log(), "INCONSISTENT_CLUSTER_ID") {
		t.Fatalf("exit %v, log:\n%s", err, nd.Log())
	}
	c.WaitBrokers(3, 5*time.Second)
}

// TestQuorumWithoutMajority: with two of three nodes gone, the last one
// refuses metadata changes (the create fails) rather than deciding alone;
// once a second node is back, changes go through again.
func TestQuorumWithoutMajority(t *testing.T) {
	c := Start(t, 3, Options{})
	c.Node(2).Kill()
	c.Node(3).Kill()
	adm := kadm.NewClient(c.Client())
	resp, err := adm.CreateTopic(ctxT(t, 30*time.Second), 1, 1, nil, "refused")
	if err == nil && resp.Err == nil {
		t.Fatal("a quorum of one out of three created a topic")
	}
	t.Logf("create without a majority: %v %v", err, resp.Err)
	if m, err := c.Metadata(c.Node(1)); err == nil {
		for _, tp := range m.Topics {
			if tp.Topic != nil && *tp.Topic == "refused" {
				t.Fatal("the refused topic is in the metadata")
			}
		}
	}
	c.Node(2).Restart()
	c.WaitFor(30*time.Second, "a quorum again", func() bool { return c.ActiveController() > 0 })
	resp, err = adm.CreateTopic(ctxT(t, 30*time.Second), 1, 1, nil, "accepted")
	if err != nil || resp.Err != nil {
		t.Fatalf("create with a majority back: %v %v", err, resp.Err)
	}
}

// TestConsumerGroup: a group consumer in the cluster finds its
// coordinator (the leader of its __consumer_offsets partition, created on
// the first FindCoordinator), consumes and commits; a second consumer of
// the group resumes from the commit.
func TestConsumerGroup(t *testing.T) {
	c := Start(t, 3, Options{})
	adm := kadm.NewClient(c.Client())
	createTopic(t, adm, "grouped", 3, 1)
	prod := c.Client(kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	for i := range 30 {
		if err := prod.ProduceSync(ctxT(t, 20*time.Second), &kgo.Record{Topic: "grouped", Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	consume := func(n int) int {
		cl := c.Client(kgo.ConsumerGroup("g"), kgo.ConsumeTopics("grouped"), kgo.DisableAutoCommit(),
			kgo.FetchMaxWait(200*time.Millisecond))
		got := 0
		ctx := ctxT(t, 30*time.Second)
		for got < n {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("consumed %d of %d", got, n)
			}
			got += fs.NumRecords()
		}
		if err := cl.CommitUncommittedOffsets(ctxT(t, 20*time.Second)); err != nil {
			t.Fatalf("commit: %v", err)
		}
		cl.Close()
		return got
	}
	if got := consume(30); got != 30 {
		t.Fatalf("first consumer got %d", got)
	}
	for i := range 5 {
		if err := prod.ProduceSync(ctxT(t, 20*time.Second), &kgo.Record{Topic: "grouped", Value: []byte{byte(100 + i)}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if got := consume(5); got != 5 {
		t.Fatalf("second consumer got %d records, want the 5 after the commit", got)
	}
}

// TestPausedLeader: a SIGSTOPped leader closes no socket, so the
// controller waits out broker.session.timeout.ms (here 3 s) before it
// fences it and moves its leadership — a stall is not taken for a crash.
// Resumed, the broker heartbeats again and is unfenced.
func TestPausedLeader(t *testing.T) {
	c := Start(t, 3, Options{Extra: []string{"broker.session.timeout.ms=3000", "broker.heartbeat.interval.ms=500"}})
	adm := kadm.NewClient(c.Client())
	createTopic(t, adm, "paused", 3, 3)
	var active int32
	c.WaitFor(10*time.Second, "an active controller", func() bool { active = c.ActiveController(); return active > 0 })
	var leaders map[int32]int32
	c.WaitFor(10*time.Second, "leaders", func() bool { leaders, _ = topicLeaders(t, c, c.Node(active), "paused"); return len(leaders) == 3 })
	victim, part := int32(-1), int32(-1)
	for p, l := range leaders {
		if l != active && l >= 0 {
			victim, part = l, p
			break
		}
	}
	start := time.Now()
	c.Node(victim).Pause()
	time.Sleep(1500 * time.Millisecond)
	if l, _ := topicLeaders(t, c, c.Node(active), "paused"); ledByOther(l, part, victim) {
		t.Fatalf("leadership moved %v after a pause of 1.5 s, before the session timeout", time.Since(start))
	}
	c.WaitFor(10*time.Second, "a new leader", func() bool {
		l, _ := topicLeaders(t, c, c.Node(active), "paused")
		return ledByOther(l, part, victim)
	})
	t.Logf("SIGSTOP of broker %d → new leader after %v (broker.session.timeout.ms 3000)", victim, time.Since(start).Round(time.Millisecond))
	c.Node(victim).Resume()
	c.WaitBrokers(3, 20*time.Second)
}

// TestWholeClusterRestart: every node is SIGKILLed at once and restarted;
// the quorum recovers its log from disk (regression: before its first
// snapshot it had forgotten its voters and never elected a leader), the
// brokers re-register and the records are still there.
func TestWholeClusterRestart(t *testing.T) {
	c := Start(t, 3, Options{})
	adm := kadm.NewClient(c.Client())
	createTopic(t, adm, "kept", 3, 1)
	produceConsume(t, c, "kept", 1)
	for _, nd := range c.Nodes {
		nd.Kill()
	}
	for _, nd := range c.Nodes {
		nd.Restart()
	}
	c.WaitBrokers(3, 30*time.Second)
	c.WaitFor(10*time.Second, "the topic's leaders", func() bool {
		l, _ := topicLeaders(t, c, c.Nodes[0], "kept")
		return len(l) == 3 && l[1] >= 0
	})
	cons := c.Client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"kept": {1: kgo.NewOffset().AtStart()}}))
	ctx := ctxT(t, 20*time.Second)
	got := 0
	for got < 10 {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("after the restart: %d of 10 records", got)
		}
		got += fs.NumRecords()
	}
}

// TestDescribeQuorum: kafka-metadata-quorum's request, sent to any broker,
// is answered by the active controller: its id as leader, three voters.
func TestDescribeQuorum(t *testing.T) {
	c := Start(t, 3, Options{})
	var active int32
	c.WaitFor(10*time.Second, "an active controller", func() bool { active = c.ActiveController(); return active > 0 })
	for _, nd := range c.Nodes {
		cl, err := kgo.NewClient(kgo.SeedBrokers(nd.Addr))
		if err != nil {
			t.Fatal(err)
		}
		req := kmsg.NewPtrDescribeQuorumRequest()
		rt := kmsg.NewDescribeQuorumRequestTopic()
		rt.Topic = "__cluster_metadata"
		rt.Partitions = append(rt.Partitions, kmsg.NewDescribeQuorumRequestTopicPartition())
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctxT(t, 10*time.Second), cl)
		cl.Close()
		if err != nil {
			t.Fatal(err)
		}
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != 0 || p.LeaderID != active || len(p.CurrentVoters) != 3 || p.HighWatermark <= 0 {
			t.Fatalf("via node %d: %+v", nd.ID, p)
		}
	}
}

// TestAdminInCluster: topic admin through any broker reaches every
// broker: configs changed with IncrementalAlterConfigs, partitions added,
// the topic deleted.
func TestAdminInCluster(t *testing.T) {
	c := Start(t, 3, Options{})
	adm := kadm.NewClient(c.Client())
	createTopic(t, adm, "admin", 2, 2)
	// As in Kafka, the other brokers learn of the topic a moment after
	// CreateTopics is answered; the config change may go to any of them.
	c.WaitFor(5*time.Second, "the topic on every broker", func() bool {
		for _, nd := range c.Nodes {
			if l, _ := topicLeaders(t, c, nd, "admin"); len(l) != 2 {
				return false
			}
		}
		return true
	})
	rs, err := adm.AlterTopicConfigs(ctxT(t, 20*time.Second), []kadm.AlterConfig{{Name: "retention.ms", Value: kadm.StringPtr("12345")}}, "admin")
	if err != nil || rs[0].Err != nil {
		t.Fatalf("alter configs: %v %v", err, rs)
	}
	for _, nd := range c.Nodes {
		a := kadm.NewClient(c.clientOf(t, nd))
		c.WaitFor(5*time.Second, "the config on every broker", func() bool {
			cs, err := a.DescribeTopicConfigs(ctxT(t, 5*time.Second), "admin")
			if err != nil || len(cs) != 1 {
				return false
			}
			for _, kv := range cs[0].Configs {
				if kv.Key == "retention.ms" && kv.MaybeValue() == "12345" {
					return true
				}
			}
			return false
		})
	}
	if _, err := adm.CreatePartitions(ctxT(t, 20*time.Second), 2, "admin"); err != nil {
		t.Fatal(err)
	}
	c.WaitFor(5*time.Second, "4 partitions with leaders", func() bool {
		l, _ := topicLeaders(t, c, c.Nodes[2], "admin")
		return len(l) == 4 && l[3] >= 0
	})
	if rs, err := adm.DeleteTopics(ctxT(t, 20*time.Second), "admin"); err != nil || rs["admin"].Err != nil {
		t.Fatalf("delete: %v %v", err, rs)
	}
	c.WaitFor(5*time.Second, "the topic gone everywhere", func() bool {
		for _, nd := range c.Nodes {
			if l, _ := topicLeaders(t, c, nd, "admin"); len(l) != 0 {
				return false
			}
		}
		return true
	})
}

// TestUnregisterBroker: a broker stopped for good is unregistered through
// any broker (UnregisterBroker, forwarded to the controller); asking again
// answers BROKER_ID_NOT_REGISTERED.
func TestUnregisterBroker(t *testing.T) {
	c := Start(t, 3, Options{})
	if err := c.Node(3).Stop(); err != nil {
		t.Fatal(err)
	}
	cl := c.clientOf(t, c.Node(1))
	for i, want := range []int16{0, kerr.BrokerIDNotRegistered.Code} {
		req := kmsg.NewPtrUnregisterBrokerRequest()
		req.BrokerID = 3
		resp, err := req.RequestWith(ctxT(t, 20*time.Second), cl)
		if err != nil || resp.ErrorCode != want {
			t.Fatalf("unregister #%d: code %v err %v, want %d", i+1, resp, err, want)
		}
	}
	c.WaitBrokers(2, 5*time.Second)
}

// TestBrokerOnlyNodeJoins: a fourth process with process.roles=broker
// reaches the quorum through controller.quorum.bootstrap.servers,
// registers and takes replicas of new topics.
func TestBrokerOnlyNodeJoins(t *testing.T) {
	c := Start(t, 3, Options{})
	c.AddNode(4, c.ClusterID)
	c.WaitBrokers(4, 30*time.Second)
	adm := kadm.NewClient(c.Client())
	createTopic(t, adm, "four", 8, 1)
	c.WaitFor(10*time.Second, "a partition led by broker 4", func() bool {
		l, _ := topicLeaders(t, c, c.Node(4), "four")
		for _, b := range l {
			if b == 4 {
				return true
			}
		}
		return false
	})
	produceConsume(t, c, "four", 3)
}

// TestAutoCreateInCluster: a Metadata request that auto-creates a topic
// is answered LEADER_NOT_AVAILABLE while the controller creates it, with
// num.partitions partitions and default.replication.factor replicas; a
// later request finds it led. A franz-go producer to a fresh topic gets
// through on its retry.
func TestAutoCreateInCluster(t *testing.T) {
	c := Start(t, 3, Options{Extra: []string{"num.partitions=2", "default.replication.factor=3"}})
	cl := c.clientOf(t, c.Node(1))
	ask := func() kmsg.MetadataResponseTopic {
		req := kmsg.NewPtrMetadataRequest()
		req.AllowAutoTopicCreation = true
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr("auto-fresh")
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctxT(t, 5*time.Second), cl)
		if err != nil || len(resp.Topics) != 1 {
			t.Fatalf("metadata: %v %+v", err, resp)
		}
		return resp.Topics[0]
	}
	if first := ask(); first.ErrorCode != kerr.LeaderNotAvailable.Code || len(first.Partitions) != 0 {
		t.Fatalf("first answer for an auto-created topic: error %d, %d partitions; want LEADER_NOT_AVAILABLE and none",
			first.ErrorCode, len(first.Partitions))
	}
	c.WaitFor(10*time.Second, "the auto-created topic led", func() bool {
		tp := ask()
		if tp.ErrorCode != 0 || len(tp.Partitions) != 2 {
			return false
		}
		for _, p := range tp.Partitions {
			if p.ErrorCode != 0 || p.Leader < 0 || len(p.Replicas) != 3 {
				return false
			}
		}
		return true
	})

	prod := c.Client(kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("auto-produced"), kgo.RequiredAcks(kgo.AllISRAcks()))
	start := time.Now()
	first, err := prod.ProduceSync(ctxT(t, 20*time.Second), kgo.StringRecord("first")).First()
	if err != nil {
		t.Fatalf("produce to a fresh topic: %v", err)
	}
	t.Logf("first produce to an auto-created topic (RF 3): %v", time.Since(start).Round(time.Millisecond))
	produceConsume(t, c, "auto-produced", 1-first.Partition) // the partition "first" did not go to
}
