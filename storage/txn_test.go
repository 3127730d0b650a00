package storage

import (
	"errors"
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
	if r, err := l.Read(2, 1<<20, false); err != nil || r.NextOffset != 6 {
		t.Fatalf("read_uncommitted = %+v, %v; want up to 6", r, err)
	}
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
