package testcluster

import (
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// batchSources counts, per broker, the record batches a client read.
type batchSources struct {
	mu  sync.Mutex
	per map[int32]int
}

func (b *batchSources) OnFetchBatchRead(meta kgo.BrokerMetadata, _ string, _ int32, m kgo.FetchBatchMetrics) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.per[meta.NodeID] += m.NumRecords
}

func (b *batchSources) counts() map[int32]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[int32]int{}
	for k, v := range b.per {
		out[k] = v
	}
	return out
}

// TestFollowerFetching (KIP-392): three nodes in racks r1, r2, r3 with
// Kafka's RackAwareReplicaSelector; a franz-go consumer with kgo.Rack set
// to a follower's rack reads every record of an RF=3 partition, and reads
// them from that follower (the leader only points it there), while a
// consumer in the leader's rack reads from the leader.
func TestFollowerFetching(t *testing.T) {
	c := Start(t, 3, Options{Extra: []string{"replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector"}})
	// Give each node its rack: a whole-cluster restart with broker.rack
	// added to each node's file (brokers register their rack anew).
	for _, nd := range c.Nodes {
		nd.Kill()
		f, err := os.OpenFile(nd.ConfigPath, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(f, "broker.rack=r%d\n", nd.ID)
		f.Close()
	}
	for _, nd := range c.Nodes {
		nd.start()
	}
	c.WaitBrokers(3, 30*time.Second)
	adm := kadm.NewClient(c.Client())
	createTopic(t, adm, "near", 1, 3)
	var leaders map[int32]int32
	var isrs map[int32][]int32
	c.WaitFor(20*time.Second, "a leader and a full ISR", func() bool {
		leaders, isrs = topicLeaders(t, c, c.Nodes[0], "near")
		return len(leaders) == 1 && leaders[0] > 0 && len(isrs[0]) == 3
	})
	leader := leaders[0]
	follower := leader%3 + 1
	t.Logf("leader %d, consumer in the rack of follower %d", leader, follower)

	prod := c.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	const n = 200
	for i := range n {
		prod.Produce(ctxT(t, 30*time.Second), &kgo.Record{Topic: "near", Value: []byte(fmt.Sprint(i))}, nil)
	}
	if err := prod.Flush(ctxT(t, 30*time.Second)); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name string
		node int32
	}{{"follower's rack", follower}, {"leader's rack", leader}} {
		t.Run(tc.name, func(t *testing.T) {
			src := &batchSources{per: map[int32]int{}}
			cons := c.Client(kgo.Rack(fmt.Sprintf("r%d", tc.node)), kgo.WithHooks(src),
				kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"near": {0: kgo.NewOffset().AtStart()}}))
			got := 0
			ctx := ctxT(t, 30*time.Second)
			for got < n {
				fs := cons.PollFetches(ctx)
				if err := ctx.Err(); err != nil {
					t.Fatalf("consumed %d of %d: %v", got, n, err)
				}
				fs.EachRecord(func(r *kgo.Record) {
					if string(r.Value) != fmt.Sprint(r.Offset) {
						t.Fatalf("offset %d holds %q", r.Offset, r.Value)
					}
					got++
				})
			}
			per := src.counts()
			t.Logf("records read per broker: %v", per)
			if per[tc.node] != n {
				t.Fatalf("records read per broker %v; want all %d from broker %d", per, n, tc.node)
			}
		})
	}
}
