package storage

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// boundCaches sets the descriptor and mapping bounds for one test.
func boundCaches(t *testing.T, files, mapped int) {
	SetMaxOpenLogFiles(files)
	SetMaxMappedSegments(mapped)
	t.Cleanup(func() {
		SetMaxOpenLogFiles(4096)
		SetMaxMappedSegments(1024)
	})
}

// openSegmentFiles counts this process's descriptors open on .log files
// under dir (deleted ones included).
func openSegmentFiles(t *testing.T, dir string) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	n := 0
	for _, e := range ents {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err == nil && strings.HasPrefix(target, dir) && strings.Contains(target, logSuffix) {
			n++
		}
	}
	return n
}

// mappedSegments counts segments whose indexes are mapped, active ones
// included.
func mappedSegments(logs []*Log) int {
	n := 0
	for _, l := range logs {
		for _, s := range l.segs.Load().segs {
			s.ix.RLock()
			if s.ix.mapped {
				n++
			}
			s.ix.RUnlock()
		}
	}
	return n
}

// checkLogContent reads every partition from its log start and checks the
// batches against what was appended (by offset).
func checkLogContent(t *testing.T, logs []*Log, want []map[int64]byte) {
	t.Helper()
	for p, l := range logs {
		l.SetHighWatermark(l.LogEndOffset())
		got := 0
		for _, h := range readAll(t, l, false) {
			fill, ok := want[p][h.BaseOffset]
			if !ok {
				t.Fatalf("partition %d: unexpected batch at %d", p, h.BaseOffset)
			}
			if h.NumRecords != 2 || byte(h.MaxTimestamp) != fill {
				t.Fatalf("partition %d offset %d: wrong batch", p, h.BaseOffset)
			}
			got++
		}
		if live := countFrom(want[p], l.LogStartOffset()); got != live {
			t.Fatalf("partition %d: read %d batches, want %d", p, got, live)
		}
	}
}

func countFrom(m map[int64]byte, start int64) int {
	n := 0
	for off := range m {
		if off >= start {
			n++
		}
	}
	return n
}

// TestManyPartitionsWithEightDescriptorsStayCorrect runs 40 partitions of
// several segments each with at most 8 cached .log descriptors and 4 mapped
// segments: appends, reads, retention, truncation, a clean restart and a
// crash restart all see the right batches, and neither bound is exceeded
// by more than the users of the moment.
func TestManyPartitionsWithEightDescriptorsStayCorrect(t *testing.T) {
	boundCaches(t, 8, 4)
	cfg := testConfig() // file.delete.delay.ms 0: no descriptor outlives eviction
	cfg.SegmentBytes = 600
	cfg.IndexIntervalBytes = 50
	root := fastTempDir(t)
	const parts = 40
	logs := make([]*Log, parts)
	want := make([]map[int64]byte, parts)
	for p := range logs {
		logs[p] = mustOpen(t, filepath.Join(root, fmt.Sprintf("t-%d", p)), cfg)
		want[p] = map[int64]byte{}
	}
	// Eviction skips what is in use, so the bounds may be exceeded by
	// the users at the moment: the appender, and the flush a roll starts
	// in the background.
	const inUse = 2
	checkBounds := func(stage string) {
		t.Helper()
		if n := openSegmentFiles(t, root); n > 8+inUse {
			t.Fatalf("%s: %d .log descriptors open", stage, n)
		}
		if n := mappedSegments(logs); n > 4+inUse {
			t.Fatalf("%s: %d segments mapped", stage, n)
		}
	}
	appendRound := func(round int) {
		for p, l := range logs {
			sp := spec(2, 40)
			sp.ts = int64(round*parts + p) // the low byte identifies the batch
			res := appendOne(t, l, buildBatch(sp))
			want[p][res.FirstOffset] = byte(sp.ts + 1)
		}
	}
	for round := 0; round < 12; round++ {
		appendRound(round)
		checkBounds("append")
	}
	if logs[0].segs.Load().segs[0] == logs[0].mu.active {
		t.Fatal("no roll: the test needs several segments per partition")
	}
	checkLogContent(t, logs, want)
	checkBounds("read")

	for p, l := range logs { // retention on half, truncation on the other half
		if p%2 == 0 {
			if _, err := l.DeleteRecordsBefore(l.segs.Load().segs[1].base); err != nil {
				t.Fatal(err)
			}
			continue
		}
		cut := l.LogEndOffset() - 6 // a batch boundary: batches hold 2 records
		if err := l.TruncateTo(cut); err != nil {
			t.Fatal(err)
		}
		for off := range want[p] {
			if off >= cut {
				delete(want[p], off)
			}
		}
	}
	appendRound(12)
	checkLogContent(t, logs, want)
	checkBounds("retention and truncation")

	for p, l := range logs { // a clean restart for half, a crash for the rest
		if p%2 == 0 {
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
		} else {
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			crash(l)
		}
	}
	if n := openSegmentFiles(t, root); n != 0 {
		t.Fatalf("%d .log descriptors open after closing every log", n)
	}
	for p := range logs {
		logs[p] = mustOpen(t, filepath.Join(root, fmt.Sprintf("t-%d", p)), cfg)
	}
	checkBounds("restart")
	appendRound(13)
	checkLogContent(t, logs, want)
	checkBounds("after restart")
	for _, l := range logs {
		l.Close()
	}
}

