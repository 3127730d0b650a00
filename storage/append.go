package storage

import (
	"errors"
	"math"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sluice-broker/sluice/record"
)

// AppendEntry is one record set to append, with its outcome.
type AppendEntry struct {
	Records []byte // one or more RecordBatch v2; rewritten in place
	// Header, when HasHeader is set, is the header of the first batch of
	// Records as record.ParseHeader returns it. A caller that parsed it
	// already (the produce path) passes it so that it is not parsed again;
	// Append still validates the batch against it (length, magic, CRC-32C,
	// counts, size).
	Header    record.Header
	HasHeader bool
	// TxnV2: the record set comes from a producer on transactions version
	// 2 (KIP-890 part 2), whose every transaction starts its sequences at
	// 0 on each partition. A transactional batch of a producer this log
	// has no state for must then start at 0: accepting a later batch first
	// (its earlier one still retrying after a failed verification) would
	// leave the earlier one out of order for good, the producer retrying
	// it until its transaction times out (Kafka: KAFKA-18202).
	TxnV2 bool
	// filled by Append:
	Result AppendResult
	Err    error
}

// AppendResult is what the produce response needs for one entry.
type AppendResult struct {
	FirstOffset    int64 // base offset assigned to the first batch
	LastOffset     int64
	LogAppendTime  int64 // -1 unless the topic uses LogAppendTime
	LogStartOffset int64
	Duplicate      bool // idempotent retry: offsets are the original ones, nothing written
}

// AppendOptions apply to a whole Append call.
type AppendOptions struct {
	LeaderEpoch int32 // stored in each batch's partitionLeaderEpoch; new epochs start an entry in the leader-epoch file
	NowMs       int64 // 0 = time.Now()
	// AllowControl admits control batches (transaction markers written by
	// the broker itself); clients may not write them.
	AllowControl bool
	// TransactionVersion is a marker's (AppendMarker): from 2 on, the
	// coordinator bumped the producer's epoch before writing it, so its
	// epoch must be above the producer's here (KIP-890 part 2) unless it
	// repeats the marker that ended the producer's last transaction.
	TransactionVersion int8
}

// Append validates and appends many record sets with one write/writev.
// Each entry is validated independently: a bad entry gets Err and nothing of
// it is written; the good ones are appended in slice order, with one
// pwritev per segment touched. Append rewrites baseOffset and
// partitionLeaderEpoch in place in the caller's buffer (and, for
// LogAppendTime topics, the timestamps and CRC). It allocates nothing when
// the caller reuses the slice. The error is only for log-level failure
// (a sticky I/O error, or the log is closed); every entry then carries it too.
func (l *Log) Append(entries []AppendEntry, opt AppendOptions) error {
	now := opt.NowMs
	if now == 0 {
		now = time.Now().UnixMilli()
	}
	l.mu.Lock()
	err := l.appendLocked(entries, &opt, now)
	flush := err == nil && l.flushDueLocked(now)
	l.mu.Unlock()
	if flush {
		err = l.flush(flushPolicy)
	}
	return err
}

func (l *Log) appendLocked(entries []AppendEntry, opt *AppendOptions, now int64) error {
	if err := l.appendableLocked(); err != nil {
		failEntries(entries, err)
		return err
	}
	if err := l.holdActiveLocked(); err != nil {
		failEntries(entries, err) // nothing was written: not sticky
		return err
	}
	defer l.releaseActiveLocked()
	first, staged := int64(-1), 0 // entries[staged:i] may be in the pending write
	for i := range entries {
		e := &entries[i]
		e.Err, e.Result = nil, AppendResult{FirstOffset: -1, LastOffset: -1, LogAppendTime: -1}
		n, batches, err := l.prepareEntry(e, opt, now)
		if err != nil || e.Result.Duplicate {
			e.Err = err
			continue
		}
		if l.rollNeededLocked(n, batches, l.mu.nextOffset+e.Result.LastOffset, now) {
			if err := l.writeStagedLocked(entries[staged:i]); err != nil {
				failEntries(entries[i:], err)
				return err
			}
			if err := l.rollLocked(now); err != nil {
				failEntries(entries[i:], err)
				return err
			}
			staged = i
		}
		if first < 0 {
			first = l.mu.nextOffset
		}
		l.stageLocked(e, n, opt.LeaderEpoch, now)
	}
	if err := l.writeStagedLocked(entries[staged:]); err != nil {
		return err
	}
	if first >= 0 && l.epochs.assign(opt.LeaderEpoch, first) {
		l.epochs.unsaved.Store(true) // saved before a recovery point covers first
	}
	return nil
}

func (l *Log) appendableLocked() error {
	if l.mu.closed || l.closed.Load() {
		return ErrClosed
	}
	return l.mu.err
}

func failEntries(entries []AppendEntry, err error) {
	for i := range entries {
		if entries[i].Err == nil && !entries[i].Result.Duplicate {
			entries[i].Err = err
		}
	}
}

