package engine_test

import (
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/sluice-broker/sluice/engine"
	"github.com/sluice-broker/sluice/metadata"
)

// TestReplicationThrottle (KIP-73): broker 3 comes back to a partition
// filled while it was away (a reassignment-like catch-up: it is not in
// the ISR) with the topic naming its replica, and broker 2's, in the
// throttled replicas. Broker 3 catches up at about the throttle rate
// (logged, not asserted), while broker 2, in the ISR and so never
// throttled, keeps up with the fill and with acks=all produces made
// during the catch-up, all of which are answered; once caught up broker 3
// rejoins the ISR. Run with the leader's throttle, the follower's, and
// none for comparison.
func TestReplicationThrottle(t *testing.T) {
	const rate = 1 << 20 // bytes/s
	const fill = 4 << 20 // bytes in the log before broker 3 returns
	for _, tc := range []struct {
		name   string
		mut    func(*engine.Config)
		config map[string]string
	}{
		{"leader", func(c *engine.Config) { c.LeaderReplicationThrottledRate = rate },
			map[string]string{"leader.replication.throttled.replicas": "*"}},
		{"follower", func(c *engine.Config) { c.FollowerReplicationThrottledRate = rate },
			map[string]string{"follower.replication.throttled.replicas": "0:2,0:3"}},
		{"none", func(*engine.Config) {}, map[string]string{"leader.replication.throttled.replicas": "*"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := startCluster(t, 3, tc.mut)
			c.stop(3)
			id := [16]byte{3, 3}
			recs := []metadata.Record{metadata.TopicRecord{Name: "thr", TopicID: id},
				metadata.PartitionRecord{TopicID: id, Partition: 0, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}, Leader: 1}}
			for k, v := range tc.config {
				v := v
				recs = append(recs, metadata.ConfigRecord{ResourceType: metadata.ResourceTopic, ResourceName: "thr", Name: k, Value: &v})
			}
			c.commit(recs...)
			rc := dialRaw(t, c.brokers[1].Addr)
			batch := engine.BuildTestBatch(t, engine.TestBatchOpts{ProducerID: -1}, engine.TestRecord{Value: make([]byte, 64<<10)})
			t0 := time.Now()
			for range fill / (64 << 10) {
				if a := produceWithTimeout(rc, -1, 10_000, "thr", batch); a.ErrorCode != 0 {
					t.Fatalf("fill: %+v", a)
				}
			}
			fillTime := time.Since(t0)
			lp := c.partition(1, "thr")
			size := len(logBytes(t, c.brokers[1], "thr"))

			start := time.Now()
			c.restart(3)
			fp := c.partition(3, "thr")
			var lat []time.Duration
			for fp.LogEndOffset() < int64(fill/(64<<10)) {
				t0 := time.Now()
				if a := produceWithTimeout(rc, -1, 10_000, "thr", smallBatch(t, "during")); a.ErrorCode != 0 {
					t.Fatalf("acks=all while broker 3 catches up: %+v", a)
				}
				lat = append(lat, time.Since(t0))
				time.Sleep(20 * time.Millisecond) // pace the probe, not a wait for state
			}
			elapsed := time.Since(start)
			waitFor(t, "broker 3 to rejoin the ISR", func() bool { return slices.Equal(lp.ISR(), []int32{1, 2, 3}) })
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			t.Logf("%s throttle: in-sync broker 2 kept up with %d MiB of acks=all in %v; broker 3 fetched %d bytes in %v = %.2f MiB/s (rate %d MiB/s, plus a first second's burst); %d acks=all produces meanwhile, p50 %v, max %v",
				tc.name, fill>>20, fillTime.Round(time.Millisecond), size, elapsed.Round(time.Millisecond), float64(size)/elapsed.Seconds()/(1<<20), rate>>20,
				len(lat), pct(lat, 50), pct(lat, 100))
			c.assertIdentical(t, "thr", 1, []int32{1, 2, 3})
		})
	}
}

func pct(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, len(sorted)*p/100)].Round(10 * time.Microsecond)
}
