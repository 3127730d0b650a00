package storage

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sluice-broker/sluice/record"
)

// replicaBatches builds n batches as a leader wrote them: offsets from 0,
// leader epoch i/10*2, every other one from idempotent producer 1.
func replicaBatches(n int) [][]byte {
	var out [][]byte
	next, seq := int64(0), int32(0)
	for i := 0; i < n; i++ {
		s := spec(1+i%4, 60+i%7*30)
		s.ts += int64(i)
		s.fill = byte(i)
		if i%2 == 1 {
			s.pid, s.epoch, s.seq = 1, 0, seq
			seq += int32(s.records)
		}
		b := followerSet(next, int32(i/10*2), buildBatch(s))
		next = record.LastOffset(b) + 1
		out = append(out, b)
	}
	return out
}

func truncateConfig() Config {
	cfg := testConfig()
	cfg.SegmentBytes = 3000
	cfg.IndexIntervalBytes = 200
	return cfg
}

// replicaLog opens a follower log in dir holding batches.
func replicaLog(t testing.TB, dir string, cfg Config, batches [][]byte) *Log {
	t.Helper()
	l := mustOpen(t, dir, cfg)
	if len(batches) == 0 {
		return l
	}
	if _, err := l.AppendAsFollower(slices.Concat(batches...)); err != nil {
		t.Fatal(err)
	}
	l.SetHighWatermark(l.LogEndOffset())
	return l
}

// modelEpochs is the leader-epoch history that batches imply: an entry
// where a batch's epoch exceeds every earlier one.
func modelEpochs(batches [][]byte) [][]int64 {
	rows := [][]int64{}
	latest := int32(-1)
	for _, b := range batches {
		if e := leaderEpochOf(b); e > latest {
			rows = append(rows, []int64{int64(e), record.BaseOffset(b)})
			latest = e
		}
	}
	return rows
}

// modelProducers is the producer state that replaying batches gives.
func modelProducers(batches [][]byte) []ProducerInfo {
	p := newProducerState()
	for _, b := range batches {
		h, _ := record.ParseHeader(b)
		if h.HasProducerID() {
			p.mu.Lock()
			p.replay(&h)
			p.mu.Unlock()
		}
	}
	return p.infos()
}

// prefixEnding returns the batches that end at or before end.
func prefixEnding(batches [][]byte, end int64) [][]byte {
	i := 0
	for i < len(batches) && record.LastOffset(batches[i]) < end {
		i++
	}
	return batches[:i]
}

// checkReplica checks that l holds exactly batches from logStart on: log
// end, bytes read back, leader epochs and producer state.
func checkReplica(t testing.TB, l *Log, logStart int64, batches [][]byte) {
	t.Helper()
	end := logStart
	if len(batches) > 0 {
		end = record.LastOffset(batches[len(batches)-1]) + 1
	}
	if l.LogEndOffset() != end || l.LogStartOffset() != logStart {
		t.Fatalf("log [%d, %d), want [%d, %d)", l.LogStartOffset(), l.LogEndOffset(), logStart, end)
	}
	if hw := l.HighWatermark(); hw > end || hw < logStart {
		t.Fatalf("HW %d outside [%d, %d]", hw, logStart, end)
	}
	var got []byte
	for off := logStart; off < end; {
		b := fetch(t, l, off, 1<<20)
		if len(b) == 0 {
			t.Fatalf("nothing read at %d (LEO %d)", off, end)
		}
		got = append(got, b...)
		hs := splitBatches(t, b)
		off = hs[len(hs)-1].LastOffset() + 1
	}
	if want := slices.Concat(batches...); !bytes.Equal(got, want) {
		t.Fatalf("log bytes differ from the model (%d bytes, want %d)", len(got), len(want))
	}
	if got, want := l.epochs.snapshot(), modelEpochs(batches); !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("epochs %v, want %v", got, want)
	}
	if got, want := l.Producers(), modelProducers(batches); !slices.Equal(got, want) {
		t.Fatalf("producers %+v, want %+v", got, want)
	}
}

