package storage

// Follower append: a replica that is not the leader copies the leader's
// batches as they are. Unlike Append, nothing is rewritten — offsets and
// partitionLeaderEpoch are the leader's, so the follower's segments are
// byte-identical to the leader's — and no idempotence check can reject a
// batch: the leader already decided, and the follower only learns from it.

import (
	"encoding/binary"
	"math"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sluice-broker/sluice/record"
)

// FollowerAppendResult describes what one AppendAsFollower call wrote.
type FollowerAppendResult struct {
	FirstOffset  int64 // base offset of the first batch
	LastOffset   int64 // last offset of the last batch; the new log end offset is LastOffset+1
	Batches      int
	Bytes        int64
	MaxTimestamp int64 // largest batch maxTimestamp, -1 if none
}

// AppendAsFollower appends record batches fetched from the partition
// leader, keeping their base offsets and leader epochs. records holds one
// or more whole RecordBatch v2 batches, all validated before anything is
// written (a rejected call changes nothing; an I/O failure sticks, as for
// Append):
//
//   - Every batch is checked as Append checks a produced one (length, magic,
//     CRC-32C, record count against lastOffsetDelta, codec, producer
//     fields); control batches are admitted. max.message.bytes is not
//     applied, as in Kafka: the leader accepted the batch.
//   - The first batch must start at the log end offset and each batch must
//     start where the previous one ended; otherwise nothing is written and
//     the error wraps ErrUnexpectedAppendOffset. In a compacted log
//     (Config.Compact) forward gaps between batches are admitted, as the
//     leader's cleaner removes whole batches.
//   - A batch whose partitionLeaderEpoch is newer than the latest known one
//     starts an entry in the leader-epoch file, which is written before the
//     batch is (recovery drops entries past the log end, never the
//     reverse).
//   - Idempotent-producer state learns every batch without checks, so a new
//     leader recognises a producer's retry as a duplicate.
//   - Segments roll and indexes grow exactly as for Append.
//   - The high watermark does not move; the owner sets it from the
//     leader's fetch responses with SetHighWatermark (clamped to the LEO).
//
// All batches go out in one pwritev per segment touched, and the call
// allocates nothing unless a new epoch or producer appears or a segment
// rolls.
func (l *Log) AppendAsFollower(records []byte) (FollowerAppendResult, error) {
	now := time.Now().UnixMilli()
	l.mu.Lock()
	res, err := l.appendAsFollowerLocked(records, now)
	flush := err == nil && l.flushDueLocked(now)
	l.mu.Unlock()
	if flush {
		err = l.flush(flushPolicy)
	}
	return res, err
}

func (l *Log) appendAsFollowerLocked(b []byte, now int64) (FollowerAppendResult, error) {
	res := FollowerAppendResult{FirstOffset: -1, LastOffset: -1, MaxTimestamp: -1}
	if err := l.appendableLocked(); err != nil {
		return res, err
	}
	if err := l.checkFollowerBatches(b, &res); err != nil {
		return res, err
	}
	if err := l.holdActiveLocked(); err != nil {
		return res, err // nothing was written: not sticky
	}
	defer l.releaseActiveLocked()
	if err := l.assignFollowerEpochsLocked(b); err != nil {
		return res, err
	}
	return res, l.writeFollowerBatchesLocked(b, now)
}

// checkFollowerBatches validates every batch of b and that their offsets
// continue the log, filling res. It changes nothing.
func (l *Log) checkFollowerBatches(b []byte, res *FollowerAppendResult) error {
	if len(b) == 0 {
		return errEmptyRecordSet
	}
	cleaned := l.mu.cfg.Compact
	next := l.mu.nextOffset
	for pos := int64(0); pos < int64(len(b)); {
		h, err := parseHeader(b[pos:])
		if err != nil {
			return err
		}
		size, err := checkParsed(b[pos:], &h, 0, cleaned)
		if err != nil {
			return err
		}
		switch {
		case h.BaseOffset < next:
			return errFollowerOverlap
		case h.BaseOffset > next && !cleaned:
			return errFollowerGap
		case h.BaseOffset > math.MaxInt64-int64(h.LastOffsetDelta)-1:
			return errFollowerOffsetRange
		}
		if res.Batches == 0 {
			res.FirstOffset = h.BaseOffset
		}
		res.Batches++
		res.Bytes += size
		res.MaxTimestamp = max(res.MaxTimestamp, h.MaxTimestamp)
		next = h.LastOffset() + 1
		pos += size
	}
	res.LastOffset = next - 1
	return nil
}

