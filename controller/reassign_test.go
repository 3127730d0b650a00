package controller

import (
	"fmt"
	"slices"
	"testing"

	"github.com/sluice-broker/sluice/metadata"
	"github.com/twmb/franz-go/pkg/kerr"
)

// layout is a partition's replicas, ISR, leader and reassignment in
// one comparable string.
func layout(p metadata.PartitionImage) string {
	s := fmt.Sprintf("replicas %v isr %v leader %d", p.Replicas, p.ISR, p.Leader)
	if p.AddingReplicas != nil || p.RemovingReplicas != nil {
		s += fmt.Sprintf(" adding %v removing %v", p.AddingReplicas, p.RemovingReplicas)
	}
	return s
}

func (h *harness) wantPlacement(topic string, i int, want string) {
	h.t.Helper()
	if got := layout(h.part(topic, i)); got != want {
		h.t.Errorf("%s-%d: %s\n\t\twant %s", topic, i, got, want)
	}
}

// reassign sends one AlterPartitionReassignments entry and commits what
// it proposes; it returns the partition's answer.
func (h *harness) reassign(topic string, i int32, replicas []int32) *kerr.Error {
	h.t.Helper()
	res := h.c.AlterPartitionReassignments(h.img, []Reassignment{{TopicPartition{topic, i}, replicas}}, true)
	h.commit(res.Records...)
	return res.Partitions[0].Err
}

// isr sends the leader's AlterPartition for partition 0 of topic (as it
// does when followers catch up) and returns its answer.
func (h *harness) isr(topic string, isr ...int32) AlterPartitionAnswer {
	h.t.Helper()
	t := h.img.Topic(topic)
	p := t.Partitions[0]
	res := h.c.AlterPartition(h.img, AlterPartition{BrokerID: p.Leader, BrokerEpoch: h.epoch(p.Leader), Partitions: []AlterPartitionItem{
		{TopicID: t.ID, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, NewISR: isr}}})
	if res.Err != nil {
		h.t.Fatal(res.Err)
	}
	h.commit(res.Records...)
	return res.Partitions[0]
}

func (h *harness) wantISR(topic string, isr ...int32) {
	h.t.Helper()
	if a := h.isr(topic, isr...); a.Err != nil {
		h.t.Fatalf("AlterPartition %v: %v", isr, a.Err)
	}
}