func TestTruncateTo(t *testing.T) {
	batches := replicaBatches(60)
	leo := record.LastOffset(batches[59]) + 1
	base := func(i int) int64 { return record.BaseOffset(batches[i]) }
	cases := []struct {
		name    string
		offset  int64
		wantEnd int64
	}{
		{"at the log end: nothing", leo, leo},
		{"past the log end: nothing", leo + 7, leo},
		{"last batch", base(59), base(59)},
		{"inside the last batch: its base", base(59) + 1, base(59)},
		{"batch boundary in an old segment", base(21), base(21)},
		{"inside a batch in an old segment", base(22) + 2, base(22)},
		{"epoch boundary", base(40), base(40)},
		{"everything", 0, 0},
		{"inside the second batch", base(1) + 1, base(1)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := truncateConfig()
			l := replicaLog(t, dir, cfg, batches)
			if err := l.TruncateTo(c.offset); err != nil {
				t.Fatal(err)
			}
			want := prefixEnding(batches, c.wantEnd)
			checkReplica(t, l, 0, want)
			if l.HighWatermark() != c.wantEnd {
				t.Fatalf("HW %d, want it clamped to %d", l.HighWatermark(), c.wantEnd)
			}
			// Segments above the cut are gone; the log goes on at the cut.
			for _, s := range l.segs.Load().segs[:len(l.segs.Load().segs)-1] {
				if s.base >= c.wantEnd {
					t.Fatalf("segment %d kept above the cut %d", s.base, c.wantEnd)
				}
			}
			more := followerSet(c.wantEnd, 20, buildBatch(spec(3, 9)))
			if _, err := l.AppendAsFollower(more); err != nil {
				t.Fatal(err)
			}
			want = append(slices.Clone(want), more)
			checkReplica(t, l, 0, want)
			crash(l)
			l = mustOpen(t, dir, cfg)
			checkReplica(t, l, 0, want)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			checkDumpLogInvariants(t, dir)
			l = mustOpen(t, dir, cfg)
			checkReplica(t, l, 0, want)
			l.Close()
		})
	}
}

// TestTruncateToKeepsTheSpanningEpoch: entries starting at or after the
// cut go; the one spanning it keeps its start and ends at the new log end.
func TestTruncateToKeepsTheSpanningEpoch(t *testing.T) {
	b := buildBatch(spec(2, 5))
	batches := [][]byte{followerSet(0, 1, b), followerSet(2, 1, b), followerSet(4, 3, b), followerSet(6, 5, b)}
	l := replicaLog(t, t.TempDir(), truncateConfig(), batches)
	defer l.Close()
	if err := l.TruncateTo(5); err != nil { // inside epoch 3's only batch
		t.Fatal(err)
	}
	if got := l.epochs.snapshot(); !slices.EqualFunc(got, [][]int64{{1, 0}}, slices.Equal) {
		t.Fatalf("epochs %v", got)
	}
	if e, end := l.EndOffsetForEpoch(1); e != 1 || end != 4 {
		t.Fatalf("EndOffsetForEpoch(1) = %d, %d; want 1, 4", e, end)
	}
}

