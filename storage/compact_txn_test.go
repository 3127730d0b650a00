package storage

import (
	"encoding/binary"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/sluice-broker/sluice/record"
)

// txnKeyed is keyedBatch for a transactional producer.
func txnKeyed(t testing.TB, pid int64, seq int32, recs ...kv) []byte {
	b := keyedBatch(t, keyedSpec{pid: pid, seq: seq}, recs...)
	binary.BigEndian.PutUint16(b[record.PosAttributes:], uint16(record.Attributes(b)|record.AttrTransactional))
	record.SetCRC(b)
	return b
}

// view reads the log as a consumer at the isolation level does (read_
// committed: up to the LSO, skipping aborted transactions by the fetch
// range's aborted list) and returns each key's last value ("" for a
// tombstone), and how many aborted records a read_uncommitted reader saw.
func view(t testing.TB, l *Log, committed bool) map[string]string {
	t.Helper()
	out := map[string]string{}
	off := l.LogStartOffset()
	for {
		var r Region
		var err error
		if committed {
			r, err = l.ReadCommitted(off, 1<<20)
		} else {
			r, err = l.Read(off, 1<<20, false)
		}
		if err != nil {
			t.Fatal(err)
		}
		if r.Len == 0 {
			return out
		}
		b := readRegion(t, r)
		var hs []record.Header
		for p := b; len(p) > 0; {
			h, _ := record.ParseHeader(p)
			hs = append(hs, h)
			p = p[h.Size():]
		}
		end := hs[len(hs)-1].LastOffset() + 1
		aborted := l.AbortedTxns(nil, off, end)
		for len(b) > 0 {
			h, recs := decodeBatch(t, b)
			b = b[h.Size():]
			if h.IsControl() || (committed && h.IsTransactional() && isAborted(aborted, h)) {
				continue
			}
			for _, r := range recs {
				out[r.key] = string(r.value)
			}
		}
		off = end
	}
}

