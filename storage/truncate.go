package storage

// Truncation: a follower cuts the tail its leader never committed
// (KIP-101/279), or drops its whole log when it fell behind the leader's
// log start.
//
// # What a concurrent reader sees
//
// Reads take no lock, so truncation orders its steps for them:
//
//  1. The log end offset and high watermark marks are lowered to the cut
//     first, so a Read that starts later never looks past it.
//  2. Then the truncation generation turns odd, bytes are cut, and the new
//     segment list is published; then it turns even again. A Read during
//     which the generation changed, or that failed while it was odd, is
//     retried, so a Read never fails because of a concurrent truncation.
//  3. Segments wholly above the cut are renamed *.deleted and removed after
//     file.delete.delay.ms, as retention's; Regions in them hold their
//     descriptors open until released.
//  4. The segment holding the cut is truncated in place and sealed; the log
//     continues in a new segment at the cut. No byte is ever written again
//     at or after a cut position of a file, so a Region handed out before a
//     truncation reads back exactly the bytes it described, or reads short
//     (EOF) where they were cut — never other bytes. Kafka has the same
//     window (FileRecords "truncated during write"); the sender treats a
//     short file region as a failed send.
//
// Committed reads (uncommitted=false) stop at the high watermark, and the
// replication layer truncates below it only with the leader's answer
// (OffsetForLeaderEpoch), so consumers of committed data are not cut.
//
// # Crash safety
//
// Every step leaves a directory that Open turns into a consistent log:
// either the old log, a prefix of it that is at least as long as the cut,
// or the truncated log. What that relies on:
//
//   - The recovery point is lowered to the cut (with the timestamp state
//     at the cut, computed from the indexes) before any file changes, so
//     recovery rescans everything past the cut and never trusts index
//     entries or a producer snapshot beyond it (snapshots above the
//     recovery point are deleted at Open).
//   - Segments above the cut are renamed newest first and the directory is
//     fsynced before the cut segment is shortened, so a crash leaves
//     segments that still form a contiguous prefix of the old log, never a
//     hole (which recovery would call corruption).
//   - The leader-epoch file is rewritten only after the data is cut and
//     fsynced. A crash in between leaves epochs past the log end, which
//     Open drops (truncateFromEnd); the reverse order could leave data
//     whose epoch the file no longer names, and OffsetForLeaderEpoch would
//     then miss a divergence.
//   - The log start and high watermark files are clamped at Open.
//   - Last, a flush fsyncs the new segment and writes the recovery point,
//     a producer snapshot and the high watermark at the new end.

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/sluice-broker/sluice/record"
)

// TruncateTo cuts the log so that it ends at offset (exclusive): the next
// appended batch gets offset. The cut falls on a batch boundary: if offset
// lies inside a batch, the log is cut before that batch, as Kafka does, and
// the new log end offset is that batch's base offset (LogEndOffset tells).
// In a compacted log an offset in a gap between batches becomes the log
// end. Offsets at or past the log end change nothing; an offset below the
// first segment starts the log afresh there (TruncateFullyAndStartAt).
//
// Segments above the cut are deleted through the *.deleted path, the
// indexes, leader-epoch history (entries starting at or after the new end;
// the one spanning it keeps its start and now ends at the log end), the
// producer state (rebuilt from the newest snapshot at or below the cut and
// the batches after it), recovery point, log start and high watermark
// (clamped to the new end) follow. It waits for a running compaction pass
// or flush to finish first.
func (l *Log) TruncateTo(offset int64) error {
	if offset < 0 {
		return ErrOffsetOutOfRange
	}
	l.cleanMu.Lock()
	defer l.cleanMu.Unlock()
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.mu.Lock()
	cut, err := l.truncateToLocked(offset)
	l.mu.Unlock()
	if err != nil || !cut {
		return err
	}
	return l.flushHeld(flushExplicit)
}

// TruncateFullyAndStartAt drops every segment and starts an empty log at
// offset: log start = log end = high watermark = offset. A follower does
// this when the leader's log start has passed its log end. The
// leader-epoch history and producer state are cleared.
func (l *Log) TruncateFullyAndStartAt(offset int64) error {
	if offset < 0 {
		return ErrOffsetOutOfRange
	}
	l.cleanMu.Lock()
	defer l.cleanMu.Unlock()
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.appendableLocked(); err != nil {
		return err
	}
	return l.truncateFullyLocked(offset)
}