// TestTruncateToProducerState: cutting a producer's last batches rolls its
// state back, so the producer's resend is appended, not a duplicate.
func TestTruncateToProducerState(t *testing.T) {
	dir := t.TempDir()
	l := replicaLog(t, dir, truncateConfig(), nil)
	defer func() { l.Close() }()
	in := followerSet(0, 0, idemBatch(7, 0, 0, 2), idemBatch(7, 0, 2, 2), idemBatch(7, 0, 4, 2))
	if _, err := l.AppendAsFollower(in); err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(); err != nil { // a snapshot at 6, above the cut
		t.Fatal(err)
	}
	if err := l.TruncateTo(3); err != nil {
		t.Fatal(err)
	}
	if ps := l.Producers(); len(ps) != 1 || ps[0].LastSequence != 1 {
		t.Fatalf("producers after truncation %+v", ps)
	}
	if r, err := appendIdem(l, idemBatch(7, 0, 2, 2)); err != nil || r.Duplicate || r.FirstOffset != 2 {
		t.Fatalf("resend after truncation: %+v %v", r, err)
	}
	snaps, _ := listSnapshots(dir)
	for _, off := range snaps {
		if off > l.LogEndOffset() {
			t.Fatalf("snapshot at %d survives a truncation to %d", off, l.LogEndOffset())
		}
	}
}

func TestTruncateBelowLogStart(t *testing.T) {
	batches := replicaBatches(60)
	t.Run("inside the first segment: log start follows", func(t *testing.T) {
		l := replicaLog(t, t.TempDir(), truncateConfig(), batches)
		defer l.Close()
		if _, err := l.DeleteRecordsBefore(record.BaseOffset(batches[3]) + 1); err != nil {
			t.Fatal(err)
		}
		if err := l.TruncateTo(record.BaseOffset(batches[2])); err != nil {
			t.Fatal(err)
		}
		if l.LogStartOffset() != l.LogEndOffset() || l.LogEndOffset() != record.BaseOffset(batches[2]) {
			t.Fatalf("log [%d, %d)", l.LogStartOffset(), l.LogEndOffset())
		}
	})
	t.Run("below the first segment: start afresh", func(t *testing.T) {
		cfg := truncateConfig()
		l := replicaLog(t, t.TempDir(), cfg, batches)
		defer l.Close()
		if _, err := l.DeleteRecordsBefore(record.BaseOffset(batches[30])); err != nil {
			t.Fatal(err)
		}
		first := l.segs.Load().segs[0].base
		if first == 0 {
			t.Fatal("retention kept the first segment")
		}
		if err := l.TruncateTo(first - 1); err != nil {
			t.Fatal(err)
		}
		checkReplica(t, l, first-1, nil)
	})
}

func TestTruncateFullyAndStartAt(t *testing.T) {
	for _, offset := range []int64{5, 1000} {
		t.Run(fmt.Sprint(offset), func(t *testing.T) {
			dir := t.TempDir()
			cfg := truncateConfig()
			l := replicaLog(t, dir, cfg, replicaBatches(40))
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			if err := l.TruncateFullyAndStartAt(offset); err != nil {
				t.Fatal(err)
			}
			check := func(l *Log, batches [][]byte) {
				t.Helper()
				checkReplica(t, l, offset, batches)
				if _, err := l.Read(offset-1, 100, true); !errors.Is(err, ErrOffsetOutOfRange) {
					t.Fatalf("Read below the new start: %v", err)
				}
			}
			check(l, nil)
			if l.HighWatermark() != offset || l.LatestEpoch() != -1 {
				t.Fatalf("HW %d epoch %d", l.HighWatermark(), l.LatestEpoch())
			}
			if snaps, _ := listSnapshots(dir); len(snaps) != 0 {
				t.Fatalf("snapshots left: %v", snaps)
			}
			// One empty segment at the new start; its index files come
			// with its first append (activateEmpty).
			if names := slices.Sorted(mapKeys(segmentFiles(t, dir))); len(names) != 1 || names[0] != segmentName(offset, logSuffix) {
				t.Fatalf("files %v", names)
			}
			crash(l)
			l = mustOpen(t, dir, cfg)
			check(l, nil)
			more := followerSet(offset, 4, buildBatch(spec(2, 2)), idemBatch(3, 0, 0, 1))
			if _, err := l.AppendAsFollower(more); err != nil {
				t.Fatal(err)
			}
			batches := [][]byte{more[:len(more)-len(idemBatch(3, 0, 0, 1))], more[len(more)-len(idemBatch(3, 0, 0, 1)):]}
			check(l, batches)
			l.Close()
			l = mustOpen(t, dir, cfg)
			check(l, batches)
			l.Close()
			checkDumpLogInvariants(t, dir)
		})
	}
}

func mapKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

var errTestCrash = errors.New("test crash")

// TestTruncateCrashAtEachStep stops truncations at each step, as a crash
// would, and requires that Open then finds a consistent log: the old log
// or a prefix of it at least as long as the cut, with epochs and producer
// state that match its batches, which a repeated truncation then cuts.
func TestTruncateCrashAtEachStep(t *testing.T) {
	batches := replicaBatches(60)
	cuts := map[string]int64{
		"active segment":     record.BaseOffset(batches[58]) + 1,
		"old segment":        record.BaseOffset(batches[22]) + 1,
		"segment boundary":   -1, // filled below
		"below first (full)": -2,
	}
	stages := []string{"recovery point", "one segment retired", "segments retired", "segment cut", "published", "epochs",
		"full: segments retired", "full: segment created", "full: checkpoints"}
	for name, cut := range cuts {
		for _, flushed := range []bool{false, true} {
			for _, stage := range stages {
				t.Run(fmt.Sprintf("%s/flushed=%v/%s", name, flushed, stage), func(t *testing.T) {
					dir := filepath.Join(fastTempDir(t), "p-0")
					cfg := crashConfig()
					cfg.SegmentBytes = 3000
					l := replicaLog(t, dir, cfg, batches)
					if flushed {
						if err := l.Flush(); err != nil {
							t.Fatal(err)
						}
					}
					offset, full := cut, false
					switch cut {
					case -1:
						offset = l.segs.Load().segs[2].base
					case -2:
						if _, err := l.DeleteRecordsBefore(record.BaseOffset(batches[30])); err != nil {
							t.Fatal(err)
						}
						offset, full = l.segs.Load().segs[0].base-1, true
					}
					start := l.LogStartOffset()
					stopped := false
					l.truncateHook = func(s string) error {
						if s == stage {
							stopped = true
							return errTestCrash
						}
						return nil
					}
					err := l.TruncateTo(offset)
					if stopped != (err != nil) {
						t.Fatalf("TruncateTo: %v (stopped %v)", err, stopped)
					}
					if !stopped {
						t.Skip("the truncation has no such step")
					}
					crash(l)
					l = mustOpen(t, dir, cfg)
					defer func() { l.Close() }()
					end := l.LogEndOffset()
					got := prefixEnding(batches, end)
					if !full && end < record.BaseOffset(batches[0]) {
						t.Fatalf("LEO %d", end)
					}
					switch {
					case full && l.LogStartOffset() == offset:
						checkReplica(t, l, offset, nil)
					case full:
						checkReplica(t, l, l.LogStartOffset(), prefixFrom(got, l.LogStartOffset()))
					default:
						if end < offset-4 || l.LogStartOffset() != start {
							t.Fatalf("after the crash the log is [%d, %d), cut at %d", l.LogStartOffset(), end, offset)
						}
						checkReplica(t, l, start, got)
					}
					if err := l.TruncateTo(offset); err != nil {
						t.Fatal(err)
					}
					if full {
						checkReplica(t, l, offset, nil)
					} else {
						checkReplica(t, l, start, prefixEnding(batches, offset))
					}
					if err := l.Close(); err != nil {
						t.Fatal(err)
					}
					checkDumpLogInvariants(t, dir)
				})
			}
		}
	}
}

// prefixFrom drops the batches that end below start.
func prefixFrom(batches [][]byte, start int64) [][]byte {
	i := 0
	for i < len(batches) && record.LastOffset(batches[i]) < start {
		i++
	}
	return batches[i:]
}