// The life of a reassignment, step by step: what each request and ISR
// change leaves in the image. Brokers 1..6 are registered; topic t's
// partition 0 starts on [1 2 3] led by 1.
func TestReassignment(t *testing.T) {
	type step struct {
		do   func(h *harness)
		want string
	}
	reassign := func(replicas ...int32) func(h *harness) {
		return func(h *harness) {
			h.t.Helper()
			if err := h.reassign("t", 0, replicas); err != nil {
				h.t.Fatalf("reassign to %v: %v", replicas, err)
			}
		}
	}
	isr := func(isr ...int32) func(h *harness) { return func(h *harness) { h.wantISR("t", isr...) } }
	cancel := func(h *harness) {
		if err := h.reassign("t", 0, nil); err != nil {
			h.t.Fatalf("cancel: %v", err)
		}
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"add a replica", []step{
			{reassign(1, 2, 3, 4), "replicas [1 2 3 4] isr [1 2 3] leader 1 adding [4] removing []"},
			{isr(1, 2, 3, 4), "replicas [1 2 3 4] isr [1 2 3 4] leader 1"},
		}},
		{"move the whole replica set", []step{
			{reassign(4, 5, 6), "replicas [4 5 6 1 2 3] isr [1 2 3] leader 1 adding [4 5 6] removing [1 2 3]"},
			{isr(1, 2, 3, 5), "replicas [4 5 6 1 2 3] isr [1 2 3 5] leader 1 adding [4 5 6] removing [1 2 3]"},
			{isr(1, 2, 3, 4, 5), "replicas [4 5 6 1 2 3] isr [1 2 3 4 5] leader 1 adding [4 5 6] removing [1 2 3]"},
			{isr(1, 2, 3, 4, 5, 6), "replicas [4 5 6] isr [4 5 6] leader 4"},
		}},
		{"the leader leaves: the first target replica in the ISR leads", []step{
			{reassign(2, 3, 4), "replicas [2 3 4 1] isr [1 2 3] leader 1 adding [4] removing [1]"},
			{isr(1, 2, 3, 4), "replicas [2 3 4] isr [2 3 4] leader 2"},
		}},
		{"the ISR shrinks while it waits; a target replica out of it holds completion", []step{
			{reassign(2, 3, 4), "replicas [2 3 4 1] isr [1 2 3] leader 1 adding [4] removing [1]"},
			{isr(1, 3), "replicas [2 3 4 1] isr [1 3] leader 1 adding [4] removing [1]"},
			{isr(1, 3, 4), "replicas [2 3 4 1] isr [1 3 4] leader 1 adding [4] removing [1]"},
			{isr(1, 2, 3, 4), "replicas [2 3 4] isr [2 3 4] leader 2"},
		}},
		{"shrinking the replication factor completes at once", []step{
			{reassign(3, 2), "replicas [3 2] isr [2 3] leader 3"},
		}},
		{"reordering completes at once and keeps the leader", []step{
			{reassign(3, 1, 2), "replicas [3 1 2] isr [1 2 3] leader 1"},
		}},
		{"cancel reverts to the original replicas", []step{
			{reassign(4, 5, 6), "replicas [4 5 6 1 2 3] isr [1 2 3] leader 1 adding [4 5 6] removing [1 2 3]"},
			{isr(1, 2, 3, 4), "replicas [4 5 6 1 2 3] isr [1 2 3 4] leader 1 adding [4 5 6] removing [1 2 3]"},
			{cancel, "replicas [1 2 3] isr [1 2 3] leader 1"},
		}},
		{"cancel moves leadership off an adding replica", []step{
			{reassign(4, 2), "replicas [4 2 1 3] isr [1 2 3] leader 1 adding [4] removing [1 3]"},
			{isr(1, 2, 3, 4), "replicas [4 2] isr [2 4] leader 4"},
			{reassign(1, 2, 3), "replicas [1 2 3 4] isr [2 4] leader 4 adding [1 3] removing [4]"},
			// Kafka's revert keeps the order of the replicas as they stood.
			{cancel, "replicas [2 4] isr [2 4] leader 4"},
		}},
		{"a new target replaces the one in progress", []step{
			{reassign(4, 5, 6), "replicas [4 5 6 1 2 3] isr [1 2 3] leader 1 adding [4 5 6] removing [1 2 3]"},
			{isr(1, 2, 3, 4), "replicas [4 5 6 1 2 3] isr [1 2 3 4] leader 1 adding [4 5 6] removing [1 2 3]"},
			{reassign(1, 2, 5), "replicas [1 2 5 4 6 3] isr [1 2 3 4] leader 1 adding [5] removing [4 6 3]"},
			{isr(1, 2, 3, 4, 5), "replicas [1 2 5] isr [1 2 5] leader 1"},
		}},
		// Kafka's revert: the replicas minus those being added. Replica 4,
		// added by the first target and dropped by the second, is no
		// longer "adding", so it stays (and catches up as a follower).
		{"cancelling a replaced reassignment keeps all but the adding replicas", []step{
			{reassign(4, 5, 6), "replicas [4 5 6 1 2 3] isr [1 2 3] leader 1 adding [4 5 6] removing [1 2 3]"},
			{reassign(1, 5, 6), "replicas [1 5 6 4 2 3] isr [1 2 3] leader 1 adding [5 6] removing [4 2 3]"},
			{cancel, "replicas [1 4 2 3] isr [1 2 3] leader 1"},
		}},
		{"the same target sent again changes nothing", []step{
			{reassign(1, 2, 3, 4), "replicas [1 2 3 4] isr [1 2 3] leader 1 adding [4] removing []"},
			{func(h *harness) {
				res := h.c.AlterPartitionReassignments(h.img, []Reassignment{{TopicPartition{"t", 0}, ints(1, 2, 3, 4)}}, true)
				if res.Partitions[0].Err != nil || len(res.Records) != 0 {
					h.t.Fatalf("again: %v, records %v", res.Partitions[0].Err, res.Records)
				}
			}, "replicas [1 2 3 4] isr [1 2 3] leader 1 adding [4] removing []"},
		}},
		{"a new target already in the ISR completes at once", []step{
			{reassign(1, 2, 3, 4), "replicas [1 2 3 4] isr [1 2 3] leader 1 adding [4] removing []"},
			{reassign(1, 2, 3), "replicas [1 2 3] isr [1 2 3] leader 1"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.brokers(6)
			h.topic("t", ints(1, 2, 3))
			for i, s := range tc.steps {
				s.do(h)
				if got := layout(h.part("t", 0)); got != s.want {
					t.Fatalf("step %d: %s\n\t\twant %s", i, got, s.want)
				}
			}
		})
	}
}

