package storage

import (
	"errors"
	"time"
)

// checkpointIntervalMs bounds how often a flush rewrites the recovery point
// and producer snapshot files (each costs a few fsyncs). Kafka writes its
// recovery checkpoint on a 60 s timer; a shorter interval keeps the tail
// that recovery must scan small. Rolls and Close always write them.
const checkpointIntervalMs = 1000

// Flush fsyncs the log up to its current end and checkpoints the recovery
// point, so a later recovery need not scan what it covers.
func (l *Log) Flush() error { return l.flush(flushExplicit) }

// Kinds of flush: policy flushes (flush.messages, flush.ms, after a roll)
// rewrite the checkpoint files at most every checkpointIntervalMs unless
// the segment changed; explicit ones always do; the final one (Close,
// after recovery) also runs on a closed log.
const (
	flushPolicy = iota
	flushExplicit
	flushFinal
)

func (l *Log) flush(kind int) error {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	return l.flushHeld(kind)
}

// flushHeld is flush for a caller that holds flushMu.
func (l *Log) flushHeld(kind int) error {
	final := kind == flushFinal
	if !final && l.closed.Load() {
		return ErrClosed
	}
	rp, segs, snap, err := l.captureFlush(final)
	if err != nil {
		return err
	}
	if err := l.syncSegments(segs, l.flushed.rp.base); err != nil {
		l.setErr(err)
		return l.stickyErr()
	}
	l.flushed.rp = rp
	now := time.Now().UnixMilli()
	if kind == flushPolicy && rp.base == l.flushed.diskRP.base && now-l.flushed.checkpointMs < checkpointIntervalMs {
		return nil
	}
	if err := l.writeCheckpoints(rp, snap); err != nil {
		l.setErr(err)
		return l.stickyErr()
	}
	l.flushed.checkpointMs = now
	return nil
}

// captureFlush records, under mu, the end position to make durable and the
// producer state as of that position.
func (l *Log) captureFlush(final bool) (recoveryPoint, *segList, []byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.err != nil {
		return recoveryPoint{}, nil, nil, l.mu.err
	}
	s := l.mu.active
	rp := recoveryPoint{
		offset: l.mu.nextOffset, base: s.base, pos: s.size.Load(),
		maxTs: s.maxTs.Load(), maxTsOff: s.maxTsOff.Load(), bytesSinceIndex: s.bytesSinceIndex,
	}
	l.mu.unflushedMsgs = 0
	l.mu.lastFlushMs = time.Now().UnixMilli()
	var snap []byte
	if rp.offset != l.flushed.snapshotOff || final {
		snap = l.producers.encode()
	}
	return rp, l.segs.Load(), snap, nil
}

// syncSegments fsyncs the logs of the segments from base on that were
// written since their last fsync, and the active segment's indexes (whose
// entries below the recovery point recovery trusts).
func (l *Log) syncSegments(segs *segList, base int64) error {
	var errs []error
	for _, s := range segs.segs[max(segs.find(base), 0):] {
		if s.deleted.Load() {
			continue
		}
		errs = append(errs, s.syncLog(), s.syncIndexes(), s.syncTxnIndex())
	}
	return errors.Join(errs...)
}

// writeCheckpoints writes the producer snapshot, then the recovery point
// that relies on it, then the high watermark.
func (l *Log) writeCheckpoints(rp recoveryPoint, snap []byte) error {
	if snap != nil {
		if err := writeSnapshot(l.dir, rp.offset, snap); err != nil {
			return err
		}
		prev := l.flushed.snapshotOff
		l.flushed.snapshotOff = rp.offset
		if prev >= 0 {
			removeSnapshotsBelow(l.dir, prev) // keep the previous one as a fallback
		}
	}
	if err := l.epochs.saveIfAssigned(); err != nil { // the epochs of what rp covers
		return err
	}
	if err := writeRecoveryPoint(l.dir, rp); err != nil {
		return err
	}
	l.flushed.diskRP = rp
	l.durableBase.Store(rp.base)
	return writeOffsetFile(l.dir, highWatermarkFile, l.HighWatermark())
}
