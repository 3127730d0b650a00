package storage

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-broker/sluice/record"
)

// followerSet concatenates batches as a leader would have written them:
// base offsets from base on, partitionLeaderEpoch epoch (both outside the
// CRC, so the batches stay valid).
func followerSet(base int64, epoch int32, batches ...[]byte) []byte {
	var out []byte
	for _, b := range batches {
		b = slices.Clone(b)
		record.SetBaseOffset(b, base)
		record.SetLeaderEpoch(b, epoch)
		base = record.LastOffset(b) + 1
		out = append(out, b...)
	}
	return out
}

// fetch returns the bytes Read hands a follower fetching at offset.
func fetch(t testing.TB, from *Log, offset int64, maxBytes int32) []byte {
	t.Helper()
	r, err := from.Read(offset, maxBytes, true)
	if err != nil {
		t.Fatalf("leader Read(%d): %v", offset, err)
	}
	return readRegion(t, r)
}

// catchUp copies leader's batches from the follower's log end to the
// leader's, maxBytes per fetch, as a replica fetcher does.
func catchUp(t testing.TB, leader, follower *Log, maxBytes int32) {
	t.Helper()
	for follower.LogEndOffset() < leader.LogEndOffset() {
		b := fetch(t, leader, follower.LogEndOffset(), maxBytes)
		if len(b) == 0 {
			t.Fatalf("leader returned nothing at %d (LEO %d)", follower.LogEndOffset(), leader.LogEndOffset())
		}
		if _, err := follower.AppendAsFollower(b); err != nil {
			t.Fatalf("AppendAsFollower at %d: %v", follower.LogEndOffset(), err)
		}
	}
}

// segmentFiles returns dir's segment files (.log, .index, .timeindex) by
// name.
func segmentFiles(t testing.TB, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		n := e.Name()
		if strings.HasSuffix(n, logSuffix) || strings.HasSuffix(n, indexSuffix) || strings.HasSuffix(n, timeIndexSuffix) {
			b, err := os.ReadFile(filepath.Join(dir, n))
			if err != nil {
				t.Fatal(err)
			}
			files[n] = b
		}
	}
	return files
}

