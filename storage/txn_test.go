package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sluice-broker/sluice/record"
)

// txnBatch builds a transactional batch of producer pid at epoch and
// sequence seq.
func txnBatch(pid int64, epoch int16, seq int32, records int) []byte {
	s := spec(records, 50)
	s.pid, s.epoch, s.seq, s.attrs = pid, epoch, seq, record.AttrTransactional
	return buildBatch(s)
}

// txnLog is a log with its high watermark following its end, as a single
// replica's does.
func appendHW(t testing.TB, l *Log, b []byte) AppendResult {
	t.Helper()
	r := appendOne(t, l, b)
	l.SetHighWatermark(l.LogEndOffset())
	return r
}

func marker(t testing.TB, l *Log, pid int64, epoch int16, commit bool) MarkerResult {
	t.Helper()
	r, err := l.AppendMarker(pid, epoch, 0, commit, AppendOptions{})
	if err != nil {
		t.Fatalf("AppendMarker(%d, commit=%v): %v", pid, commit, err)
	}
	l.SetHighWatermark(l.LogEndOffset())
	return r
}

func checkLSO(t testing.TB, l *Log, want int64) {
	t.Helper()
	if got := l.LastStableOffset(); got != want {
		t.Fatalf("LastStableOffset = %d, want %d (HW %d, LEO %d)", got, want, l.HighWatermark(), l.LogEndOffset())
	}
}

// readCommittedOffsets reads the log as a read_committed consumer reads
// it: batches up to the LSO, with the aborted transactions of the range;
// it returns the data offsets a consumer keeps.
func readCommittedOffsets(t testing.TB, l *Log) []int64 {
	t.Helper()
	var kept []int64
	off := l.LogStartOffset()
	for {
		r, err := l.ReadCommitted(off, 1<<20)
		if err != nil {
			t.Fatalf("ReadCommitted(%d): %v", off, err)
		}
		if r.Len == 0 {
			return kept
		}
		hs := splitBatches(t, readRegion(t, r))
		end := hs[len(hs)-1].LastOffset() + 1
		aborted := l.AbortedTxns(nil, off, end)
		for _, h := range hs {
			if h.IsControl() || h.NumRecords == 0 {
				continue
			}
			if h.IsTransactional() && isAborted(aborted, h) {
				continue
			}
			for o := h.BaseOffset; o <= h.LastOffset(); o++ {
				kept = append(kept, o)
			}
		}
		off = end
	}
}

func isAborted(aborted []AbortedTxn, h record.Header) bool {
	for _, a := range aborted {
		if a.ProducerID == h.ProducerID && a.FirstOffset <= h.BaseOffset && h.BaseOffset < a.LastOffset {
			return true
		}
	}
	return false
}

func offsets(from, to int64) []int64 {
	var o []int64
	for i := from; i < to; i++ {
		o = append(o, i)
	}
	return o
}

func TestTxnLastStableOffsetFollowsOpenTransactions(t *testing.T) {
	l := mustOpen(t, t.TempDir(), testConfig())
	defer l.Close()
	appendHW(t, l, buildBatch(spec(3, 10))) // 0-2, plain
	checkLSO(t, l, 3)
	appendHW(t, l, txnBatch(7, 0, 0, 2)) // 3-4, producer 7 opens at 3
	checkLSO(t, l, 3)
	appendHW(t, l, buildBatch(spec(1, 10))) // 5
	appendHW(t, l, txnBatch(8, 0, 0, 1))    // 6, producer 8 opens at 6
	appendHW(t, l, txnBatch(7, 0, 2, 1))    // 7
	checkLSO(t, l, 3)
	if got := l.FirstUnstableOffset(); got != 3 {
		t.Fatalf("FirstUnstableOffset = %d, want 3", got)
	}
	m := marker(t, l, 7, 0, true) // 8 commits producer 7
	if m.Offset != 8 || m.Aborted != nil {
		t.Fatalf("commit marker = %+v", m)
	}
	checkLSO(t, l, 6)             // producer 8 still open
	m = marker(t, l, 8, 0, false) // 9 aborts producer 8
	if m.Aborted == nil || *m.Aborted != (AbortedTxn{8, 6, 9, 10}) {
		t.Fatalf("abort marker = %+v", m.Aborted)
	}
	checkLSO(t, l, 10)
	if got := l.FirstUnstableOffset(); got != -1 {
		t.Fatalf("FirstUnstableOffset = %d, want -1", got)
	}
	want := append(offsets(0, 6), 7) // 6 was aborted; 8, 9 are markers
	if got := readCommittedOffsets(t, l); !slices.Equal(got, want) {
		t.Fatalf("read_committed offsets %v, want %v", got, want)
	}
	infos := l.Producers()
	for _, p := range infos {
		if p.CurrentTxnStartOffset != -1 {
			t.Fatalf("producer %d still has a transaction at %d", p.ProducerID, p.CurrentTxnStartOffset)
		}
	}
}

