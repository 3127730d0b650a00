package engine_test

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-broker/sluice/engine"
	"github.com/sluice-broker/sluice/metadata"
)

// TestReplicationISRExpansionBatched: N partitions led by broker 1 with
// ISR [1] get a follower, broker 2, that catches up on all of them at
// once (the "9,000 followers came up late" case). Every partition joins
// the ISR, and the expansions reach the controller batched: far fewer
// AlterPartition requests and commits than partitions. The same with one
// partition per request is logged beside it for comparison
// (SLUICE_ISR_PARTITIONS sets N, 300 by default).
func TestReplicationISRExpansionBatched(t *testing.T) {
	n := int32(300)
	if v, err := strconv.Atoi(os.Getenv("SLUICE_ISR_PARTITIONS")); err == nil && v > 0 {
		n = int32(v)
	}
	for _, batch := range []int{0, 1} {
		t.Run(fmt.Sprintf("batch=%d", batch), func(t *testing.T) {
			c := startCluster(t, 2)
			if batch > 0 {
				engine.SetISRBatch(c.brokers[1].Broker, batch)
			}
			id := [16]byte{7, 7}
			recs := []metadata.Record{metadata.TopicRecord{Name: "late", TopicID: id}}
			for i := range n {
				recs = append(recs, metadata.PartitionRecord{TopicID: id, Partition: i, Replicas: []int32{1, 2},
					ISR: []int32{1}, Leader: 1})
			}
			c.commitOnly(recs...)
			c.deliver(1)
			lead := c.brokers[1].Broker.Topic("late").Partitions()
			opening := time.Now()
			c.deliver(2) // the follower comes up: opens its logs and fetches
			start := time.Now()
			waitFor(t, "every partition's ISR to be [1 2]", func() bool {
				for _, p := range lead {
					if !slices.Equal(p.ISR(), []int32{1, 2}) {
						return false
					}
				}
				return true
			})
			elapsed := time.Since(start)
			requests, commits := c.alterCounts()
			sent, carried := engine.ISRRequests(c.brokers[1].Broker)
			t.Logf("%d partitions joined the ISR %v after the follower opened its logs (%v): %d AlterPartition requests (%d partition changes sent), %d commits",
				n, elapsed.Round(time.Millisecond), start.Sub(opening).Round(time.Millisecond), requests, carried, commits)
			if int64(requests) != sent {
				t.Errorf("controller saw %d requests, the leader sent %d", requests, sent)
			}
			if batch == 0 && (requests >= int(n) || commits >= int(n)) {
				t.Errorf("%d requests and %d commits for %d partitions: not batched", requests, commits, n)
			}
		})
	}
}
