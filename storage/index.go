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
// starts there: the batch holding rel is at or after that position. span is
// the segment's offset span so far (an interpolation hint; any value works).
func (x *offsetIndex) lookup(rel, span uint32) uint32 {
	i := searchLE(x.n.Load(), rel, span, x.relAt)
	if i < 0 {
		return 0
	}
	_, pos := x.entry(i)
	return pos
}

// lookupPos returns the largest indexed batch position <= pos, or 0. size
// is the segment's size (the interpolation hint).
func (x *offsetIndex) lookupPos(pos, size uint32) uint32 {
	i := searchLE(x.n.Load(), pos, size, x.posAt)
	if i < 0 {
		return 0
	}
	_, p := x.entry(i)
	return p
}

func (x *offsetIndex) relAt(i int64) uint32 {
	return binary.BigEndian.Uint32(x.buf[i*offsetEntrySize:])
}

func (x *offsetIndex) posAt(i int64) uint32 {
	return binary.BigEndian.Uint32(x.buf[i*offsetEntrySize+4:])
}

// searchLE returns the last i in [0, n) with key(i) <= target, or -1; keys
// must be strictly increasing and roughly spread over [0, span).
//
// Offsets and positions in a segment grow nearly linearly with the entry
// number (batches are of similar size), so it starts at the interpolated
// entry target*n/span and gallops from there, then binary-searches the
// bracket. On such data it touches one or two cache lines of the index
// instead of the ~log2(n) of a plain binary search, which matters because a
// lookup in a large partition is bound by cache and TLB misses. On skewed
// data the gallop keeps it within about twice a binary search's probes.
func searchLE(n int64, target, span uint32, key func(int64) uint32) int64 {
	guess := n - 1
	if span > target {
		guess = int64(uint64(target) * uint64(n) / uint64(span))
	}
	return gallopLE(n, target, guess, key)
}

// gallopLE is searchLE from a given first guess in [0, n).
func gallopLE[K int64 | uint32](n int64, target K, guess int64, key func(int64) K) int64 {
	if n == 0 {
		return -1
	}
	guess = min(max(guess, 0), n-1)
	// Invariant from here: key(lo) <= target < key(hi), with key(-1) = -inf
	// and key(n) = +inf.
	lo, hi := int64(-1), n
	if key(guess) <= target {
		lo = guess
		for step := int64(1); lo+step < hi; step *= 2 {
			if key(lo+step) > target {
				hi = lo + step
				break
			}
			lo += step
		}
	} else {
		hi = guess
		for step := int64(1); hi-step > lo; step *= 2 {
			if key(hi-step) <= target {
				lo = hi - step
				break
			}
			hi -= step
		}
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if key(mid) <= target {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
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