// TestTxnLSOWaitsForMarkerBelowHighWatermark: a decided transaction stays
// unstable until the high watermark passes its marker.
func TestTxnLSOWaitsForMarkerBelowHighWatermark(t *testing.T) {
	l := mustOpen(t, t.TempDir(), testConfig())
	defer l.Close()
	appendHW(t, l, txnBatch(1, 0, 0, 4)) // 0-3
	if _, err := l.AppendMarker(1, 0, 0, true, AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	checkLSO(t, l, 0) // HW 4: the marker at 4 is not below it
	l.SetHighWatermark(5)
	checkLSO(t, l, 5)
	r, err := l.ReadCommitted(0, 1<<20)
	if err != nil || r.NextOffset != 5 {
		t.Fatalf("ReadCommitted = %+v, %v", r, err)
	}
	r.Release()
}

func TestTxnReadCommittedStopsAtLSO(t *testing.T) {
	l := mustOpen(t, t.TempDir(), testConfig())
	defer l.Close()
	appendHW(t, l, buildBatch(spec(2, 10))) // 0-1
	appendHW(t, l, txnBatch(1, 0, 0, 2))    // 2-3 open
	appendHW(t, l, buildBatch(spec(2, 10))) // 4-5
	r, err := l.ReadCommitted(0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if hs := splitBatches(t, readRegion(t, r)); len(hs) != 1 || r.NextOffset != 2 {
		t.Fatalf("read %d batches up to %d, want 1 up to 2", len(hs), r.NextOffset)
	}
	if r, err := l.ReadCommitted(2, 1<<20); err != nil || r.Len != 0 {
		t.Fatalf("ReadCommitted at the LSO = %+v, %v; want nothing", r, err)
	}
	r, err = l.Read(2, 1<<20, false)
	if err != nil || r.NextOffset != 6 {
		t.Fatalf("read_uncommitted = %+v, %v; want up to 6", r, err)
	}
	r.Release()
}

func TestTxnMarkerFencing(t *testing.T) {
	l := mustOpen(t, t.TempDir(), testConfig())
	defer l.Close()
	appendHW(t, l, txnBatch(1, 3, 0, 1))
	if _, err := l.AppendMarker(1, 3, 5, true, AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendMarker(1, 3, 4, false, AppendOptions{}); !errors.Is(err, ErrTransactionCoordinatorFenced) {
		t.Fatalf("stale coordinator epoch: %v, want ErrTransactionCoordinatorFenced", err)
	}
	if _, err := l.AppendMarker(1, 2, 5, false, AppendOptions{}); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("old producer epoch: %v, want ErrInvalidProducerEpoch", err)
	}
	end := l.LogEndOffset()
	if end != 2 {
		t.Fatalf("log end %d after rejected markers, want 2", end)
	}
	// A bumped epoch (transactions v2) is accepted.
	if _, err := l.AppendMarker(1, 4, 5, false, AppendOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestTxnV2LateMarkerDoesNotEndTheNextTransaction: under transactions
// version 2 a transaction's records carry epoch E and its markers E+1, and
// the producer's next transaction writes at E+1. A marker at E+1 arriving
// once that next transaction is open is a late copy of the last one and
// must not end it (Kafka refuses it: INVALID_PRODUCER_EPOCH); the same
// marker with nothing open is a harmless retry and is written.
func TestTxnV2LateMarkerDoesNotEndTheNextTransaction(t *testing.T) {
	l := mustOpen(t, t.TempDir(), testConfig())
	defer l.Close()
	v2 := AppendOptions{TransactionVersion: 2}
	appendHW(t, l, txnBatch(1, 3, 0, 1)) // 0: transaction at epoch 3
	if _, err := l.AppendMarker(1, 4, 0, true, v2); err != nil {
		t.Fatal(err) // 1: its commit at the bumped epoch
	}
	if _, err := l.AppendMarker(1, 4, 0, true, v2); err != nil {
		t.Fatalf("a retried marker with nothing open: %v, want it written", err) // 2
	}
	appendHW(t, l, txnBatch(1, 4, 0, 1)) // 3: the next transaction, at epoch 4
	if _, err := l.AppendMarker(1, 4, 0, false, v2); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("a late marker at the open transaction's epoch: %v, want ErrInvalidProducerEpoch", err)
	}
	// Version 0/1 markers carry the records' epoch: accepted at it.
	if _, err := l.AppendMarker(1, 4, 0, false, AppendOptions{}); err != nil {
		t.Fatalf("a version 1 marker at the records' epoch: %v", err)
	}
	l.SetHighWatermark(l.LogEndOffset())
	checkLSO(t, l, l.LogEndOffset())
}

// TestTxnV2UnknownProducerStartsAtZero: a producer on transactions
// version 2 starts each transaction at sequence 0, so with no state here
// its later batch is refused until the first one is in. The CI run it
// comes from: the first batch of a Java producer's first transaction on a
// partition failed its verification (CONCURRENT_TRANSACTIONS, retriable),
// the second passed and was appended at sequence 1, and the retried first
// one was then out of order for good: the commit hung.
func TestTxnV2UnknownProducerStartsAtZero(t *testing.T) {
	l := mustOpen(t, t.TempDir(), testConfig())
	defer l.Close()
	appendV2 := func(b []byte, v2 bool) error {
		e := []AppendEntry{{Records: b, TxnV2: v2}}
		if err := l.Append(e, AppendOptions{}); err != nil {
			return err
		}
		return e[0].Err
	}
	if err := appendV2(txnBatch(7, 0, 1, 4), true); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("version 2, unknown producer, sequence 1: %v, want ErrOutOfOrderSequence", err)
	}
	if l.LogEndOffset() != 0 {
		t.Fatalf("log end %d after a refused batch", l.LogEndOffset())
	}
	if err := appendV2(txnBatch(7, 0, 0, 1), true); err != nil {
		t.Fatalf("sequence 0: %v", err)
	}
	if err := appendV2(txnBatch(7, 0, 1, 4), true); err != nil {
		t.Fatalf("the retried later batch: %v", err)
	}
	// Version 1 keeps KIP-360's rule: an unknown producer at any sequence
	// (its state may have gone with old segments).
	if err := appendV2(txnBatch(8, 0, 9, 1), false); err != nil {
		t.Fatalf("version 1, unknown producer, sequence 9: %v", err)
	}
}

// TestTxnAbortedLookup checks the fetch-range rule: entries whose marker
// is at or after the fetch offset and that began before its end.
func TestTxnAbortedLookup(t *testing.T) {
	l := mustOpen(t, t.TempDir(), testConfig())
	defer l.Close()
	appendHW(t, l, txnBatch(1, 0, 0, 2)) // 0-1
	appendHW(t, l, txnBatch(2, 0, 0, 2)) // 2-3
	marker(t, l, 1, 0, false)            // 4: abort 1 (LSO then 2)
	appendHW(t, l, txnBatch(3, 0, 0, 1)) // 5
	marker(t, l, 2, 0, false)            // 6: abort 2 (LSO then 5)
	marker(t, l, 3, 0, false)            // 7: abort 3 (LSO then 8)
	all := l.AbortedTxns(nil, 0, 100)
	want := []AbortedTxn{{1, 0, 4, 2}, {2, 2, 6, 5}, {3, 5, 7, 8}}
	if !slices.Equal(all, want) {
		t.Fatalf("aborted %v, want %v", all, want)
	}
	if got := l.AbortedTxns(nil, 5, 6); !slices.Equal(got, want[1:]) {
		t.Fatalf("[5,6): %v, want %v", got, want[1:])
	}
	if got := l.AbortedTxns(nil, 0, 2); !slices.Equal(got, want[:1]) {
		t.Fatalf("[0,2): %v, want %v", got, want[:1])
	}
	if got := l.AbortedTxns(nil, 8, 9); len(got) != 0 {
		t.Fatalf("[8,9): %v, want none", got)
	}
}

func TestTxnIndexSurvivesRestartAndRecovery(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig()
	cfg.SegmentBytes = 600 // several segments
	l := mustOpen(t, dir, cfg)
	var want []AbortedTxn
	for i := int64(0); i < 12; i++ {
		appendHW(t, l, txnBatch(i, 0, 0, 2))
		appendHW(t, l, buildBatch(spec(1, 10)))
		if m := marker(t, l, i, 0, i%3 == 0); m.Aborted != nil {
			want = append(want, *m.Aborted)
		}
	}
	appendHW(t, l, txnBatch(99, 0, 0, 2)) // left open
	openAt := l.LogEndOffset() - 2
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	check := func(l *Log, what string) {
		t.Helper()
		if got := l.AbortedTxns(nil, 0, 1<<40); !slices.Equal(got, want) {
			t.Fatalf("%s: aborted %v, want %v", what, got, want)
		}
		checkLSO(t, l, openAt)
	}
	l = mustOpen(t, dir, cfg)
	check(l, "clean restart")
	// An unclean stop after everything was flushed, and one after the
	// recovery point was lost: recovery rebuilds the entries from markers.
	l.Flush()
	crash(l)
	l = mustOpen(t, dir, cfg)
	check(l, "crash")
	crash(l)
	os.Remove(filepath.Join(dir, recoveryPointFile))
	l = mustOpen(t, dir, cfg)
	check(l, "crash without recovery point")
	marker(t, l, 99, 0, false)
	checkLSO(t, l, l.LogEndOffset())
	l.Close()
}

// txnWorkload fills a log in dir with interleaved transactions of three
// producers (every third one aborted), plain batches, over several
// segments, and returns it open with the number of batches written.
func txnWorkload(t testing.TB, dir string) (*Log, int) {
	cfg := testConfig()
	cfg.SegmentBytes = 2000
	cfg.IndexIntervalBytes = 300
	l := mustOpen(t, dir, cfg)
	batches := 0
	seq := map[int64]int32{}
	for i := 0; i < 30; i++ {
		pid := int64(100 + i%3)
		appendHW(t, l, txnBatch(pid, 0, seq[pid], 2))
		seq[pid] += 2
		appendHW(t, l, buildBatch(spec(1, 30)))
		batches += 2
		if i%2 == 1 {
			for p := int64(100); p < 103; p++ {
				marker(t, l, p, 0, (i+int(p))%3 != 0)
				batches++
			}
		}
	}
	return l, batches
}

// TestTxnFollowerKeepsLeadersState: a follower that copies a leader's
// transactional log byte for byte ends with the same transaction index
// (in memory and in its .txnindex files), the same open transactions and
// so the same LSO, and keeps them over a restart; a truncation below an
// abort marker reopens that transaction and drops its entry, and catching
// up again restores both.
func TestTxnFollowerKeepsLeadersState(t *testing.T) {
	root := t.TempDir()
	leader, _ := txnWorkload(t, filepath.Join(root, "leader"))
	defer leader.Close()
	appendHW(t, leader, txnBatch(500, 0, 0, 3)) // left open
	cfg := testConfig()
	cfg.SegmentBytes = 2000
	cfg.IndexIntervalBytes = 300
	fdir := filepath.Join(root, "follower")
	f := mustOpen(t, fdir, cfg)
	catchUp(t, leader, f, 700)
	f.SetHighWatermark(leader.HighWatermark())
	same := func(what string) {
		t.Helper()
		want, got := leader.AbortedTxns(nil, 0, 1<<40), f.AbortedTxns(nil, 0, 1<<40)
		if !slices.Equal(got, want) {
			t.Fatalf("%s: follower's aborted %v, leader's %v", what, got, want)
		}
		if got, want := f.LastStableOffset(), leader.LastStableOffset(); got != want {
			t.Fatalf("%s: follower's LSO %d, leader's %d", what, got, want)
		}
		if got, want := f.Producers(), leader.Producers(); !slices.Equal(got, want) {
			t.Fatalf("%s: follower's producers %+v, leader's %+v", what, got, want)
		}
	}
	same("caught up")
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"00000000000000000000.txnindex"} {
		a, _ := os.ReadFile(filepath.Join(leader.Dir(), name))
		b, _ := os.ReadFile(filepath.Join(fdir, name))
		if len(a) == 0 || !slices.Equal(a, b) {
			t.Fatalf("%s differs: leader %d bytes, follower %d", name, len(a), len(b))
		}
	}
	f = mustOpen(t, fdir, cfg)
	defer func() { f.Close() }()
	same("restarted")

	// Cut just below the last abort marker: its transaction is open again.
	all := f.AbortedTxns(nil, 0, 1<<40)
	last := all[len(all)-1]
	if err := f.TruncateTo(last.LastOffset); err != nil {
		t.Fatal(err)
	}
	if got := f.AbortedTxns(nil, 0, 1<<40); !slices.Equal(got, all[:len(all)-1]) {
		t.Fatalf("after the cut: aborted %v, want %v", got, all[:len(all)-1])
	}
	if got := f.FirstUnstableOffset(); got > last.FirstOffset {
		t.Fatalf("after the cut: first unstable offset %d, want at most %d (the reopened transaction)", got, last.FirstOffset)
	}
	catchUp(t, leader, f, 700)
	f.SetHighWatermark(leader.HighWatermark())
	same("caught up again")
}

// TestTxnSnapshotKeepsOpenTransactions: producer snapshots carry open
// transactions, so a restart that replays nothing (a clean close) and
// one that replays from a snapshot both resume them.
func TestTxnSnapshotKeepsOpenTransactions(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, testConfig())
	appendHW(t, l, buildBatch(spec(2, 10)))
	appendHW(t, l, txnBatch(7, 2, 0, 3)) // 2-4, open
	if err := l.Flush(); err != nil {    // snapshot at 5
		t.Fatal(err)
	}
	appendHW(t, l, txnBatch(8, 0, 0, 1)) // 5, open, after the snapshot
	m := mustDecodeNewestSnapshot(t, dir)
	if e := m[7]; e == nil || e.txnStart != 2 || e.epoch != 2 {
		t.Fatalf("snapshot entry of producer 7: %+v", e)
	}
	crash(l)
	l = mustOpen(t, dir, testConfig())
	checkLSO(t, l, 2)
	starts := map[int64]int64{}
	for _, p := range l.Producers() {
		starts[p.ProducerID] = p.CurrentTxnStartOffset
	}
	if starts[7] != 2 || starts[8] != 5 {
		t.Fatalf("after recovery: transaction starts %v, want 7:2 8:5", starts)
	}
	marker(t, l, 7, 2, true)
	checkLSO(t, l, 5)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, dir, testConfig())
	defer l.Close()
	checkLSO(t, l, 5)
	marker(t, l, 8, 0, false)
	checkLSO(t, l, l.LogEndOffset())
}

