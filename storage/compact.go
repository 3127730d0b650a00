package storage

// Log compaction (cleanup.policy=compact), done as Kafka's log cleaner does
// it.
//
// A pass looks at the cleanable segments: every segment before the active
// one that lies wholly below the high watermark, below the first offset of
// an open transaction, below the durable recovery point (so recovery never
// resumes inside a rewritten segment) and, with min.compaction.lag.ms, older
// than that lag. Those below the cleaner checkpoint were cleaned before
// ("clean"); the rest are "dirty".
//
//  1. Offset map: read the dirty segments and note, for every key, the
//     offset of its latest record. The map is bounded (cleanerMapBytes);
//     when it fills, the pass stops at that segment and leaves the rest
//     dirty for the next pass.
//  2. Clean every segment from the first up to where the map ends, in
//     groups of consecutive segments that together fit one segment
//     (segment.bytes, the index sizes, 32-bit relative offsets). A record
//     stays if no later record has its key (offset >= map[key]); a
//     tombstone (null value) stays until delete.retention.ms after the pass
//     that first kept it (see below). Records without a key are invalid in
//     a compacted topic (the produce path rejects them) and are dropped, as
//     Kafka drops them. Batches keep their baseOffset, lastOffsetDelta,
//     producer fields, leader epoch and maxTimestamp, and each kept record
//     its offset delta, so every surviving record keeps its offset; a batch
//     with records removed is re-encoded with its codec and a new CRC. A
//     batch left with no records is dropped, unless it is the last one of
//     its producer (idempotence state is rebuilt from it), which is kept
//     empty, as Kafka keeps it. Records of aborted transactions are
//     removed and never mapped; committed transactional records are
//     compacted like any others; markers stay until no record of their
//     transaction is left and delete.retention.ms has passed (see
//     compact_txn.go). Batches whose records cannot be decoded are kept
//     whole and not mapped: their CRC holds, so a client wrote them that
//     way. A CRC that fails is corruption, and stops the pass with a
//     *CorruptError.
//  3. Swap each group's output in, crash-safe: the output is written to
//     "<base>.log.cleaned" (and .index.cleaned, .timeindex.cleaned,
//     .txnindex.cleaned with the group's remaining aborted transactions) and
//     fsynced, renamed to ".swap", then, under the log lock, the old
//     segments are renamed to ".deleted" (their descriptors stay open for
//     file.delete.delay.ms, for readers that found them before the swap;
//     Regions hold theirs until released), the ".swap" files take
//     the final names and the new segment list is published. Recovery
//     (completeSwaps) deletes ".cleaned" leftovers and finishes a ".swap":
//     it replaces the segments whose base offsets it covers, as Kafka does.
//     A crash at any point thus leaves every offset in its old segment or
//     in the new one (an old segment the output does not reach stays, only
//     less compacted), and never loses the latest record of a key.
//
// Tombstones follow KIP-534: when a pass first keeps a batch holding
// tombstones, it rewrites the batch with the delete-horizon attribute (bit
// 6) and firstTimestamp = now + delete.retention.ms (records' timestamp
// deltas are re-based on it, so their timestamps do not change). Passes
// after that horizon drop the batch's tombstones. The earliest horizon is
// kept in the cleaner checkpoint, so CompactionDue asks for a pass when it
// passes even if nothing new was written.
//
// The log start offset, the log end offset, the high watermark, the leader
// epoch file and the producer snapshots are not touched: no offset changes.

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/sluice-broker/sluice/record"
)

// CompactStats describes one Compact pass.
type CompactStats struct {
	FirstDirty int64 // first offset not cleaned before this pass
	CleanedTo  int64 // offsets below it are now cleaned (the cleaner checkpoint)
	Keys       int   // distinct keys in the offset map

	SegmentsRead     int   // segments filtered
	SegmentsReplaced int   // old segments swapped out
	SegmentsWritten  int   // cleaned segments swapped in
	BytesRead        int64 // size of the segments filtered
	BytesReplaced    int64 // size of the segments swapped out
	BytesWritten     int64 // size of the segments swapped in

	Records           int64 // records read in the filtered segments
	RecordsKept       int64
	TombstonesRemoved int64 // tombstones dropped because their delete horizon passed
	AbortedRemoved    int64 // records of aborted transactions dropped
	MarkersRemoved    int64 // transaction markers dropped because their delete horizon passed
}