// truncateToLocked runs TruncateTo under cleanMu, flushMu and mu and
// reports whether anything was cut.
func (l *Log) truncateToLocked(offset int64) (bool, error) {
	if err := l.appendableLocked(); err != nil {
		return false, err
	}
	if offset >= l.mu.nextOffset {
		return false, nil
	}
	segs := l.segs.Load()
	if offset < segs.ents[0].base {
		return true, l.truncateFullyLocked(offset)
	}
	i := segs.find(offset)
	s := segs.at(i)
	pos, end, err := cutPoint(s, offset)
	if err != nil {
		return false, err
	}
	l.lowerMarksLocked(mark{end, s.base, pos})
	l.truncGen.Add(1) // odd: bytes are being cut
	defer l.truncGen.Add(1)
	if err := l.cutLocked(segs.segs, i, pos, end); err != nil {
		l.setErrLocked(err)
		return true, l.mu.err
	}
	return true, nil
}

// cutPoint finds where in s the log ending at offset is cut: the position
// of the batch holding offset (or of the first batch after it, in a gap)
// and the new log end offset.
func cutPoint(s *segment, offset int64) (pos, end int64, err error) {
	if offset <= s.base {
		return 0, offset, nil
	}
	f, err := s.file()
	if err != nil {
		return 0, 0, err
	}
	defer s.fileDone()
	size := s.size.Load()
	pos, _, err = s.findBatch(f, offset, size)
	if err == errBeyondEnd {
		return size, offset, nil // a compacted log's gap at the segment end
	}
	if err != nil {
		return 0, 0, err
	}
	var h [record.HeaderLen]byte
	if _, err := f.ReadAt(h[:], pos); err != nil {
		return 0, 0, err
	}
	return pos, min(offset, record.BaseOffset(h[:])), nil
}

// lowerMarksLocked lowers the published log end, and the high watermark if
// it is above the cut, to m, so that reads starting from now stop there.
func (l *Log) lowerMarksLocked(m mark) {
	l.leo.store(m)
	l.hwMu.Lock()
	if l.hw.load().off > m.off {
		l.hw.store(m)
	}
	l.hwMu.Unlock()
}

// cutLocked truncates the log to end at byte pos of segs[i], where offset
// end begins; see the top of the file for the order of the steps.
func (l *Log) cutLocked(segs []*segment, i int, pos, end int64) error {
	s := segs[i]
	keep, dead := slices.Clone(segs[:i+1]), slices.Clone(segs[i+1:])
	if pos == 0 {
		keep, dead = keep[:i], slices.Clone(segs[i:])
	}
	// With pos 0 the recovery point names the segment that will start at
	// end (until it exists, recovery rescans from the first segment).
	rp := recoveryPoint{offset: end, base: end, maxTs: -1, maxTsOff: -1}
	if pos > 0 {
		if err := s.mapWritable(l.mu.cfg); err != nil {
			return err
		}
		if err := s.cutIndexes(pos, end); err != nil {
			return err
		}
		rp = recoveryPoint{end, s.base, pos, s.maxTs.Load(), s.maxTsOff.Load(), s.bytesSinceIndex}
	}
	if err := l.lowerRecoveryPoint(rp); err != nil {
		return err
	}
	if err := l.truncHook("recovery point"); err != nil {
		return err
	}
	if err := l.retireSegmentsLocked(dead); err != nil {
		return err
	}
	if err := l.truncHook("segments retired"); err != nil {
		return err
	}
	if pos > 0 {
		if err := l.cutSegment(s, pos); err != nil {
			return err
		}
	}
	if err := l.truncHook("segment cut"); err != nil {
		return err
	}
	next, err := createSegment(l, end, l.mu.cfg)
	if err != nil {
		return err
	}
	if err := syncDir(l.dir); err != nil {
		next.close()
		return err
	}
	l.publishCutLocked(append(keep, next), end)
	if err := l.truncHook("published"); err != nil {
		return err
	}
	return l.afterCutLocked(end)
}

// truncHook lets tests stop a truncation at a named step, as a crash
// would.
func (l *Log) truncHook(stage string) error {
	if l.truncateHook == nil {
		return nil
	}
	return l.truncateHook(stage)
}