// TestTruncateConcurrentReads runs readers against a follower whose tail
// is repeatedly rewritten (a divergent append, a truncation, a catch-up
// from the leader), under -race in CI. Committed reads must always return
// the leader's bytes; uncommitted ones must return, for every whole batch,
// bytes that were at that offset at some point, or read short where a
// truncation cut them, and never fail.
func TestTruncateConcurrentReads(t *testing.T) {
	cfg := truncateConfig()
	cfg.FileDeleteDelayMs = 20
	root := fastTempDir(t)
	leader := replicaLog(t, filepath.Join(root, "leader"), cfg, replicaBatches(300))
	defer leader.Close()
	f := mustOpen(t, filepath.Join(root, "follower"), cfg)
	defer f.Close()
	leaderAt := map[int64][]byte{}
	for _, b := range replicaBatches(300) {
		leaderAt[record.BaseOffset(b)] = b
	}
	// Divergent batches carry epoch 99 and a fill no leader batch has.
	diverge := func(b []byte) bool {
		return leaderEpochOf(b) == 99 && bytes.Contains(b, []byte{0xee, 0xef})
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	var reads atomic.Int64
	reader := func(seed uint64, uncommitted bool) {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(seed, 1))
		for !stop.Load() {
			limit := f.HighWatermark()
			if uncommitted {
				limit = f.LogEndOffset()
			}
			if limit == 0 {
				continue
			}
			r, err := f.Read(rng.Int64N(limit), int32(rng.IntN(4000)), uncommitted)
			if err != nil {
				if errors.Is(err, ErrOffsetOutOfRange) && uncommitted {
					continue // the log end moved down since we looked
				}
				t.Errorf("Read: %v", err)
				return
			}
			if r.Len == 0 {
				continue
			}
			buf := make([]byte, r.Len)
			n, err := r.File.ReadAt(buf, r.Pos)
			r.Release()
			if err != nil && !errors.Is(err, io.EOF) {
				t.Errorf("ReadAt: %v (region %+v)", err, r)
				return
			}
			if !uncommitted && n < len(buf) {
				t.Errorf("committed region read short: %d of %d", n, len(buf))
				return
			}
			for b := buf[:n]; len(b) >= record.HeaderLen && int64(len(b)) >= record.Size(b); b = b[record.Size(b):] {
				if record.Size(b) < record.HeaderLen {
					// Bytes that are no batch header. Above the HW the
					// region may have been cut and rewritten after Read
					// returned it (a follower's fetch sent from the file
					// later sees the same and fails its CRC check, as in
					// Kafka); below it, never.
					if uncommitted {
						break
					}
					t.Errorf("committed region holds no batch header at %d (length field %d)", r.Pos, record.Size(b)-12)
					return
				}
				batch := b[:record.Size(b)]
				if bytes.Equal(batch, leaderAt[record.BaseOffset(batch)]) || (uncommitted && diverge(batch)) {
					continue
				}
				t.Errorf("read a batch at %d that was never there (committed=%v)", record.BaseOffset(batch), !uncommitted)
				return
			}
			reads.Add(1)
		}
	}
	wg.Add(4)
	go reader(1, false)
	go reader(2, false)
	go reader(3, true)
	go reader(4, true)
	rng := rand.New(rand.NewPCG(9, 9))
	for i := 0; i < 60 && !t.Failed(); i++ {
		if f.LogEndOffset() < leader.LogEndOffset() {
			b := fetch(t, leader, f.LogEndOffset(), int32(500+rng.IntN(3000)))
			if _, err := f.AppendAsFollower(b); err != nil {
				t.Fatal(err)
			}
		}
		// A follower's high watermark is some earlier log end (a batch
		// boundary), and it only grows.
		common := f.LogEndOffset()
		if rng.IntN(2) == 0 {
			f.SetHighWatermark(common)
		}
		s := spec(2, 40)
		s.fill = 0xee
		e := []AppendEntry{{Records: buildBatch(s)}, {Records: buildBatch(s)}}
		if err := f.Append(e, AppendOptions{LeaderEpoch: 99}); err != nil || e[0].Err != nil {
			t.Fatal(err, e[0].Err)
		}
		cut := common
		if rng.IntN(3) == 0 {
			cut = f.HighWatermark() // never below it
		}
		if err := f.TruncateTo(cut); err != nil {
			t.Fatal(err)
		}
	}
	stop.Store(true)
	wg.Wait()
	if reads.Load() == 0 {
		t.Fatal("no reads ran")
	}
}

