package engine

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-broker/sluice/record"
	"github.com/sluice-broker/sluice/storage"
)

// txnTestBatch is a transactional batch of n records of producer pid, as
// a transactional producer sends one.
func txnTestBatch(t testing.TB, pid int64, epoch int16, seq int32, n int) []byte {
	t.Helper()
	h := record.NewHeader()
	h.ProducerID, h.ProducerEpoch, h.BaseSequence = pid, epoch, seq
	h.Attributes = record.AttrTransactional
	h.FirstTimestamp, h.MaxTimestamp = 1_700_000_000_000, 1_700_000_000_000
	h.NumRecords, h.LastOffsetDelta = int32(n), int32(n-1)
	var raw []byte
	for i := range n {
		raw = record.AppendRecord(raw, &record.Record{OffsetDelta: int32(i), Value: []byte("txn")})
	}
	b, err := record.AppendBatch(nil, &h, raw)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func appendTestBatch(t testing.TB, p *Partition, b []byte) storage.AppendResult {
	t.Helper()
	e := []storage.AppendEntry{{Records: b}}
	if err := p.append(e, 1, 0); err != nil || e[0].Err != nil {
		t.Fatalf("append: %v, %v", err, e[0].Err)
	}
	return e[0].Result
}

// TestWriteTxnMarker drives the partition side of WriteTxnMarkers: the
// LSO holds at an open transaction, a commit moves it, an abort is
// indexed, stale coordinator and producer epochs are refused, and a
// follower refuses markers.
func TestWriteTxnMarker(t *testing.T) {
	br := benchBroker(t)
	p := br.Topic("bench").Partition(0)
	appendTestBatch(t, p, txnTestBatch(t, 10, 1, 0, 3)) // 0-2
	appendTestBatch(t, p, txnTestBatch(t, 11, 1, 0, 2)) // 3-4
	if lso, hw := p.LastStableOffset(), p.HighWatermark(); lso != 0 || hw != 5 {
		t.Fatalf("LSO %d, HW %d; want 0, 5", lso, hw)
	}
	if err := p.writeTxnMarker(10, 1, 3, true, 0); err != nil { // 5
		t.Fatal(err)
	}
	if lso := p.LastStableOffset(); lso != 3 {
		t.Fatalf("LSO %d after committing producer 10, want 3", lso)
	}
	if err := p.writeTxnMarker(11, 1, 3, false, 0); err != nil { // 6
		t.Fatal(err)
	}
	if lso := p.LastStableOffset(); lso != 7 {
		t.Fatalf("LSO %d after aborting producer 11, want 7", lso)
	}
	if got := p.abortedTxns(nil, 0, 7); len(got) != 1 || got[0] != (storage.AbortedTxn{ProducerID: 11, FirstOffset: 3, LastOffset: 6, LastStableOffset: 7}) {
		t.Fatalf("aborted %+v", got)
	}
	if err := p.writeTxnMarker(10, 1, 2, true, 0); !errors.Is(err, kerr.TransactionCoordinatorFenced) {
		t.Fatalf("stale coordinator epoch: %v", err)
	}
	if err := p.writeTxnMarker(10, 0, 3, true, 0); !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("stale producer epoch: %v", err)
	}
	p.becomeFollower(5, p.LeaderEpoch()+1)
	if err := p.writeTxnMarker(10, 1, 3, true, 0); !errors.Is(err, kerr.NotLeaderForPartition) {
		t.Fatalf("follower: %v", err)
	}
}
