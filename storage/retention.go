package storage

import (
	"errors"
	"slices"
	"time"
)

// EnforceRetention deletes the oldest segments that retention.ms,
// retention.bytes or the log start offset no longer need, and returns how
// many it deleted. It never deletes the active segment, nor a segment
// holding offsets at or above the high watermark (consumers may not have
// seen those yet), and it deletes a prefix of the log only, as Kafka does.
func (l *Log) EnforceRetention(nowMs int64) (deletedSegments int, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.appendableLocked(); err != nil {
		return 0, err
	}
	return l.deleteSegmentsLocked(l.expiredLocked(nowMs, true))
}

// expiredLocked counts the leading segments that may be deleted: those
// wholly below the log start offset and, with policy, those past
// retention.ms or retention.bytes.
func (l *Log) expiredLocked(nowMs int64, policy bool) int {
	cfg := &l.mu.cfg
	segs := l.segs.Load().segs
	hw, start, total := l.hw.load().off, l.logStart.Load(), l.size.Load()
	n := 0
	for ; n < len(segs)-1; n++ {
		s, nextBase := segs[n], segs[n+1].base
		if nextBase > hw {
			break
		}
		byStart := nextBase <= start
		byTime := policy && cfg.RetentionMs >= 0 && nowMs-s.largestTimestamp() > cfg.RetentionMs
		bySize := policy && cfg.RetentionBytes >= 0 && total-s.size.Load() >= cfg.RetentionBytes
		if !byStart && !byTime && !bySize {
			break
		}
		total -= s.size.Load()
	}
	return n
}

// DeleteRecordsBefore moves the log start offset to offset (-1 means the
// high watermark), persists it, and deletes the segments wholly below it.
// Offsets above the high watermark are out of range, as in Kafka.
func (l *Log) DeleteRecordsBefore(offset int64) (logStart int64, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.appendableLocked(); err != nil {
		return 0, err
	}
	hw := l.hw.load().off
	if offset == -1 {
		offset = hw
	}
	if offset < 0 || offset > hw {
		return l.logStart.Load(), ErrOffsetOutOfRange
	}
	if offset > l.logStart.Load() {
		l.logStart.Store(offset)
		if err := l.afterLogStartMovedLocked(); err != nil {
			return offset, err
		}
	}
	_, err = l.deleteSegmentsLocked(l.expiredLocked(0, false))
	return l.logStart.Load(), err
}

// deleteSegmentsLocked drops the first n segments from the log and
// schedules their files for removal after file.delete.delay.ms: they are
// renamed to *.deleted now and their descriptors stay open until then, so
// reads that found them before still work (Regions handed out hold their
// descriptors open until released anyway).
func (l *Log) deleteSegmentsLocked(n int) (int, error) {
	if n == 0 {
		return 0, nil
	}
	old := l.segs.Load()
	dead := old.segs[:n]
	l.segs.Store(newSegList(slices.Clone(old.segs[n:])))
	var freed int64
	for _, s := range dead {
		freed += s.size.Load()
	}
	l.size.Add(-freed)
	if first := old.segs[n].base; first > l.logStart.Load() {
		l.logStart.Store(first)
	}
	err := l.afterLogStartMovedLocked()
	delay := time.Duration(l.mu.cfg.FileDeleteDelayMs) * time.Millisecond
	for _, s := range dead {
		err = errors.Join(err, s.renameDeleted())
		if delay <= 0 {
			s.removeDeleted()
		} else {
			l.removals.after(delay, s.removeDeleted)
		}
	}
	return n, err
}

// afterLogStartMovedLocked persists the log start offset and trims what
// depends on it: the leader-epoch history, producers that only wrote below
// it, and old producer snapshots.
func (l *Log) afterLogStartMovedLocked() error {
	start := l.logStart.Load()
	err := writeOffsetFile(l.dir, logStartFile, start)
	if l.epochs.truncateFromStart(start) {
		err = errors.Join(err, l.epochs.persist())
	}
	l.producers.evictBefore(start)
	l.aborted.dropBelow(start)
	l.hwMu.Lock()
	l.producers.txnDirty.Store(true) // the first unstable offset is clamped to the log start
	l.refreshUnstableLocked(l.hw.load().off)
	l.hwMu.Unlock()
	return errors.Join(err, removeSnapshotsBelow(l.dir, l.segs.Load().segs[0].base))
}