// cutIndexes drops s's index entries at or after byte pos (where offset end
// begins) and restores the segment's timestamp state at pos: the last
// remaining time index entry holds the largest timestamp up to the last
// remaining offset index entry, and the few batches from there to pos are
// read. s is mapped writable; writer only.
func (s *segment) cutIndexes(pos, end int64) error {
	n := s.ix.off.n.Load()
	for n > 0 {
		if _, p := s.ix.off.entry(n - 1); int64(p) < pos {
			break
		}
		n--
	}
	s.ix.off.truncate(n)
	from := int64(0)
	if n > 0 {
		_, p := s.ix.off.entry(n - 1)
		from = int64(p)
	}
	m := s.ix.tim.n.Load()
	for m > 0 {
		if _, rel := s.ix.tim.entry(m - 1); s.base+int64(rel) < end {
			break
		}
		m--
	}
	s.ix.tim.truncate(m)
	maxTs, maxTsOff := int64(-1), int64(-1)
	if m > 0 {
		ts, rel := s.ix.tim.entry(m - 1)
		maxTs, maxTsOff = ts, s.base+int64(rel)
	}
	f, err := s.file()
	if err != nil {
		return err
	}
	defer s.fileDone()
	r := newHeaderReader(f)
	defer r.close()
	for p := from; p < pos; {
		h, err := r.header(p, pos)
		if err != nil {
			break // cannot happen below the committed size
		}
		if ts := record.MaxTimestamp(h); ts > maxTs {
			maxTs, maxTsOff = ts, record.LastOffset(h)
		}
		p += record.Size(h)
	}
	s.maxTs.Store(maxTs)
	s.maxTsOff.Store(maxTsOff)
	s.lastOff.Store(end - 1)
	s.bytesSinceIndex = pos - from
	return nil
}

// lowerRecoveryPoint makes the recovery point (in memory and on disk) no
// later than rp, the cut, before any file is changed. Everything before
// the cut was fsynced if the old point lay past it, so rp is then a valid
// point itself.
func (l *Log) lowerRecoveryPoint(rp recoveryPoint) error {
	if after(l.flushed.rp, rp) {
		l.flushed.rp = rp
	}
	if !after(l.flushed.diskRP, rp) {
		return nil
	}
	if err := writeRecoveryPoint(l.dir, rp); err != nil {
		return err
	}
	l.flushed.diskRP = rp
	l.durableBase.Store(rp.base)
	return nil
}

// after reports whether recovery point a lies past b.
func after(a, b recoveryPoint) bool {
	return a.base > b.base || (a.base == b.base && a.pos > b.pos)
}

// retireSegmentsLocked takes dead segments out of the log directory,
// newest first, through the *.deleted path (removed after
// file.delete.delay.ms), and fsyncs the directory.
func (l *Log) retireSegmentsLocked(dead []*segment) error {
	delay := time.Duration(l.mu.cfg.FileDeleteDelayMs) * time.Millisecond
	var freed int64
	for j := len(dead) - 1; j >= 0; j-- {
		s := dead[j]
		if err := s.renameDeleted(); err != nil {
			return err
		}
		freed += s.size.Load()
		if j == len(dead)-2 { // one segment renamed, the others not yet
			if err := l.truncHook("one segment retired"); err != nil {
				return err
			}
		}
		if delay <= 0 {
			s.removeDeleted()
		} else {
			time.AfterFunc(delay, s.removeDeleted)
		}
	}
	l.size.Add(-freed)
	if len(dead) == 0 {
		return nil
	}
	return syncDir(l.dir)
}

// cutSegment shortens s's log to pos durably and seals it with its
// remaining index entries.
func (l *Log) cutSegment(s *segment, pos int64) error {
	if old := s.size.Load(); pos < old {
		f, err := s.file()
		if err != nil {
			return err
		}
		err = f.Truncate(pos)
		if err == nil {
			s.size.Store(pos)
			l.size.Add(pos - old)
			err = f.Sync()
		}
		s.fileDone()
		if err != nil {
			return err
		}
	}
	return errors.Join(s.finalTimeEntry(), s.seal())
}

