package storage

// Transactions, the partition side (Kafka's ProducerStateManager and
// transaction index, as far as a log sees them).
//
//   - A transactional batch (attribute bit 4) from a producer with no open
//     transaction opens one at its base offset (producerEntry.txnStart); a
//     control batch (an end-of-transaction marker) closes it.
//   - The first unstable offset is the first offset of the oldest
//     transaction that is still open or whose marker the high watermark
//     has not passed yet (unreplicated: a new leader without the marker
//     would see the transaction open again). The last stable offset (LSO)
//     is min(high watermark, first unstable offset); read_committed
//     consumers read up to it (ReadCommitted).
//   - An abort marker records the transaction in the transaction index
//     (txnindex.go), which read_committed fetches consult (AbortedTxns).
//
// The first unstable offset is published as an endMark (offset, segment,
// position) like the high watermark, and recomputed under hwMu where the
// high watermark moves (setHighWatermarkLocked: until it moves, an open
// transaction's data is above it anyway), where the log start moves (the
// offset is clamped to it) and after a truncation. Changes to producer
// state set producerState.txnDirty, which the recomputation looks at.

import (
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-broker/sluice/record"
)

// ErrTransactionCoordinatorFenced: a marker carries an older coordinator
// epoch than one already written for its producer (TRANSACTION_COORDINATOR_FENCED, 52).
var ErrTransactionCoordinatorFenced = errors.New("storage: transaction coordinator fenced")

// completedTxn is a transaction whose marker is written but not yet below
// the high watermark.
type completedTxn struct {
	first  int64 // the transaction's first offset (the marker's when it had no data)
	marker int64
}

// decidedTxns are the transactions decided by a marker the high watermark
// has not passed yet, oldest marker first. Its lock is taken after hwMu
// and producerState.mu, never before either, so that a replay can note a
// marker before the producer state closes its transaction.
type decidedTxns struct {
	mu   sync.Mutex
	list []completedTxn
	n    atomic.Int32 // len(list), read without the lock
}

// add notes c unless its marker is the last one noted already (a replay
// of a marker its reader noted).
func (d *decidedTxns) add(c completedTxn) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if n := len(d.list); n > 0 && d.list[n-1].marker >= c.marker {
		return
	}
	d.list = append(d.list, c)
	d.n.Store(int32(len(d.list)))
}

// removeLast takes back the note of the marker at offset, if last.
func (d *decidedTxns) removeLast(marker int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if n := len(d.list); n > 0 && d.list[n-1].marker == marker {
		d.list = d.list[:n-1]
		d.n.Store(int32(len(d.list)))
	}
}

// keep drops the transactions whose marker keep rejects and returns the
// smallest first offset of the others, math.MaxInt64 if none.
func (d *decidedTxns) keep(keep func(completedTxn) bool) int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	first := int64(math.MaxInt64)
	kept := d.list[:0]
	for _, c := range d.list {
		if keep(c) {
			kept = append(kept, c)
			first = min(first, c.first)
		}
	}
	clear(d.list[len(kept):])
	d.list = kept
	d.n.Store(int32(len(kept)))
	return first
}

// noUnstable is the first unstable offset while no transaction is open.
var noUnstable = mark{math.MaxInt64, -1, 0}

// LastStableOffset is the offset below which every transaction is decided
// and replicated: min(high watermark, first unstable offset).
func (l *Log) LastStableOffset() int64 {
	return min(l.hw.load().off, l.unstable.load().off)
}

// FirstUnstableOffset is the first offset of the oldest transaction still
// open (or decided above the high watermark), -1 if there is none.
func (l *Log) FirstUnstableOffset() int64 {
	if off := l.unstable.load().off; off != math.MaxInt64 {
		return off
	}
	return -1
}

// ReadCommitted is Read for a read_committed consumer: it stops at the
// last stable offset instead of the high watermark.
func (l *Log) ReadCommitted(offset int64, maxBytes int32) (Region, error) {
	return l.read(offset, maxBytes, limitStable)
}

// stableLimit is the mark a read_committed read stops at. The unstable
// mark is stored before the high watermark that passes it, so a reader
// that sees a new high watermark sees the unstable offset that goes with it.
func (l *Log) stableLimit() mark {
	limit := l.hw.load()
	if u := l.unstable.load(); u.off < limit.off {
		return u
	}
	return limit
}

