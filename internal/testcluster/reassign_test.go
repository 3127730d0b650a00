package testcluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/tools/chaos/check"
)

// TestReassignment moves an RF=3 topic's replicas while an idempotent
// acks=all producer writes to it (min.insync.replicas=2):
//
//  1. a fourth broker joins and every partition moves one replica onto
//     it (partition 0 its preferred leader, so leadership moves too);
//  2. with SLUICE_KAFKA_CLASSPATH set, Kafka's kafka-reassign-partitions
//     --generate/--execute/--verify spreads the topic over the four;
//  3. every replica is moved off broker 4, which is stopped and
//     unregistered.
//
// A group's offsets partitions go onto broker 4 after step 1 and off it
// in step 3; its committed offset is read back after each move.
//
// After each move the old replicas' directories are gone. At the end the
// durability checker of TestDurability reads every partition to its high
// watermark (no acknowledged record lost, moved, duplicated or reordered)
// and the replicas' .log bytes below the HW are compared: a replica
// rebuilt by a reassignment holds the leader's batches byte for byte.
func TestReassignment(t *testing.T) {
	const (
		topic      = "moving"
		partitions = 3
	)
	c := Start(t, 3, Options{Extra: []string{"min.insync.replicas=2"}})
	adm := kadm.NewClient(c.Client())
	resp, err := adm.CreateTopic(ctxT(t, 20*time.Second), partitions, 3,
		map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}, topic)
	if err != nil || resp.Err != nil {
		t.Fatalf("create %s: %v %v", topic, err, resp.Err)
	}
	waitHealed(t, c, topic, partitions, 30*time.Second)
	c.AddNode(4, c.ClusterID)
	c.WaitBrokers(4, 30*time.Second)

	// A group's committed offset: __consumer_offsets is created now, its
	// replicas spread over the four brokers.
	committed := kadm.Offsets{}
	committed.Add(kadm.Offset{Topic: topic, Partition: 1, At: 7, LeaderEpoch: -1})
	if r, err := adm.CommitOffsets(ctxT(t, 30*time.Second), "mover", committed); err != nil || r.Error() != nil {
		t.Fatalf("commit: %v %v", err, r.Error())
	}

	h := check.NewHistory()
	stopProducing := produceRoundRobin(c, topic, partitions, h)
	time.Sleep(time.Second)

	// 1. One replica of each partition onto broker 4.
	before := assignment(t, c, topic)
	moves := map[int32][]int32{}
	for p, rs := range before {
		target := slices.Clone(rs)
		target[int(p)%len(target)] = 4
		moves[p] = target
	}
	start := time.Now()
	reassign(t, adm, topic, moves)
	waitMovedAway(t, c, topic, before, moves)
	t.Logf("onto broker 4: %v → %v, done in %v", before, moves, time.Since(start).Round(time.Millisecond))
	// The group's offsets partitions move whole onto broker 4: their
	// coordinator moves with them and loads the group from the copy.
	offsetsBefore := assignment(t, c, "__consumer_offsets")
	offsetsMoves := map[int32][]int32{}
	for p := range offsetsBefore {
		offsetsMoves[p] = []int32{4}
	}
	reassign(t, adm, "__consumer_offsets", offsetsMoves)
	waitMovedAway(t, c, "__consumer_offsets", offsetsBefore, offsetsMoves)
	wantCommitted(t, adm, topic, 1, 7)
	time.Sleep(time.Second)

	// 2. Kafka's tool.
	t.Run("kafka-reassign-partitions", func(t *testing.T) {
		cp := os.Getenv("SLUICE_KAFKA_CLASSPATH")
		if cp == "" {
			t.Skip("kafka-reassign-partitions not run: set SLUICE_KAFKA_CLASSPATH to Kafka's jars (interop/java/target/deps/*)")
		}
		kafkaReassignTool(t, c, cp, topic, partitions)
	})

	// 3. Everything off broker 4 (the group's offsets too), then broker 4
	// goes.
	for _, name := range []string{topic, "__consumer_offsets"} {
		before := assignment(t, c, name)
		moves := offBroker(c, 4, before)
		start := time.Now()
		reassign(t, adm, name, moves)
		waitMovedAway(t, c, name, before, moves)
		t.Logf("%s off broker 4: %v → %v, done in %v", name, before, moves, time.Since(start).Round(time.Millisecond))
	}
	time.Sleep(time.Second)
	if err := c.Node(4).Stop(); err != nil {
		t.Fatalf("broker 4 stop: %v", err)
	}
	unreg := kmsg.NewPtrUnregisterBrokerRequest()
	unreg.BrokerID = 4
	if r, err := unreg.RequestWith(ctxT(t, 20*time.Second), c.clientOf(t, c.Node(1))); err != nil || r.ErrorCode != 0 {
		t.Fatalf("unregister broker 4: %v %v", r, err)
	}
	c.WaitBrokers(3, 10*time.Second)
	// A new client: adm has broker 4 cached as the group's coordinator,
	// and kept dialing it (connection refused) for 30 s when asked here.
	wantCommitted(t, kadm.NewClient(c.Client()), topic, 1, 7)

	stopProducing()
	logs := consumeAll(t, c, topic, partitions)
	an := h.Check(logs, nil)
	final := assignment(t, c, topic)
	for p, l := range logs {
		an.Add(check.Diverged, compareAssigned(c, topic, p, l.HW, final[p])...)
	}
	sent, acked, failed := h.Counts()
	t.Logf("records: sent %d, acked %d, failed %d", sent, acked, failed)
	reportAnomalies(t, an)
	if acked == 0 {
		t.Fatal("nothing was acknowledged")
	}
}