// prepareEntry validates a record set and runs the idempotent producer
// checks. On success Result.LastOffset temporarily holds the record count
// minus one (offsets are assigned when the entry is staged). A duplicate
// sets Result.Duplicate with the original offsets.
func (l *Log) prepareEntry(e *AppendEntry, opt *AppendOptions, now int64) (n, batches int64, err error) {
	cfg := &l.mu.cfg
	var first record.Header
	n, batches, records, err := validateRecordSet(e, &first, int64(cfg.MaxMessageBytes), opt.AllowControl)
	if err != nil {
		return 0, 0, err
	}
	if n > cfg.SegmentBytes {
		return 0, 0, ErrRecordListTooLarge
	}
	if dup, isDup, err := l.checkProducersLocked(e.Records, &first, e.TxnV2, now); err != nil {
		return 0, 0, err
	} else if isDup {
		e.Result.Duplicate = true
		e.Result.FirstOffset, e.Result.LastOffset = dup.firstOffset, dup.lastOffset
		e.Result.LogStartOffset = l.logStart.Load()
		return 0, 0, nil
	}
	e.Result.LastOffset = records - 1
	return n, batches, nil
}

// validateRecordSet checks every batch of e's record set and returns its
// size, batch count and record count, and in first the header of its first
// batch.
func validateRecordSet(e *AppendEntry, first *record.Header, maxSize int64, allowControl bool) (n, batches, records int64, err error) {
	b := e.Records
	if len(b) == 0 {
		return 0, 0, 0, errEmptyRecordSet
	}
	for n < int64(len(b)) {
		h, err := batchHeader(e, n)
		if err != nil {
			return 0, 0, 0, err
		}
		size, err := checkParsed(b[n:], &h, maxSize, false)
		if err != nil {
			return 0, 0, 0, err
		}
		if h.IsControl() && !allowControl {
			return 0, 0, 0, errControlFromClient
		}
		if batches == 0 {
			*first = h
		}
		batches++
		records += int64(h.NumRecords)
		n += size
	}
	return n, batches, records, nil
}

// batchHeader is the header of the batch at pos in e.Records: the caller's
// for the first batch if it gave it, parsed otherwise.
func batchHeader(e *AppendEntry, pos int64) (record.Header, error) {
	if pos == 0 && e.HasHeader {
		return e.Header, nil
	}
	return parseHeader(e.Records[pos:])
}

// checkProducersLocked applies the idempotent producer rules to each batch
// of the validated record set b with a producer id, updating the state as it
// goes and undoing its updates if a later batch of the same record set is
// rejected. first is the header of the first batch; txnV2 is the entry's
// TxnV2.
func (l *Log) checkProducersLocked(b []byte, first *record.Header, txnV2 bool, now int64) (dup batchMeta, isDup bool, err error) {
	p := l.producers
	p.mu.Lock()
	defer p.mu.Unlock()
	l.mu.undo = l.mu.undo[:0]
	off := l.mu.nextOffset
	for pos := int64(0); pos < int64(len(b)); pos += record.Size(b[pos:]) {
		h := *first
		if pos > 0 {
			h, _ = record.ParseHeader(b[pos:]) // validated: it parses
		}
		h.BaseOffset = off
		off += int64(h.NumRecords)
		if !h.HasProducerID() {
			continue
		}
		if l.mu.cfg.TimestampType == LogAppendTime {
			h.MaxTimestamp = now
		}
		if dup, isDup, err = p.check(&h, txnV2); err != nil || isDup {
			p.undo(l.mu.undo)
			return dup, isDup, err
		}
		l.mu.undo = append(l.mu.undo, p.update(&h))
	}
	return batchMeta{}, false, nil
}

// stageLocked assigns offsets to an entry's batches, rewrites them in place,
// stages their index entries and queues the bytes for the next write.
func (l *Log) stageLocked(e *AppendEntry, n int64, epoch int32, now int64) {
	s, cfg := l.mu.active, &l.mu.cfg
	b := e.Records[:n]
	e.Result.FirstOffset = l.mu.nextOffset
	e.Result.LogStartOffset = l.logStart.Load()
	for pos := int64(0); pos < n; {
		size := record.Size(b[pos:])
		batch := b[pos : pos+size]
		record.SetBaseOffset(batch, l.mu.nextOffset)
		record.SetLeaderEpoch(batch, epoch)
		if cfg.TimestampType == LogAppendTime {
			record.SetLogAppendTime(batch, now)
			e.Result.LogAppendTime = now
		}
		last := l.mu.nextOffset + int64(record.LastOffsetDelta(batch))
		s.trackBatch(s.size.Load()+l.mu.pending+pos, size, last, record.MaxTimestamp(batch), cfg.IndexIntervalBytes)
		l.mu.nextOffset = last + 1
		l.mu.unflushedMsgs += int64(record.NumRecords(batch))
		pos += size
	}
	e.Result.LastOffset = l.mu.nextOffset - 1
	l.mu.pending += n
	var iov unix.Iovec
	iov.Base = &b[0]
	iov.SetLen(int(n))
	l.mu.iov = append(l.mu.iov, iov)
}

