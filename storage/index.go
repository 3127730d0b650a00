package storage

import (
	"encoding/binary"
	"sync/atomic"
)

// offsetEntrySize is the size of one .index entry: a 4-byte offset relative
// to the segment's base offset and a 4-byte position in the .log file, both
// big-endian (Kafka's layout, so kafka-dump-log reads our files).
const offsetEntrySize = 8

// offsetIndex is a sparse offset index over buf, which is a memory-mapped
// .index file (or heap memory in benchmarks). An entry (rel, pos) says that
// the batch starting at pos has last offset base+rel: Kafka indexes a batch by
// its last offset, and kafka-dump-log checks exactly that.
//
// One writer (holding Log.mu) appends; any number of readers search at the
// same time without locks: the writer fills the slot first and publishes it
// by storing n, so readers only look at [0, n).
type offsetIndex struct {
	buf []byte // len(buf) is the capacity in bytes, a multiple of offsetEntrySize

	// n is the number of published entries.
	// Invariant: entries [0, n) have strictly increasing rel and pos.
	n atomic.Int64

	// pending is the number of written entries, published or not. Only the
	// writer touches it. Invariant: n <= pending <= cap().
	pending int64
}

func (x *offsetIndex) cap() int64 { return int64(len(x.buf)) / offsetEntrySize }

func (x *offsetIndex) entry(i int64) (rel, pos uint32) {
	e := x.buf[i*offsetEntrySize : i*offsetEntrySize+offsetEntrySize]
	return binary.BigEndian.Uint32(e), binary.BigEndian.Uint32(e[4:])
}

// full reports whether k more entries would not fit.
func (x *offsetIndex) full(k int64) bool { return x.pending+k > x.cap() }

// add writes an entry after the pending ones; publish makes them visible.
func (x *offsetIndex) add(rel, pos uint32) {
	e := x.buf[x.pending*offsetEntrySize:]
	binary.BigEndian.PutUint32(e, rel)
	binary.BigEndian.PutUint32(e[4:], pos)
	x.pending++
}

func (x *offsetIndex) publish() { x.n.Store(x.pending) }

// discard forgets unpublished entries (after a failed write).
func (x *offsetIndex) discard() { x.pending = x.n.Load() }

// truncate drops published entries from i on; writer only.
func (x *offsetIndex) truncate(i int64) {
	x.n.Store(i)
	x.pending = i
}

// lookup returns the position of the last indexed batch whose last offset is
// <= rel, or 0 (the segment start) when there is none. The scan for rel then
// starts there: the batch holding rel is at or after that position.
func (x *offsetIndex) lookup(rel uint32) uint32 {
	lo, hi := int64(0), x.n.Load() // find the first entry with entry.rel > rel
	for lo < hi {
		mid := int64(uint64(lo+hi) >> 1)
		if r, _ := x.entry(mid); r <= rel {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo == 0 {
		return 0
	}
	_, pos := x.entry(lo - 1)
	return pos
}

// lookupPos returns the largest indexed batch position <= pos, or 0.
func (x *offsetIndex) lookupPos(pos uint32) uint32 {
	lo, hi := int64(0), x.n.Load()
	for lo < hi {
		mid := int64(uint64(lo+hi) >> 1)
		if _, p := x.entry(mid); p <= pos {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo == 0 {
		return 0
	}
	_, p := x.entry(lo - 1)
	return p
}

// validPrefix counts the leading entries of a possibly preallocated or
// damaged index that are sane: increasing, and pointing below logSize. The
// zero tail of a preallocated file stops it (no real entry has position 0,
// since the first batch is never indexed).
func (x *offsetIndex) validPrefix(logSize int64) int64 {
	var prevRel, prevPos uint32
	for i := int64(0); i < x.cap(); i++ {
		rel, pos := x.entry(i)
		if pos == 0 || int64(pos) >= logSize || (i > 0 && (rel <= prevRel || pos <= prevPos)) {
			return i
		}
		prevRel, prevPos = rel, pos
	}
	return x.cap()
}
