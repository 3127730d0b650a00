package engine_test

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/engine"
	"github.com/sluice-broker/sluice/internal/testbroker"
)

// Transactions end to end: real franz-go producers and consumers through a
// real broker.

func txnBroker(t *testing.T) *testbroker.Broker { return txnBrokerVersion(t, 2) }

// txnBrokerVersion finalizes transaction.version at v: 2 has clients on
// KIP-890 part 2 (Produce v12, EndTxn v5, TxnOffsetCommit v5), 1 on the
// protocol before it (AddPartitionsToTxn, AddOffsetsToTxn).
func txnBrokerVersion(t *testing.T, v int32) *testbroker.Broker {
	return testbroker.Start(t, func(c *engine.Config) { c.TxnStatePartitions, c.TxnVersion = 4, v })
}

// produceTxn runs one transaction of values to topic and commits or aborts
// it.
func produceTxn(t *testing.T, cl *kgo.Client, topic string, commit bool, values ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for _, v := range values {
		cl.Produce(ctx, &kgo.Record{Topic: topic, Key: []byte(v), Value: []byte(v)}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce %s: %v", v, err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		t.Fatalf("end transaction (commit %v): %v", commit, err)
	}
}

// readUntil consumes topic at the isolation level until every partition
// has shown the value end, and returns the other values in order of
// arrival.
func readUntil(t *testing.T, tb *testbroker.Broker, topic string, partitions int, end string, iso kgo.IsolationLevel) []string {
	t.Helper()
	cl := tb.Client(t, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(iso), kgo.FetchMaxWait(200*time.Millisecond),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ended := map[int32]bool{}
	var out []string
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
			out = append(out, string(r.Value))
		})
	}
	return out
}

func sorted(s []string) []string {
	s = append([]string(nil), s...)
	sort.Strings(s)
	return s
}

// eachTxnVersion runs test under transaction.version 1 and 2.
func eachTxnVersion(t *testing.T, test func(*testing.T, int32)) {
	for _, v := range []int32{1, 2} {
		t.Run(fmt.Sprintf("transaction.version=%d", v), func(t *testing.T) { test(t, v) })
	}
}

func TestTransactionsCommitAndAbort(t *testing.T) { eachTxnVersion(t, testCommitAndAbort) }

