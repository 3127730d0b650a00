package engine_test

import (
	"testing"

	"github.com/sluice-broker/sluice/engine"
	"github.com/sluice-broker/sluice/internal/testbroker"
)

// TestOffsetsTopicCompaction commits offsets many times, so that
// __consumer_offsets holds many segments of superseded commits, runs the
// log cleaner, and checks the partition shrank and that the committed
// offsets survive a restart, replayed from the compacted log.
func TestOffsetsTopicCompaction(t *testing.T) {
	tb := testbroker.Start(t, func(c *engine.Config) {
		c.OffsetsTopicPartitions = 1
		c.OffsetsTopicSegmentBytes = 4096
	})
	createTopic(t, tb, "events", 3)
	const commits = 400
	for i := 0; i < commits; i++ {
		commitSimple(t, tb, "compacted", map[string]map[int32]int64{"events": {0: int64(i), 1: int64(2 * i), 2: int64(3 * i)}})
	}
	commitSimple(t, tb, "other", map[string]map[int32]int64{"events": {1: 7}})
	want := map[string]map[int32]int64{"events": {0: commits - 1, 1: 2 * (commits - 1), 2: 3 * (commits - 1)}}

	offsets := tb.Broker.Topic(offsetsTopicName).Partition(0).Log
	end, before := offsets.LogEndOffset(), offsets.Size()
	if err := offsets.Flush(); err != nil { // the recovery point leaves the sealed segments
		t.Fatal(err)
	}
	if n := tb.Broker.CompactLogsNow(); n != 1 {
		t.Fatalf("cleaned %d partitions, want the offsets partition", n)
	}
	after := offsets.Size()
	t.Logf("__consumer_offsets-0: %d bytes before, %d after compaction", before, after)
	if after > before/4 {
		t.Fatalf("partition shrank from %d to %d bytes only", before, after)
	}
	if n := tb.Broker.CompactLogsNow(); n != 0 {
		t.Fatalf("a second round cleaned %d partitions with nothing new", n)
	}
	if got := fetchAll(t, tb, "compacted"); !sameOffsets(got, want) {
		t.Fatalf("before restart: %v, want %v", got, want)
	}

	tb.Restart(t)
	offsets = tb.Broker.Topic(offsetsTopicName).Partition(0).Log
	if offsets.LogEndOffset() != end || offsets.Size() > after {
		t.Fatalf("after restart: end %d (was %d), size %d (was %d)", offsets.LogEndOffset(), end, offsets.Size(), after)
	}
	if got := fetchAll(t, tb, "compacted"); !sameOffsets(got, want) {
		t.Fatalf("after restart: %v, want %v", got, want)
	}
	if got := fetchAll(t, tb, "other"); got["events"][1] != 7 {
		t.Fatalf("other group after restart: %v", got)
	}
}

func sameOffsets(a, b map[string]map[int32]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for topic, ps := range b {
		if len(a[topic]) != len(ps) {
			return false
		}
		for p, o := range ps {
			if a[topic][p] != o {
				return false
			}
		}
	}
	return true
}
