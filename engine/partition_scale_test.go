package engine_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-broker/sluice/engine"
	"github.com/sluice-broker/sluice/internal/testbroker"
	"github.com/sluice-broker/sluice/storage"
)

// TestThreeThousandPartitionsSurviveRetentionRestartAndDeletion keeps the
// broker correct at a few thousand partitions (issue 17), not fast: 30
// topics of 100 partitions, created one CreateTopics each, two records
// written to every partition, retention deleting the first segment of ten
// topics (whose every batch rolls), ten topics deleted, a clean restart
// (which recovers no partition: the data directory's clean-shutdown record
// names them all) —
// with the storage caches bounded below the partition count (1,024 .log
// descriptors, 128 mapped segments), so descriptors and mappings are evicted
// and brought back all along. (The descriptor bound stays above half the
// 2,000 partitions one fetch reads back: evicted descriptors that lent a
// Region to the response count until the response releases it, and past
// twice the bound reads fail retriably until then; storage's own tests
// cover that.) Afterwards every surviving partition holds
// exactly its records and the deleted topics are gone, directories
// included. Timings are logged, never asserted.
func TestThreeThousandPartitionsSurviveRetentionRestartAndDeletion(t *testing.T) {
	storage.SetMaxOpenLogFiles(1024)
	storage.SetMaxMappedSegments(128)
	t.Cleanup(func() {
		storage.SetMaxOpenLogFiles(4096)
		storage.SetMaxMappedSegments(1024)
	})
	tb := testbroker.Start(t, func(c *engine.Config) { c.RetentionCheckInterval = 100 * time.Millisecond })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const topics, parts = 30, 100
	name := func(i int) string { return fmt.Sprintf("scale-%02d", i) }
	retained := func(i int) bool { return i < 10 }
	deleted := func(i int) bool { return i >= 20 }

	adm := tb.Admin(t)
	start := time.Now()
	for i := 0; i < topics; i++ {
		var configs map[string]*string
		if retained(i) { // every batch rolls, and the old segment expires
			configs = map[string]*string{"segment.bytes": kadm.StringPtr("100"), "retention.ms": kadm.StringPtr("1")}
		}
		if _, err := adm.CreateTopic(ctx, parts, 1, configs, name(i)); err != nil {
			t.Fatalf("create %s: %v", name(i), err)
		}
	}
	t.Logf("created %d partitions in %v", topics*parts, time.Since(start))

	cl := tb.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.MaxBufferedRecords(topics*parts))
	start = time.Now()
	for round := 0; round < 2; round++ {
		var recs []*kgo.Record
		for i := 0; i < topics; i++ {
			for p := int32(0); p < parts; p++ {
				recs = append(recs, &kgo.Record{Topic: name(i), Partition: p, Value: []byte(fmt.Sprintf("%s/%d/%d", name(i), p, round))})
			}
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce round %d: %v", round, err)
		}
		t.Logf("wrote record %d to each partition in %v", round, time.Since(start))
		start = time.Now()
	}

	waitForRetention(ctx, t, adm, name, retained)
	doomed := []string{}
	for i := 0; i < topics; i++ {
		if deleted(i) {
			doomed = append(doomed, name(i))
		}
	}
	if _, err := adm.DeleteTopics(ctx, doomed...); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	tb.Restart(t)
	t.Logf("restart (clean stop and start) in %v", time.Since(start))
	if rec, markers := partitionsRecovered(t, tb); rec != 0 || markers != 0 {
		t.Fatalf("after the clean restart %d partitions were recovered and %d kept a marker of their own", rec, markers)
	}

	adm = tb.Admin(t)
	checkScaleOffsets(ctx, t, adm, topics, name, retained, deleted)
	checkScaleRecords(ctx, t, tb, topics, parts, name, deleted)
	ents, err := os.ReadDir(tb.Config.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		for _, d := range doomed {
			if strings.HasPrefix(e.Name(), d+"-") {
				t.Fatalf("%s still in the data directory", e.Name())
			}
		}
	}
}

// waitForRetention waits until retention has deleted the first segment of
// every partition of the retained topics.
func waitForRetention(ctx context.Context, t *testing.T, adm *kadm.Client, name func(int) string, retained func(int) bool) {
	t.Helper()
	var ts []string
	for i := 0; retained(i); i++ {
		ts = append(ts, name(i))
	}
	start := time.Now()
	for {
		offs, err := adm.ListStartOffsets(ctx, ts...)
		if err != nil {
			t.Fatal(err)
		}
		waiting := 0
		offs.Each(func(o kadm.ListedOffset) {
			if o.Err != nil || o.Offset < 1 {
				waiting++
			}
		})
		if waiting == 0 {
			t.Logf("retention deleted the first segment of every retained partition after %v", time.Since(start))
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("retention: %d partitions still start at 0", waiting)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkScaleOffsets: the deleted topics are gone, and every other
// partition ends at 2 and starts at 0, or past 0 if retention applies.
func checkScaleOffsets(ctx context.Context, t *testing.T, adm *kadm.Client, topics int, name func(int) string, retained, deleted func(int) bool) {
	t.Helper()
	listed, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var live []string
	for i := 0; i < topics; i++ {
		if _, ok := listed[name(i)]; ok == deleted(i) {
			t.Fatalf("%s listed: %v", name(i), ok)
		}
		if !deleted(i) {
			live = append(live, name(i))
		}
	}
	ends, err := adm.ListEndOffsets(ctx, live...)
	if err != nil {
		t.Fatal(err)
	}
	starts, err := adm.ListStartOffsets(ctx, live...)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < topics; i++ {
		if deleted(i) {
			continue
		}
		for p, o := range ends[name(i)] {
			s := starts[name(i)][p]
			if o.Err != nil || o.Offset != 2 || s.Err != nil || (s.Offset >= 1) != retained(i) {
				t.Fatalf("%s/%d after restart: start %d (%v), end %d (%v)", name(i), p, s.Offset, s.Err, o.Offset, o.Err)
			}
		}
	}
}

// checkScaleRecords consumes every surviving partition from its start and
// checks each record is the one written there.
func checkScaleRecords(ctx context.Context, t *testing.T, tb *testbroker.Broker, topics, parts int, name func(int) string, deleted func(int) bool) {
	t.Helper()
	assign := map[string]map[int32]kgo.Offset{}
	for i := 0; i < topics; i++ {
		if deleted(i) {
			continue
		}
		assign[name(i)] = map[int32]kgo.Offset{}
		for p := int32(0); p < int32(parts); p++ {
			assign[name(i)][p] = kgo.NewOffset().AtStart()
		}
	}
	cl := tb.Client(t, kgo.ConsumePartitions(assign))
	seen := map[string]bool{}
	start := time.Now()
	for !allSeen(seen, topics, parts, name, deleted) {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d records: %v", len(seen), err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			want := fmt.Sprintf("%s/%d/%d", r.Topic, r.Partition, r.Offset)
			if string(r.Value) != want {
				t.Fatalf("%s/%d@%d holds %q", r.Topic, r.Partition, r.Offset, r.Value)
			}
			seen[want] = true
		})
	}
	t.Logf("read every surviving partition in %v", time.Since(start))
}

// allSeen reports whether the last record (offset 1) of every surviving
// partition was consumed; retention may have taken offset 0.
func allSeen(seen map[string]bool, topics, parts int, name func(int) string, deleted func(int) bool) bool {
	for i := 0; i < topics; i++ {
		if deleted(i) {
			continue
		}
		for p := 0; p < parts; p++ {
			if !seen[fmt.Sprintf("%s/%d/1", name(i), p)] {
				return false
			}
		}
	}
	return true
}
