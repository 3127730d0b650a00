package controller

import (
	"fmt"
	"testing"
)

// BenchmarkFence10kPartitions: fencing one of three brokers when 10,000
// partitions (100 topics of 100, RF 3) are spread over them: the
// decision walks every partition (there is no index from broker to
// partitions) and proposes a change for each one the broker is in.
func BenchmarkFence10kPartitions(b *testing.B) {
	h := tenThousandPartitions(b)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		res := h.c.Heartbeat(h.img, Heartbeat{BrokerID: 1, BrokerEpoch: h.epoch(1), CurrentMetadataOffset: h.next, WantFence: true}, h.now)
		if len(res.Records) < 10_000 {
			b.Fatalf("%d records", len(res.Records))
		}
	}
}

// BenchmarkTickIdle10kPartitions: a Tick that fences no one, over the
// same image.
func BenchmarkTickIdle10kPartitions(b *testing.B) {
	h := tenThousandPartitions(b)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if res := h.c.Tick(h.img, h.now); len(res.Records) != 0 {
			b.Fatal("fenced")
		}
	}
}

// tenThousandPartitions is three brokers and 100 topics of 100
// partitions, RF 3, leaders spread evenly.
func tenThousandPartitions(b *testing.B) *harness {
	h := newHarness(b)
	h.brokers(3)
	for i := range 100 {
		var as [][]int32
		for p := range 100 {
			r := int32((i + p) % 3)
			as = append(as, ints(r+1, (r+1)%3+1, (r+2)%3+1))
		}
		name := fmt.Sprintf("t%03d", i)
		res := h.c.CreateTopics(h.img, []CreateTopic{{Name: name, ID: [16]byte{0xee, byte(i), 1}, NumPartitions: -1, ReplicationFactor: -1, Assignments: as}})
		if res.Topics[0].Err != nil {
			b.Fatalf("create %s: %v", name, res.Topics[0].Err)
		}
		h.commit(res.Records...)
	}
	return h
}

// BenchmarkFenceUninvolved10kPartitions: fencing a fourth broker that
// hosts none of the 10,000 partitions: what the scan alone costs, which
// an index from broker to partitions would save.
func BenchmarkFenceUninvolved10kPartitions(b *testing.B) {
	h := tenThousandPartitions(b)
	h.register(4, 1, nil)
	h.heartbeat(4, nil)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		res := h.c.Heartbeat(h.img, Heartbeat{BrokerID: 4, BrokerEpoch: h.epoch(4), CurrentMetadataOffset: h.next, WantFence: true}, h.now)
		if len(res.Records) != 1 {
			b.Fatalf("%d records", len(res.Records))
		}
	}
}