// cleanerCheckpointFile holds "<cleanedTo> <deleteHorizonMs>": offsets
// below cleanedTo may have been compacted (recovery then admits offset gaps
// and batches with fewer records than their offset span), and the earliest
// delete horizon of a kept tombstone (math.MaxInt64 when none).
const cleanerCheckpointFile = "cleaner-offset-checkpoint"

// cleanerMapBytes bounds one pass's offset map (Kafka's
// log.cleaner.dedupe.buffer.size); a variable so tests can lower it.
var cleanerMapBytes int64 = 128 << 20

// mapEntryOverhead approximates what a map entry costs beyond its key.
const mapEntryOverhead = 64

// errSegmentGone stops a pass whose segments retention deleted meanwhile.
var errSegmentGone = errors.New("storage: segment deleted during compaction")

// Compact runs one cleaning pass over the inactive segments of a log whose
// Config.Compact is set (see the top of compact.go); it does nothing for
// other logs. nowMs is the clock tombstone horizons are measured with.
// Reads and appends go on meanwhile: the filtering runs without the log
// lock, which is taken only to swap a group of segments in.
func (l *Log) Compact(nowMs int64) (CompactStats, error) {
	l.cleanMu.Lock()
	defer l.cleanMu.Unlock()
	p, err := l.plan(nowMs)
	st := CompactStats{FirstDirty: p.firstDirty, CleanedTo: p.point}
	if err != nil || !p.cfg.Compact || len(p.segs) == 0 {
		return st, err
	}
	if p.dirty == len(p.segs) && p.horizon > nowMs {
		return st, nil // nothing new, and no tombstone is due
	}
	f := &batchFilter{now: nowMs, deleteRetentionMs: p.cfg.DeleteRetentionMs, horizon: math.MaxInt64}
	upto, err := l.buildOffsetMap(&p, f, &st)
	if err != nil {
		return st, quietIfGone(err)
	}
	st.CleanedTo = max(p.point, p.segEnd(upto-1))
	// Recovery must admit cleaned batches before the first one exists.
	if err := l.saveCleanerState(st.CleanedTo, p.horizon); err != nil {
		return st, err
	}
	f.lastOfProducer, f.lastDataOfProducer = l.producers.lastOffsets(), l.producers.lastDataOffsets()
	f.txn = newTxnTracker(l.aborted.load(), p.segs[0].base)
	if done, err := l.cleanSegments(&p, upto, f, &st); err != nil {
		// Keep what was cleaned; the rest stays dirty for the next pass,
		// and horizons found before this pass may still be pending there.
		st.CleanedTo = done
		return st, errors.Join(quietIfGone(err), l.saveCleanerState(done, min(p.horizon, f.horizon)))
	}
	return st, l.saveCleanerState(st.CleanedTo, f.horizon)
}

// cleanSegments cleans p.segs[:upto] group by group. On failure it returns
// the offset below which everything was cleaned.
func (l *Log) cleanSegments(p *cleanPlan, upto int, f *batchFilter, st *CompactStats) (done int64, err error) {
	done, n := p.point, 0 // the first n segments are cleaned
	for _, g := range groupSegments(p, upto) {
		if err := l.cleanGroup(p, g, f, st); err != nil {
			return done, err
		}
		n += len(g)
		done = max(done, p.next[n-1])
	}
	return done, nil
}

// CompactionDue reports whether Compact has work worth a pass: the log is
// compacted and either its dirty ratio (bytes of dirty cleanable segments
// over bytes of all cleanable segments) reached min.cleanable.dirty.ratio,
// or the delete horizon of a kept tombstone has passed. It only looks at
// segment sizes, so it is cheap to call often.
func (l *Log) CompactionDue(nowMs int64) bool {
	p, err := l.plan(nowMs)
	if err != nil || !p.cfg.Compact || len(p.segs) == 0 {
		return false
	}
	clean, dirty := p.bytes()
	if dirty > 0 && float64(dirty) >= p.cfg.MinCleanableDirtyRatio*float64(clean+dirty) {
		return true
	}
	return p.horizon <= nowMs
}