// logStream is the concatenation of dir's .log files in offset order: the
// partition's batches as bytes, whatever the segment boundaries.
func logStream(t testing.TB, dir string) []byte {
	t.Helper()
	files := segmentFiles(t, dir)
	var names []string
	for n := range files {
		if strings.HasSuffix(n, logSuffix) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	var out []byte
	for _, n := range names {
		out = append(out, files[n]...)
	}
	return out
}

// leaderWorkload appends plain and idempotent batches over several leader
// epochs and returns the leader.
func leaderWorkload(t testing.TB, dir string, cfg Config, n int) *Log {
	t.Helper()
	l := mustOpen(t, dir, cfg)
	seq := map[int64]int32{}
	for i := 0; i < n; i++ {
		s := spec(1+i%5, 50+i*37%400)
		s.ts += int64(i * 3)
		s.fill = byte(i)
		if i%3 != 0 {
			s.pid, s.epoch = int64(i%3), 0
			s.seq = seq[s.pid]
			seq[s.pid] += int32(s.records)
		}
		e := []AppendEntry{{Records: buildBatch(s)}}
		if err := l.Append(e, AppendOptions{LeaderEpoch: int32(i / 17 * 2)}); err != nil || e[0].Err != nil {
			t.Fatal(err, e[0].Err)
		}
	}
	return l
}

func TestAppendAsFollowerCopiesLeaderByteForByte(t *testing.T) {
	for _, maxBytes := range []int32{1, 700, 5000, 1 << 20} {
		cfg := testConfig()
		cfg.SegmentBytes = 6000
		cfg.IndexIntervalBytes = 500
		root := t.TempDir()
		leader := leaderWorkload(t, filepath.Join(root, "leader"), cfg, 120)
		follower := mustOpen(t, filepath.Join(root, "follower"), cfg)
		catchUp(t, leader, follower, maxBytes)
		if hw := follower.HighWatermark(); hw != 0 {
			t.Fatalf("follower append moved the high watermark to %d", hw)
		}
		follower.SetHighWatermark(1 << 40)
		if follower.HighWatermark() != leader.LogEndOffset() {
			t.Fatalf("HW %d, want clamp to LEO %d", follower.HighWatermark(), leader.LogEndOffset())
		}
		if got, want := follower.epochs.snapshot(), leader.epochs.snapshot(); !slices.EqualFunc(got, want, slices.Equal) {
			t.Fatalf("epochs %v, leader %v", got, want)
		}
		if got, want := follower.Producers(), leader.Producers(); !slices.Equal(got, want) {
			t.Fatalf("producers %+v, leader %+v", got, want)
		}
		leader.Close()
		follower.Close()
		lf, ff := segmentFiles(t, leader.Dir()), segmentFiles(t, follower.Dir())
		if len(lf) != len(ff) || len(lf) < 9 {
			t.Fatalf("maxBytes %d: %d segment files, leader %d", maxBytes, len(ff), len(lf))
		}
		for name, b := range lf {
			if !bytes.Equal(ff[name], b) {
				t.Fatalf("maxBytes %d: %s differs from the leader's", maxBytes, name)
			}
		}
		checkDumpLogInvariants(t, follower.Dir())
	}
}

func TestAppendAsFollowerRejects(t *testing.T) {
	good := followerSet(3, 1, buildBatch(spec(2, 10)), buildBatch(spec(3, 10)))
	second := len(buildBatch(spec(2, 10)))
	mut := func(f func(b []byte) []byte) []byte { return f(slices.Clone(good)) }
	cases := []struct {
		name string
		in   []byte
		want error
	}{
		{"empty", nil, ErrCorruptMessage},
		{"overlap", followerSet(2, 1, buildBatch(spec(2, 10))), ErrUnexpectedAppendOffset},
		{"gap", followerSet(4, 1, buildBatch(spec(2, 10))), ErrUnexpectedAppendOffset},
		{"gap between batches", mut(func(b []byte) []byte { record.SetBaseOffset(b[second:], 9); return b }), ErrUnexpectedAppendOffset},
		{"overlap between batches", mut(func(b []byte) []byte { record.SetBaseOffset(b[second:], 4); return b }), ErrUnexpectedAppendOffset},
		{"bad crc", mut(func(b []byte) []byte { b[len(b)-3] ^= 1; return b }), ErrCorruptMessage},
		{"bad magic", mut(func(b []byte) []byte { b[second+record.PosMagic] = 1; return b }), ErrInvalidRecord},
		{"truncated", good[:len(good)-1], ErrCorruptMessage},
		{"trailing bytes", append(slices.Clone(good), 0, 0, 0), ErrCorruptMessage},
		{"short length", mut(func(b []byte) []byte { b[record.PosLength+3] = 5; b[record.PosLength+2] = 0; return b }), ErrCorruptMessage},
		{"offset overflow", followerSet(1<<62, 1, buildBatch(spec(1, 1))), ErrUnexpectedAppendOffset},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := mustOpen(t, t.TempDir(), testConfig())
			defer l.Close()
			if _, err := l.AppendAsFollower(followerSet(0, 0, buildBatch(spec(3, 5)))); err != nil {
				t.Fatal(err)
			}
			size := l.Size()
			_, err := l.AppendAsFollower(c.in)
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
			if l.LogEndOffset() != 3 || l.Size() != size || l.LatestEpoch() != 0 {
				t.Fatalf("a rejected call changed the log: LEO %d size %d epoch %d", l.LogEndOffset(), l.Size(), l.LatestEpoch())
			}
			if res, err := l.AppendAsFollower(good); err != nil || res.FirstOffset != 3 || res.LastOffset != 7 || res.Batches != 2 {
				t.Fatalf("valid append after a rejected one: %+v %v", res, err)
			}
		})
	}
}

// TestAppendAsFollowerProducerState: a follower learns idempotent producers
// from the replicated batches without judging them, and once it leads, a
// producer's retry of a replicated batch is a duplicate with its original
// offsets.
func TestAppendAsFollowerProducerState(t *testing.T) {
	l := mustOpen(t, t.TempDir(), testConfig())
	defer l.Close()
	// The same sequence twice and an older epoch: the leader decided, so
	// the follower takes them.
	in := followerSet(0, 4, idemBatch(9, 1, 0, 3), idemBatch(9, 1, 0, 3), idemBatch(9, 0, 3, 3), idemBatch(9, 1, 3, 3))
	if _, err := l.AppendAsFollower(in); err != nil {
		t.Fatal(err)
	}
	ps := l.Producers()
	if len(ps) != 1 || ps[0].ProducerEpoch != 1 || ps[0].LastSequence != 5 {
		t.Fatalf("producers %+v", ps)
	}
	// Failover: this replica leads and the producer retries its last batch.
	r, err := appendIdem(l, idemBatch(9, 1, 3, 3))
	if err != nil || !r.Duplicate || r.FirstOffset != 9 || r.LastOffset != 11 {
		t.Fatalf("retry after failover: %+v %v", r, err)
	}
	if r, err := appendIdem(l, idemBatch(9, 1, 6, 1)); err != nil || r.Duplicate || r.FirstOffset != 12 {
		t.Fatalf("next batch after failover: %+v %v", r, err)
	}
}