// TestTruncateRegionsHandedOutBefore pins what a Region read before a
// truncation reads after it: in a segment above the cut (renamed
// *.deleted, open for file.delete.delay.ms) the same bytes; in the cut
// segment the bytes below the cut, and a short read past it — never the
// bytes appended after the truncation, which go to a new segment.
func TestTruncateRegionsHandedOutBefore(t *testing.T) {
	cfg := truncateConfig()
	cfg.FileDeleteDelayMs = 60_000
	batches := replicaBatches(60)
	l := replicaLog(t, t.TempDir(), cfg, batches)
	defer l.Close()
	segs := l.segs.Load().segs
	cutSeg, above := segs[1], segs[3]
	read := func(offset int64) (Region, []byte) {
		r, err := l.Read(offset, 1<<20, true)
		if err != nil || r.Len == 0 {
			t.Fatalf("Read(%d): %+v %v", offset, r, err)
		}
		return r, peekRegion(t, r)
	}
	rAbove, wantAbove := read(above.base)
	rCut, wantCut := read(cutSeg.base)
	cutAt := record.BaseOffset(prefixFrom(batches, cutSeg.base+1)[1]) // the second batch of the cut segment
	if err := l.TruncateTo(cutAt); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendAsFollower(followerSet(cutAt, 30, buildBatch(spec(4, 300)), buildBatch(spec(4, 300)))); err != nil {
		t.Fatal(err)
	}
	if got := readRegion(t, rAbove); !bytes.Equal(got, wantAbove) {
		t.Fatal("a Region in a deleted segment changed")
	}
	got := make([]byte, rCut.Len)
	n, err := rCut.File.ReadAt(got, rCut.Pos)
	kept := record.Size(wantCut)
	if !errors.Is(err, io.EOF) || int64(n) != kept || !bytes.Equal(got[:n], wantCut[:kept]) {
		t.Fatalf("Region in the cut segment read %d bytes (%v), want the %d below the cut and EOF", n, err, kept)
	}
	rCut.Release()
}

// TestTruncateCompactedGaps: in a compacted log an offset in a gap
// between batches becomes the log end; one inside a batch cuts before it.
func TestTruncateCompactedGaps(t *testing.T) {
	cfg := truncateConfig()
	cfg.Compact = true
	b := buildBatch(spec(2, 5))
	batches := [][]byte{followerSet(0, 0, b), followerSet(5, 0, b), followerSet(10, 1, b)}
	dir := t.TempDir()
	l := replicaLog(t, dir, cfg, batches)
	defer func() { l.Close() }()
	if err := l.TruncateTo(11); err != nil {
		t.Fatal(err)
	}
	if l.LogEndOffset() != 10 || l.LatestEpoch() != 0 {
		t.Fatalf("LEO %d epoch %d, want 10 and 0", l.LogEndOffset(), l.LatestEpoch())
	}
	if err := l.TruncateTo(3); err != nil {
		t.Fatal(err)
	}
	if l.LogEndOffset() != 3 {
		t.Fatalf("LEO %d, want the gap offset 3", l.LogEndOffset())
	}
	if _, err := l.AppendAsFollower(followerSet(5, 2, b)); err != nil {
		t.Fatal(err)
	}
	crash(l)
	l = mustOpen(t, dir, cfg)
	checkReplica(t, l, 0, [][]byte{batches[0], followerSet(5, 2, b)})
}