// produceRoundRobin writes a counter over the partitions with an
// idempotent acks=all producer, recording every answer in h, until the
// returned stop is called (which flushes what is in flight).
func produceRoundRobin(c *Cluster, topic string, partitions int, h *check.History) (stop func()) {
	prod := c.Client(
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.MetadataMinAge(100*time.Millisecond),
		kgo.RecordDeliveryTimeout(40*time.Second),
	)
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			default:
			}
			p := int32(i % partitions)
			v := h.Send(0, p)
			r := &kgo.Record{Topic: topic, Partition: p, Value: []byte(strconv.Itoa(v))}
			prod.Produce(context.Background(), r, func(r *kgo.Record, err error) { h.Done(v, r.Offset, err) })
			if i%5 == 4 {
				time.Sleep(time.Millisecond)
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(done)
			<-stopped
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			if err := prod.Flush(ctx); err != nil {
				c.t.Logf("flush: %v (unacknowledged records stay indeterminate)", err)
			}
		})
	}
}

// assignment is the topic's replicas by partition, from a running node.
func assignment(t *testing.T, c *Cluster, topic string) map[int32][]int32 {
	t.Helper()
	out := map[int32][]int32{}
	waitUntil(t, 10*time.Second, "the topic's replicas", func() bool {
		m, err := c.Metadata(c.Node(1))
		if err != nil {
			return false
		}
		for _, tp := range m.Topics {
			if tp.Topic != nil && *tp.Topic == topic {
				for _, p := range tp.Partitions {
					out[p.Partition] = p.Replicas
				}
			}
		}
		return len(out) > 0
	})
	return out
}

// offBroker returns targets that replace broker id in every partition of
// as by a running broker the partition does not have.
func offBroker(c *Cluster, id int32, as map[int32][]int32) map[int32][]int32 {
	out := map[int32][]int32{}
	for p, rs := range as {
		i := slices.Index(rs, id)
		if i < 0 {
			continue
		}
		target := slices.Clone(rs)
		for _, nd := range c.Nodes {
			if nd.ID != id && nd.Running() && !slices.Contains(rs, nd.ID) {
				target[i] = nd.ID
				break
			}
		}
		out[p] = target
	}
	return out
}

// reassign asks for the moves through adm and fails on any refusal.
func reassign(t *testing.T, adm *kadm.Client, topic string, moves map[int32][]int32) {
	t.Helper()
	var req kadm.AlterPartitionAssignmentsReq
	for p, rs := range moves {
		req.Assign(topic, p, rs)
	}
	resp, err := adm.AlterPartitionAssignments(ctxT(t, 20*time.Second), req)
	if err != nil {
		t.Fatalf("reassign %v: %v", moves, err)
	}
	for _, r := range resp.Sorted() {
		if r.Err != nil {
			t.Fatalf("reassign %s-%d: %v %s", r.Topic, r.Partition, r.Err, r.ErrMessage)
		}
	}
}

// waitMovedAway waits until no reassignment of topic is listed, every
// running node's metadata shows each moved partition on its target with
// all of it in the ISR, and the directories of replicas the moves dropped
// are gone.
func waitMovedAway(t *testing.T, c *Cluster, topic string, before, moves map[int32][]int32) {
	t.Helper()
	adm := kadm.NewClient(c.Client())
	set := kadm.TopicsSet{}
	for p := range moves {
		set.Add(topic, p)
	}
	waitUntil(t, 90*time.Second, "the reassignment to complete", func() bool {
		ls, err := adm.ListPartitionReassignments(ctxT(t, 5*time.Second), set)
		if err != nil || len(ls[topic]) > 0 {
			return false
		}
		for _, nd := range c.Nodes {
			if nd.Running() && !onTargets(c, nd, topic, moves) {
				return false
			}
		}
		for p, target := range moves {
			for _, id := range before[p] {
				if slices.Contains(target, id) {
					continue
				}
				if _, err := os.Stat(partitionDir(c.Node(id), topic, p)); err == nil {
					return false
				}
			}
		}
		return true
	})
}