// refreshUnstableLocked recomputes the first unstable offset for a high
// watermark moving to hw, dropping the completed transactions whose marker
// it passes. The caller holds hwMu.
func (l *Log) refreshUnstableLocked(hw int64) {
	// Every high watermark move comes here: without transactions it
	// costs two loads and writes nothing.
	if !l.producers.txnDirty.Load() && l.unreplicated.n.Load() == 0 {
		return
	}
	l.producers.txnDirty.Store(false)
	first := l.producers.firstUnstable()
	first = min(first, l.unreplicated.keep(func(c completedTxn) bool { return c.marker >= hw }))
	l.publishUnstable(first)
}

// publishUnstable stores the mark of first, the new first unstable offset.
// As in Kafka, it is never below the log start: a transaction whose start
// DeleteRecords or retention removed holds back only what is left of it.
func (l *Log) publishUnstable(first int64) {
	if first != math.MaxInt64 {
		first = max(first, l.logStart.Load())
	}
	switch {
	case first == l.unstable.load().off:
	case first == math.MaxInt64:
		l.unstable.store(noUnstable)
	default:
		if m, ok := l.markFor(first); ok {
			l.unstable.store(m)
			return
		}
		// Not found (below the log start, or unreadable): stop reads at
		// the start of its segment, or read nothing below it.
		segs := l.segs.Load()
		m := mark{first, -1, 0}
		if i := segs.find(first); i >= 0 {
			m.base = segs.at(i).base
		}
		l.unstable.store(m)
	}
}

// MarkerResult is where AppendMarker wrote a marker.
type MarkerResult struct {
	Offset  int64
	Bytes   int64       // the control batch's size
	Aborted *AbortedTxn // the transaction index entry, for an abort
}

// AppendMarker writes the end-of-transaction marker of producer pid at
// epoch (commit or abort) as the leader, as Kafka's coordinator has it
// written: a control batch of one record. It ends the producer's open
// transaction (a marker for a producer without one is written all the
// same, as Kafka does: a retried marker is harmless), and an abort is
// added to the transaction index. Errors: ErrInvalidProducerEpoch for an
// epoch older than the producer's (under transactions version 2, see
// AppendOptions.TransactionVersion: not above it, unless the marker
// repeats the one that ended the producer's last transaction), ErrTransactionCoordinatorFenced for a
// coordinator epoch older than the last marker's, and Append's.
func (l *Log) AppendMarker(pid int64, epoch int16, coordinatorEpoch int32, commit bool, opt AppendOptions) (MarkerResult, error) {
	now := opt.NowMs
	if now == 0 {
		now = time.Now().UnixMilli()
	}
	h := record.NewHeader()
	h.ProducerID, h.ProducerEpoch, h.FirstTimestamp = pid, epoch, now
	typ := record.ControlAbort
	if commit {
		typ = record.ControlCommit
	}
	batch := record.AppendMarkerBatch(make([]byte, 0, 96), h, record.Marker{Type: typ, CoordinatorEpoch: coordinatorEpoch})
	l.mu.Lock()
	res, err := l.appendMarkerLocked(batch, pid, epoch, coordinatorEpoch, commit, opt, now)
	flush := err == nil && l.flushDueLocked(now)
	l.mu.Unlock()
	if flush {
		err = l.flush(flushPolicy)
	}
	return res, err
}

func (l *Log) appendMarkerLocked(batch []byte, pid int64, epoch int16, coordinatorEpoch int32, commit bool, opt AppendOptions, now int64) (MarkerResult, error) {
	if err := l.appendableLocked(); err != nil {
		return MarkerResult{}, err
	}
	markerOff := l.mu.nextOffset
	c, err := l.producers.checkMarker(pid, epoch, coordinatorEpoch, opt.TransactionVersion, markerOff)
	if err != nil {
		return MarkerResult{}, err
	}
	// Recorded before the marker is visible, so that no high watermark
	// move can pass the marker while the transaction looks decided but
	// unindexed.
	undo := l.noteCompletedLocked(c, commit)
	entries := [1]AppendEntry{{Records: batch}}
	opt.AllowControl = true
	if err := l.appendLocked(entries[:], &opt, now); err != nil || entries[0].Err != nil {
		undo()
		return MarkerResult{}, errors.Join(err, entries[0].Err)
	}
	l.producers.setCoordinatorEpoch(pid, coordinatorEpoch)
	res := MarkerResult{Offset: entries[0].Result.FirstOffset, Bytes: int64(len(batch))}
	if !commit {
		res.Aborted = &c
		if err := appendTxnIndexFile(l.mu.active, c); err != nil {
			l.setErrLocked(err)
			return res, l.mu.err
		}
	}
	return res, nil
}