// TestEvictedDescriptorKeepsLentRegionReadable: a Region handed out before
// its descriptor is evicted stays readable (same file, same bytes) until it
// is released, whatever file.delete.delay.ms says and even after its log
// is closed; the descriptor closes with the release. Descriptors that
// lent nothing still out are closed at eviction.
func TestEvictedDescriptorKeepsLentRegionReadable(t *testing.T) {
	boundCaches(t, 2, 1024)
	cfg := testConfig()
	cfg.FileDeleteDelayMs = 60_000 // no bearing on descriptors
	root := fastTempDir(t)
	logs := make([]*Log, 4)
	for i := range logs {
		logs[i] = mustOpen(t, filepath.Join(root, fmt.Sprint(i)), cfg)
		defer logs[i].Close()
		sp := spec(2, 40)
		sp.fill = byte(10 * i)
		appendOne(t, logs[i], buildBatch(sp))
		logs[i].SetHighWatermark(logs[i].LogEndOffset())
	}
	r, err := logs[0].Read(0, 1<<20, false)
	if err != nil || r.Len == 0 {
		t.Fatalf("Read: %v %+v", err, r)
	}
	before := peekRegion(t, r)
	for _, l := range logs[1:] { // evict logs[0]'s descriptor
		readRegion(t, mustRead(t, l, 0))
	}
	if logs[0].mu.active.fd.f.Load() != nil {
		t.Fatal("descriptor not evicted")
	}
	if cached, lending := OpenLogFiles(); cached > 2 || lending != 1 {
		t.Fatalf("cached %d lending %d, want 1 lending", cached, lending)
	}
	if n := openSegmentFiles(t, root); n != 3 {
		t.Fatalf("%d .log descriptors open, want 2 cached and 1 lent", n)
	}
	logs[0].Close()
	if after := peekRegion(t, r); string(after) != string(before) {
		t.Fatal("lent Region reads other bytes after eviction and its log's close")
	}
	f := r.File
	r.Release()
	if _, err := f.ReadAt(make([]byte, 1), 0); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("lent descriptor not closed by the release: %v", err)
	}
	if _, lending := OpenLogFiles(); lending != 0 {
		t.Fatalf("lending %d after the release", lending)
	}
}