// TestCompactTransactions: compaction removes aborted transactions'
// records, keeps committed ones (compacted by key), keeps markers while
// they matter and removes them after delete.retention.ms; a cleaned log
// reads the same under read_committed before and after, and under
// read_uncommitted as read_committed once the aborted records are gone.
func TestCompactTransactions(t *testing.T) {
	dir := t.TempDir()
	cfg := compactConfig()
	cfg.DeleteRetentionMs = 1000
	l := mustOpen(t, dir, cfg)
	defer func() { l.Close() }()
	var want map[string]string // the read_committed view
	filled := 0
	filler := func(n int) {
		for i := 0; i < n; i++ {
			k, v := fmt.Sprintf("fill-%d", filled%7), fmt.Sprintf("v%d", filled)
			appendHW(t, l, keyedBatch(t, keyedSpec{}, rec(k, v)))
			if want != nil {
				want[k] = v
			}
			filled++
		}
	}
	appendHW(t, l, txnKeyed(t, 1, 0, rec("k1", "a1"), rec("k2", "a2"))) // aborted
	appendHW(t, l, keyedBatch(t, keyedSpec{}, rec("k1", "p1")))
	appendHW(t, l, txnKeyed(t, 2, 0, rec("k1", "c1"), rec("k3", "c3"))) // committed
	marker(t, l, 1, 0, false)
	marker(t, l, 2, 0, true)
	appendHW(t, l, txnKeyed(t, 1, 2, rec("k3", "a3"))) // aborted
	marker(t, l, 1, 0, false)
	appendHW(t, l, txnKeyed(t, 1, 3, rec("k4", "c4"))) // committed: producer 1's last
	marker(t, l, 1, 0, true)
	filler(60)
	settle(t, l)
	want = view(t, l, true)
	if want["k1"] != "c1" || want["k2"] != "" || want["k3"] != "c3" || want["k4"] != "c4" {
		t.Fatalf("read_committed before compaction: %v", want)
	}
	if u := view(t, l, false); u["k2"] != "a2" || u["k3"] != "a3" {
		t.Fatalf("read_uncommitted before compaction: %v", u)
	}
	if n := len(l.AbortedTxns(nil, 0, 1<<40)); n != 2 {
		t.Fatalf("%d aborted transactions indexed, want 2", n)
	}

	now := int64(1_800_000_000_000)
	st := mustCompact(t, l, now)
	t.Logf("pass 1: %+v", st)
	if st.AbortedRemoved != 3 {
		t.Fatalf("pass 1 removed %d aborted records, want 3", st.AbortedRemoved)
	}
	check := func(what string) {
		t.Helper()
		if got := view(t, l, true); !maps.Equal(got, want) {
			t.Fatalf("%s: read_committed %v, want %v", what, got, want)
		}
		if got := view(t, l, false); !maps.Equal(got, want) {
			t.Fatalf("%s: read_uncommitted %v, want %v", what, got, want)
		}
	}
	check("pass 1")
	if err := l.Close(); err != nil { // the cleaned segments' .txnindex files are read back
		t.Fatal(err)
	}
	l = mustOpen(t, dir, cfg)
	check("pass 1, reopened")
	if n := len(l.AbortedTxns(nil, 0, 1<<40)); n != 2 {
		t.Fatalf("after pass 1: %d aborted transactions indexed, want 2 (their records were just removed)", n)
	}

	// Pass 2 (new dirty data asks for it): no aborted data is left, so
	// the abort markers are stamped with a horizon and their entries go.
	filler(30)
	settle(t, l)
	st = mustCompact(t, l, now+1)
	t.Logf("pass 2: %+v", st)
	check("pass 2")
	if n := len(l.AbortedTxns(nil, 0, 1<<40)); n != 0 {
		t.Fatalf("after pass 2: %d aborted transactions indexed, want 0", n)
	}
	// Pass 3 after the horizon removes the abort markers; producer 1's
	// last batch (its commit marker) stays, as does producer 2's commit
	// while its transaction's record c1/c3 remain.
	filler(30)
	settle(t, l)
	st = mustCompact(t, l, now+1+cfg.DeleteRetentionMs)
	t.Logf("pass 3: %+v", st)
	if st.MarkersRemoved != 2 {
		t.Fatalf("pass 3 removed %d markers, want the 2 abort markers", st.MarkersRemoved)
	}
	check("pass 3")
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, dir, cfg)
	check("reopened")
	crash(l)
	l = mustOpen(t, dir, cfg)
	check("recovered")
	if cp := os.Getenv("SLUICE_KAFKA_CLASSPATH"); cp != "" {
		// Kafka's DumpLogSegments reads the cleaned segments: emptied
		// batches, markers with a delete horizon, cleaned .txnindex files.
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		runKafkaDumpLog(t, cp, dir, len(splitBatches(t, logStream(t, dir))))
	}
}

// TestCompactTransactionsProperty runs random workloads of plain writes,
// interleaved transactions of three producers (committed or aborted at
// random) and compaction passes with a clock that passes delete horizons,
// and checks after every pass and at the end (after a restart) that the
// read_committed view is the model's: each key's last value among the
// records below the LSO that no abort hid.
func TestCompactTransactionsProperty(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { compactTxnProperty(t, seed) })
	}
}

type modelRec struct {
	off      int64
	key, val string
	txn      int // -1 plain
}

