package storage

import "runtime"

// Read returns the batches starting with the one containing offset, up to
// maxBytes on batch boundaries (the first batch whole even if larger, KIP-74),
// never past the high watermark when uncommitted==false (past it up to LEO when true),
// and within one segment. offset == limit gives an empty Region. In a
// compacted log an offset the cleaner removed reads from the next batch
// that remains.
//
// Read takes no lock and never blocks appends. It loads the published end
// (an offset with its byte position, see endMark) before the segment list,
// so every segment the end refers to is in the list it sees, and it never
// reads past that position, so a batch being written is never visible.
// Locating offset costs a binary search over segments, one over the sparse
// index (in memory), and a short scan of batch headers from the index hint,
// usually one pread.
//
// A Read that overlaps a truncation is retried, so it never fails because
// bytes were cut under it; see truncate.go for what a Region handed out
// before a truncation reads.
//
// A Region with Len > 0 keeps its segment's descriptor open until it is
// released (Region.Release): the caller, or whoever it hands the Region
// to, releases it exactly once when done with it.
func (l *Log) Read(offset int64, maxBytes int32, uncommitted bool) (Region, error) {
	if uncommitted {
		return l.read(offset, maxBytes, limitLogEnd)
	}
	return l.read(offset, maxBytes, limitHighWatermark)
}

// How far a read may go: the high watermark (consumers), the log end
// (followers), the last stable offset (read_committed consumers).
const (
	limitHighWatermark = iota
	limitLogEnd
	limitStable
)

func (l *Log) read(offset int64, maxBytes int32, kind int) (Region, error) {
	for {
		gen := l.truncGen.Load()
		r, err := l.readOnce(offset, maxBytes, kind)
		if now := l.truncGen.Load(); now == gen && (err == nil || now&1 == 0) {
			return r, err
		}
		r.Release()
		runtime.Gosched() // a truncation is under way: let it finish
	}
}

func (l *Log) readOnce(offset int64, maxBytes int32, kind int) (Region, error) {
	if l.closed.Load() {
		return Region{}, ErrClosed
	}
	leo := l.leo.load()
	limit := leo
	switch kind {
	case limitHighWatermark:
		limit = l.hw.load()
	case limitStable:
		limit = l.stableLimit()
	}
	if offset < l.logStart.Load() || offset > leo.off {
		return Region{}, ErrOffsetOutOfRange
	}
	if offset >= limit.off {
		return Region{}, nil
	}
	segs := l.segs.Load()
	i := segs.find(offset)
	if i < 0 {
		return Region{}, ErrOffsetOutOfRange // deleted by retention meanwhile
	}
	for {
		s := segs.at(i)
		end, endOff := s.size.Load(), int64(-1) // final: limit lies in a later segment
		if limit.base == s.base {
			end, endOff = limit.pos, limit.off
		} else if i+1 < len(segs.segs) {
			endOff = segs.at(i + 1).base // a sealed segment ends where the next begins
		}
		r, err := s.read(offset, end, endOff, int64(maxBytes))
		if err != nil || r.Len > 0 || limit.base == s.base || i+1 == len(segs.segs) {
			return r, err
		}
		// Nothing at or after offset in a segment wholly below the limit:
		// the cleaner removed the batches that held it, and the next
		// batch is in a later segment, as in Kafka.
		i++
		if offset = segs.at(i).base; offset >= limit.off {
			return Region{}, nil
		}
	}
}

// read returns the region from the batch holding offset up to maxBytes,
// cut at a batch boundary no later than end (where offset endOff starts, if
// known). In the common case of a consumer continuing where its last fetch
// stopped, the start is a remembered boundary and, if everything up to the
// limit fits in maxBytes, no file access at all is needed.
func (s *segment) read(offset, end, endOff, maxBytes int64) (Region, error) {
	f, err := s.file()
	if err != nil {
		return Region{}, err
	}
	defer s.fileDone()
	start, ok := s.boundary(offset)
	if !ok || start >= end {
		var err error
		if start, _, err = s.findBatch(f, offset, end); err == errBeyondEnd {
			return Region{}, nil // offset's batch is not wholly below the limit yet
		} else if err != nil {
			return Region{}, err
		}
	}
	stop, stopOff := end, endOff
	if start+maxBytes < end {
		// Cut at the last boundary within maxBytes, but keep the first
		// batch whole even if it is larger (KIP-74).
		var err error
		if stop, stopOff, err = s.boundaryBefore(f, start+maxBytes, start, end); err != nil {
			return Region{}, err
		}
	}
	if stopOff >= 0 {
		s.rememberBoundary(stopOff, stop)
	}
	if stop <= start {
		return Region{}, nil
	}
	return Region{File: f, Pos: start, Len: stop - start, NextOffset: stopOff, ref: s.lend()}, nil
}

// OffsetForTimestamp returns the first batch whose maxTimestamp >= ts: its
// base offset and that timestamp (ListOffsets by time). Kafka returns the
// offset of the first record with timestamp >= ts inside that batch; the
// batch base offset is at or before it, so a consumer starting there sees
// that record, with at most one batch of earlier ones first.
func (l *Log) OffsetForTimestamp(ts int64) (offset, timestamp int64, ok bool) {
	leo := l.leo.load()
	segs := l.segs.Load()
	start := l.logStart.Load()
	for _, s := range segs.segs {
		if s.maxTs.Load() < ts {
			continue
		}
		end := s.size.Load()
		if leo.base == s.base {
			end = leo.pos
		}
		off, bts, found, err := s.findTimestamp(ts, end)
		if err != nil || !found {
			continue
		}
		return max(off, start), bts, true
	}
	return -1, -1, false
}