func mustDecodeNewestSnapshot(t *testing.T, dir string) map[int64]*producerEntry {
	t.Helper()
	offs, err := listSnapshots(dir)
	if err != nil || len(offs) == 0 {
		t.Fatalf("no snapshot: %v", err)
	}
	data, err := os.ReadFile(filepath.Join(dir, segmentName(offs[len(offs)-1], snapshotSuffix)))
	if err != nil {
		t.Fatal(err)
	}
	m, err := decodeSnapshot(data)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestTxnIndexDroppedWithLogStart: entries whose marker falls below a
// moved log start are forgotten, and their segments' files go.
func TestTxnIndexDroppedWithLogStart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "t-0")
	l, _ := txnWorkload(t, dir)
	defer l.Close()
	all := l.AbortedTxns(nil, 0, 1<<40)
	cut := all[len(all)/2].LastOffset + 1
	start, err := l.DeleteRecordsBefore(cut)
	if err != nil {
		t.Fatal(err)
	}
	got := l.AbortedTxns(nil, start, 1<<40)
	if len(got) == 0 || len(got) >= len(all) || got[0].LastOffset < start {
		t.Fatalf("after moving the log start to %d: %v (of %v)", start, got, all)
	}
	if n := len(l.aborted.load()); n != len(all)-searchAborted(all, start) {
		t.Fatalf("%d entries kept in memory, want %d", n, len(all)-searchAborted(all, start))
	}
}