func testCommitAndAbort(t *testing.T, version int32) {
	tb := txnBrokerVersion(t, version)
	makeTopic(t, tb, "txn-out", 2, nil)
	p := tb.Client(t, kgo.TransactionalID("tx-1"), kgo.DefaultProduceTopic("txn-out"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	produceTxn(t, p, "txn-out", true, "a1", "a2", "a3", "a4")
	produceTxn(t, p, "txn-out", false, "x1", "x2", "x3")
	produceTxn(t, p, "txn-out", true, "b1", "b2")
	produceTxn(t, p, "txn-out", false, "y1")
	produceTxn(t, p, "txn-out", true, "END", "END")

	committed := readUntil(t, tb, "txn-out", 2, "END", kgo.ReadCommitted())
	want := []string{"a1", "a2", "a3", "a4", "b1", "b2"}
	if got := sorted(committed); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("read_committed read %v, want %v", got, want)
	}
	all := readUntil(t, tb, "txn-out", 2, "END", kgo.ReadUncommitted())
	if len(all) != 10 {
		t.Fatalf("read_uncommitted read %v, want every record, aborted ones too", sorted(all))
	}

	adm := kadm.NewClient(p)
	desc, err := adm.DescribeTransactions(context.Background(), "tx-1")
	if err != nil {
		t.Fatal(err)
	}
	d := desc["tx-1"]
	// Transactions version 2: the epoch went up with each of the five.
	wantEpoch := map[int32]int16{1: 0, 2: 5}[version]
	if d.Err != nil || d.State != "CompleteCommit" || d.ProducerEpoch != wantEpoch || d.TimeoutMillis <= 0 {
		t.Fatalf("describe: %+v", d)
	}
	list, err := adm.ListTransactions(context.Background(), nil, []string{"CompleteCommit"})
	if err != nil || len(list) != 1 {
		t.Fatalf("list: %+v %v", list, err)
	}
}

func TestTransactionalProducerFenced(t *testing.T) {
	tb := txnBroker(t)
	makeTopic(t, tb, "fence", 1, nil)
	old := tb.Client(t, kgo.TransactionalID("tx-f"), kgo.DefaultProduceTopic("fence"))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := old.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := old.ProduceSync(ctx, &kgo.Record{Value: []byte("zombie")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// A new producer of the id aborts the old one's open transaction and
	// fences it.
	fresh := tb.Client(t, kgo.TransactionalID("tx-f"), kgo.DefaultProduceTopic("fence"))
	produceTxn(t, fresh, "fence", true, "fresh", "END")
	err := old.EndTransaction(ctx, kgo.TryCommit)
	if err == nil {
		t.Fatal("the fenced producer committed")
	}
	t.Logf("the fenced producer's commit: %v", err)
	if got := readUntil(t, tb, "fence", 1, "END", kgo.ReadCommitted()); fmt.Sprint(got) != "[fresh]" {
		t.Fatalf("read_committed read %v", got)
	}
}

// TestTransactionalProduceToPartitionNotAdded: KIP-890 part 1. A
// transactional batch for a partition the producer did not add to its
// transaction is refused; once added it is accepted.
func TestTransactionalProduceToPartitionNotAdded(t *testing.T) {
	tb := txnBroker(t)
	makeTopic(t, tb, "verify", 1, nil)
	rc := dialRaw(t, tb.Addr)
	id := "tx-v"
	init := initTxnProducer(t, rc, id)
	batch := txnBatch(t, init.ProducerID, init.ProducerEpoch, 0, "v")
	if p := produceTxnRaw(rc, id, "verify", batch); p.ErrorCode != kerr.InvalidTxnState.Code {
		t.Fatalf("produce before AddPartitionsToTxn: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	add := kmsg.NewPtrAddPartitionsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch = id, init.ProducerID, init.ProducerEpoch
	add.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: "verify", Partitions: []int32{0}}}
	if r := do[*kmsg.AddPartitionsToTxnResponse](rc, add, 3); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("add: %v", kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode))
	}
	if p := produceTxnRaw(rc, id, "verify", batch); p.ErrorCode != 0 {
		t.Fatalf("produce after AddPartitionsToTxn: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	// Verify-only (v4): the partition is in the transaction, another is not.
	ver := kmsg.NewPtrAddPartitionsToTxnRequest()
	vt := kmsg.NewAddPartitionsToTxnRequestTransaction()
	vt.TransactionalID, vt.ProducerID, vt.ProducerEpoch, vt.VerifyOnly = id, init.ProducerID, init.ProducerEpoch, true
	vt.Topics = []kmsg.AddPartitionsToTxnRequestTransactionTopic{{Topic: "verify", Partitions: []int32{0, 7}}}
	ver.Transactions = []kmsg.AddPartitionsToTxnRequestTransaction{vt}
	vr := do[*kmsg.AddPartitionsToTxnResponse](rc, ver, 4)
	ps := vr.Transactions[0].Topics[0].Partitions
	if ps[0].ErrorCode != 0 || ps[1].ErrorCode != kerr.InvalidTxnState.Code {
		t.Fatalf("verify-only: %+v", ps)
	}
}

func initTxnProducer(t *testing.T, rc *rawConn, id string) *kmsg.InitProducerIDResponse {
	t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID, req.TransactionTimeoutMillis = &id, 60000
	r := do[*kmsg.InitProducerIDResponse](rc, req, 4)
	if r.ErrorCode != 0 {
		t.Fatalf("InitProducerId: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	return r
}

func produceTxnRaw(rc *rawConn, id, topic string, batch []byte) kmsg.ProduceResponseTopicPartition {
	return produceTxnRawV(rc, id, topic, batch, 9)
}

// produceTxnRawV is produceTxnRaw at Produce version v (v12+: transactions
// version 2, the leader adds the partition to the transaction).
func produceTxnRawV(rc *rawConn, id, topic string, batch []byte, v int16) kmsg.ProduceResponseTopicPartition {
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis, req.TransactionID = -1, 5000, &id
	req.Topics = []kmsg.ProduceRequestTopic{{Topic: topic, Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: batch}}}}
	return do[*kmsg.ProduceResponse](rc, req, v).Topics[0].Partitions[0]
}

// TestTxnV2LaterBatchFirstIsRetriedNotAppended: a producer on transactions
// version 2 whose second batch to a partition arrives before its first (the
// first failed its verification and is being retried) gets
// OUT_OF_ORDER_SEQUENCE_NUMBER, which the client retries behind the first,
// instead of an append that leaves the first out of order for good. A CI
// run of the Java cluster scenario hung on that: its commit waited 30 s
// for a batch retried forever.
func TestTxnV2LaterBatchFirstIsRetriedNotAppended(t *testing.T) {
	tb := txnBrokerVersion(t, 2)
	makeTopic(t, tb, "v2seq", 1, nil)
	rc := dialRaw(t, tb.Addr)
	id := "tx-v2seq"
	init := initTxnProducer(t, rc, id)
	pid, epoch := init.ProducerID, init.ProducerEpoch
	later := txnBatch(t, pid, epoch, 1, "b", "END")
	if p := produceTxnRawV(rc, id, "v2seq", later, 12); p.ErrorCode != kerr.OutOfOrderSequenceNumber.Code {
		t.Fatalf("the later batch first: %v, want OUT_OF_ORDER_SEQUENCE_NUMBER", kerr.ErrorForCode(p.ErrorCode))
	} else {
		t.Logf("the later batch first: %s", *p.ErrorMessage)
	}
	if p := produceTxnRawV(rc, id, "v2seq", txnBatch(t, pid, epoch, 0, "a"), 12); p.ErrorCode != 0 || p.BaseOffset != 0 {
		t.Fatalf("the first batch: %v at %d", kerr.ErrorForCode(p.ErrorCode), p.BaseOffset)
	}
	if p := produceTxnRawV(rc, id, "v2seq", later, 12); p.ErrorCode != 0 || p.BaseOffset != 1 {
		t.Fatalf("the later batch retried: %v at %d", kerr.ErrorForCode(p.ErrorCode), p.BaseOffset)
	}
	end := kmsg.NewPtrEndTxnRequest()
	end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = id, pid, epoch, true
	if r := do[*kmsg.EndTxnResponse](rc, end, 5); r.ErrorCode != 0 {
		t.Fatalf("EndTxn: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if got := readUntil(t, tb, "v2seq", 1, "END", kgo.ReadCommitted()); fmt.Sprint(got) != "[a b]" {
		t.Fatalf("read_committed read %v, want [a b]", got)
	}
}

// TestGroupTransactSession is consume-transform-produce: records of "in"
// are copied to "out" inside transactions that also commit the group's
// offsets, with a second session joining half way (a rebalance). Every
// input record is in "out" exactly once for read_committed readers, and
// the group's committed offsets cover the input.
func TestGroupTransactSession(t *testing.T) { eachTxnVersion(t, testGroupTransactSession) }

func testGroupTransactSession(t *testing.T, version int32) {
	tb := txnBrokerVersion(t, version)
	makeTopic(t, tb, "in", 2, nil)
	makeTopic(t, tb, "out", 2, nil)
	const n = 200
	src := tb.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := 0; i < n; i++ {
		src.Produce(ctx, &kgo.Record{Topic: "in", Value: []byte(strconv.Itoa(i))}, nil)
	}
	if err := src.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	copied := make(chan int, 2*n)
	run := func(name string, stop <-chan struct{}) chan error {
		done := make(chan error, 1)
		s, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(tb.Addr), kgo.TransactionalID(name), kgo.ConsumerGroup("copier"),
			kgo.ConsumeTopics("in"), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.DefaultProduceTopic("out"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			defer s.Close()
			for {
				select {
				case <-stop:
					done <- nil
					return
				default:
				}
				pctx, pcancel := context.WithTimeout(ctx, time.Second)
				fs := s.PollFetches(pctx)
				pcancel()
				if err := s.Begin(); err != nil {
					done <- err
					return
				}
				k := 0
				fs.EachRecord(func(r *kgo.Record) {
					k++
					s.Produce(ctx, &kgo.Record{Value: r.Value, Partition: r.Partition}, nil)
				})
				committed, err := s.End(ctx, kgo.TryCommit)
				if err != nil {
					done <- err
					return
				}
				if committed {
					copied <- k
				}
			}
		}()
		return done
	}
	stop := make(chan struct{})
	d1 := run("copier-1", stop)
	total := 0
	for total < n/2 {
		total += <-copied
	}
	d2 := run("copier-2", stop)
	deadline := time.After(40 * time.Second)
	for total < n {
		select {
		case k := <-copied:
			total += k
		case <-deadline:
			t.Fatalf("copied %d of %d", total, n)
		}
	}
	close(stop)
	for _, d := range []chan error{d1, d2} {
		if err := <-d; err != nil {
			t.Fatal(err)
		}
	}

	// Every input record exactly once, for read_committed readers.
	cl := tb.Client(t, kgo.ConsumeTopics("out"), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	seen := map[string]int{}
	rctx, rcancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer rcancel()
	for len(seen) < n && rctx.Err() == nil {
		cl.PollFetches(rctx).EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++ })
	}
	for i := 0; i < n; i++ {
		if c := seen[strconv.Itoa(i)]; c != 1 {
			t.Errorf("record %d copied %d times", i, c)
		}
	}
	committedSum := func() int64 {
		adm := kadm.NewClient(tb.Client(t))
		offs, err := adm.FetchOffsets(context.Background(), "copier")
		if err != nil {
			t.Fatal(err)
		}
		sum := int64(0)
		offs.Each(func(o kadm.OffsetResponse) { sum += o.At })
		return sum
	}
	if sum := committedSum(); sum != n {
		t.Fatalf("committed offsets sum to %d, want %d", sum, n)
	}
	// A restart replays __consumer_offsets: the transactional commits count
	// from their markers.
	tb.Restart(t)
	if sum := committedSum(); sum != n {
		t.Fatalf("after a restart the committed offsets sum to %d, want %d", sum, n)
	}
}

// TestTxnOffsetsOpenAcrossRestart: offsets committed in a transaction
// that is still open when the broker restarts come back pending (not
// visible), and become the group's when the transaction then commits.
func TestTxnOffsetsOpenAcrossRestart(t *testing.T) {
	tb := txnBroker(t)
	makeTopic(t, tb, "src", 1, nil)
	rc := dialRaw(t, tb.Addr)
	id, group := "tx-open-offsets", "g-open"
	init := initTxnProducer(t, rc, id)
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = id, init.ProducerID, init.ProducerEpoch, group
	if r := do[*kmsg.AddOffsetsToTxnResponse](rc, add, 3); r.ErrorCode != 0 {
		t.Fatalf("AddOffsetsToTxn: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	commit := kmsg.NewPtrTxnOffsetCommitRequest()
	commit.TransactionalID, commit.Group, commit.ProducerID, commit.ProducerEpoch = id, group, init.ProducerID, init.ProducerEpoch
	commit.Generation = -1
	commit.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "src", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: 42, LeaderEpoch: -1}}}}
	if r := do[*kmsg.TxnOffsetCommitResponse](rc, commit, 3); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("TxnOffsetCommit: %v", kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode))
	}
	committed := func() int64 {
		offs, err := kadm.NewClient(tb.Client(t)).FetchOffsets(context.Background(), group)
		if err != nil {
			t.Fatal(err)
		}
		o, ok := offs.Lookup("src", 0)
		if !ok {
			return -1
		}
		return o.At
	}
	if at := committed(); at != -1 {
		t.Fatalf("an open transaction's offset is visible: %d", at)
	}
	tb.Restart(t)
	if at := committed(); at != -1 {
		t.Fatalf("after a restart an open transaction's offset is visible: %d", at)
	}
	rc = dialRaw(t, tb.Addr)
	end := kmsg.NewPtrEndTxnRequest()
	end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = id, init.ProducerID, init.ProducerEpoch, true
	if r := do[*kmsg.EndTxnResponse](rc, end, 3); r.ErrorCode != 0 {
		t.Fatalf("EndTxn: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if at := committed(); at != 42 {
		t.Fatalf("after the commit the group's offset is %d, want 42", at)
	}
}

