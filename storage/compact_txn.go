package storage

// Transactions in compaction, as Kafka's cleaner treats them
// (CleanedTransactionMetadata). The cleanable range lies below the first
// unstable offset, so every transaction with data there is decided; the
// transaction index says which were aborted.
//
//   - The records of an aborted transaction are removed, and never enter
//     the offset map (an aborted write must not supersede a committed
//     one). Committed transactional records are compacted by key like any
//     others.
//   - An abort marker is kept while the pass removed records of its
//     transaction (a reader may still hold them), with its transaction
//     index entry. A commit marker is kept while the pass saw batches of
//     its transaction. Once a pass finds no data of the transaction, the
//     marker is stamped with a delete horizon (now + delete.retention.ms,
//     as a tombstone's, KIP-534), and a pass after that horizon removes it
//     (unless it is its producer's last batch, which stays empty: the
//     producer state is rebuilt from it). An abort marker's index entry
//     goes with it: no records of the transaction are left to hide.
//
// A cleaned log therefore reads the same under both isolation levels,
// less the superseded records: read_committed never sees an aborted
// record, since none is left (or its entry is still indexed), and
// read_uncommitted sees no aborted record once a pass removed it.

import (
	"slices"

	"github.com/sluice-broker/sluice/record"
)

// txnTracker follows transactions through the batches of a pass, in
// offset order.
type txnTracker struct {
	// aborted are the aborted transactions that overlap the pass, by
	// first offset; those before next have been entered.
	aborted []AbortedTxn
	next    int
	// open maps the producers whose transaction is under way at the
	// current batch to whether it was aborted (and, then, to its entry).
	abortedOpen   map[int64]*abortedOpen
	committedOpen map[int64]bool
}

type abortedOpen struct {
	txn      AbortedTxn
	observed bool // the pass saw (and removed) data batches of it
}

// newTxnTracker tracks a pass over offsets from start, given the log's
// aborted transactions (ordered by marker).
func newTxnTracker(list []AbortedTxn, start int64) *txnTracker {
	t := &txnTracker{abortedOpen: map[int64]*abortedOpen{}, committedOpen: map[int64]bool{}}
	t.aborted = slices.Clone(list[searchAborted(list, start):])
	slices.SortStableFunc(t.aborted, func(a, b AbortedTxn) int { return cmpInt64(a.FirstOffset, b.FirstOffset) })
	return t
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// enterUpTo opens the aborted transactions that began at or before off.
func (t *txnTracker) enterUpTo(off int64) {
	for t.next < len(t.aborted) && t.aborted[t.next].FirstOffset <= off {
		a := t.aborted[t.next]
		t.abortedOpen[a.ProducerID] = &abortedOpen{txn: a}
		t.next++
	}
}

// onData sees a data batch and reports whether its records belong to an
// aborted transaction. A nil tracker knows of no transaction.
func (t *txnTracker) onData(h *record.Header) bool {
	if t == nil {
		return false
	}
	t.enterUpTo(h.LastOffset())
	if !h.IsTransactional() {
		return false
	}
	if a := t.abortedOpen[h.ProducerID]; a != nil {
		a.observed = true
		return true
	}
	t.committedOpen[h.ProducerID] = true
	return false
}

// onMarker sees a control batch b and reports whether the marker may go
// (once its delete horizon passes), and for a kept abort marker its
// transaction index entry. A nil tracker keeps every marker.
func (t *txnTracker) onMarker(b []byte, h *record.Header) (discardable bool, entry *AbortedTxn) {
	if t == nil {
		return false, nil
	}
	t.enterUpTo(h.LastOffset())
	m, ok := markerOf(b, h)
	if !ok {
		return true, nil // emptied by an earlier pass
	}
	pid := h.ProducerID
	switch m.Type {
	case record.ControlAbort:
		a := t.abortedOpen[pid]
		delete(t.abortedOpen, pid)
		if a != nil && a.observed {
			return false, &a.txn
		}
		return true, nil
	default:
		seen := t.committedOpen[pid]
		delete(t.committedOpen, pid)
		return !seen, nil
	}
}

// filterMarker decides what stays of control batch b (see the top of the
// file): b whole, b stamped with a delete horizon, an empty batch (its
// producer's last), or nothing.
func (f *batchFilter) filterMarker(b []byte, h *record.Header, st *CompactStats) (kept []byte, changed bool, err error) {
	st.Records += int64(h.NumRecords)
	discardable, entry := f.txn.onMarker(b, h)
	switch {
	case !discardable:
		if entry != nil {
			f.index = append(f.index, *entry)
		}
	case !h.HasDeleteHorizon():
		if h.NumRecords == 0 {
			break // already empty: nothing left to stamp
		}
		base := f.now + min(f.deleteRetentionMs, maxInt64-f.now)
		f.horizon = min(f.horizon, base)
		if !f.decode(b, h) {
			break
		}
		f.kept = append(f.kept[:0], f.decoded...)
		st.RecordsKept += int64(len(f.kept))
		kept, err = f.rebuild(h, base, true, true)
		return kept, true, err
	case f.now < h.FirstTimestamp:
		f.horizon = min(f.horizon, h.FirstTimestamp)
	default: // past its horizon
		st.MarkersRemoved++
		if f.lastOfProducer[h.ProducerID] != h.LastOffset() {
			return nil, true, nil
		}
		if h.NumRecords == 0 {
			return b, false, nil
		}
		f.kept = f.kept[:0]
		kept, err = f.rebuild(h, h.FirstTimestamp, false, true)
		return kept, true, err
	}
	st.RecordsKept += int64(h.NumRecords)
	return b, false, nil
}

const maxInt64 = 1<<63 - 1

// filterAborted drops the records of an aborted transaction's batch,
// keeping it empty if it is its producer's last.
func (f *batchFilter) filterAborted(b []byte, h *record.Header, st *CompactStats) (kept []byte, changed bool, err error) {
	st.Records += int64(h.NumRecords)
	st.AbortedRemoved += int64(h.NumRecords)
	if !f.producersLast(h) {
		return nil, true, nil
	}
	if h.NumRecords == 0 {
		return b, false, nil
	}
	f.kept = f.kept[:0]
	kept, err = f.rebuild(h, h.FirstTimestamp, false, h.HasDeleteHorizon())
	return kept, true, err
}

// producersLast reports whether the batch is its producer's last one, or
// its last data batch: kept (empty if need be) so that the producer's
// state can be rebuilt from the log.
func (f *batchFilter) producersLast(h *record.Header) bool {
	last := h.LastOffset()
	if off, ok := f.lastOfProducer[h.ProducerID]; ok && off == last {
		return true
	}
	off, ok := f.lastDataOfProducer[h.ProducerID]
	return ok && off == last
}

// spliceAborted replaces the in-memory index entries whose marker lies in
// [from, to) (a cleaned group's range) with entries. The caller holds mu.
func (l *Log) spliceAborted(from, to int64, entries []AbortedTxn) {
	list := l.aborted.load()
	i, j := searchAborted(list, from), searchAborted(list, to)
	if j-i == len(entries) && slices.Equal(list[i:j], entries) {
		return
	}
	l.aborted.set(slices.Concat(list[:i], entries, list[j:]))
}