// Requests that cannot start are answered per partition with Kafka's
// codes and propose nothing for that partition; the others in the same
// request go ahead.
func TestReassignmentRefused(t *testing.T) {
	h := newHarness(t)
	h.brokers(5)
	three := ints(1, 2, 3)
	h.topic("t", three, three, three, three, three, three, three, three)
	h.topic("u", three)
	h.topic("v", three)
	h.fenceNow(5)
	h.register(9, 1, nil) // registered, never unfenced
	reqs := []Reassignment{
		{TopicPartition{"t", 0}, ints(1, 2, 7)},             // broker 7 unknown
		{TopicPartition{"t", 1}, ints(1, 2, 2)},             // twice
		{TopicPartition{"t", 2}, []int32{}},                 // empty
		{TopicPartition{"t", 3}, ints(1, 2, 5)},             // a new replica on a fenced broker
		{TopicPartition{"t", 4}, ints(1, 2, 9)},             // a new replica on a broker never unfenced
		{TopicPartition{"t", 5}, ints(1, 2, 3, 4, 5, 9, 7)}, // more replicas than brokers
		{TopicPartition{"t", 8}, three},                     // no partition 8
		{TopicPartition{"nope", 0}, three},                  // no topic
		{TopicPartition{"t", -1}, three},                    // negative partition
		{TopicPartition{"t", 6}, nil},                       // nothing to cancel
		{TopicPartition{"u", 0}, ints(1, 2, 3, 4)},          // fine
		{TopicPartition{"t", 7}, ints(4, 2, 3)},             // fine
		{TopicPartition{"t", 7}, ints(1, 2, 3)},             // named twice
	}
	want := []*kerr.Error{kerr.InvalidReplicaAssignment, kerr.InvalidReplicaAssignment, kerr.InvalidReplicaAssignment,
		kerr.InvalidReplicaAssignment, kerr.InvalidReplicaAssignment, kerr.InvalidReplicaAssignment, kerr.UnknownTopicOrPartition,
		kerr.UnknownTopicOrPartition, kerr.UnknownTopicOrPartition, kerr.NoReassignmentInProgress, nil, nil, kerr.InvalidRequest}
	res := h.c.AlterPartitionReassignments(h.img, reqs, true)
	for i, a := range res.Partitions {
		if a.Err != want[i] {
			t.Errorf("request %d %v %v: %v, want %v", i, reqs[i].TopicPartition, reqs[i].Replicas, a.Err, want[i])
		}
	}
	if len(res.Records) != 2 {
		t.Errorf("%d records, want 2 (the two that went ahead): %v", len(res.Records), res.Records)
	}
	h.commit(res.Records...)
	h.wantPlacement("u", 0, "replicas [1 2 3 4] isr [1 2 3] leader 1 adding [4] removing []")
	h.wantPlacement("t", 7, "replicas [4 2 3 1] isr [1 2 3] leader 1 adding [4] removing [1]")
	h.wantPlacement("t", 0, "replicas [1 2 3] isr [1 2 3] leader 1")

	// A fenced broker that already holds a replica may stay in the target:
	// a reassignment is how partitions leave a dead broker.
	h.fenceNow(3)
	if err := h.reassign("t", 7, ints(4, 2, 3)); err != nil {
		t.Errorf("keeping fenced replica 3: %v", err)
	}
	if err := h.reassign("u", 0, ints(1, 2, 4)); err != nil {
		t.Errorf("moving off fenced broker 3: %v", err)
	}

	// KIP-860: a request that forbids replication factor changes.
	for _, tc := range []struct {
		replicas []int32
		want     *kerr.Error
	}{{ints(1, 2, 4, 3), kerr.InvalidReplicationFactor}, {ints(1, 2), kerr.InvalidReplicationFactor}, {ints(2, 1, 4), nil}} {
		res := h.c.AlterPartitionReassignments(h.img, []Reassignment{{TopicPartition{"v", 0}, tc.replicas}}, false)
		if got := res.Partitions[0].Err; got != tc.want {
			t.Errorf("RF change forbidden, %v: %v, want %v", tc.replicas, got, tc.want)
		}
	}
}

