package testcluster

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestConsumerGroupSurvivesCoordinatorMove: a KIP-848 consumer group's
// state (its records in __consumer_offsets, RF=3) is loaded by the next
// leader of its partition when the coordinator shuts down. The members
// heartbeat on to the new coordinator with the epochs they had: the group
// epoch does not move, nobody is fenced and nothing is reassigned.
func TestConsumerGroupSurvivesCoordinatorMove(t *testing.T) {
	c := StartInProcess(t, 3, "offsets.topic.replication.factor=3",
		"group.consumer.heartbeat.interval.ms=200", "group.consumer.min.heartbeat.interval.ms=100")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	adm := kadm.NewClient(c.Client())
	const topic, group = "kip848-moves", "kip848-g"
	if r, err := adm.CreateTopic(ctx, 4, 3, nil, topic); err != nil || r.Err != nil {
		t.Fatalf("create: %v %v", err, r.Err)
	}
	for range 2 {
		cl := c.Client(kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.ServerSideBalancer(),
			kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.FetchMaxWait(200*time.Millisecond))
		go func() {
			for cl.PollFetches(ctx).Err0() == nil {
			}
		}()
	}
	// A fresh client each time: one that knew the stopped coordinator
	// would keep asking it.
	describe := func() (kmsg.ConsumerGroupDescribeResponseGroup, bool) {
		describer, err := kgo.NewClient(kgo.SeedBrokers(c.Bootstrap()...))
		if err != nil {
			t.Fatal(err)
		}
		defer describer.Close()
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Groups = []string{group}
		resp, err := req.RequestWith(ctx, describer)
		if err != nil || len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 {
			return kmsg.ConsumerGroupDescribeResponseGroup{}, false
		}
		return resp.Groups[0], true
	}
	stable := func(g kmsg.ConsumerGroupDescribeResponseGroup) bool {
		if g.State != "Stable" || len(g.Members) != 2 {
			return false
		}
		for _, m := range g.Members {
			if len(m.Assignment.TopicPartitions) == 0 || len(m.Assignment.TopicPartitions[0].Partitions) != 2 {
				return false
			}
		}
		return true
	}
	var before kmsg.ConsumerGroupDescribeResponseGroup
	c.WaitFor(30*time.Second, "two members with two partitions each", func() bool {
		g, ok := describe()
		before = g
		return ok && stable(g)
	})
	coord := adm.FindGroupCoordinators(ctx, group)[group]
	if coord.Err != nil {
		t.Fatal(coord.Err)
	}
	c.Nodes[coord.NodeID-1].Stop(t)
	var after kmsg.ConsumerGroupDescribeResponseGroup
	c.WaitFor(30*time.Second, "the group on its new coordinator", func() bool {
		g, ok := describe()
		after = g
		return ok && stable(g)
	})
	if after.Epoch != before.Epoch {
		t.Fatalf("group epoch moved from %d to %d across the coordinator move (a member was fenced)", before.Epoch, after.Epoch)
	}
	for i := range after.Members {
		if after.Members[i].MemberID != before.Members[i].MemberID || after.Members[i].MemberEpoch != before.Members[i].MemberEpoch {
			t.Fatalf("members changed across the move:\n%+v\n%+v", before.Members, after.Members)
		}
	}
}