// noteCompletedLocked records a transaction decided by a marker about to
// be written at c.LastOffset: it stays unstable until the high watermark
// passes the marker, and an abort enters the in-memory transaction index.
// It returns what undoes both if the marker is not written. The caller
// holds mu.
func (l *Log) noteCompletedLocked(c AbortedTxn, commit bool) (undo func()) {
	l.unreplicated.add(completedTxn{c.FirstOffset, c.LastOffset})
	if !commit {
		l.aborted.add(c)
	}
	return func() {
		l.unreplicated.removeLast(c.LastOffset)
		l.producers.txnDirty.Store(true) // a move meanwhile may have counted it
		if !commit {
			l.aborted.cutFrom(c.LastOffset)
		}
	}
}

// checkMarker validates a marker of producer pid against its state and
// returns the transaction it completes, as a transaction index entry:
// the open transaction's first offset (the marker's own offset if none is
// open) and the last stable offset once it is decided.
func (p *producerState) checkMarker(pid int64, epoch int16, coordinatorEpoch int32, tv int8, markerOff int64) (AbortedTxn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := AbortedTxn{ProducerID: pid, FirstOffset: markerOff, LastOffset: markerOff}
	if e := p.mu.m[pid]; e != nil {
		switch {
		case epoch < e.epoch:
			return c, ErrInvalidProducerEpoch
		// Under version 2 the producer's records of the transaction a
		// marker ends carry the epoch before the bump: a marker at the
		// epoch of an open transaction is a late one, from the
		// transaction before, and must not end this one. With none open
		// it is a retry of the marker that ended the last (a new
		// coordinator finishing a commit), harmless.
		case tv >= 2 && epoch == e.epoch && e.txnStart >= 0:
			return c, ErrInvalidProducerEpoch
		case coordinatorEpoch < e.coordinatorEpoch:
			return c, ErrTransactionCoordinatorFenced
		}
		if e.txnStart >= 0 {
			c.FirstOffset = e.txnStart
		}
	}
	c.LastStableOffset = p.firstUnstableExceptLocked(pid, markerOff+1)
	return c, nil
}

// firstUnstableExceptLocked is the first offset of the oldest open
// transaction of another producer than pid, or def. The caller holds p.mu.
func (p *producerState) firstUnstableExceptLocked(pid, def int64) int64 {
	first := int64(math.MaxInt64)
	for _, e := range p.mu.m {
		if e.pid != pid && e.txnStart >= 0 {
			first = min(first, e.txnStart)
		}
	}
	if first == math.MaxInt64 {
		return def
	}
	return first
}

// completedLocked is the transaction the marker with header h decides:
// its producer's open transaction, or the marker alone. The caller holds
// p.mu.
func (p *producerState) completedLocked(h *record.Header) completedTxn {
	c := completedTxn{first: h.BaseOffset, marker: h.BaseOffset}
	if e := p.mu.m[h.ProducerID]; e != nil && e.txnStart >= 0 {
		c.first = e.txnStart
	}
	return c
}

func (p *producerState) setCoordinatorEpoch(pid int64, epoch int32) {
	p.mu.Lock()
	if e := p.mu.m[pid]; e != nil {
		e.coordinatorEpoch = epoch
	}
	p.mu.Unlock()
}