// A new replica whose broker is fenced mid-reassignment cannot join the
// ISR (INELIGIBLE_REPLICA), so the reassignment waits; once the broker is
// back and catches up it completes. Leadership never goes to it while
// fenced, even when the leader leaves.
func TestReassignmentNewReplicaFenced(t *testing.T) {
	h := newHarness(t)
	h.brokers(4)
	h.topic("t", ints(1, 2, 3))
	if err := h.reassign("t", 0, ints(4, 2, 3)); err != nil {
		t.Fatal(err)
	}
	h.fenceNow(4)
	if a := h.isr("t", 1, 2, 3, 4); a.Err != kerr.IneligibleReplica {
		t.Fatalf("fenced new replica joins the ISR: %v", a.Err)
	}
	h.wantPlacement("t", 0, "replicas [4 2 3 1] isr [1 2 3] leader 1 adding [4] removing [1]")
	if got := ListPartitionReassignments(h.img, nil); len(got) != 1 {
		t.Errorf("listed %v, want the one in progress", got)
	}

	h.heartbeat(4, nil) // caught up: unfenced
	h.wantBroker(4, false, false)
	h.wantISR("t", 1, 2, 3, 4)
	h.wantPlacement("t", 0, "replicas [4 2 3] isr [2 3 4] leader 4")
	if got := ListPartitionReassignments(h.img, nil); len(got) != 0 {
		t.Errorf("listed %v after completion", got)
	}
}

// Fencing the leader mid-reassignment elects in the replicas' order, the
// target's first: the adding replica can lead once in the ISR. Cancelling
// then hands leadership back to an original replica.
func TestReassignmentFenceThenCancel(t *testing.T) {
	h := newHarness(t)
	h.brokers(4)
	h.topic("t", ints(1, 2))
	if err := h.reassign("t", 0, ints(3, 4)); err != nil {
		t.Fatal(err)
	}
	h.wantISR("t", 1, 2, 3)
	h.fenceNow(1)
	h.wantPlacement("t", 0, "replicas [3 4 1 2] isr [2 3] leader 3 adding [3 4] removing [1 2]")
	if err := h.reassign("t", 0, nil); err != nil {
		t.Fatal(err)
	}
	h.wantPlacement("t", 0, "replicas [1 2] isr [2] leader 2")
}

// A cancel that would leave no in-sync replica (only adding replicas are
// in the ISR) is refused unless the topic allows unclean election, and
// then only once an original replica may lead.
func TestReassignmentCancelWithoutOriginalInSync(t *testing.T) {
	h := newHarness(t)
	h.brokers(4)
	h.topic("t", ints(1, 2))
	if err := h.reassign("t", 0, ints(3, 4)); err != nil {
		t.Fatal(err)
	}
	h.wantISR("t", 1, 2, 3)
	h.fenceNow(1)
	h.fenceNow(2)
	want := "replicas [3 4 1 2] isr [3] leader 3 adding [3 4] removing [1 2]"
	h.wantPlacement("t", 0, want)
	if err := h.reassign("t", 0, nil); err != kerr.InvalidReplicaAssignment {
		t.Fatalf("cancel with no original replica in sync: %v", err)
	}
	h.commit(setTopicConfig("t", UncleanLeaderElectionConfig, "true"))
	if err := h.reassign("t", 0, nil); err != kerr.InvalidReplicaAssignment {
		t.Fatalf("unclean cancel with every original replica fenced: %v", err)
	}
	h.wantPlacement("t", 0, want)
	h.heartbeat(2, nil) // back
	if err := h.reassign("t", 0, nil); err != nil {
		t.Fatal(err)
	}
	h.wantPlacement("t", 0, "replicas [1 2] isr [2] leader 2")
}