// TestAbortHangingTransaction is what kafka-transactions abort does to a
// hanging transaction (one its coordinator does not know, which holds the
// last stable offset): a WriteTxnMarkers abort sent straight to the
// partition's leader with the producer's id, epoch and coordinator epoch
// (from DescribeProducers). The last stable offset then moves past it.
func TestAbortHangingTransaction(t *testing.T) {
	tb := txnBroker(t)
	p := makeTopic(t, tb, "hanging", 1, nil).Partition(0)
	// Only a partition written around the coordinator can hang: produce
	// verifies with it (KIP-890).
	if _, err := engine.AppendBatchForTest(p, txnBatch(t, 4242, 3, 0, "stuck")); err != nil {
		t.Fatal(err)
	}
	rc := dialRaw(t, tb.Addr)
	lso := func() int64 {
		req := listOffsetsReq("hanging", -1, -1)
		req.IsolationLevel = 1 // read_committed
		return do[*kmsg.ListOffsetsResponse](rc, req, 7).Topics[0].Partitions[0].Offset
	}
	if got := lso(); got != 0 {
		t.Fatalf("last stable offset %d with the transaction open, want 0", got)
	}
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.CoordinatorEpoch, m.Committed = 4242, 3, -1, false
	m.Topics = []kmsg.WriteTxnMarkersRequestMarkerTopic{{Topic: "hanging", Partitions: []int32{0}}}
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	req.Markers = []kmsg.WriteTxnMarkersRequestMarker{m}
	resp := do[*kmsg.WriteTxnMarkersResponse](rc, req, 1)
	if code := resp.Markers[0].Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("WriteTxnMarkers: %v", kerr.ErrorForCode(code))
	}
	if got := lso(); got != 2 {
		t.Fatalf("last stable offset %d after the abort, want 2 (past the marker)", got)
	}
	m.Topics[0].Topic = "nope"
	resp = do[*kmsg.WriteTxnMarkersResponse](rc, req, 1)
	if code := resp.Markers[0].Topics[0].Partitions[0].ErrorCode; code != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("marker for an unknown topic: %v", kerr.ErrorForCode(code))
	}
}