// FuzzDecodeTxnIndex feeds arbitrary bytes to the .txnindex decoder: it
// never panics, returns only entries that are sane for the segment, and
// reads back what it decodes when re-encoded.
func FuzzDecodeTxnIndex(f *testing.F) {
	f.Add(AbortedTxn{1, 0, 4, 2}.appendTo(AbortedTxn{9, 5, 7, 8}.appendTo(nil)), int64(0), int64(100))
	f.Add([]byte{0, 0, 1, 2, 3}, int64(0), int64(10))
	f.Add(AbortedTxn{1, 3, 2, 5}.appendTo(nil), int64(0), int64(10))
	f.Fuzz(func(t *testing.T, b []byte, base, next int64) {
		if len(b) > 1<<16 {
			return
		}
		got, err := decodeTxnIndex(b, base, next)
		var re []byte
		prev := int64(-1)
		for _, a := range got {
			if a.LastOffset < base || a.LastOffset >= next || a.LastOffset <= prev || a.FirstOffset > a.LastOffset {
				t.Fatalf("insane entry %+v in [%d, %d)", a, base, next)
			}
			prev = a.LastOffset
			re = a.appendTo(re)
		}
		if !slices.Equal(re, b[:len(re)]) {
			t.Fatal("decoded entries do not re-encode to the bytes they came from")
		}
		if err == nil && len(re) != len(b) {
			t.Fatalf("no error, but %d of %d bytes decoded", len(re), len(b))
		}
	})
}