// DirtyRatio is the share of the cleanable bytes not cleaned yet, the
// figure CompactionDue compares with min.cleanable.dirty.ratio (0 when
// nothing is cleanable).
func (l *Log) DirtyRatio(nowMs int64) float64 {
	p, err := l.plan(nowMs)
	clean, dirty := p.bytes()
	if err != nil || clean+dirty == 0 {
		return 0
	}
	return float64(dirty) / float64(clean+dirty)
}

func quietIfGone(err error) error {
	if errors.Is(err, errSegmentGone) {
		return nil // retention got there first; the next pass starts over
	}
	return err
}

// cleanPlan is what a pass may clean, captured at its start.
type cleanPlan struct {
	cfg Config
	// segs are the cleanable segments, oldest first; next is the base of
	// the segment after each (next[i] ends segs[i]).
	segs []*segment
	next []int64
	// dirty is the index of the first segment not cleaned yet; segs[dirty:]
	// are dirty. firstDirty is the offset where the dirty part starts.
	dirty      int
	firstDirty int64
	point      int64 // the cleaner checkpoint
	horizon    int64 // earliest delete horizon of a kept tombstone
}

// bytes sums the sizes of the clean and the dirty cleanable segments.
func (p *cleanPlan) bytes() (clean, dirty int64) {
	for i, s := range p.segs {
		if i < p.dirty {
			clean += s.size.Load()
		} else {
			dirty += s.size.Load()
		}
	}
	return clean, dirty
}

// segEnd is the offset that ends segs[i] (the next segment's base).
func (p *cleanPlan) segEnd(i int) int64 {
	if i < 0 {
		return 0
	}
	return p.next[i]
}

// plan finds the cleanable segments.
func (l *Log) plan(nowMs int64) (cleanPlan, error) {
	rpBase := l.durableBase.Load() // 0 (nothing cleanable) until a checkpoint exists
	l.mu.Lock()
	defer l.mu.Unlock()
	p := cleanPlan{cfg: l.mu.cfg, point: l.mu.cleanPoint, horizon: l.mu.cleanHorizon}
	if err := l.appendableLocked(); err != nil {
		return p, err
	}
	all := l.segs.Load().segs
	hw := l.hw.load().off
	unstable := min(l.producers.firstUnstable(), l.unstable.load().off)
	start := max(p.point, l.logStart.Load())
	p.firstDirty = start
	lag := p.cfg.MinCompactionLagMs
	p.dirty = -1
	for i := 0; i+1 < len(all); i++ {
		s, next := all[i], all[i+1].base
		if next > hw || next > unstable || s.base >= rpBase || (lag > 0 && s.largestTimestamp() > nowMs-lag) {
			break
		}
		if p.dirty < 0 && next > start {
			p.dirty = i
			p.firstDirty = max(start, s.base)
		}
		p.segs = append(p.segs, s)
		p.next = append(p.next, next)
	}
	if p.dirty < 0 {
		p.dirty = len(p.segs)
	}
	return p, nil
}

// saveCleanerState writes the cleaner checkpoint and publishes its values.
func (l *Log) saveCleanerState(point, horizon int64) error {
	if err := writeFileAtomic(l.dir, cleanerCheckpointFile, formatCheckpoint([][]int64{{point, horizon}})); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.cleanPoint, l.mu.cleanHorizon = point, horizon
	return nil
}