// onTargets reports whether nd's metadata has every partition of moves on
// exactly its target replicas, all in the ISR, with a leader.
func onTargets(c *Cluster, nd *Node, topic string, moves map[int32][]int32) bool {
	m, err := c.Metadata(nd)
	if err != nil {
		return false
	}
	seen := 0
	for _, tp := range m.Topics {
		if tp.Topic == nil || *tp.Topic != topic {
			continue
		}
		for _, p := range tp.Partitions {
			target, ok := moves[p.Partition]
			if !ok {
				continue
			}
			isr := slices.Sorted(slices.Values(p.ISR))
			if !slices.Equal(p.Replicas, target) || !slices.Equal(isr, slices.Sorted(slices.Values(target))) || p.Leader < 0 {
				return false
			}
			seen++
		}
	}
	return seen == len(moves)
}

func partitionDir(nd *Node, topic string, p int32) string {
	return filepath.Join(nd.DataDir, fmt.Sprintf("%s-%d", topic, p))
}

// compareAssigned compares partition p's batches below hw on its
// replicas byte for byte.
func compareAssigned(c *Cluster, topic string, p int32, hw int64, replicas []int32) []string {
	var out []string
	var ref []byte
	for i, id := range replicas {
		b, err := check.BatchesBelow(partitionDir(c.Node(id), topic, p), hw)
		switch {
		case err != nil:
			out = append(out, fmt.Sprintf("partition %d node %d: %v", p, id, err))
		case i == 0:
			ref = b
		case !bytes.Equal(ref, b):
			out = append(out, fmt.Sprintf("partition %d: node %d (%d bytes) differs from node %d (%d bytes) below hw %d",
				p, id, len(b), replicas[0], len(ref), hw))
		}
	}
	return out
}

// kafkaReassignTool runs Kafka's ReassignPartitionsCommand over the topic:
// --generate for brokers 1-4, --execute of its proposal, and --verify
// until every partition's reassignment is complete (keeping throttles:
// none were set, and clearing them needs broker configs).
func kafkaReassignTool(t *testing.T, c *Cluster, cp, topic string, partitions int) {
	dir := t.TempDir()
	run := func(args ...string) string {
		t.Helper()
		args = append([]string{"-cp", cp, "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
			"--bootstrap-server", strings.Join(c.Bootstrap(), ",")}, args...)
		cmd := exec.Command("java", args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr // the admin client's log
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("kafka-reassign-partitions %v: %v\n%s%s", args[3:], err, out, stderr.Bytes())
		}
		return string(out)
	}
	moveFile := filepath.Join(dir, "topics.json")
	os.WriteFile(moveFile, []byte(`{"version":1,"topics":[{"topic":"`+topic+`"}]}`), 0o644)
	gen := run("--topics-to-move-json-file", moveFile, "--broker-list", "1,2,3,4", "--generate")
	const proposed = "Proposed partition reassignment configuration"
	i := strings.Index(gen, proposed)
	if i < 0 {
		t.Fatalf("--generate printed no proposal:\n%s", gen)
	}
	plan := strings.TrimSpace(gen[i+len(proposed):])
	var parsed struct {
		Partitions []struct {
			Partition int32   `json:"partition"`
			Replicas  []int32 `json:"replicas"`
		} `json:"partitions"`
	}
	if err := json.Unmarshal([]byte(plan), &parsed); err != nil || len(parsed.Partitions) != partitions {
		t.Fatalf("--generate proposal %q: %v", plan, err)
	}
	planFile := filepath.Join(dir, "plan.json")
	os.WriteFile(planFile, []byte(plan), 0o644)
	before := assignment(t, c, topic)
	if out := run("--reassignment-json-file", planFile, "--execute"); !strings.Contains(out, "Successfully started partition reassignment") {
		t.Fatalf("--execute:\n%s", out)
	}
	waitUntil(t, 90*time.Second, "kafka-reassign-partitions --verify to report completion", func() bool {
		out := run("--reassignment-json-file", planFile, "--verify", "--preserve-throttles")
		return strings.Count(out, "is completed") == partitions
	})
	moves := map[int32][]int32{}
	for _, p := range parsed.Partitions {
		moves[p.Partition] = p.Replicas
	}
	waitMovedAway(t, c, topic, before, moves)
	t.Logf("kafka-reassign-partitions: %v → %v", before, moves)
}