// TestTxnLogStartPassesOpenTransaction: DeleteRecords past an open
// transaction's last batch forgets it (its producer is evicted), and past
// its start alone clamps the first unstable offset to the log start, as
// Kafka does; the LSO never stays below the log start.
func TestTxnLogStartPassesOpenTransaction(t *testing.T) {
	l := mustOpen(t, t.TempDir(), testConfig())
	defer l.Close()
	appendHW(t, l, buildBatch(spec(2, 10))) // 0-1
	appendHW(t, l, txnBatch(7, 0, 0, 2))    // 2-3 open
	appendHW(t, l, txnBatch(8, 0, 0, 2))    // 4-5 open
	appendHW(t, l, buildBatch(spec(2, 10))) // 6-7
	checkLSO(t, l, 2)
	if _, err := l.DeleteRecordsBefore(3); err != nil {
		t.Fatal(err)
	}
	checkLSO(t, l, 3) // producer 7 wrote at 3: still open, clamped
	if _, err := l.DeleteRecordsBefore(4); err != nil {
		t.Fatal(err)
	}
	checkLSO(t, l, 4) // producer 7 evicted; producer 8 open at 4
	marker(t, l, 8, 0, true)
	checkLSO(t, l, l.LogEndOffset())
}

// TestTxnConcurrentReadCommitted races read_committed readers against a
// writer of interleaved transactions (each decided up front, its records
// saying how) and markers: a reader never keeps a record of a transaction
// that is aborted, whatever it saw of the LSO and the index when it read.
func TestTxnConcurrentReadCommitted(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 4000
	l := mustOpen(t, t.TempDir(), cfg)
	defer l.Close()
	const txns = 300
	done := make(chan struct{})
	errs := make(chan error, 4)
	for range 3 {
		go func() {
			off, kept := int64(0), 0
			for {
				select {
				case <-done:
					errs <- nil
					return
				default:
				}
				r, err := l.ReadCommitted(off, 1<<14)
				if err != nil {
					errs <- err
					return
				}
				if r.Len == 0 {
					continue
				}
				b := make([]byte, r.Len)
				_, err = r.File.ReadAt(b, r.Pos)
				r.Release()
				if err != nil {
					errs <- err
					return
				}
				var hs []record.Header
				for p := b; len(p) > 0; {
					h, _ := record.ParseHeader(p)
					hs = append(hs, h)
					p = p[h.Size():]
				}
				end := hs[len(hs)-1].LastOffset() + 1
				aborted := l.AbortedTxns(nil, off, end)
				for _, h := range hs {
					if h.IsControl() || !h.IsTransactional() || isAborted(aborted, h) {
						continue
					}
					if h.FirstTimestamp%2 == 1 { // the writer's mark of a transaction it aborts
						errs <- fmt.Errorf("kept batch %d of aborted producer %d (LSO %d, aborted %v)", h.BaseOffset, h.ProducerID, l.LastStableOffset(), aborted)
						return
					}
					kept++
				}
				off = end
			}
		}()
	}
	seq := map[int64]int32{}
	for i := range txns {
		pid := int64(i % 5)
		abort := i%3 == 0
		s := spec(2, 20)
		s.pid, s.epoch, s.seq, s.attrs = pid, 0, seq[pid], record.AttrTransactional
		s.ts = 1_700_000_000_000 + int64(btoi(abort)) // odd: to be aborted
		seq[pid] += 2
		appendHW(t, l, buildBatch(s))
		if i%5 == 4 { // decide the five open transactions
			for p := int64(0); p < 5; p++ {
				marker(t, l, p, 0, (i-4+int(p))%3 != 0)
			}
		}
	}
	close(done)
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestTxnReplayKeepsMarkerAboveHWUnstable: a marker the high watermark
// has not passed, replayed from headers at open (its snapshot lost), keeps
// its transaction unstable, as when it was appended.
func TestTxnReplayKeepsMarkerAboveHWUnstable(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, testConfig())
	appendHW(t, l, buildBatch(spec(1, 10))) // 0
	appendHW(t, l, txnBatch(3, 0, 0, 2))    // 1-2
	if err := l.Flush(); err != nil {       // snapshot at 3
		t.Fatal(err)
	}
	if _, err := l.AppendMarker(3, 0, 0, true, AppendOptions{}); err != nil { // 3
		t.Fatal(err)
	}
	l.SetHighWatermark(3) // a follower has the data, not the marker yet
	checkLSO(t, l, 1)
	if err := l.Close(); err != nil { // snapshot at 4, HW 3 checkpointed
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, segmentName(4, snapshotSuffix))); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, dir, testConfig())
	defer l.Close()
	if hw := l.HighWatermark(); hw != 3 {
		t.Fatalf("reopened with HW %d, want the checkpointed 3", hw)
	}
	checkLSO(t, l, 1)
	l.SetHighWatermark(4)
	checkLSO(t, l, 4)
}
