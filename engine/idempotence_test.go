package engine_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/engine"
	"github.com/sluice-broker/sluice/internal/testbroker"
)

func initProducerID(rc *rawConn, v int16, txnID *string) *kmsg.InitProducerIDResponse {
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID, req.TransactionTimeoutMillis = txnID, 60000
	return do[*kmsg.InitProducerIDResponse](rc, req, v)
}

func idempotentBatch(t testing.TB, pid int64, epoch int16, seq int32, n int) []byte {
	recs := make([]engine.TestRecord, n)
	for i := range recs {
		recs[i] = engine.TestRecord{Value: []byte(strconv.Itoa(int(seq) + i))}
	}
	return engine.BuildTestBatch(t, engine.TestBatchOpts{ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq, FirstTimestamp: 1}, recs...)
}

func TestInitProducerID(t *testing.T) {
	tb := testbroker.Start(t)
	rc := dialRaw(t, tb.Addr)
	seen := map[int64]bool{}
	for v := int16(0); v <= 5; v++ {
		r := initProducerID(rc, v, nil)
		if r.ErrorCode != 0 || r.ProducerID < 0 || r.ProducerEpoch != 0 || seen[r.ProducerID] {
			t.Fatalf("v%d: id %d epoch %d error %d", v, r.ProducerID, r.ProducerEpoch, r.ErrorCode)
		}
		seen[r.ProducerID] = true
	}
	txn, empty := "tx", ""
	if r := initProducerID(rc, 5, &txn); r.ErrorCode != 0 || seen[r.ProducerID] || r.ProducerEpoch != 0 {
		t.Fatalf("transactional id: %v id %d epoch %d", kerr.ErrorForCode(r.ErrorCode), r.ProducerID, r.ProducerEpoch)
	}
	if r := initProducerID(rc, 5, &empty); r.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("empty transactional id: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	// Ids never repeat across restarts, even though the block in use was
	// only partly handed out.
	tb.Restart(t)
	rc = dialRaw(t, tb.Addr)
	r := initProducerID(rc, 5, nil)
	for id := range seen {
		if r.ProducerID <= id {
			t.Fatalf("id %d after restart, %d was handed out before", r.ProducerID, id)
		}
	}
}

func TestIdempotentProduce(t *testing.T) {
	tb := testbroker.Start(t)
	makeTopic(t, tb, "idem", 1, nil)
	rc := dialRaw(t, tb.Addr)
	pid := initProducerID(rc, 5, nil).ProducerID
	produce := func(seq int32, n int) kmsg.ProduceResponseTopicPartition {
		t.Helper()
		return produceRaw(rc, 12, -1, "idem", 0, idempotentBatch(t, pid, 0, seq, n))
	}
	expect := func(what string, p kmsg.ProduceResponseTopicPartition, code *kerr.Error, offset int64) {
		t.Helper()
		want := int16(0)
		if code != nil {
			want = code.Code
		}
		if p.ErrorCode != want || p.BaseOffset != offset {
			t.Fatalf("%s: %v at offset %d, want %v at %d", what, kerr.ErrorForCode(p.ErrorCode), p.BaseOffset, code, offset)
		}
	}
	expect("first batch", produce(0, 2), nil, 0)
	expect("second batch", produce(2, 3), nil, 2)
	expect("retry of the first batch", produce(0, 2), nil, 0)
	expect("retry of the second batch", produce(2, 3), nil, 2)
	expect("sequence gap", produce(9, 1), kerr.OutOfOrderSequenceNumber, -1)
	expect("next in sequence", produce(5, 1), nil, 5)

	hw := do[*kmsg.ListOffsetsResponse](rc, listOffsetsReq("idem", -1, -1), 10).Topics[0].Partitions[0].Offset
	if hw != 6 {
		t.Fatalf("high watermark %d after duplicates, want 6", hw)
	}
	checkProducer(t, rc, pid, 5)

	// Producer state survives a restart: a late retry is still recognised.
	tb.Restart(t)
	rc = dialRaw(t, tb.Addr)
	expect("retry after restart", produce(5, 1), nil, 5)
	expect("next after restart", produce(6, 2), nil, 6)
	expect("gap after restart", produce(20, 1), kerr.OutOfOrderSequenceNumber, -1)
	checkProducer(t, rc, pid, 7)
}

// checkProducer asks DescribeProducers for the producer's state.
func checkProducer(t *testing.T, rc *rawConn, pid int64, lastSeq int32) {
	t.Helper()
	req := kmsg.NewPtrDescribeProducersRequest()
	req.Topics = []kmsg.DescribeProducersRequestTopic{{Topic: "idem", Partitions: []int32{0, 3}}}
	resp := do[*kmsg.DescribeProducersResponse](rc, req, 0)
	ps := resp.Topics[0].Partitions
	if len(ps) != 2 || ps[0].ErrorCode != 0 || ps[1].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("describe producers: %+v", ps)
	}
	for _, ap := range ps[0].ActiveProducers {
		if ap.ProducerID == pid {
			if ap.ProducerEpoch != 0 || ap.LastSequence != lastSeq || ap.CurrentTxnStartOffset != -1 {
				t.Fatalf("producer state %+v, want last sequence %d", ap, lastSeq)
			}
			return
		}
	}
	t.Fatalf("producer %d not described: %+v", pid, ps[0].ActiveProducers)
}

// TestIdempotentKgoAcrossRestart runs franz-go's idempotent producer (its
// default) through a broker restart and checks nothing is lost or doubled.
func TestIdempotentKgoAcrossRestart(t *testing.T) {
	tb := testbroker.Start(t)
	makeTopic(t, tb, "kgo-idem", 2, nil)
	cl := tb.Client(t, kgo.DefaultProduceTopic("kgo-idem"))
	ctx := context.Background()
	produceN := func(from, n int) {
		for i := from; i < from+n; i++ {
			if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: []byte("v")}).FirstErr(); err != nil {
				t.Fatalf("record %d: %v", i, err)
			}
		}
	}
	produceN(0, 50)
	tb.Restart(t)
	produceN(50, 50)
	seen := map[string]bool{}
	for _, r := range consumeAll(t, tb, "kgo-idem", 100) {
		if seen[string(r.Key)] {
			t.Fatalf("record %s twice", r.Key)
		}
		seen[string(r.Key)] = true
	}
}