// buildOffsetMap maps every key of the dirty segments to the offset of its
// latest record, segment by segment until the map is full. It returns the
// index of the first segment the map does not cover: the pass cleans the
// segments before it.
func (l *Log) buildOffsetMap(p *cleanPlan, f *batchFilter, st *CompactStats) (int, error) {
	f.keys, f.latest = make(map[string]int), nil
	var mem int64
	upto := p.dirty
	if p.dirty == len(p.segs) {
		return upto, nil
	}
	txn := newTxnTracker(l.aborted.load(), p.segs[p.dirty].base)
	for i := p.dirty; i < len(p.segs) && (i == p.dirty || mem < cleanerMapBytes); i++ {
		err := l.eachBatch(p.segs[i], func(b []byte, h *record.Header) error {
			if h.IsControl() {
				txn.onMarker(b, h)
				return nil
			}
			if txn.onData(h) || !f.decode(b, h) {
				return nil // aborted records supersede nothing
			}
			for i := range f.decoded {
				r := &f.decoded[i]
				if r.Key == nil {
					continue
				}
				off := h.BaseOffset + int64(r.OffsetDelta)
				if k, ok := f.keys[string(r.Key)]; ok { // no key copy for known keys
					f.latest[k] = off
					continue
				}
				f.keys[string(r.Key)] = len(f.latest)
				f.latest = append(f.latest, off)
				mem += int64(len(r.Key)) + mapEntryOverhead
			}
			return nil
		})
		if err != nil {
			return 0, err
		}
		upto = i + 1
	}
	st.Keys = len(f.keys)
	return upto, nil
}

// eachBatch calls fn with every batch of a sealed segment, checked as
// recovery checks it (a cleaner must not launder a bad CRC into a fresh
// one). A failure names the segment file and position.
func (l *Log) eachBatch(s *segment, fn func(b []byte, h *record.Header) error) error {
	size := s.size.Load()
	file, err := s.file()
	if err != nil {
		if s.deleted.Load() {
			return errSegmentGone
		}
		return err
	}
	defer s.fileDone()
	r := chunkReader{f: file, size: size}
	r.mapForScan(0)
	defer r.unmap()
	for pos := int64(0); pos < size; {
		if l.closed.Load() {
			return ErrClosed
		}
		var h record.Header
		b, err := r.batchAt(pos)
		if err == nil {
			h, err = checkedHeader(b, 0, true)
		}
		if err != nil && s.deleted.Load() {
			return errSegmentGone // its descriptor was closed under us
		}
		if err == nil {
			err = fn(b, &h)
		}
		if errors.Is(err, ErrCorruptMessage) || errors.Is(err, ErrInvalidRecord) {
			return &CorruptError{File: s.path(logSuffix), Pos: pos, Reason: err}
		} else if err != nil {
			return err
		}
		pos += int64(len(b))
	}
	return nil
}

// groupSegments splits segs[:upto] into runs of consecutive segments whose
// cleaned output fits one segment: Kafka's groupSegmentsBySize.
func groupSegments(p *cleanPlan, upto int) [][]*segment {
	maxLog := min(p.cfg.SegmentBytes, maxRel)
	var groups [][]*segment
	for i := 0; i < upto; {
		s := p.segs[i]
		logSize, offSize, timSize := s.size.Load(), s.fileSize(indexSuffix), s.fileSize(timeIndexSuffix)
		j := i + 1
		for ; j < upto; j++ {
			t := p.segs[j]
			logSize += t.size.Load()
			offSize += t.fileSize(indexSuffix)
			timSize += t.fileSize(timeIndexSuffix)
			if logSize > maxLog || offSize > p.cfg.offsetIndexCap() || timSize > p.cfg.timeIndexCap()-timeEntrySize ||
				p.next[j]-1-s.base > math.MaxInt32 {
				break
			}
		}
		groups = append(groups, p.segs[i:j])
		i = j
	}
	return groups
}