func compactTxnProperty(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 99))
	dir := t.TempDir()
	cfg := compactConfig()
	cfg.DeleteRetentionMs = 50
	l := mustOpen(t, dir, cfg)
	defer func() { l.Close() }()
	var recs []modelRec
	open := map[int64]int{}   // producer → its open transaction
	aborted := map[int]bool{} // decided transactions that aborted
	first := map[int]int64{}  // transaction → first offset
	seq := map[int64]int32{}
	txnID := 0
	now := int64(1_800_000_000_000)
	var total CompactStats
	want := func() map[string]string {
		lso := l.LogEndOffset()
		for _, id := range open {
			lso = min(lso, first[id])
		}
		out := map[string]string{}
		for _, r := range recs {
			if r.off < lso && (r.txn < 0 || !aborted[r.txn]) {
				out[r.key] = r.val
			}
		}
		return out
	}
	check := func(what string) {
		t.Helper()
		if got, w := view(t, l, true), want(); !maps.Equal(got, w) {
			t.Fatalf("%s: read_committed %v, want %v", what, got, w)
		}
	}
	for step := 0; step < 600; step++ {
		key, val := fmt.Sprintf("k%d", rng.IntN(12)), fmt.Sprintf("v%d", step)
		switch op := rng.IntN(10); {
		case op < 4:
			res := appendHW(t, l, keyedBatch(t, keyedSpec{}, rec(key, val)))
			recs = append(recs, modelRec{res.FirstOffset, key, val, -1})
		case op < 8:
			pid := int64(1 + rng.IntN(3))
			id, ok := open[pid]
			if !ok {
				id, txnID = txnID, txnID+1
				open[pid] = id
			}
			res := appendHW(t, l, txnKeyed(t, pid, seq[pid], rec(key, val)))
			seq[pid]++
			if !ok {
				first[id] = res.FirstOffset
			}
			recs = append(recs, modelRec{res.FirstOffset, key, val, id})
		default:
			for pid, id := range open {
				commit := rng.IntN(3) != 0
				marker(t, l, pid, 0, commit)
				aborted[id] = !commit
				delete(open, pid)
				break
			}
		}
		if step%50 == 49 {
			settle(t, l)
			now += int64(rng.IntN(80))
			st := mustCompact(t, l, now)
			total.AbortedRemoved += st.AbortedRemoved
			total.MarkersRemoved += st.MarkersRemoved
			total.Records += st.Records
			total.RecordsKept += st.RecordsKept
			check(fmt.Sprintf("step %d", step))
			noAbortedBelow(t, l, recs, aborted, st.CleanedTo)
		}
	}
	for pid := range open {
		marker(t, l, pid, 0, false)
		aborted[open[pid]] = true
		delete(open, pid)
	}
	settle(t, l)
	mustCompact(t, l, now+1000)
	check("end")
	t.Logf("passes read %d records, kept %d; removed %d aborted records and %d markers",
		total.Records, total.RecordsKept, total.AbortedRemoved, total.MarkersRemoved)
	if total.AbortedRemoved == 0 || total.MarkersRemoved == 0 {
		t.Fatal("the workload never exercised aborted-record or marker removal")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, dir, cfg)
	check("reopened")
}

// noAbortedBelow checks that a read_uncommitted reader finds no record of
// an aborted transaction below cleaned (what the pass cleaned).
func noAbortedBelow(t *testing.T, l *Log, recs []modelRec, aborted map[int]bool, cleaned int64) {
	t.Helper()
	byOff := map[int64]modelRec{}
	for _, r := range recs {
		byOff[r.off] = r
	}
	_, got := readRecords(t, l)
	for _, r := range got {
		if m, ok := byOff[r.off]; ok && r.off < cleaned && m.txn >= 0 && aborted[m.txn] {
			t.Fatalf("aborted record %d (%s=%s) left below the cleaned offset %d", r.off, m.key, m.val, cleaned)
		}
	}
}

// TestCompactKeepsLastDataBatchBeforeMarker: a transactional producer's
// last data batch is kept (emptied) even though a marker follows it, as
// Kafka keeps it, so its sequence numbers survive a rebuild from the log.
func TestCompactKeepsLastDataBatchBeforeMarker(t *testing.T) {
	cfg := compactConfig()
	l := mustOpen(t, t.TempDir(), cfg)
	defer l.Close()
	data := appendHW(t, l, txnKeyed(t, 5, 0, rec("k", "old")))
	marker(t, l, 5, 0, true)
	for i := range 80 {
		appendHW(t, l, keyedBatch(t, keyedSpec{}, rec("k", fmt.Sprint("new", i))))
	}
	settle(t, l)
	mustCompact(t, l, 1_800_000_000_000)
	hs, _ := readRecords(t, l)
	for _, h := range hs {
		if h.BaseOffset == data.FirstOffset {
			if h.NumRecords != 0 || h.ProducerID != 5 || h.IsControl() {
				t.Fatalf("producer 5's last data batch: %+v, want it kept empty", h)
			}
			return
		}
	}
	t.Fatal("producer 5's last data batch was removed")
}
