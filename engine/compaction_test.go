package engine_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

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

	offsets := engine.PartitionLog(tb.Broker.Topic(offsetsTopicName).Partition(0))
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
	offsets = engine.PartitionLog(tb.Broker.Topic(offsetsTopicName).Partition(0))
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

// TestCompactedTopicConsumedByClient produces keyed records (zstd, with an
// idempotent producer, and tombstones) to a compacted topic, compacts it,
// and reads it back with franz-go: records keep their offsets, values and
// timestamps, and of every key only the latest record is left below the
// active segment.
func TestCompactedTopicConsumedByClient(t *testing.T) {
	tb := testbroker.Start(t)
	resp, err := tb.Admin(t).CreateTopic(adminCtx(t), 1, 1, map[string]*string{
		"cleanup.policy":      kadm.StringPtr("compact"),
		"segment.bytes":       kadm.StringPtr("2048"),
		"delete.retention.ms": kadm.StringPtr("3600000"),
	}, "table")
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatal(err)
	}
	cl := tb.Client(t, kgo.DefaultProduceTopic("table"), kgo.ProducerBatchCompression(kgo.ZstdCompression()))
	produced := map[int64]*kgo.Record{}
	latest := map[string]int64{}
	base := time.UnixMilli(1_700_000_000_000)
	for i := 0; i < 300; i++ {
		key := fmt.Sprintf("key-%d", i%20)
		r := &kgo.Record{Key: []byte(key), Value: []byte(fmt.Sprintf("value-%d", i)), Timestamp: base.Add(time.Duration(i) * time.Millisecond)}
		if i%20 == 5 && i > 200 {
			r.Value = nil // tombstone
		}
		if err := cl.ProduceSync(adminCtx(t), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
		produced[r.Offset] = r
		latest[key] = r.Offset
	}
	l := engine.PartitionLog(tb.Broker.Topic("table").Partition(0))
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if n := tb.Broker.CompactLogsNow(); n != 1 {
		t.Fatalf("cleaned %d partitions", n)
	}
	st, err := l.Compact(time.Now().UnixMilli()) // nothing left to do: reports how far it cleaned
	if err != nil || st.CleanedTo == 0 || st.SegmentsRead != 0 {
		t.Fatalf("%+v %v", st, err)
	}
	end := l.LogEndOffset()
	consumer := tb.Client(t, kgo.ConsumeTopics("table"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var got []*kgo.Record
	for len(got) == 0 || got[len(got)-1].Offset < end-1 {
		fs := consumer.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d records: %v", len(got), err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		got = append(got, fs.Records()...)
	}
	if len(got) >= len(produced)/2 {
		t.Fatalf("consumed %d of %d records: not compacted", len(got), len(produced))
	}
	seen := map[string]int64{}
	for i, r := range got {
		want := produced[r.Offset]
		if want == nil || !bytes.Equal(r.Key, want.Key) || !bytes.Equal(r.Value, want.Value) || (r.Value == nil) != (want.Value == nil) || !r.Timestamp.Equal(want.Timestamp) {
			t.Fatalf("offset %d: got %q=%q at %v, produced %+v", r.Offset, r.Key, r.Value, r.Timestamp, want)
		}
		if i > 0 && r.Offset <= got[i-1].Offset {
			t.Fatalf("offset %d after %d", r.Offset, got[i-1].Offset)
		}
		if _, ok := seen[string(r.Key)]; ok && r.Offset < st.CleanedTo {
			t.Fatalf("key %s twice below %d, the cleaned offsets", r.Key, st.CleanedTo)
		}
		seen[string(r.Key)] = r.Offset
	}
	for key, off := range latest {
		if seen[key] != off {
			t.Fatalf("key %s: last consumed at %d, latest produced at %d", key, seen[key], off)
		}
	}
}