// assignFollowerEpochsLocked records the leader epochs that begin in b,
// before b is written; the file is saved before a recovery point covers
// them (see epochCache.unsaved).
func (l *Log) assignFollowerEpochsLocked(b []byte) error {
	latest, changed := l.epochs.latest(), false
	for pos := int64(0); pos < int64(len(b)); pos += record.Size(b[pos:]) {
		batch := b[pos:]
		if epoch := leaderEpochOf(batch); epoch > latest {
			changed = l.epochs.assign(epoch, record.BaseOffset(batch)) || changed
			latest = epoch
		}
	}
	if changed {
		l.epochs.unsaved.Store(true)
	}
	return nil
}

// writeFollowerBatchesLocked stages the validated batches of b segment by
// segment, rolling where Append would, and writes them.
func (l *Log) writeFollowerBatchesLocked(b []byte, now int64) error {
	cfg := &l.mu.cfg
	start := int64(0) // b[start:pos] is staged for the active segment
	for pos := int64(0); pos < int64(len(b)); {
		batch := b[pos:]
		size := record.Size(batch)
		base, last := record.BaseOffset(batch), record.LastOffset(batch)
		if l.rollNeededLocked(size, 1, last, now) {
			if err := l.writeFollowerRangeLocked(b[start:pos]); err != nil {
				return err
			}
			l.mu.nextOffset = base // a compacted leader's gap may precede it
			if err := l.rollLocked(now); err != nil {
				return err
			}
			start = pos
		}
		s := l.mu.active
		if last-s.base > math.MaxInt32 {
			// Only a compacted log's gap, into an empty segment that
			// cannot roll, gets here.
			return l.writeFollowerFail(b[start:pos], errFollowerOffsetRange)
		}
		s.trackBatch(s.size.Load()+l.mu.pending, size, last, record.MaxTimestamp(batch), cfg.IndexIntervalBytes)
		l.mu.pending += size
		l.mu.nextOffset = last + 1
		l.mu.unflushedMsgs += int64(record.NumRecords(batch))
		if producerIDOf(batch) >= 0 {
			l.replayFollowerMarker(batch)
			l.replayBatch(batch)
		}
		pos += size
	}
	return l.writeFollowerRangeLocked(b[start:])
}

// writeFollowerFail writes what was staged before a batch that cannot be
// placed, and returns err.
func (l *Log) writeFollowerFail(staged []byte, err error) error {
	if werr := l.writeFollowerRangeLocked(staged); werr != nil {
		return werr
	}
	return err
}

// writeFollowerRangeLocked writes b (whose batches are staged) at the end of
// the active segment with one pwritev and publishes it.
func (l *Log) writeFollowerRangeLocked(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	l.mu.iov = appendIovec(l.mu.iov, b)
	return l.writeStagedLocked(nil)
}

func appendIovec(iov []unix.Iovec, b []byte) []unix.Iovec {
	var v unix.Iovec
	v.Base = unsafe.SliceData(b)
	v.SetLen(len(b))
	return append(iov, v)
}

// leaderEpochOf and producerIDOf read a batch header's fields in place.
func leaderEpochOf(b []byte) int32 {
	return int32(binary.BigEndian.Uint32(b[record.PosLeaderEpoch:]))
}

func producerIDOf(b []byte) int64 {
	return int64(binary.BigEndian.Uint64(b[record.PosProducerID:]))
}
