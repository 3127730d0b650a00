package engine

import (
	"errors"
	"math"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

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
	if err := p.writeTxnMarker(10, 1, 3, true, 0, 0); err != nil { // 5
		t.Fatal(err)
	}
	if lso := p.LastStableOffset(); lso != 3 {
		t.Fatalf("LSO %d after committing producer 10, want 3", lso)
	}
	if err := p.writeTxnMarker(11, 1, 3, false, 0, 0); err != nil { // 6
		t.Fatal(err)
	}
	if lso := p.LastStableOffset(); lso != 7 {
		t.Fatalf("LSO %d after aborting producer 11, want 7", lso)
	}
	if got := p.abortedTxns(nil, 0, 7); len(got) != 1 || got[0] != (storage.AbortedTxn{ProducerID: 11, FirstOffset: 3, LastOffset: 6, LastStableOffset: 7}) {
		t.Fatalf("aborted %+v", got)
	}
	if err := p.writeTxnMarker(10, 1, 2, true, 0, 0); !errors.Is(err, kerr.TransactionCoordinatorFenced) {
		t.Fatalf("stale coordinator epoch: %v", err)
	}
	if err := p.writeTxnMarker(10, 0, 3, true, 0, 0); !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("stale producer epoch: %v", err)
	}
	p.becomeFollower(5, p.LeaderEpoch()+1)
	if err := p.writeTxnMarker(10, 1, 3, true, 0, 0); !errors.Is(err, kerr.NotLeaderForPartition) {
		t.Fatalf("follower: %v", err)
	}
}

// TestFetchReadCommittedAllocatesNoMore pins that read_committed costs a
// fetch nothing extra: over a partition whose records hold aborted
// transactions, a read_committed fetch (LSO, aborted list from the pooled
// fetch) allocates what a read_uncommitted one does.
func TestFetchReadCommittedAllocatesNoMore(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under the race detector (sync.Pool drops items at random)")
	}
	br := benchBroker(t)
	p := br.Topic("bench").Partition(0)
	for i := range int64(20) {
		appendTestBatch(t, p, txnTestBatch(t, 100+i%4, 0, int32(i/4*2), 2))
		if i%4 == 3 {
			for pid := int64(100); pid < 104; pid++ {
				if err := p.writeTxnMarker(pid, 0, 0, pid%2 == 0, 0, 0); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if n := len(p.abortedTxns(nil, 0, p.LastStableOffset())); n != 10 {
		t.Fatalf("%d aborted transactions, want 10", n)
	}
	allocs := func(isolation int8) float64 {
		req := kmsg.NewPtrFetchRequest()
		req.MaxBytes, req.IsolationLevel = 1<<20, isolation
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.PartitionMaxBytes = 1 << 20
		req.Topics = []kmsg.FetchRequestTopic{{Topic: "bench", Partitions: []kmsg.FetchRequestTopicPartition{fp}}}
		f := frame(req, 12)
		return testing.AllocsPerRun(200, func() {
			br.Handle(&Session{}, f, func(r *Response) { r.Release() })
		})
	}
	uncommitted, committed := allocs(0), allocs(1)
	t.Logf("allocations per fetch: read_uncommitted %v, read_committed %v", uncommitted, committed)
	if committed > uncommitted {
		t.Fatalf("read_committed allocates %v per fetch, read_uncommitted %v", committed, uncommitted)
	}
}

// TestStableReadable: read_committed waiters hear of a high watermark move
// only when it moves the LSO: with the bytes it made readable when nothing
// was held back, as enough for anyone when a decided transaction released
// what was.
func TestStableReadable(t *testing.T) {
	var s stableTracker
	steps := []struct {
		lso, hw, n, want int64
	}{
		{10, 10, 100, 100},          // no transaction: the LSO follows the HW
		{10, 20, 50, 0},             // a transaction opened at 10: held back
		{10, 30, 50, 0},             // still held
		{35, 40, 20, math.MaxInt32}, // decided: what was held is readable now
		{40, 40, 5, math.MaxInt32},  // held before this move too
		{45, 45, 7, 7},
	}
	for i, st := range steps {
		if got := s.stableReadable(st.lso, st.hw, st.n); got != st.want {
			t.Fatalf("step %d (%+v): %d", i, st, got)
		}
	}
}

// TestVerificationHoldsLaterBatchesBehindAFailedOne: once a batch of a
// producer's transaction fails its verification on a partition, its later
// batches there are held (retriably) until that one is verified, so none
// can be appended ahead of it; a new producer epoch or leader epoch starts
// afresh, and a verified batch lets the rest through.
func TestVerificationHoldsLaterBatchesBehindAFailedOne(t *testing.T) {
	br := benchBroker(t)
	p := br.Topic("bench").Partition(0)
	var v verifiedTxns
	now := int64(1_700_000_000_000)
	v.failed(p, 7, 3, 5, now)
	if seq, held := v.heldBehind(p, 7, 3, 9, now); !held || seq != 5 {
		t.Fatalf("a later batch: held %v behind %d, want held behind 5", held, seq)
	}
	if _, held := v.heldBehind(p, 7, 3, 5, now); held {
		t.Fatal("the failed batch's retry is held behind itself")
	}
	v.failed(p, 7, 3, 2, now) // an even earlier one failed too
	if _, held := v.heldBehind(p, 7, 3, 4, now); !held {
		t.Fatal("a batch after the earliest failed one is not held")
	}
	if _, held := v.heldBehind(p, 7, 4, 9, now); held {
		t.Fatal("a new producer epoch is held behind the old one's batch")
	}
	if _, held := v.heldBehind(p, 8, 3, 9, now); held {
		t.Fatal("another producer is held")
	}
	if v.ok(p, 7, 3) {
		t.Fatal("a failed verification counts as verified")
	}
	// A failure whose batch never comes back holds nothing once the
	// client would have given it up (delivery.timeout.ms).
	if _, held := v.heldBehind(p, 7, 3, 9, now+failedVerificationHold.Milliseconds()); held {
		t.Fatal("held past failedVerificationHold")
	}
	v.set(p, 7, 3)
	if _, held := v.heldBehind(p, 7, 3, 9, now); held || !v.ok(p, 7, 3) {
		t.Fatal("still held once verified")
	}
}