func TestAppendAsFollowerEpochs(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, testConfig())
	b := buildBatch(spec(2, 5))
	in := slices.Concat(followerSet(0, 1, b, b), followerSet(4, 3, b), followerSet(6, 2, b), followerSet(8, 7, b))
	if _, err := l.AppendAsFollower(in); err != nil {
		t.Fatal(err)
	}
	want := [][]int64{{1, 0}, {3, 4}, {7, 8}}
	if got := l.epochs.snapshot(); !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("epochs %v, want %v", got, want)
	}
	if e, end := l.EndOffsetForEpoch(3); e != 3 || end != 8 {
		t.Fatalf("EndOffsetForEpoch(3) = %d, %d", e, end)
	}
	crash(l)
	l = mustOpen(t, dir, testConfig())
	defer l.Close()
	if got := l.epochs.snapshot(); !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("epochs after a crash %v, want %v", got, want)
	}
	if l.LogEndOffset() != 10 {
		t.Fatalf("LEO after a crash %d", l.LogEndOffset())
	}
}

// TestAppendAsFollowerControlAndCompacted: transaction markers are
// replicated, and a compacted leader's gaps between batches are admitted.
func TestAppendAsFollowerControlAndCompacted(t *testing.T) {
	cfg := testConfig()
	cfg.Compact = true
	l := mustOpen(t, t.TempDir(), cfg)
	defer l.Close()
	txn := spec(2, 5)
	txn.pid, txn.epoch, txn.seq, txn.attrs = 4, 0, 0, record.AttrTransactional
	h := record.NewHeader()
	h.BaseOffset, h.ProducerID, h.ProducerEpoch, h.FirstTimestamp = 2, 4, 0, 1
	marker := record.AppendMarkerBatch(nil, h, record.Marker{Type: record.ControlCommit})
	in := slices.Concat(followerSet(0, 0, buildBatch(txn)), marker, followerSet(10, 0, buildBatch(spec(1, 1))))
	if _, err := l.AppendAsFollower(in); err != nil {
		t.Fatal(err)
	}
	if ps := l.Producers(); len(ps) != 1 || ps[0].CurrentTxnStartOffset != -1 {
		t.Fatalf("marker not applied: %+v", ps)
	}
	if l.LogEndOffset() != 11 {
		t.Fatalf("LEO %d", l.LogEndOffset())
	}
}

func TestAppendAsFollowerAllocatesNothing(t *testing.T) {
	l := mustOpen(t, t.TempDir(), testConfig())
	defer l.Close()
	in := followerSet(0, 1, idemBatch(3, 0, 0, 4), buildBatch(spec(16, 100)), buildBatch(spec(4, 100)))
	seq := int32(0)
	next := func() { // base offsets continue the log; the producer's sequence too
		off := l.LogEndOffset()
		for pos := 0; pos < len(in); pos += int(record.Size(in[pos:])) {
			record.SetBaseOffset(in[pos:], off)
			off = record.LastOffset(in[pos:]) + 1
		}
		setSequenceForTest(in[:record.Size(in)], seq)
		seq += 4
	}
	next()
	if _, err := l.AppendAsFollower(in); err != nil { // sizes the reusable iovec slice
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(200, func() {
		next()
		if _, err := l.AppendAsFollower(in); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("AppendAsFollower allocates %v per call", allocs)
	}
}

// FuzzAppendAsFollower feeds arbitrary bytes to a follower log at offset
// 0: it must never panic; what it accepts must read back byte-for-byte and
// survive a crash; what it rejects must leave the log empty.
func FuzzAppendAsFollower(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	f.Add(followerSet(0, 3, buildBatch(spec(2, 4)), idemBatch(1, 0, 0, 2)))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := filepath.Join(fastTempDir(t), "p-0")
		cfg := crashConfig()
		cfg.SegmentBytes = 4096
		l := mustOpen(t, dir, cfg)
		res, err := l.AppendAsFollower(slices.Clone(data))
		if err != nil {
			if !errors.Is(err, ErrCorruptMessage) && !errors.Is(err, ErrInvalidRecord) && !errors.Is(err, ErrUnexpectedAppendOffset) {
				t.Fatalf("unmapped error %v", err)
			}
			if l.LogEndOffset() != 0 || l.Size() != 0 {
				t.Fatalf("rejected input changed the log: LEO %d size %d", l.LogEndOffset(), l.Size())
			}
			l.Close()
			return
		}
		if l.LogEndOffset() != res.LastOffset+1 || res.FirstOffset != 0 || l.HighWatermark() != 0 {
			t.Fatalf("result %+v, LEO %d HW %d", res, l.LogEndOffset(), l.HighWatermark())
		}
		crash(l)
		l = mustOpen(t, dir, cfg)
		defer l.Close()
		if l.LogEndOffset() != res.LastOffset+1 {
			t.Fatalf("LEO %d after a crash, want %d", l.LogEndOffset(), res.LastOffset+1)
		}
		if got := logStream(t, dir); !bytes.Equal(got, data) {
			t.Fatalf("log holds %d bytes that differ from the %d appended", len(got), len(data))
		}
	})
}