// cleanGroup filters a group of segments into one new segment and swaps it
// in. A group of one segment in which nothing changes is left alone.
func (l *Log) cleanGroup(p *cleanPlan, group []*segment, f *batchFilter, st *CompactStats) error {
	out, err := createSegmentAs(l, group[0].base, p.cfg, cleanedSuffix)
	if err != nil {
		return err
	}
	w := cleanedWriter{s: out, w: bufio.NewWriterSize(out.pinnedFile(), 1<<20), interval: p.cfg.IndexIntervalBytes} // pinned until published
	changed := len(group) > 1
	var before int64
	f.index = f.index[:0]
	for _, s := range group {
		before += s.size.Load()
		err := l.eachBatch(s, func(b []byte, h *record.Header) error {
			kept, c, err := f.filter(b, h, st)
			changed = changed || c
			if err != nil || kept == nil {
				return err
			}
			return w.add(kept)
		})
		if err != nil {
			out.discard()
			return err
		}
	}
	st.SegmentsRead += len(group)
	st.BytesRead += before
	if !changed {
		out.discard()
		return nil
	}
	last := group[len(group)-1]
	if err := errors.Join(w.finish(last.mtimeMs), writeTxnIndexFile(out, f.index)); err != nil {
		out.discard()
		return err
	}
	if err := l.hook("cleaned"); err != nil {
		out.close()
		return err
	}
	if err := out.renameTmp(swapSuffix); err != nil {
		out.discard()
		return err
	}
	if err := syncDir(l.dir); err != nil {
		out.discard()
		return err
	}
	if err := l.hook("swap"); err != nil {
		out.close()
		return err
	}
	out.lastOff.Store(last.lastOff.Load())
	return l.swapIn(group, out, before, slices.Clone(f.index), st)
}

// swapIn replaces group with out in the segment list and on disk. See the
// top of the file for the order of the renames and why it is crash-safe.
func (l *Log) swapIn(group []*segment, out *segment, before int64, index []AbortedTxn, st *CompactStats) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.appendableLocked(); err != nil {
		out.discard()
		return err
	}
	cur := l.segs.Load().segs
	j := slices.Index(cur, group[0])
	if j < 0 || j+len(group) > len(cur) || !slices.Equal(cur[j:j+len(group)], group) {
		out.discard() // retention deleted some of them meanwhile
		return errSegmentGone
	}
	for i, s := range group {
		if err := s.renameDeleted(); err != nil {
			l.setErrLocked(err) // the directory is half swapped; a restart finishes it
			return l.mu.err
		}
		if err := l.hook(fmt.Sprintf("deleted %d", i)); err != nil {
			out.close()
			return err
		}
	}
	if err := out.renameTmp(""); err != nil {
		l.setErrLocked(err)
		return l.mu.err
	}
	out.unpinFile()
	l.spliceAborted(out.base, cur[j+len(group)].base, index)
	l.segs.Store(newSegList(slices.Concat(cur[:j], []*segment{out}, cur[j+len(group):])))
	l.size.Add(out.size.Load() - before)
	st.SegmentsReplaced += len(group)
	st.SegmentsWritten++
	st.BytesReplaced += before
	st.BytesWritten += out.size.Load()
	err := syncDir(l.dir)
	delay := time.Duration(l.mu.cfg.FileDeleteDelayMs) * time.Millisecond
	for _, s := range group {
		if delay <= 0 {
			s.removeDeleted()
		} else {
			l.removals.after(delay, s.removeDeleted)
		}
	}
	if err != nil {
		l.setErrLocked(err)
		return l.mu.err
	}
	return nil
}

// hook lets tests stop a pass at a named stage, as a crash would.
func (l *Log) hook(stage string) error {
	if l.compactHook == nil {
		return nil
	}
	return l.compactHook(stage)
}

// cleanedWriter writes a cleaner output segment and its indexes, which are
// built as appends build them.
type cleanedWriter struct {
	s        *segment
	w        *bufio.Writer
	interval int32
}

func (w *cleanedWriter) add(b []byte) error {
	s := w.s
	pos := s.size.Load()
	interval := w.interval
	if s.ix.off.full(1) {
		// The index is sparse: skipping entries costs longer scans, while
		// writing past its end would fault.
		interval = math.MaxInt32
	}
	s.trackBatch(pos, int64(len(b)), record.LastOffset(b), record.MaxTimestamp(b), interval)
	if _, err := w.w.Write(b); err != nil {
		return err
	}
	s.size.Store(pos + int64(len(b)))
	return nil
}

