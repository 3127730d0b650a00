package engine_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/engine"
	"github.com/sluice-broker/sluice/metadata"
)

// startRackCluster starts brokers 1..n in racks r1..rn with Kafka's
// RackAwareReplicaSelector, and registers them (with their racks) in the
// image every broker holds.
func startRackCluster(t *testing.T, n int, mutators ...func(*engine.Config)) *testController {
	muts := append([]func(*engine.Config){func(cfg *engine.Config) {
		cfg.BrokerRack = fmt.Sprintf("r%d", cfg.NodeID)
		cfg.ReplicaSelectorClass = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
	}}, mutators...)
	c := startCluster(t, n, muts...)
	for id := int32(1); id <= int32(n); id++ {
		rack := fmt.Sprintf("r%d", id)
		c.commit(metadata.RegisterBrokerRecord{BrokerID: id, BrokerEpoch: int64(id), Rack: &rack,
			Endpoints: []metadata.Endpoint{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 9}}})
	}
	return c
}

// consumerFetch is a consumer's Fetch v12 of partition 0 at offset from
// rack ("" none).
func consumerFetch(rc *rawConn, topic string, offset int64, rack string, version int16) kmsg.FetchResponseTopicPartition {
	req := fetchReq(topic, [16]byte{}, map[int32]int64{0: offset})
	req.Rack = rack
	return do[*kmsg.FetchResponse](rc, req, version).Topics[0].Partitions[0]
}

// TestFetchFromFollower (KIP-392): the leader (rack r1) answers a
// consumer in rack r2 with PreferredReadReplica 2 and no records, and
// consumers in its own rack, in no rack or in an unknown rack with the
// records; follower 2 serves the consumer's fetch up to its high
// watermark, answers OFFSET_OUT_OF_RANGE past its log end and
// NOT_LEADER_OR_FOLLOWER to Fetch below v11 (fetching only from leaders);
// a follower that left the ISR is not preferred.
func TestFetchFromFollower(t *testing.T) {
	c := startRackCluster(t, 3, func(cfg *engine.Config) { cfg.ReplicaLagTimeMax = 300 * time.Millisecond })
	c.createTopic("ff", 1, []int32{1, 2, 3}, nil)
	rc1 := dialRaw(t, c.brokers[1].Addr)
	for i := range 3 {
		if a := produceWithTimeout(rc1, -1, 10_000, "ff", smallBatch(t, "a", fmt.Sprint(i))); a.ErrorCode != 0 {
			t.Fatalf("%+v", a)
		}
	}
	lp, fp2 := c.partition(1, "ff"), c.partition(2, "ff")
	waitFor(t, "follower 2's high watermark", func() bool { return fp2.HighWatermark() == lp.HighWatermark() })

	p := consumerFetch(rc1, "ff", 0, "r2", 12)
	if p.ErrorCode != 0 || p.PreferredReadReplica != 2 || len(p.RecordBatches) != 0 || p.HighWatermark != 6 {
		t.Fatalf("leader's answer to rack r2: %+v", p)
	}
	for _, rack := range []string{"r1", "", "r9"} {
		p := consumerFetch(rc1, "ff", 0, rack, 12)
		if p.ErrorCode != 0 || p.PreferredReadReplica != -1 || lastOffset(t, p.RecordBatches) != 5 {
			t.Fatalf("leader's answer to rack %q: error %v, preferred %d, last offset %d", rack, kerr.ErrorForCode(p.ErrorCode), p.PreferredReadReplica, lastOffset(t, p.RecordBatches))
		}
	}

	rc2 := dialRaw(t, c.brokers[2].Addr)
	p = consumerFetch(rc2, "ff", 0, "r2", 12)
	if p.ErrorCode != 0 || p.PreferredReadReplica != -1 || p.HighWatermark != 6 || lastOffset(t, p.RecordBatches) != 5 {
		t.Fatalf("follower's answer: error %v %+v", kerr.ErrorForCode(p.ErrorCode), p)
	}
	if p := consumerFetch(rc2, "ff", 6, "r2", 12); p.ErrorCode != 0 || len(p.RecordBatches) != 0 {
		t.Fatalf("follower at its high watermark: %+v", p)
	}
	if p := consumerFetch(rc2, "ff", 7, "r2", 12); p.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Fatalf("follower past its log end: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	if p := consumerFetch(rc2, "ff", 0, "", 10); p.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("follower to Fetch v10: %v", kerr.ErrorForCode(p.ErrorCode))
	}

	// A parked consumer on the follower is woken by the high watermark
	// its fetcher brings.
	parked := make(chan kmsg.FetchResponseTopicPartition, 1)
	go func() {
		rc := dialRaw(t, c.brokers[2].Addr)
		req := fetchReq("ff", [16]byte{}, map[int32]int64{0: 6})
		req.MaxWaitMillis, req.Rack = 10_000, "r2"
		parked <- do[*kmsg.FetchResponse](rc, req, 12).Topics[0].Partitions[0]
	}()
	waitFor(t, "the consumer to park on the follower", func() bool { return engine.ParkedFetches(c.brokers[2].Broker) > 0 })
	if a := produceWithTimeout(rc1, -1, 10_000, "ff", smallBatch(t, "late")); a.ErrorCode != 0 {
		t.Fatalf("%+v", a)
	}
	if p := <-parked; p.ErrorCode != 0 || lastOffset(t, p.RecordBatches) != 6 {
		t.Fatalf("parked consumer on the follower: %+v", p)
	}

	c.stop(2)
	waitFor(t, "broker 2 to leave the ISR", func() bool { return slices.Equal(lp.ISR(), []int32{1, 3}) })
	if p := consumerFetch(rc1, "ff", 0, "r2", 12); p.PreferredReadReplica != -1 || len(p.RecordBatches) == 0 {
		t.Fatalf("leader sent rack r2 to an out-of-sync follower: %+v", p)
	}
	if p := consumerFetch(rc1, "ff", 0, "r3", 12); p.PreferredReadReplica != 3 {
		t.Fatalf("leader's answer to rack r3: %+v", p)
	}
}
