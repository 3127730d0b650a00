package storage

// The transaction index: Kafka's ".txnindex" files, one beside each
// segment that holds an abort marker, listing the aborted transactions
// whose marker lies in that segment. A read_committed fetch asks for the
// aborted transactions that overlap what it returns (AbortedTxns), so the
// consumer can drop their records.
//
// File format (Kafka's TransactionIndex; big-endian, entries back to back,
// in the order their markers were written):
//
//	+---------+------------+-------------+------------+------------------+
//	| version | producerId | firstOffset | lastOffset | lastStableOffset |
//	| int16=0 | int64      | int64       | int64      | int64            |
//	+---------+------------+-------------+------------+------------------+
//	34 bytes. firstOffset is the transaction's first offset in the
//	partition, lastOffset the offset of its abort marker, lastStableOffset
//	the first offset of the oldest other transaction still open when the
//	marker was written (lastOffset+1 if none): every transaction aborted
//	later starts at or after it, which lets a lookup stop early.
//
// The log keeps every entry of every segment in memory too, ordered by
// lastOffset, and answers lookups from there without a lock; the files
// are what a restart reads back. An entry is written to its file when the
// marker is appended and fsynced with the segment's log; recovery drops
// the entries at or after the point where it rescans and rebuilds them
// from the markers it replays.

import (
	"encoding/binary"
	"errors"
	"os"
	"sync/atomic"
)

const (
	txnIndexSuffix   = ".txnindex"
	abortedTxnSize   = 34
	txnIndexVersion  = 0
	minMarkerBatchSz = 61 + 14 // header + the smallest control record: bounds a file by its segment
)

// AbortedTxn is one aborted transaction of a partition.
type AbortedTxn struct {
	ProducerID       int64
	FirstOffset      int64 // the transaction's first offset in the partition
	LastOffset       int64 // its abort marker's offset
	LastStableOffset int64 // first offset of the oldest other open transaction then, or LastOffset+1
}

func (t AbortedTxn) appendTo(b []byte) []byte {
	be := binary.BigEndian
	b = be.AppendUint16(b, txnIndexVersion)
	b = be.AppendUint64(b, uint64(t.ProducerID))
	b = be.AppendUint64(b, uint64(t.FirstOffset))
	b = be.AppendUint64(b, uint64(t.LastOffset))
	return be.AppendUint64(b, uint64(t.LastStableOffset))
}

var errBadTxnIndex = errors.New("storage: bad transaction index entry")

// decodeTxnIndex parses the entries of a .txnindex file of the segment
// [base, next), stopping at the first that is malformed (short, unknown
// version, offsets outside the segment or going backwards, first after
// last). It returns the valid prefix and, if it stopped early, why.
func decodeTxnIndex(b []byte, base, next int64) ([]AbortedTxn, error) {
	out := make([]AbortedTxn, 0, min(len(b)/abortedTxnSize, 1<<16))
	prev := int64(-1)
	for ; len(b) > 0; b = b[abortedTxnSize:] {
		if len(b) < abortedTxnSize || binary.BigEndian.Uint16(b) != txnIndexVersion {
			return out, errBadTxnIndex
		}
		t := AbortedTxn{int64(binary.BigEndian.Uint64(b[2:])), int64(binary.BigEndian.Uint64(b[10:])),
			int64(binary.BigEndian.Uint64(b[18:])), int64(binary.BigEndian.Uint64(b[26:]))}
		if t.LastOffset < base || t.LastOffset >= next || t.LastOffset <= prev ||
			t.FirstOffset < 0 || t.FirstOffset > t.LastOffset || t.LastStableOffset < 0 || t.ProducerID < 0 {
			return out, errBadTxnIndex
		}
		prev = t.LastOffset
		out = append(out, t)
	}
	return out, nil
}

// abortedIndex is the in-memory list of a log's aborted transactions,
// published for lock-free lookups. Writers hold Log.mu. The slice only
// grows at its end in place (a reader of an older header never reads past
// its length); dropping entries at the end copies.
type abortedIndex struct {
	p atomic.Pointer[[]AbortedTxn] // Invariant: sorted by LastOffset, strictly increasing
}