// finish makes the output durable and seals its indexes. The log file
// keeps the modification time of the group's last segment, which
// retention.ms falls back on for batches without timestamps.
func (w *cleanedWriter) finish(mtimeMs int64) error {
	s := w.s
	if err := w.w.Flush(); err != nil {
		return err
	}
	s.publishIndexes()
	if err := s.finalTimeEntry(); err != nil {
		return err
	}
	s.mtimeMs = mtimeMs
	mtime := time.UnixMilli(mtimeMs)
	if err := os.Chtimes(s.path(logSuffix), mtime, mtime); err != nil {
		return err
	}
	if err := s.pinnedFile().Sync(); err != nil { // pinned until published
		return err
	}
	return s.seal()
}

// renameTmp renames the segment's files from its current suffix to tmp:
// the indexes first, the log last, so that a ".log" + tmp file implies
// complete indexes next to it.
func (s *segment) renameTmp(tmp string) error {
	for _, suf := range []string{indexSuffix, timeIndexSuffix, txnIndexSuffix, logSuffix} {
		if err := os.Rename(s.path(suf), filepath.Join(s.dir, segmentName(s.base, suf)+tmp)); err != nil {
			return err
		}
	}
	s.tmp = tmp
	return nil
}

// discard closes an unpublished cleaner output and removes its files,
// under either temporary name.
func (s *segment) discard() {
	s.close()
	for _, suf := range []string{indexSuffix, timeIndexSuffix, txnIndexSuffix, logSuffix} {
		for _, tmp := range []string{cleanedSuffix, swapSuffix} {
			os.Remove(filepath.Join(s.dir, segmentName(s.base, suf)+tmp))
		}
	}
}

// batchFilter decides what of each batch a pass keeps.
type batchFilter struct {
	now               int64
	deleteRetentionMs int64
	// keys maps every key of the mapped range to latest[keys[key]], the
	// offset of its latest record there.
	keys           map[string]int
	latest         []int64
	lastOfProducer map[int64]int64 // producer id → its last offset in the log
	// lastDataOfProducer: producer id → the last offset of its last data
	// batch (a marker may follow it); that batch is kept too, as Kafka
	// keeps it, so the producer's sequence survives a rebuild from the log.
	lastDataOfProducer map[int64]int64
	// txn follows transactions through the pass (compact_txn.go); index
	// collects the transaction index entries of the group being cleaned.
	txn   *txnTracker
	index []AbortedTxn
	// horizon is the earliest delete horizon among the batches kept with
	// tombstones, math.MaxInt64 if none.
	horizon int64

	raw, recs, out []byte     // scratch
	kept           []cleanRec // scratch
	decoded        []cleanRec // scratch
}

// cleanRec is one record of a batch being filtered.
type cleanRec struct {
	record.Record
	whole []byte // the record as encoded, its length prefix included
}

// decode decompresses batch b and decodes its records into f.decoded. It
// reports false for records it cannot make sense of (undecodable,
// offsets not increasing within the batch's span, a count that is not
// the header's): a batch whose CRC holds is what a client wrote and the
// broker accepted, so the cleaner keeps it whole and maps none of its
// keys rather than guess, or stop cleaning the log.
func (f *batchFilter) decode(b []byte, h *record.Header) bool {
	f.decoded = f.decoded[:0]
	raw, err := record.Records(f.raw, b, *h, record.DefaultDecompressLimit)
	if err != nil {
		return false
	}
	if h.Compression() != record.None {
		f.raw = raw
	}
	prev := int32(-1)
	it := record.NewIter(raw)
	for it.Next() {
		r := it.Record()
		if r.OffsetDelta <= prev || r.OffsetDelta > h.LastOffsetDelta {
			return false
		}
		prev = r.OffsetDelta
		f.decoded = append(f.decoded, cleanRec{Record: *r, whole: it.Raw()})
	}
	return it.Err() == nil && len(f.decoded) == int(h.NumRecords)
}

