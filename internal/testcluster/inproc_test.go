package testcluster

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestInProcessCluster runs three nodes in the test's process: an RF=3
// topic takes acks=all writes, a controlled shutdown moves the stopped
// node's leaderships and writes go on, the node comes back into every ISR,
// and a consumer reads every record once, in order.
func TestInProcessCluster(t *testing.T) {
	start := time.Now()
	c := StartInProcess(t, 3, "min.insync.replicas=2")
	t.Logf("three in-process nodes formed in %v", time.Since(start))
	adm := kadm.NewClient(c.Client())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const topic, parts = "inproc", 3
	if r, err := adm.CreateTopic(ctx, parts, 3, nil, topic); err != nil || r.Err != nil {
		t.Fatalf("create: %v %v", err, r.Err)
	}
	c.WaitFor(20*time.Second, "three in-sync replicas everywhere", func() bool { return inSync(ctx, adm, topic, 3) })

	prod := c.Client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	produce := func(from, n int) {
		for i := from; i < from+n; i++ {
			if err := prod.ProduceSync(ctx, kgo.StringRecord(fmt.Sprint(i))).FirstErr(); err != nil {
				t.Fatalf("produce %d: %v", i, err)
			}
		}
	}
	produce(0, 150)

	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	stopped := md.Topics[topic].Partitions[0].Leader
	nd := c.Nodes[stopped-1]
	nd.Stop(t)
	c.WaitFor(10*time.Second, fmt.Sprintf("node %d out of every leadership and ISR", stopped), func() bool {
		md, err := adm.Metadata(ctx, topic)
		if err != nil || len(md.Topics[topic].Partitions) != parts {
			return false
		}
		for _, p := range md.Topics[topic].Partitions {
			if p.Leader < 0 || p.Leader == stopped || slices.Contains(p.ISR, stopped) {
				return false
			}
		}
		return true
	})
	produce(150, 150)
	nd.Start(t)
	c.WaitFor(30*time.Second, "the restarted node back in every ISR", func() bool { return inSync(ctx, adm, topic, 3) })
	produce(300, 60)

	cons := c.Client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	last := map[int32]int{}
	for seen := 0; seen < 360; {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of 360: %v", seen, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			var v int
			fmt.Sscan(string(r.Value), &v)
			if prev, ok := last[r.Partition]; ok && v <= prev {
				t.Fatalf("partition %d: %d after %d", r.Partition, v, prev)
			}
			last[r.Partition] = v
			seen++
		})
	}
}

// inSync reports whether every partition of topic has a leader and n
// in-sync replicas.
func inSync(ctx context.Context, adm *kadm.Client, topic string, n int) bool {
	md, err := adm.Metadata(ctx, topic)
	if err != nil || len(md.Topics[topic].Partitions) == 0 {
		return false
	}
	for _, p := range md.Topics[topic].Partitions {
		if p.Err != nil || p.Leader < 0 || len(p.ISR) != n {
			return false
		}
	}
	return true
}
