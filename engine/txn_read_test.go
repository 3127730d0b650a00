package engine_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-broker/sluice/engine"
	"github.com/sluice-broker/sluice/internal/testbroker"
	"github.com/sluice-broker/sluice/record"
)

// txnBatch is a transactional batch of producer pid holding values, as a
// transactional producer sends one (pid -1: a plain batch).
func txnBatch(t testing.TB, pid int64, epoch int16, seq int32, values ...string) []byte {
	t.Helper()
	h := record.NewHeader()
	h.ProducerID, h.ProducerEpoch, h.BaseSequence = pid, epoch, seq
	if pid >= 0 {
		h.Attributes = record.AttrTransactional
	}
	h.FirstTimestamp = time.Now().UnixMilli()
	h.MaxTimestamp = h.FirstTimestamp
	h.NumRecords, h.LastOffsetDelta = int32(len(values)), int32(len(values)-1)
	var raw []byte
	for i, v := range values {
		raw = record.AppendRecord(raw, &record.Record{OffsetDelta: int32(i), Value: []byte(v)})
	}
	b, err := record.AppendBatch(nil, &h, raw)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// plainBatch is a batch of a plain (non-idempotent) producer.
func plainBatch(t testing.TB, values ...string) []byte {
	return txnBatch(t, -1, -1, -1, values...)
}

func mustAppend(t testing.TB, p *engine.Partition, b []byte) {
	t.Helper()
	if _, err := engine.AppendBatchForTest(p, b); err != nil {
		t.Fatal(err)
	}
}

func mustMarker(t testing.TB, p *engine.Partition, pid int64, commit bool) {
	t.Helper()
	if err := engine.WriteTxnMarkerForTest(p, pid, 0, 0, commit); err != nil {
		t.Fatal(err)
	}
}

// consumeValues consumes topic from the start with cl until it has n
// records or ctx ends, and returns their values in order.
func consumeValues(ctx context.Context, t testing.TB, cl *kgo.Client, n int) []string {
	t.Helper()
	var got []string
	for len(got) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			break
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Errorf("fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	return got
}

func listEnd(t testing.TB, adm *kadm.Client, topic string, committed bool) int64 {
	t.Helper()
	var offs kadm.ListedOffsets
	var err error
	if committed {
		offs, err = adm.ListCommittedOffsets(context.Background(), topic)
	} else {
		offs, err = adm.ListEndOffsets(context.Background(), topic)
	}
	if err != nil {
		t.Fatal(err)
	}
	o, _ := offs.Lookup(topic, 0)
	if o.Err != nil {
		t.Fatal(o.Err)
	}
	return o.Offset
}

// TestReadCommittedSkipsAbortedAndWaitsForCommit: franz-go consumers at
// both isolation levels over a partition holding a plain batch, an aborted
// and a committed transaction. read_committed sees nothing of an open
// transaction, is woken by the commit (a parked fetch), and never sees the
// aborted records; read_uncommitted sees everything at once. ListOffsets
// and DescribeProducers answer the LSO and the open transaction's start.
func TestReadCommittedSkipsAbortedAndWaitsForCommit(t *testing.T) {
	tb := testbroker.Start(t)
	makeTopic(t, tb, "txn", 1, nil)
	p := tb.Broker.Topic("txn").Partition(0)
	mustAppend(t, p, txnBatch(t, 1000, 0, 0, "a1", "a2")) // 0-1, aborted below
	mustAppend(t, p, plainBatch(t, "p1"))                 // 2
	mustAppend(t, p, txnBatch(t, 2000, 0, 0, "c1", "c2")) // 3-4, committed below
	adm := tb.Admin(t)
	if lso, hw := listEnd(t, adm, "txn", true), listEnd(t, adm, "txn", false); lso != 0 || hw != 5 {
		t.Fatalf("ListOffsets: read_committed %d, read_uncommitted %d; want 0, 5", lso, hw)
	}
	described, err := adm.DescribeProducers(context.Background(), kadm.TopicsSet{"txn": {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	starts := map[int64]int64{}
	described.EachProducer(func(ps kadm.DescribedProducer) { starts[ps.ProducerID] = ps.CurrentTxnStartOffset })
	if starts[1000] != 0 || starts[2000] != 3 {
		t.Fatalf("DescribeProducers: transaction starts %v, want 1000:0 2000:3", starts)
	}

	uncommitted := tb.Client(t, kgo.ConsumeTopics("txn"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if got := consumeValues(ctx, t, uncommitted, 5); !slices.Equal(got, []string{"a1", "a2", "p1", "c1", "c2"}) {
		t.Fatalf("read_uncommitted got %q", got)
	}

	committed := tb.Client(t, kgo.ConsumeTopics("txn"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(20*time.Second))
	short, cancelShort := context.WithTimeout(context.Background(), 500*time.Millisecond)
	if got := consumeValues(short, t, committed, 1); len(got) != 0 {
		t.Fatalf("read_committed read %q below an open transaction", got)
	}
	cancelShort()
	// The consumer's next fetch parks (nothing below the LSO, max wait
	// 20 s); the markers must wake it.
	done := make(chan []string, 1)
	go func() { done <- consumeValues(ctx, t, committed, 3) }()
	time.Sleep(200 * time.Millisecond) // let the fetch park; the test holds without it
	mustMarker(t, p, 1000, false)      // 5
	mustMarker(t, p, 2000, true)       // 6
	start := time.Now()
	got := <-done
	t.Logf("read_committed answered %v after the commit", time.Since(start))
	if !slices.Equal(got, []string{"p1", "c1", "c2"}) {
		t.Fatalf("read_committed got %q, want p1 c1 c2", got)
	}
	if lso := listEnd(t, adm, "txn", true); lso != 7 {
		t.Fatalf("ListOffsets read_committed %d after the markers, want 7", lso)
	}
}