// The reassignment lives in the image: a controller that takes over from
// a snapshot (a failover) lists it and completes it on the leader's next
// AlterPartition, and a cancel works the same.
func TestReassignmentSurvivesFailover(t *testing.T) {
	for _, cancel := range []bool{false, true} {
		t.Run(fmt.Sprintf("cancel=%v", cancel), func(t *testing.T) {
			h := newHarness(t)
			h.brokers(6)
			h.topic("t", ints(1, 2, 3))
			h.topic("u", ints(1, 2, 3))
			if err := h.reassign("t", 0, ints(4, 5, 6)); err != nil {
				t.Fatal(err)
			}
			h.wantISR("t", 1, 2, 3, 4)

			img, err := metadata.ApplyAll(metadata.Image{}, h.img.Records())
			if err != nil {
				t.Fatal(err)
			}
			next := &harness{t: t, c: New(DefaultConfig(cluster)), img: img, next: h.next, now: h.now + 5000}
			want := []OngoingReassignment{{TopicPartition{"t", 0}, ints(4, 5, 6, 1, 2, 3), ints(4, 5, 6), ints(1, 2, 3)}}
			if got := ListPartitionReassignments(next.img, nil); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("new controller lists %v, want %v", got, want)
			}
			if got := ListPartitionReassignments(next.img, []TopicPartition{{"u", 0}, {"nope", 0}, {"t", 9}}); len(got) != 0 {
				t.Errorf("listed %v for partitions not being reassigned", got)
			}
			if cancel {
				if err := next.reassign("t", 0, nil); err != nil {
					t.Fatal(err)
				}
				next.wantPlacement("t", 0, "replicas [1 2 3] isr [1 2 3] leader 1")
				return
			}
			next.wantISR("t", 1, 2, 3, 4, 5, 6)
			next.wantPlacement("t", 0, "replicas [4 5 6] isr [4 5 6] leader 4")
		})
	}
}

// The AlterPartition that completes a reassignment answers the state it
// committed: the ISR without the removed replicas and the new leader.
func TestAlterPartitionAnswersCompletion(t *testing.T) {
	h := newHarness(t)
	h.brokers(4)
	h.topic("t", ints(1, 2, 3))
	if err := h.reassign("t", 0, ints(2, 3, 4)); err != nil {
		t.Fatal(err)
	}
	before := h.part("t", 0)
	a := h.isr("t", 1, 2, 3, 4)
	after := h.part("t", 0)
	if a.Err != nil || a.Leader != 2 || !slices.Equal(a.ISR, after.ISR) || a.LeaderEpoch != after.LeaderEpoch ||
		a.PartitionEpoch != after.PartitionEpoch || after.LeaderEpoch != before.LeaderEpoch+1 {
		t.Errorf("answer %+v, image %s epochs %d/%d", a, layout(after), after.LeaderEpoch, after.PartitionEpoch)
	}
}

// TestCreatePartitionsDuringReassignment: partitions added while partition
// 0 moves to new brokers get the topic's replication factor (the target's
// size), not that of partition 0's replica list, which also holds the
// replicas leaving it.
func TestCreatePartitionsDuringReassignment(t *testing.T) {
	h := newHarness(t)
	h.brokers(6)
	h.topic("t", ints(1, 2, 3))
	if err := h.reassign("t", 0, ints(4, 5, 6)); err != nil {
		t.Fatal(err)
	}
	res := h.c.CreatePartitions(h.img, "t", 2, nil)
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	h.commit(res.Records...)
	if got := h.part("t", 1).Replicas; len(got) != 3 {
		t.Errorf("new partition's replicas %v, want 3 of them", got)
	}
	if res := h.c.CreatePartitions(h.img, "t", 3, [][]int32{{1, 2, 3, 4, 5, 6}}); res.Err != kerr.InvalidReplicaAssignment {
		t.Errorf("an assignment of 6 replicas: %v, want INVALID_REPLICA_ASSIGNMENT", res.Err)
	}
}