// publishCutLocked makes the truncated segment list and log end visible.
func (l *Log) publishCutLocked(segs []*segment, end int64) {
	active := segs[len(segs)-1]
	active.createdMs = time.Now().UnixMilli()
	l.segs.Store(newSegList(segs))
	l.mu.active = active
	l.mu.nextOffset = end
	l.leo.store(mark{end, active.base, 0})
	l.hwMu.Lock()
	l.setHighWatermarkLocked(min(l.hw.load().off, end))
	l.hwMu.Unlock()
}

// afterCutLocked brings what depends on the log's end in line with it: the
// log start (if the cut went below it), the leader-epoch history, the
// producer state and the cleaner checkpoint.
func (l *Log) afterCutLocked(end int64) error {
	var errs []error
	if end < l.logStart.Load() {
		l.logStart.Store(end)
		errs = append(errs, writeOffsetFile(l.dir, logStartFile, end))
	}
	if l.epochs.truncateFromEnd(end) {
		errs = append(errs, l.epochs.persist())
	}
	if err := l.truncHook("epochs"); err != nil {
		return err
	}
	errs = append(errs, l.replayProducers(l.segs.Load().segs, end))
	l.producers.evictBefore(l.logStart.Load())
	errs = append(errs, l.txnAfterCutLocked(end))
	if l.mu.cleanPoint > end {
		errs = append(errs, l.saveCleanerStateLocked(end, l.mu.cleanHorizon))
	}
	return errors.Join(errs...)
}

// saveCleanerStateLocked is saveCleanerState for a caller holding mu.
func (l *Log) saveCleanerStateLocked(point, horizon int64) error {
	if err := writeFileAtomic(l.dir, cleanerCheckpointFile, formatCheckpoint([][]int64{{point, horizon}})); err != nil {
		return err
	}
	l.mu.cleanPoint, l.mu.cleanHorizon = point, horizon
	return nil
}

// truncateFullyLocked runs TruncateFullyAndStartAt under cleanMu, flushMu
// and mu. The old segments go newest first (a crash leaves a prefix of the
// old log, which the follower truncates again), then the empty segment at
// offset is created, then the checkpoints name offset, and last the epoch
// history and producer state are cleared (a crash before that leaves an
// epoch at most, moved to offset by Open's truncateFromStart).
func (l *Log) truncateFullyLocked(offset int64) error {
	l.truncGen.Add(1)
	defer l.truncGen.Add(1)
	err := l.truncateFullySteps(offset)
	if err != nil {
		l.setErrLocked(err)
		return l.mu.err
	}
	return nil
}

func (l *Log) truncateFullySteps(offset int64) error {
	if err := l.retireSegmentsLocked(l.segs.Load().segs); err != nil {
		return err
	}
	if err := l.truncHook("full: segments retired"); err != nil {
		return err
	}
	s, err := createSegment(l, offset, l.mu.cfg)
	if err != nil {
		return err
	}
	if err := syncDir(l.dir); err != nil {
		s.close()
		return err
	}
	l.size.Store(0)
	l.logStart.Store(offset)
	l.publishCutLocked([]*segment{s}, offset)
	l.mu.unflushedMsgs = 0
	rp := recoveryPoint{offset: offset, base: offset, maxTs: -1, maxTsOff: -1}
	l.flushed.rp, l.flushed.diskRP = rp, rp
	l.durableBase.Store(offset)
	if err := l.truncHook("full: segment created"); err != nil {
		return err
	}
	if err := errors.Join(
		writeOffsetFile(l.dir, logStartFile, offset),
		writeRecoveryPoint(l.dir, rp),
		writeOffsetFile(l.dir, highWatermarkFile, offset)); err != nil {
		return err
	}
	if err := l.truncHook("full: checkpoints"); err != nil {
		return err
	}
	l.epochs.clear()
	l.producers.mu.Lock()
	clear(l.producers.mu.m)
	l.producers.mu.Unlock()
	l.txnClearLocked()
	l.flushed.snapshotOff = -1
	err = errors.Join(l.epochs.persist(), removeSnapshotFiles(l.dir))
	if l.mu.cleanPoint > offset {
		err = errors.Join(err, l.saveCleanerStateLocked(offset, l.mu.cleanHorizon))
	}
	return err
}

// removeSnapshotFiles deletes every producer snapshot in dir.
func removeSnapshotFiles(dir string) error {
	offs, err := listSnapshots(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, off := range offs {
		if err := os.Remove(filepath.Join(dir, segmentName(off, snapshotSuffix))); err != nil && !isNotExist(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
