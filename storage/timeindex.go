package storage

import (
	"encoding/binary"
	"sync/atomic"
)

// timeEntrySize is the size of one .timeindex entry: an 8-byte timestamp and
// a 4-byte offset relative to the segment's base offset, big-endian.
const timeEntrySize = 12

// timeIndex is a sparse timestamp index over buf, a memory-mapped .timeindex
// file. An entry (ts, rel) says that the largest timestamp among the batches
// up to and including the one with last offset base+rel is ts. Entries are
// added only when the timestamp grows, so they are strictly increasing in ts.
// Publication works as in offsetIndex.
type timeIndex struct {
	buf []byte

	// n is the number of published entries.
	// Invariant: entries [0, n) have strictly increasing ts and
	// non-decreasing rel.
	n atomic.Int64

	// pending counts written entries; writer only. Invariant: n <= pending.
	pending int64
}

func (x *timeIndex) cap() int64 { return int64(len(x.buf)) / timeEntrySize }

func (x *timeIndex) entry(i int64) (ts int64, rel uint32) {
	e := x.buf[i*timeEntrySize : i*timeEntrySize+timeEntrySize]
	return int64(binary.BigEndian.Uint64(e)), binary.BigEndian.Uint32(e[8:])
}

// full reports whether k more entries would not fit. One slot is held back
// for the entry written when the segment is sealed (as Kafka's TimeIndex
// does), so the final largest timestamp always has room.
func (x *timeIndex) full(k int64) bool { return x.pending+k > x.cap()-1 }

// lastTs is the newest written timestamp, or -1 when empty; writer only.
func (x *timeIndex) lastTs() int64 {
	if x.pending == 0 {
		return -1
	}
	ts, _ := x.entry(x.pending - 1)
	return ts
}

// maybeAdd writes (ts, rel) if ts is larger than the last entry, as Kafka
// does, and reports whether it did.
func (x *timeIndex) maybeAdd(ts int64, rel uint32) bool {
	if ts <= x.lastTs() || x.pending >= x.cap() {
		return false
	}
	e := x.buf[x.pending*timeEntrySize:]
	binary.BigEndian.PutUint64(e, uint64(ts))
	binary.BigEndian.PutUint32(e[8:], rel)
	x.pending++
	return true
}

func (x *timeIndex) publish() { x.n.Store(x.pending) }
func (x *timeIndex) discard() { x.pending = x.n.Load() }
func (x *timeIndex) truncate(i int64) {
	x.n.Store(i)
	x.pending = i
}

// lookup returns the relative offset of the last entry with timestamp <= ts,
// and false when every entry is newer (the search then starts at the segment
// start).
func (x *timeIndex) lookup(ts int64) (uint32, bool) {
	lo, hi := int64(0), x.n.Load()
	for lo < hi {
		mid := int64(uint64(lo+hi) >> 1)
		if t, _ := x.entry(mid); t <= ts {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo == 0 {
		return 0, false
	}
	_, rel := x.entry(lo - 1)
	return rel, true
}

// last returns the newest published entry.
func (x *timeIndex) last() (ts int64, rel uint32, ok bool) {
	n := x.n.Load()
	if n == 0 {
		return -1, 0, false
	}
	ts, rel = x.entry(n - 1)
	return ts, rel, true
}

// validPrefix counts leading entries that are strictly increasing in
// timestamp, non-decreasing in offset and not beyond maxRel. A zeroed entry
// after the first stops it.
func (x *timeIndex) validPrefix(maxRel uint32) int64 {
	var prevTs int64
	var prevRel uint32
	for i := int64(0); i < x.cap(); i++ {
		ts, rel := x.entry(i)
		if rel > maxRel || (ts == 0 && rel == 0) || (i > 0 && (ts <= prevTs || rel < prevRel)) {
			return i
		}
		prevTs, prevRel = ts, rel
	}
	return x.cap()
}