// BenchmarkAppendAsFollower appends 16 x 1 KiB-record batches as a
// follower, 1, 4 and 16 batches per call (one fetched record set), to
// compare with BenchmarkAppend's 1-set and 4-sets. Each call first sets
// the batches' base offsets to continue the log, as the leader's would.
func BenchmarkAppendAsFollower(b *testing.B) {
	for _, perCall := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("%d-batches", perCall), func(b *testing.B) {
			l := mustOpen(b, b.TempDir(), DefaultConfig())
			defer l.Close()
			var in []byte
			for range perCall {
				in = append(in, benchBatch()...)
			}
			size := int(record.Size(in))
			b.SetBytes(int64(len(in)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				off := l.LogEndOffset()
				for pos := 0; pos < len(in); pos += size {
					record.SetBaseOffset(in[pos:], off)
					off += 16
				}
				if _, err := l.AppendAsFollower(in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkFollowerVsAppend interleaves rounds of Append (4 record sets
// per call) and AppendAsFollower (the same 4 batches as one fetched set)
// on two logs in one directory, so both see the same page cache and
// writeback pressure, and reports each one's throughput and CPU time per
// call. Which goes first alternates by round: the second writer of a round
// pays more of the writeback throttling. SLUICE_BENCH_TMPFS=1 runs on
// tmpfs (no writeback at all).
func BenchmarkFollowerVsAppend(b *testing.B) {
	dir := b.TempDir()
	if os.Getenv("SLUICE_BENCH_TMPFS") != "" {
		dir = fastTempDir(b)
	}
	leader := mustOpen(b, filepath.Join(dir, "leader"), DefaultConfig())
	defer leader.Close()
	follower := mustOpen(b, filepath.Join(dir, "follower"), DefaultConfig())
	defer follower.Close()
	entries := make([]AppendEntry, 4)
	var in []byte
	for i := range entries {
		entries[i].Records = benchBatch()
		in = append(in, benchBatch()...)
	}
	size := int(record.Size(in))
	var tLeader, tFollower, cLeader, cFollower time.Duration
	timed := func(wall, cpu *time.Duration, n int, call func()) {
		start, c0 := time.Now(), cpuTime()
		for i := 0; i < n; i++ {
			call()
		}
		*wall += time.Since(start)
		*cpu += cpuTime() - c0
	}
	appendLeader := func() {
		if err := leader.Append(entries, AppendOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	appendFollower := func() {
		off := follower.LogEndOffset()
		for pos := 0; pos < len(in); pos += size {
			record.SetBaseOffset(in[pos:], off)
			off += 16
		}
		if _, err := follower.AppendAsFollower(in); err != nil {
			b.Fatal(err)
		}
	}
	const round = 128
	b.SetBytes(int64(len(in)))
	b.ResetTimer()
	for done := 0; done < b.N; done += round {
		n := min(round, b.N-done)
		if done/round%2 == 0 {
			timed(&tLeader, &cLeader, n, appendLeader)
			timed(&tFollower, &cFollower, n, appendFollower)
		} else {
			timed(&tFollower, &cFollower, n, appendFollower)
			timed(&tLeader, &cLeader, n, appendLeader)
		}
	}
	b.StopTimer()
	mb := float64(b.N) * float64(len(in)) / 1e6
	b.ReportMetric(mb/tLeader.Seconds(), "append-MB/s")
	b.ReportMetric(mb/tFollower.Seconds(), "follower-MB/s")
	b.ReportMetric(float64(cLeader.Microseconds())/float64(b.N), "append-cpu-µs/op")
	b.ReportMetric(float64(cFollower.Microseconds())/float64(b.N), "follower-cpu-µs/op")
}