// filter returns what stays of batch b: b itself (changed false) when it
// stays whole, a rewritten batch (valid until the next call) when some of
// its records go or its tombstones get their delete horizon, nil when all
// of it goes.
func (f *batchFilter) filter(b []byte, h *record.Header, st *CompactStats) (kept []byte, changed bool, err error) {
	if h.IsControl() {
		return f.filterMarker(b, h, st)
	}
	if f.txn.onData(h) {
		return f.filterAborted(b, h, st)
	}
	if !f.decode(b, h) {
		st.Records += int64(h.NumRecords)
		st.RecordsKept += int64(h.NumRecords)
		return b, false, nil
	}
	hadHorizon := h.HasDeleteHorizon()
	expired := hadHorizon && f.now >= h.FirstTimestamp
	f.kept = f.kept[:0]
	tombstones := false
	for _, r := range f.decoded {
		off := h.BaseOffset + int64(r.OffsetDelta)
		if k, ok := f.keys[string(r.Key)]; r.Key == nil || (ok && off < f.latest[k]) {
			continue
		}
		if r.IsTombstone() && expired {
			st.TombstonesRemoved++
			continue
		}
		tombstones = tombstones || r.IsTombstone()
		f.kept = append(f.kept, r)
	}
	st.Records += int64(len(f.decoded))
	st.RecordsKept += int64(len(f.kept))
	if len(f.kept) == 0 {
		if !h.HasProducerID() || !f.producersLast(h) {
			return nil, true, nil
		}
		if h.NumRecords == 0 && !hadHorizon {
			return b, false, nil // already the empty last batch of its producer
		}
		kept, err = f.rebuild(h, h.FirstTimestamp, false, false)
		return kept, true, err
	}
	if len(f.kept) == len(f.decoded) && tombstones == hadHorizon {
		if hadHorizon {
			f.horizon = min(f.horizon, h.FirstTimestamp)
		}
		return b, false, nil
	}
	base, reencode := h.FirstTimestamp, false
	switch {
	case tombstones && !hadHorizon:
		base, reencode = f.now+min(f.deleteRetentionMs, math.MaxInt64-f.now), true
	case !tombstones && hadHorizon:
		base, reencode = h.FirstTimestamp+f.kept[0].TimestampDelta, true
	}
	if tombstones {
		f.horizon = min(f.horizon, base)
	}
	kept, err = f.rebuild(h, base, reencode, tombstones)
	return kept, true, err
}

// rebuild encodes the kept records as a new batch with the header h:
// same base offset, lastOffsetDelta, producer fields, leader epoch and
// maxTimestamp; firstTimestamp base (re-basing the records' timestamp
// deltas if reencode); the delete-horizon bit if horizon. An empty batch
// is written uncompressed.
func (f *batchFilter) rebuild(h *record.Header, base int64, reencode, horizon bool) ([]byte, error) {
	f.recs = f.recs[:0]
	for i := range f.kept {
		r := &f.kept[i]
		if !reencode {
			f.recs = append(f.recs, r.whole...)
			continue
		}
		rec := r.Record
		rec.TimestampDelta = h.FirstTimestamp + r.TimestampDelta - base
		f.recs = record.AppendRecord(f.recs, &rec)
	}
	codec := h.Compression()
	if len(f.kept) == 0 {
		codec = record.None
	}
	nh := *h
	nh.Attributes &^= record.AttrDeleteHorizon
	if horizon {
		nh.Attributes |= record.AttrDeleteHorizon
	}
	nh.FirstTimestamp, nh.NumRecords = base, int32(len(f.kept))
	out, err := record.Rebuild(f.out[:0], &nh, f.recs, codec)
	if err != nil {
		return nil, err
	}
	f.out = out
	return out, nil
}

// readCleanerCheckpoint returns (0, MaxInt64) when there is none.
func readCleanerCheckpoint(dir string) (point, horizon int64, err error) {
	rows, err := readCheckpoint(filepath.Join(dir, cleanerCheckpointFile), 2)
	if err != nil || len(rows) != 1 {
		return 0, math.MaxInt64, err
	}
	return rows[0][0], rows[0][1], nil
}
