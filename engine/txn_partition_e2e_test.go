package engine_test

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-broker/sluice/engine"
	"github.com/sluice-broker/sluice/internal/testbroker"
)

// The partition side of transactions with real franz-go transactional
// producers and consumers: open transactions over a broker restart, and a
// compacted topic read at both isolation levels.

// consumeKeys consumes topic from the start at iso until every partition
// has shown a record whose value is end, and returns each key's last
// value.
func consumeKeys(t *testing.T, tb *testbroker.Broker, topic string, partitions int, end string, iso kgo.IsolationLevel) map[string]string {
	t.Helper()
	cl := tb.Client(t, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(iso), kgo.FetchMaxWait(200*time.Millisecond),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ended := map[int32]bool{}
	out := map[string]string{}
	for len(ended) < partitions {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %v, %d of %d partitions ended: %v", out, len(ended), partitions, ctx.Err())
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Value) == end {
				ended[r.Partition] = true
				return
			}
			out[string(r.Key)] = string(r.Value)
		})
	}
	return out
}

func stableOffsets(t *testing.T, tb *testbroker.Broker, topic string, partitions int32) []int64 {
	t.Helper()
	var out []int64
	for i := range partitions {
		out = append(out, tb.Broker.Topic(topic).Partition(i).LastStableOffset())
	}
	return out
}

// TestOpenTransactionSurvivesRestart: a transaction left open across a
// clean broker restart still holds the LSO of its partitions where it
// began (the producer state came back from the snapshots), and its commit
// afterwards makes its records visible to read_committed.
func TestOpenTransactionSurvivesRestart(t *testing.T) {
	tb := txnBroker(t)
	makeTopic(t, tb, "rs", 2, nil)
	plain := tb.Client(t, kgo.DefaultProduceTopic("rs"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	for _, v := range []string{"p1", "p2"} {
		if err := plain.ProduceSync(context.Background(), &kgo.Record{Key: []byte(v), Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	tx := tb.Client(t, kgo.TransactionalID("tx-restart"), kgo.DefaultProduceTopic("rs"),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.TransactionTimeout(60*time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := tx.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"o1", "o2", "o3", "o4"} {
		if err := tx.ProduceSync(ctx, &kgo.Record{Key: []byte(v), Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	for _, v := range []string{"q1", "q2"} { // after the open transaction
		if err := plain.ProduceSync(ctx, &kgo.Record{Key: []byte(v), Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if got := stableOffsets(t, tb, "rs", 2); fmt.Sprint(got) != "[1 1]" {
		t.Fatalf("LSOs before the restart %v, want [1 1] (each partition's first transactional offset)", got)
	}
	tb.Restart(t)
	if got := stableOffsets(t, tb, "rs", 2); fmt.Sprint(got) != "[1 1]" {
		t.Fatalf("LSOs after the restart %v, want [1 1]", got)
	}
	if err := tx.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit after the restart: %v", err)
	}
	if err := plain.ProduceSync(ctx, &kgo.Record{Value: []byte("END"), Partition: 0}, &kgo.Record{Value: []byte("END")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	got := consumeKeys(t, tb, "rs", 2, "END", kgo.ReadCommitted())
	for _, k := range []string{"p1", "p2", "o1", "o2", "o3", "o4", "q1", "q2"} {
		if got[k] != k {
			t.Fatalf("read_committed after the commit: %v, missing %s", got, k)
		}
	}
}

// TestCompactedTopicTransactions: a compacted topic written by committed
// and aborted transactions reads the same at read_committed before and
// after the log cleaner ran, and at read_uncommitted no aborted record is
// left once it did.
func TestCompactedTopicTransactions(t *testing.T) {
	tb := txnBroker(t)
	makeTopic(t, tb, "cmp", 1, map[string]string{"cleanup.policy": "compact", "segment.bytes": "2048", "min.cleanable.dirty.ratio": "0.01"})
	tx := tb.Client(t, kgo.TransactionalID("tx-cmp"), kgo.DefaultProduceTopic("cmp"))
	write := func(commit bool, kv ...string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := tx.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < len(kv); i += 2 {
			if err := tx.ProduceSync(ctx, &kgo.Record{Key: []byte(kv[i]), Value: []byte(kv[i+1])}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	write(true, "k1", "v1", "k2", "v1", "k3", "v1")
	write(false, "k1", "x", "k2", "x", "k4", "x")
	write(true, "k2", "v2")
	write(false, "k3", "x")
	for i := 0; i < 60; i++ { // roll the transactions out of the active segment
		write(true, fmt.Sprintf("f%d", i%5), fmt.Sprintf("w%d", i))
	}
	write(true, "end", "END")
	want := consumeKeys(t, tb, "cmp", 1, "END", kgo.ReadCommitted())
	if want["k1"] != "v1" || want["k2"] != "v2" || want["k3"] != "v1" || want["k4"] != "" {
		t.Fatalf("read_committed before cleaning: %v", want)
	}
	if u := consumeKeys(t, tb, "cmp", 1, "END", kgo.ReadUncommitted()); u["k4"] != "x" {
		t.Fatalf("read_uncommitted before cleaning: %v", u)
	}
	log := engine.PartitionLog(tb.Broker.Topic("cmp").Partition(0))
	if err := log.Flush(); err != nil {
		t.Fatal(err)
	}
	if n := tb.Broker.CompactLogsNow(); n != 1 {
		t.Fatalf("cleaned %d partitions, want 1", n)
	}
	if got := consumeKeys(t, tb, "cmp", 1, "END", kgo.ReadCommitted()); !maps.Equal(got, want) {
		t.Fatalf("read_committed after cleaning %v, want %v", got, want)
	}
	if got := consumeKeys(t, tb, "cmp", 1, "END", kgo.ReadUncommitted()); !maps.Equal(got, want) {
		t.Fatalf("read_uncommitted after cleaning %v, want %v (no aborted record left)", got, want)
	}
}