// waitUntil polls cond until it holds or d passes, failing t then (the
// test or subtest that waits, unlike Cluster.WaitFor).
func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestReassignmentOffStoppedBroker: a partition is moved off a broker
// while that broker is down; when it comes back, the image no longer
// places the partition there and the leftover directory is deleted.
func TestReassignmentOffStoppedBroker(t *testing.T) {
	const topic = "leftover"
	c := Start(t, 3, Options{})
	adm := kadm.NewClient(c.Client())
	createTopic(t, adm, topic, 1, 2)
	before := assignment(t, c, topic)
	gone := before[0][1] // a follower
	var target []int32
	for _, nd := range c.Nodes {
		if nd.ID != gone {
			target = append(target, nd.ID)
		}
	}
	produceConsume(t, c, topic, 0)
	if err := c.Node(gone).Stop(); err != nil {
		t.Fatal(err)
	}
	reassign(t, adm, topic, map[int32][]int32{0: target})
	waitUntil(t, 30*time.Second, "the reassignment to complete", func() bool {
		return onTargets(c, c.Node(target[0]), topic, map[int32][]int32{0: target})
	})
	dir := partitionDir(c.Node(gone), topic, 0)
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("the stopped broker's replica is gone before it restarted: %v", err)
	}
	c.Node(gone).Restart()
	c.WaitBrokers(3, 30*time.Second)
	waitUntil(t, 30*time.Second, "the leftover replica directory to be deleted", func() bool {
		_, err := os.Stat(dir)
		return os.IsNotExist(err)
	})
}

// TestReassignmentControllerFailover: a reassignment is in progress (its
// new replica's broker is paused, so it cannot catch up) when the active
// controller is SIGKILLed. The next controller lists it from its image,
// and completes it once the new replica catches up; the records written
// before are all on the new replica set. The killed node, restarted,
// deletes its replica if the move dropped it.
func TestReassignmentControllerFailover(t *testing.T) {
	const topic = "failover-move"
	c := Start(t, 3, Options{})
	createTopic(t, kadm.NewClient(c.Client()), topic, 1, 2) // on two of the voters
	produceConsume(t, c, topic, 0)
	c.AddNode(4, c.ClusterID)
	c.WaitBrokers(4, 30*time.Second)

	var active int32 = -1
	waitUntil(t, 10*time.Second, "an active controller", func() bool { active = c.ActiveController(); return active > 0 })
	before := assignment(t, c, topic)
	var other int32 // a voter that stays up
	for _, id := range []int32{1, 2, 3} {
		if id != active && other == 0 {
			other = id
		}
	}
	target := []int32{4, other}

	c.Node(4).Pause() // shorter than broker.session.timeout.ms: not fenced
	paused := time.Now()
	reassign(t, kadm.NewClient(c.clientOf(t, c.Node(other))), topic, map[int32][]int32{0: target})
	c.Node(active).Kill()
	list := kadm.TopicsSet{}
	list.Add(topic, 0)
	waitUntil(t, 20*time.Second, "the next controller to list the reassignment", func() bool {
		ls, err := kadm.NewClient(c.clientOf(t, c.Node(other))).ListPartitionReassignments(ctxT(t, 3*time.Second), list)
		if err != nil {
			return false
		}
		r, ok := ls[topic][0]
		return ok && slices.Contains(r.AddingReplicas, 4)
	})
	if next := c.ActiveController(); next == active || next < 0 {
		t.Fatalf("active controller %d after killing %d", next, active)
	}
	t.Logf("reassignment %v → %v listed by the next controller, %v after pausing broker 4", before[0], target,
		time.Since(paused).Round(time.Millisecond))
	c.Node(4).Resume()
	waitUntil(t, 60*time.Second, "the reassignment to complete", func() bool {
		return onTargets(c, c.Node(other), topic, map[int32][]int32{0: target})
	})

	// The records produced before the move, read back from the new set
	// (whose leader is the first target replica, 4, once in the ISR).
	cons := c.Client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	var n int
	ctx := ctxT(t, 20*time.Second)
	for n < 10 {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of 10 records after the move: %v", n, err)
		}
		n += fs.NumRecords()
	}
	for _, s := range compareAssigned(c, topic, 0, 10, target) {
		t.Error(s)
	}

	if slices.Contains(before[0], active) && !slices.Contains(target, active) {
		c.Node(active).Restart()
		waitUntil(t, 30*time.Second, "the killed node to delete its moved replica", func() bool {
			_, err := os.Stat(partitionDir(c.Node(active), topic, 0))
			return os.IsNotExist(err)
		})
	}
}

// wantCommitted checks group "mover"'s committed offset of topic-p.
func wantCommitted(t *testing.T, adm *kadm.Client, topic string, p int32, want int64) {
	t.Helper()
	var fetched kadm.OffsetResponses
	waitUntil(t, 30*time.Second, "the group's committed offset", func() bool {
		var err error
		fetched, err = adm.FetchOffsets(ctxT(t, 5*time.Second), "mover")
		return err == nil && fetched.Error() == nil
	})
	if o, ok := fetched.Lookup(topic, p); !ok || o.At != want {
		t.Errorf("committed offset of %s-%d: %+v (found %v), want %d", topic, p, o, ok, want)
	}
}
