package testcluster

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Share groups on three in-process nodes: three partitions led by
// different brokers, their share state in __share_group_state partitions
// led by others (the leaders persist through WriteShareGroupState to the
// coordinator), two franz-go share consumers. Every record is delivered
// once; after the leader of a partition is stopped (controlled shutdown)
// the records produced since are delivered and no accepted one again.
func TestShareGroupCluster(t *testing.T) {
	c := StartInProcess(t, 3, "share.coordinator.state.topic.num.partitions=3", "offsets.topic.replication.factor=3")
	adm := kadm.NewClient(c.Client())
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const topic, parts = "shareq", 3
	if r, err := adm.CreateTopic(ctx, parts, 3, nil, topic); err != nil || r.Err != nil {
		t.Fatalf("create: %v %v", err, r.Err)
	}
	c.WaitFor(20*time.Second, "three in-sync replicas everywhere", func() bool { return inSync(ctx, adm, topic, 3) })
	alter := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "csg"
	res.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "share.auto.offset.reset", Value: kmsg.StringPtr("earliest")}}
	alter.Resources = []kmsg.IncrementalAlterConfigsRequestResource{res}
	if resp, err := alter.RequestWith(ctx, c.Client()); err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("group config: %v %+v", err, resp)
	}
	prod := c.Client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	produce := func(from, n int) {
		for i := from; i < from+n; i++ {
			if err := prod.ProduceSync(ctx, kgo.StringRecord(fmt.Sprint(i))).FirstErr(); err != nil {
				t.Fatalf("produce %d: %v", i, err)
			}
		}
	}
	var mu sync.Mutex
	seen := map[string]int{}
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(seen)
	}
	consume := func(want int) {
		cctx, ccancel := context.WithCancel(ctx)
		defer ccancel()
		var wg sync.WaitGroup
		for range 2 {
			cl := c.Client(kgo.ShareGroup("csg"), kgo.ConsumeTopics(topic))
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer cl.Close()
				for cctx.Err() == nil && count() < want {
					cl.PollFetches(cctx).EachRecord(func(r *kgo.Record) {
						mu.Lock()
						seen[string(r.Value)]++
						mu.Unlock()
					})
					if count() >= want {
						ccancel()
					}
				}
				cl.MarkAcks(kgo.AckAccept)
				fctx, fcancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer fcancel()
				cl.FlushAcks(fctx)
			}()
		}
		wg.Wait()
		if n := count(); n != want {
			t.Fatalf("consumed %d distinct records, want %d", n, want)
		}
	}
	produce(0, 90)
	consume(90)

	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	stopped := md.Topics[topic].Partitions[0].Leader
	c.Nodes[stopped-1].Stop(t)
	produce(90, 60)
	consume(150)
	mu.Lock()
	defer mu.Unlock()
	for v, k := range seen {
		if k != 1 {
			t.Errorf("record %s delivered %d times", v, k)
		}
	}
}
