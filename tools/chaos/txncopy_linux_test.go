package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-broker/sluice/internal/testbroker"
	"github.com/sluice-broker/sluice/tools/chaos/check"
	"github.com/sluice-broker/sluice/tools/chaos/copier"
)

// TestCopierNeverCommitsOffsetsWithoutItsRecords: a transaction in which
// a copied record fails must not commit the group's offsets. The 10-minute
// chaos run of 2026-12-05 found the copy 26 values short of the committed
// offsets: the copier's records were failed by the run's cancelled context
// as it stopped, and the session still committed the offsets it had
// polled. Here a record fails because the copy lacks its partition (the
// source has two, the copy one), deterministically.
func TestCopierNeverCommitsOffsetsWithoutItsRecords(t *testing.T) {
	tb := testbroker.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := tb.Admin(t)
	for topic, parts := range map[string]int32{"src": 2, "dst": 1} {
		if _, err := adm.CreateTopic(ctx, parts, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	prod := tb.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range 10 {
		r := &kgo.Record{Topic: "src", Partition: int32(i % 2), Value: fmt.Appendf(nil, "%d", i)}
		if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	s, err := kgo.NewGroupTransactSession(
		kgo.SeedBrokers(tb.Addr), kgo.TransactionalID("copier-test"),
		kgo.ConsumerGroup("src-copier"), kgo.ConsumeTopics("src"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	polled := 0
	for polled < 10 {
		fs := s.PollRecords(ctx, 100)
		if err := ctx.Err(); err != nil {
			t.Fatalf("polled %d of 10: %v", polled, err)
		}
		polled += fs.NumRecords()
		committed, err := copier.CopyOnce(s, "dst", fs, nil)
		if committed || err == nil {
			t.Fatalf("a transaction with a failed record: committed %v, err %v; want an abort and an error", committed, err)
		}
		t.Logf("aborted as wanted: %v", err)
	}

	offsets, err := committedOffsets(ctx, []string{tb.Addr}, nil, "src-copier", "src")
	if err != nil {
		t.Fatal(err)
	}
	if len(offsets) != 0 {
		t.Fatalf("offsets committed without their copies: %v", offsets)
	}
	dst, err := check.ReadCommitted(ctx, []string{tb.Addr}, "dst", 1)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(dst[0].Values); n != 0 {
		t.Fatalf("%d values visible at read_committed from aborted transactions", n)
	}
}

// TestCopierRenewsASessionThatCannotBegin: a copier whose producer id
// failed for good must go on copying with a new session. In the sasl_ssl
// chaos runs of 2026-12-05 a login refused by a just-restarted broker
// made franz-go fail a copier's producer id, and the copier then failed
// every Begin (thousands of errors) until the run ended, its partitions
// never copied again. Here the session is fenced by a second one of the
// same transactional id, which franz-go also treats as fatal.
func TestCopierRenewsASessionThatCannotBegin(t *testing.T) {
	tb := testbroker.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	adm := tb.Admin(t)
	for _, topic := range []string{"src", "dst"} {
		if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	prod := tb.Client(t)
	for i := range 20 {
		if err := prod.ProduceSync(ctx, &kgo.Record{Topic: "src", Value: fmt.Appendf(nil, "%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	o := copier.Options{Seeds: []string{tb.Addr}, Src: "src", Dst: "dst", Group: "src-copier",
		TransactionalID: "renew-test", SessionTimeout: 6 * time.Second}
	fenced, err := copier.Session(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := fenced.Begin(); err != nil {
		t.Fatal(err)
	}
	if err := fenced.ProduceSync(ctx, &kgo.Record{Topic: "dst", Value: []byte("-1")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	newer, err := copier.Session(o) // its InitProducerID fences the first
	if err != nil {
		t.Fatal(err)
	}
	if err := newer.Begin(); err != nil {
		t.Fatal(err)
	}
	if err := newer.ProduceSync(ctx, &kgo.Record{Topic: "dst", Value: []byte("-2")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if _, err := newer.End(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	newer.Close()
	if committed, err := fenced.End(ctx, kgo.TryCommit); committed || err == nil {
		t.Fatalf("the fenced session's end: committed %v, err %v; want an error", committed, err)
	}

	var st copier.Stats
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); copier.Run(runCtx, fenced, o, &st) }()
	var copied int
	for copied < 20 && ctx.Err() == nil {
		time.Sleep(200 * time.Millisecond)
		rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
		dst, err := check.ReadCommitted(rctx, []string{tb.Addr}, "dst", 1)
		rcancel()
		if err == nil {
			copied = len(dst[0].Values)
		}
	}
	stop()
	<-done
	t.Logf("copied %d, %d sessions renewed, %d errors", copied, st.Renewed.Load(), st.Errors.Load())
	if copied != 20 || st.Renewed.Load() == 0 {
		t.Fatalf("copied %d of 20 with %d sessions renewed; want all, through a new session", copied, st.Renewed.Load())
	}
}