// TestTransactionAPIErrors: the error answers of the transaction APIs
// that clients and tools depend on.
func TestTransactionAPIErrors(t *testing.T) {
	tb := txnBroker(t)
	makeTopic(t, tb, "known", 2, nil)
	rc := dialRaw(t, tb.Addr)
	id := "tx-errors"
	init := initTxnProducer(t, rc, id)

	// A topic that does not exist: its partitions UNKNOWN_TOPIC_OR_PARTITION,
	// the others OPERATION_NOT_ATTEMPTED, nothing added.
	add := kmsg.NewPtrAddPartitionsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch = id, init.ProducerID, init.ProducerEpoch
	add.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: "known", Partitions: []int32{0, 1}}, {Topic: "unknown", Partitions: []int32{0}}}
	r := do[*kmsg.AddPartitionsToTxnResponse](rc, add, 3)
	codes := []int16{r.Topics[0].Partitions[0].ErrorCode, r.Topics[0].Partitions[1].ErrorCode, r.Topics[1].Partitions[0].ErrorCode}
	if codes[0] != kerr.OperationNotAttempted.Code || codes[1] != kerr.OperationNotAttempted.Code || codes[2] != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("add with an unknown topic: %v", codes)
	}
	// An older epoch: PRODUCER_FENCED from v2, INVALID_PRODUCER_EPOCH before.
	initTxnProducer(t, rc, id) // bumps the epoch
	end := kmsg.NewPtrEndTxnRequest()
	end.TransactionalID, end.ProducerID, end.ProducerEpoch = id, init.ProducerID, init.ProducerEpoch
	if c := do[*kmsg.EndTxnResponse](rc, end, 3).ErrorCode; c != kerr.ProducerFenced.Code {
		t.Fatalf("EndTxn v3 at an old epoch: %v", kerr.ErrorForCode(c))
	}
	if c := do[*kmsg.EndTxnResponse](rc, end, 1).ErrorCode; c != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("EndTxn v1 at an old epoch: %v", kerr.ErrorForCode(c))
	}
	// A timeout above transaction.max.timeout.ms.
	big := kmsg.NewPtrInitProducerIDRequest()
	big.TransactionalID, big.TransactionTimeoutMillis = &id, 3_600_000
	if c := do[*kmsg.InitProducerIDResponse](rc, big, 4).ErrorCode; c != kerr.InvalidTransactionTimeout.Code {
		t.Fatalf("InitProducerId with a 1 h timeout: %v", kerr.ErrorForCode(c))
	}
	// Unknown ids and states.
	desc := kmsg.NewPtrDescribeTransactionsRequest()
	desc.TransactionalIDs = []string{"never-seen"}
	if c := do[*kmsg.DescribeTransactionsResponse](rc, desc, 0).TransactionStates[0].ErrorCode; c != kerr.TransactionalIDNotFound.Code {
		t.Fatalf("describe an unknown id: %v", kerr.ErrorForCode(c))
	}
	list := kmsg.NewPtrListTransactionsRequest()
	list.StateFilters = []string{"Ongoing", "Bogus"}
	lr := do[*kmsg.ListTransactionsResponse](rc, list, 1)
	if lr.ErrorCode != 0 || fmt.Sprint(lr.UnknownStateFilters) != "[Bogus]" || len(lr.TransactionStates) != 0 {
		t.Fatalf("list with an unknown state: %+v", lr)
	}
	list.StateFilters = nil
	list.TransactionalIDPattern = kmsg.StringPtr("tx-err.*")
	if lr := do[*kmsg.ListTransactionsResponse](rc, list, 2); len(lr.TransactionStates) != 1 || lr.TransactionStates[0].TransactionalID != id {
		t.Fatalf("list by pattern: %+v", lr)
	}
	list.TransactionalIDPattern = kmsg.StringPtr("(")
	if c := do[*kmsg.ListTransactionsResponse](rc, list, 2).ErrorCode; c != kerr.InvalidRequest.Code {
		t.Fatalf("list with a bad pattern: %v", kerr.ErrorForCode(c))
	}
	// A transactional batch without a transactional id in the request.
	b := txnBatch(t, init.ProducerID, init.ProducerEpoch, 0, "v")
	if p := produceRaw(rc, 9, -1, "known", 0, b); p.ErrorCode != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Fatalf("transactional batch without a transactional id: %v", kerr.ErrorForCode(p.ErrorCode))
	}
}

// TestTxnStateMinISRCappedOnOneNode: transaction.state.log.min.isr keeps
// Kafka's default 2, and on one node __transaction_state gets 1 (its
// replication factor), so transactions work with the defaults.
func TestTxnStateMinISRCappedOnOneNode(t *testing.T) {
	tb := txnBroker(t)
	makeTopic(t, tb, "minisr", 1, nil)
	p := tb.Client(t, kgo.TransactionalID("tx-minisr"), kgo.DefaultProduceTopic("minisr"))
	produceTxn(t, p, "minisr", true, "a", "END")
	rcs, err := kadm.NewClient(tb.Client(t)).DescribeTopicConfigs(context.Background(), "__transaction_state")
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On("__transaction_state", nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("describe: %v %v", err, rc.Err)
	}
	for _, c := range rc.Configs {
		if c.Key == "min.insync.replicas" && (c.Value == nil || *c.Value != "1") {
			t.Fatalf("min.insync.replicas %v, want 1", c.Value)
		}
	}
}