// TestRegionAtZeroDeleteDelayReadsItsOwnBytesAfterEviction is the
// regression test for a flaky TestManyPartitionsWithEightDescriptorsStayCorrect
// ("ReadAt: file already closed"): at file.delete.delay.ms 0 an evicted
// descriptor that had lent a Region was closed at once, so reading (or
// sending) the Region failed, or — had another open reused the descriptor
// number — would have read another file's bytes. Here the descriptor is
// evicted by a roll's background flush, as in that test, and by other
// logs' reads, and new files are opened to take freed descriptor numbers:
// the Region still reads its own bytes, and its descriptor closes when it
// is released.
func TestRegionAtZeroDeleteDelayReadsItsOwnBytesAfterEviction(t *testing.T) {
	boundCaches(t, 2, 1024)
	cfg := testConfig()
	cfg.FileDeleteDelayMs = 0
	cfg.SegmentBytes = 300
	root := fastTempDir(t)
	logs := make([]*Log, 4)
	for i := range logs {
		logs[i] = mustOpen(t, filepath.Join(root, fmt.Sprint(i)), cfg)
		defer logs[i].Close()
		sp := spec(2, 40)
		sp.fill = byte(10*i + 1)
		appendOne(t, logs[i], buildBatch(sp))
		logs[i].SetHighWatermark(logs[i].LogEndOffset())
	}
	r := mustRead(t, logs[0], 0)
	want := peekRegion(t, r)
	lent := r.File
	// Rolls: each new segment's file and its predecessor's flush need
	// descriptors, evicting logs[0]'s.
	for range 8 {
		appendOne(t, logs[1], buildBatch(spec(2, 100)))
	}
	for _, l := range logs[1:] {
		readRegion(t, mustRead(t, l, 0))
	}
	if f := logs[0].segs.Load().segs[0].fd.f.Load(); f != nil && f.f == lent {
		t.Fatal("logs[0]'s descriptor was not evicted")
	}
	// Take descriptor numbers a wrongly closed one would have freed.
	for i := range 8 {
		f, err := os.Create(filepath.Join(root, fmt.Sprintf("other-%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		f.Write(make([]byte, 4096))
	}
	if got := peekRegion(t, r); !bytes.Equal(got, want) {
		t.Fatal("Region reads other bytes after its descriptor was evicted")
	}
	if _, lending := OpenLogFiles(); lending != 1 {
		t.Fatalf("lending %d, want the Region's descriptor", lending)
	}
	r.Release()
	if _, err := lent.ReadAt(make([]byte, 1), 0); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("descriptor still open after its Region was released: %v", err)
	}
	if _, lending := OpenLogFiles(); lending != 0 {
		t.Fatalf("lending %d after the release", lending)
	}
}

// mustRead reads from offset up to 1 MiB, expecting records.
func mustRead(t *testing.T, l *Log, offset int64) Region {
	t.Helper()
	r, err := l.Read(offset, 1<<20, false)
	if err != nil || r.Len == 0 {
		t.Fatalf("Read(%d): %v %+v", offset, err, r)
	}
	return r
}

// TestIdleActiveIndexesAreUnmapped: with room for 2 mapped segments, 10
// partitions' active indexes are released when idle and mapped again on
// the next append or lookup with the entries they had (nothing rescanned),
// and a flush after the release still makes the entries durable: a crash
// then finds them without rebuilding.
func TestIdleActiveIndexesAreUnmapped(t *testing.T) {
	boundCaches(t, 4096, 2)
	cfg := testConfig()
	cfg.IndexIntervalBytes = 50
	root := fastTempDir(t)
	logs := make([]*Log, 10)
	for i := range logs {
		logs[i] = mustOpen(t, filepath.Join(root, fmt.Sprint(i)), cfg)
		appendN(t, logs[i], 20, 2, 40)
	}
	if n := mappedSegments(logs); n > 2 {
		t.Fatalf("%d segments mapped", n)
	}
	s := logs[0].mu.active
	s.ix.RLock()
	mapped, entries := s.ix.mapped, s.ix.off.n.Load()
	s.ix.RUnlock()
	if mapped || entries == 0 {
		t.Fatalf("partition 0: mapped %v with %d entries", mapped, entries)
	}
	for _, l := range logs {
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
		if l.mu.active.ix.dirty.Load() {
			t.Fatal("index still dirty after a flush")
		}
	}
	appendN(t, logs[0], 5, 2, 40) // remapped with the entries it had
	if got := s.ix.off.n.Load(); got <= entries {
		t.Fatalf("entries %d after more appends, had %d", got, entries)
	}
	for i, l := range logs {
		l.SetHighWatermark(l.LogEndOffset())
		for off := int64(0); off < l.LogEndOffset(); off += 2 {
			r, err := l.Read(off, 1, false)
			if err != nil {
				t.Fatal(err)
			}
			if h := splitBatches(t, readRegion(t, r)); h[0].BaseOffset != off {
				t.Fatalf("partition %d: Read(%d) got batch %d", i, off, h[0].BaseOffset)
			}
		}
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
		n := l.mu.active.ix.off.n.Load()
		crash(l)
		l = mustOpen(t, filepath.Join(root, fmt.Sprint(i)), cfg)
		if got := l.mu.active.ix.off.n.Load(); got != n {
			t.Fatalf("partition %d: %d index entries after a crash, %d before", i, got, n)
		}
		l.Close()
	}
}

// TestConcurrentPartitionsShareFewDescriptors: six partitions appended to,
// read and flushed at once through 3 descriptors and 2 mappings evict each
// other's all the time, without an error or a descriptor over the bound
// (run with -race, this checks the cache's locking).
func TestConcurrentPartitionsShareFewDescriptors(t *testing.T) {
	boundCaches(t, 3, 2)
	cfg := testConfig()
	root := fastTempDir(t)
	logs := make([]*Log, 6)
	for i := range logs {
		logs[i] = mustOpen(t, filepath.Join(root, fmt.Sprint(i)), cfg)
		defer logs[i].Close()
	}
	deadline := time.Now().Add(200 * time.Millisecond)
	done := make(chan error, len(logs))
	for i := range logs {
		go func(l *Log) {
			for time.Now().Before(deadline) {
				e := []AppendEntry{{Records: buildBatch(spec(1, 10))}}
				if err := l.Append(e, AppendOptions{}); err != nil {
					done <- err
					return
				}
				l.SetHighWatermark(l.LogEndOffset())
				r, err := l.Read(l.LogEndOffset()-1, 100, false)
				if err != nil {
					done <- err
					return
				}
				r.Release()
			}
			done <- l.Flush()
		}(logs[i])
	}
	for range logs {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if n := openSegmentFiles(t, root); n > 3+len(logs) {
		t.Fatalf("%d descriptors open", n)
	}
}

// TestReadsBeyondTheDescriptorBudgetFailRetriably: with 2 cached
// descriptors and Regions in flight on every evicted one, the reads that
// would need a fifth descriptor fail with ErrTooManyOpenFiles instead of
// opening it, and succeed again once Regions are released, which closes
// their descriptors.
func TestReadsBeyondTheDescriptorBudgetFailRetriably(t *testing.T) {
	boundCaches(t, 2, 1024)
	cfg := testConfig()
	root := fastTempDir(t)
	logs := make([]*Log, 6)
	for i := range logs {
		logs[i] = mustOpen(t, filepath.Join(root, fmt.Sprint(i)), cfg)
		defer logs[i].Close()
		appendOne(t, logs[i], buildBatch(spec(2, 40)))
		logs[i].SetHighWatermark(logs[i].LogEndOffset())
	}
	var held []Region
	failed := 0
	for _, l := range logs {
		r, err := l.Read(0, 1<<20, false)
		switch {
		case err == ErrTooManyOpenFiles:
			failed++
		case err != nil:
			t.Fatal(err)
		default:
			held = append(held, r)
		}
	}
	cached, lending := OpenLogFiles()
	if failed == 0 || cached > 2 || lending > 2 {
		t.Fatalf("failed %d, cached %d, lending %d", failed, cached, lending)
	}
	if n := openSegmentFiles(t, root); n != cached+lending {
		t.Fatalf("%d .log descriptors open, %d cached and %d lending", n, cached, lending)
	}
	for i := range held[:2] { // the first ones were evicted: their release closes them
		held[i].Release()
	}
	r, err := logs[5].Read(0, 1<<20, false)
	if err != nil {
		t.Fatalf("read after descriptors were freed: %v", err)
	}
	r.Release()
	for i := range held {
		held[i].Release()
	}
}

// TestIdleCleanRestartLeavesIndexesAlone: reopening a cleanly closed log
// maps no index, replays nothing (its producer snapshot is at the recovery
// point), and closing it again without appends neither maps, trims nor
// rewrites its index files; before, every restart of thousands of idle
// partitions grew and cut back two 10 MiB files each.
func TestIdleCleanRestartLeavesIndexesAlone(t *testing.T) {
	dir := filepath.Join(fastTempDir(t), "p")
	cfg := testConfig()
	l := mustOpen(t, dir, cfg)
	appendN(t, l, 3, 2, 40)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	paths := []string{filepath.Join(dir, segmentName(0, indexSuffix)), filepath.Join(dir, segmentName(0, timeIndexSuffix))}
	before := make([]os.FileInfo, len(paths))
	for i, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		before[i] = st
	}
	time.Sleep(20 * time.Millisecond) // a rewrite would show in the mtime
	l = mustOpen(t, dir, cfg)
	if l.mu.active.ix.mapped {
		t.Fatal("clean open mapped the active indexes")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for i, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() != before[i].Size() || !st.ModTime().Equal(before[i].ModTime()) {
			t.Fatalf("%s rewritten by an idle restart: %d bytes at %v, was %d at %v", p, st.Size(), st.ModTime(), before[i].Size(), before[i].ModTime())
		}
	}
	l = mustOpen(t, dir, cfg) // still serves what it held
	defer l.Close()
	l.SetHighWatermark(l.LogEndOffset())
	if got := len(readAll(t, l, false)); got != 3 {
		t.Fatalf("read %d batches after two restarts, want 3", got)
	}
}