// rollNeededLocked reports whether the entry must go to a new segment:
// segment.bytes or segment.ms reached, an index full, or an offset that no
// longer fits the 32-bit relative offsets of the indexes. An empty segment
// is never rolled.
func (l *Log) rollNeededLocked(n, batches, lastOffset, now int64) bool {
	s, cfg := l.mu.active, &l.mu.cfg
	size := s.size.Load() + l.mu.pending
	if size == 0 {
		return false
	}
	return size+n > cfg.SegmentBytes ||
		now-s.createdMs >= cfg.SegmentMs ||
		s.ix.off.full(batches) || s.ix.tim.full(batches) ||
		lastOffset-s.base > math.MaxInt32
}

// writeStagedLocked writes the staged bytes with pwritev and publishes them:
// index entries first, then the log end offset, so a reader that sees the
// new end also finds the batches and their index entries. On failure the
// error sticks and the entries get it.
func (l *Log) writeStagedLocked(entries []AppendEntry) error {
	if l.mu.pending == 0 {
		return nil
	}
	s, f := l.mu.active, l.mu.heldFile // held: appendLocked holds the active segment
	pos := s.size.Load()
	err := pwritevAll(int(f.Fd()), l.mu.iov, pos)
	clear(l.mu.iov) // do not keep callers' buffers alive
	l.mu.iov = l.mu.iov[:0]
	s.wrote()
	if err != nil {
		s.ix.off.discard()
		s.ix.tim.discard()
		f.Truncate(pos) // best effort; recovery would cut the torn tail anyway
		l.setErrLocked(err)
		failEntries(entries, l.mu.err)
		return l.mu.err
	}
	end := pos + l.mu.pending
	l.mu.pending = 0
	s.size.Store(end)
	l.size.Add(end - pos)
	s.publishIndexes()
	l.leo.store(mark{l.mu.nextOffset, s.base, end})
	return nil
}

// advanceIovecs drops n written bytes from the front of iov.
func advanceIovecs(iov []unix.Iovec, n int64) []unix.Iovec {
	for len(iov) > 0 && n >= int64(iov[0].Len) {
		n -= int64(iov[0].Len)
		iov = iov[1:]
	}
	if n > 0 {
		iov[0].Base = (*byte)(unsafe.Add(unsafe.Pointer(iov[0].Base), n))
		iov[0].Len -= uint64(n)
	}
	return iov
}

// rollLocked seals the active segment and starts a new one at the log end
// offset. The sealed segment's log is fsynced by a background flush, not
// here, so producers do not wait for it.
func (l *Log) rollLocked(now int64) error {
	old := l.mu.active
	held := l.mu.held != nil
	l.releaseActiveLocked() // sealing takes the indexes exclusively
	if err := errors.Join(old.finalTimeEntry(), old.seal()); err != nil {
		l.setErrLocked(err)
		return l.mu.err
	}
	s, err := createSegment(l, l.mu.nextOffset, l.mu.cfg)
	if err != nil {
		l.setErrLocked(err)
		return l.mu.err
	}
	s.createdMs = now
	l.segs.Store(l.segs.Load().with(s))
	l.mu.active = s
	l.leo.store(mark{l.mu.nextOffset, s.base, 0})
	go l.flush(flushPolicy)
	if held {
		return l.holdActiveLocked()
	}
	return nil
}

// holdActiveLocked gets the active segment's index mappings and log
// descriptor back if the caches let them go, and holds both (shared) so
// that neither is evicted while the appender writes; releaseActiveLocked
// lets them go. Between appends an idle partition costs neither a
// mapping nor a descriptor.
func (l *Log) holdActiveLocked() error {
	s := l.mu.active
	if err := s.holdIndexes(); err != nil {
		return err
	}
	f, err := s.file()
	if err != nil {
		s.ix.RUnlock()
		return err
	}
	l.mu.held, l.mu.heldFile = s, f
	return nil
}

func (l *Log) releaseActiveLocked() {
	if s := l.mu.held; s != nil {
		s.fileDone()
		s.ix.RUnlock()
		l.mu.held, l.mu.heldFile = nil, nil
	}
}

// MaybeRoll rolls the active segment when segment.ms has passed, and flushes
// if flush.ms has: both are time-based, so the owner calls this periodically.
func (l *Log) MaybeRoll(nowMs int64) error {
	l.mu.Lock()
	err := l.appendableLocked()
	s := l.mu.active
	if err == nil && s.size.Load() > 0 && nowMs-s.createdMs >= l.mu.cfg.SegmentMs {
		err = l.rollLocked(nowMs)
	}
	flush := err == nil && l.flushDueLocked(nowMs)
	l.mu.Unlock()
	if flush {
		err = l.flush(flushPolicy)
	}
	return err
}

// flushDueLocked applies flush.messages and flush.ms.
func (l *Log) flushDueLocked(now int64) bool {
	if l.mu.unflushedMsgs == 0 {
		return false
	}
	return l.mu.unflushedMsgs >= l.mu.cfg.FlushMessages || now-l.mu.lastFlushMs >= l.mu.cfg.FlushMs
}