func (x *abortedIndex) load() []AbortedTxn {
	if p := x.p.Load(); p != nil {
		return *p
	}
	return nil
}

func (x *abortedIndex) set(list []AbortedTxn) { x.p.Store(&list) }

// add appends t, whose marker follows every indexed one.
func (x *abortedIndex) add(t AbortedTxn) {
	list := x.load()
	if n := len(list); n > 0 && list[n-1].LastOffset >= t.LastOffset {
		return // replayed again (recovery after a crash mid-write): already there
	}
	x.set(append(list, t))
}

// cutFrom drops the entries whose marker is at or after offset.
func (x *abortedIndex) cutFrom(offset int64) {
	list := x.load()
	i := searchAborted(list, offset)
	if i < len(list) {
		x.set(append([]AbortedTxn(nil), list[:i]...))
	}
}

// dropBelow forgets the entries whose marker is below offset (the log
// start moved past them: no fetch can ask for them).
func (x *abortedIndex) dropBelow(offset int64) {
	list := x.load()
	if i := searchAborted(list, offset); i > 0 {
		x.set(list[i:])
	}
}

// searchAborted is the index of the first entry whose marker is at or
// after offset.
func searchAborted(list []AbortedTxn, offset int64) int {
	lo, hi := 0, len(list)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if list[mid].LastOffset < offset {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// AbortedTxns appends to dst the aborted transactions that a read of the
// offsets [from, to) overlaps: those whose marker is at or after from and
// that began before to, as Kafka's fetch collects them. It takes no lock
// and allocates only if dst must grow.
func (l *Log) AbortedTxns(dst []AbortedTxn, from, to int64) []AbortedTxn {
	list := l.aborted.load()
	for i := searchAborted(list, from); i < len(list); i++ {
		t := list[i]
		if t.FirstOffset < to {
			dst = append(dst, t)
		}
		if t.LastStableOffset >= to {
			break // every later one begins at or after to
		}
	}
	return dst
}

// appendTxnIndexFile adds t to the .txnindex file of s; the next flush of
// the log fsyncs it.
func appendTxnIndexFile(s *segment, t AbortedTxn) error {
	f, err := os.OpenFile(s.path(txnIndexSuffix), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	var b [abortedTxnSize]byte
	_, err = f.Write(t.appendTo(b[:0]))
	s.txnDirty.Store(true)
	return errors.Join(err, f.Close())
}

// writeTxnIndexFile replaces the .txnindex file of s with entries (removes
// it when there are none).
func writeTxnIndexFile(s *segment, entries []AbortedTxn) error {
	path := s.path(txnIndexSuffix)
	if len(entries) == 0 {
		if err := os.Remove(path); err != nil && !isNotExist(err) {
			return err
		}
		return nil
	}
	b := make([]byte, 0, len(entries)*abortedTxnSize)
	for _, t := range entries {
		b = t.appendTo(b)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return err
	}
	return syncPath(path)
}

// syncTxnIndex fsyncs the segment's .txnindex if an entry was added since
// its last fsync.
func (s *segment) syncTxnIndex() error {
	if !s.txnDirty.Swap(false) {
		return nil
	}
	err := syncPath(s.path(txnIndexSuffix))
	if err != nil && !isNotExist(err) {
		s.txnDirty.Store(true)
		return err
	}
	return nil
}

// readTxnIndex loads the entries of s's .txnindex whose marker is below
// trusted (the rest recovery rebuilds), given that the segment ends before
// next. A damaged or untrusted tail is cut from the file.
func readTxnIndex(s *segment, next, trusted int64) ([]AbortedTxn, error) {
	path := s.path(txnIndexSuffix)
	st, err := os.Stat(path)
	if isNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	limit := (s.size.Load()/minMarkerBatchSz + 1) * abortedTxnSize // a larger file cannot be valid
	if st.Size() > limit {
		return nil, writeTxnIndexFile(s, nil)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	entries, bad := decodeTxnIndex(b, s.base, next)
	keep := searchAborted(entries, trusted)
	if bad != nil || keep < len(entries) {
		return entries[:keep], writeTxnIndexFile(s, entries[:keep])
	}
	return entries, nil
}