// replayMarker brings the transaction state up to a control batch read
// back from the log or copied from the leader (b is the whole batch),
// before the producer state applies it: the completed transaction stays
// unstable until the high watermark passes it, an abort enters the
// transaction index, and the marker's coordinator epoch is remembered.
// persist says whether the index entry goes to the active segment's file
// now (a follower append) or is written once recovery has published the
// segments (persistRecovered). The caller holds mu.
func (l *Log) replayMarker(b []byte, h *record.Header, persist bool) error {
	m, ok := markerOf(b, h)
	if !ok {
		return nil // an empty control batch the leader's cleaner left
	}
	l.producers.mu.Lock()
	c := AbortedTxn{ProducerID: h.ProducerID, FirstOffset: h.BaseOffset, LastOffset: h.BaseOffset}
	if e := l.producers.mu.m[h.ProducerID]; e != nil {
		if h.ProducerEpoch < e.epoch {
			l.producers.mu.Unlock()
			return nil // a zombie's marker: the producer state ignores it too
		}
		if e.txnStart >= 0 {
			c.FirstOffset = e.txnStart
		}
		e.coordinatorEpoch = m.CoordinatorEpoch
	}
	c.LastStableOffset = l.producers.firstUnstableExceptLocked(h.ProducerID, h.BaseOffset+1)
	l.producers.mu.Unlock()
	l.noteCompletedLocked(c, m.Type == record.ControlCommit)
	if m.Type == record.ControlAbort && persist {
		return appendTxnIndexFile(l.mu.active, c)
	}
	return nil
}

// markerOf decodes the marker of control batch b.
func markerOf(b []byte, h *record.Header) (record.Marker, bool) {
	raw, err := record.Records(nil, b, *h, 1<<10)
	if err != nil {
		return record.Marker{}, false
	}
	it := record.NewIter(raw)
	if !it.Next() {
		return record.Marker{}, false
	}
	m, err := record.ParseMarker(it.Record())
	return m, err == nil
}

// loadTxnIndexes reads the transaction index files of segs (the log's
// segments, the last ending at next), keeping the entries whose marker is
// below trusted; recovery rebuilds the rest.
func (l *Log) loadTxnIndexes(segs []*segment, next, trusted int64) error {
	var all []AbortedTxn
	for i, s := range segs {
		end := next
		if i+1 < len(segs) {
			end = segs[i+1].base
		}
		entries, err := readTxnIndex(s, end, trusted)
		if err != nil {
			return err
		}
		all = append(all, entries...)
	}
	l.aborted.set(all)
	return nil
}

// persistRecovered writes the index entries that recovery rebuilt (those
// at or after trusted) to the files of the segments holding their markers.
func (l *Log) persistRecovered(trusted int64) error {
	list := l.aborted.load()
	segs := l.segs.Load()
	var errs []error
	for _, t := range list[searchAborted(list, trusted):] {
		if i := segs.find(t.LastOffset); i >= 0 {
			errs = append(errs, appendTxnIndexFile(segs.at(i), t))
		}
	}
	return errors.Join(errs...)
}

// txnAfterCutLocked brings the transaction state in line with a log
// truncated to end, after the producer state was rebuilt: index entries
// and completed transactions at or after end go, and the cut segment's
// index file keeps only what is below end. The caller holds mu.
func (l *Log) txnAfterCutLocked(end int64) error {
	before := len(l.aborted.load())
	l.aborted.cutFrom(end)
	dropped := len(l.aborted.load()) < before
	l.unreplicated.keep(func(c completedTxn) bool { return c.marker < end })
	l.hwMu.Lock()
	l.producers.txnDirty.Store(true)
	l.refreshUnstableLocked(l.hw.load().off)
	l.hwMu.Unlock()
	segs := l.segs.Load()
	if !dropped || len(segs.segs) < 2 {
		return nil
	}
	cut := segs.segs[len(segs.segs)-2] // the new active segment starts at end
	list := l.aborted.load()
	return writeTxnIndexFile(cut, list[searchAborted(list, cut.base):])
}

// txnClearLocked forgets every transaction (the log starts afresh). The
// caller holds mu.
func (l *Log) txnClearLocked() {
	l.aborted.set(nil)
	l.unreplicated.keep(func(completedTxn) bool { return false })
	l.hwMu.Lock()
	l.unstable.store(noUnstable)
	l.hwMu.Unlock()
}

// replayFollowerMarker is replayMarker for a batch a follower copies, if
// it is a control batch. Failing to write its index entry fails the log
// (sticky), as a failed write of the batch would.
func (l *Log) replayFollowerMarker(batch []byte) {
	if record.Attributes(batch)&record.AttrControl == 0 {
		return
	}
	h, err := record.ParseHeader(batch) // validated by checkFollowerBatches
	if err != nil {
		return
	}
	if err := l.replayMarker(batch, &h, true); err != nil {
		l.setErrLocked(err)
	}
}
