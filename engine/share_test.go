package engine_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/engine"
	"github.com/sluice-broker/sluice/internal/testbroker"
)

func startShareBroker(t *testing.T) *testbroker.Broker {
	return testbroker.Start(t, func(c *engine.Config) { c.ShareStateTopicPartitions = 2 })
}

// setGroupConfig sets GROUP configs with IncrementalAlterConfigs.
func setGroupConfig(t *testing.T, cl *kgo.Client, group string, kv map[string]string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	for k, v := range kv {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value = k, kmsg.StringPtr(v)
		res.Configs = append(res.Configs, c)
	}
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("alter group configs: %v %+v", err, resp)
	}
}

func produceN(t *testing.T, cl *kgo.Client, topic string, n int) {
	t.Helper()
	for i := range n {
		r := &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "v%d", i)}
		if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

type seen struct {
	mu     sync.Mutex
	offset map[int64]int // deliveries per offset
}

func (s *seen) add(r *kgo.Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.offset[r.Offset]++
}

func (s *seen) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.offset)
}

// Two franz-go share consumers on one partition: every record is
// delivered, and none twice (each accepted on the next poll).
func TestShareGroupFranzGo(t *testing.T) {
	tb := startShareBroker(t)
	cl := tb.Client(t, kgo.DefaultProduceTopic("q"))
	if _, err := tb.Admin(t).CreateTopic(context.Background(), 1, 1, nil, "q"); err != nil {
		t.Fatal(err)
	}
	setGroupConfig(t, cl, "sg", map[string]string{"share.auto.offset.reset": "earliest"})
	const n = 200
	produceN(t, cl, "q", n)

	s := &seen{offset: map[int64]int{}}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for range 2 {
		c := tb.Client(t, kgo.ShareGroup("sg"), kgo.ConsumeTopics("q"), kgo.ShareMaxRecords(20))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil && s.count() < n {
				fs := c.PollFetches(ctx)
				fs.EachRecord(s.add)
				if s.count() >= n {
					cancel() // the other consumer is parked in its poll
				}
			}
			c.MarkAcks(kgo.AckAccept)
			c.FlushAcks(context.Background())
		}()
	}
	wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.offset) != n {
		t.Fatalf("saw %d distinct offsets of %d", len(s.offset), n)
	}
	for off, k := range s.offset {
		if k != 1 {
			t.Errorf("offset %d delivered %d times", off, k)
		}
	}
	desc := describeShare(t, cl, "sg")
	t.Logf("group after consuming: state %s epoch %d members %d", desc.GroupState, desc.GroupEpoch, len(desc.Members))
}

func describeShare(t *testing.T, cl *kgo.Client, group string) kmsg.ShareGroupDescribeResponseGroup {
	t.Helper()
	req := kmsg.NewPtrShareGroupDescribeRequest()
	req.GroupIDs = []string{group}
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Groups[0]
}

// Released records come back with a higher delivery count; after a
// broker restart the records still held (not acknowledged) are
// delivered again and the accepted ones never.
func TestShareGroupRestartWithInFlightRecords(t *testing.T) {
	tb := startShareBroker(t)
	cl := tb.Client(t, kgo.DefaultProduceTopic("q"))
	if _, err := tb.Admin(t).CreateTopic(context.Background(), 1, 1, nil, "q"); err != nil {
		t.Fatal(err)
	}
	setGroupConfig(t, cl, "sg", map[string]string{"share.auto.offset.reset": "earliest"})
	produceN(t, cl, "q", 10)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := tb.Client(t, kgo.ShareGroup("sg"), kgo.ConsumeTopics("q"), kgo.ShareMaxRecords(10))
	var got []*kgo.Record
	for len(got) < 10 && ctx.Err() == nil {
		c.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got = append(got, r) })
	}
	// Accept the first five, hold the others (in flight) across the restart.
	c.MarkAcks(kgo.AckAccept, got[:5]...)
	if err := c.FlushAcks(ctx); err != nil {
		t.Fatal(err)
	}
	tb.Restart(t)

	c3 := tb.Client(t, kgo.ShareGroup("sg"), kgo.ConsumeTopics("q"), kgo.ShareMaxRecords(10))
	again := map[int64]int32{}
	for len(again) < 5 && ctx.Err() == nil {
		c3.PollFetches(ctx).EachRecord(func(r *kgo.Record) { again[r.Offset] = r.DeliveryCount() })
	}
	for off, dc := range again {
		if off < 5 {
			t.Errorf("accepted offset %d delivered again", off)
		}
		if dc < 2 {
			t.Errorf("offset %d redelivered with delivery count %d", off, dc)
		}
	}
	if len(again) != 5 {
		t.Fatalf("redelivered %v, want offsets 5-9", again)
	}
}
