package storage

import (
	"errors"
	"io"
	"os"
	"sync"

	"github.com/sluice-broker/sluice/record"
)

// scanBufSize is the read size of a header scan. The sparse index puts an
// entry every index.interval.bytes (4 KiB) of log, so a scan that starts at
// an index entry usually finds its batch within one or two reads.
const scanBufSize = 8192

var scanBufs = sync.Pool{New: func() any { return new([scanBufSize]byte) }}

// headerReader reads batch headers of one segment file with as few preads
// as possible: each read fetches scanBufSize bytes, which usually hold many
// headers when batches are small.
type headerReader struct {
	f     *os.File
	buf   *[scanBufSize]byte
	start int64 // file position of buf[0]
	n     int   // valid bytes in buf
}

func newHeaderReader(f *os.File) headerReader {
	return headerReader{f: f, buf: scanBufs.Get().(*[scanBufSize]byte)}
}

func (r *headerReader) close() {
	scanBufs.Put(r.buf)
	r.buf = nil
}

// header returns the record.HeaderLen bytes at pos; end is the committed end of
// the file, beyond which nothing is read.
func (r *headerReader) header(pos, end int64) ([]byte, error) {
	if pos >= r.start && pos+record.HeaderLen <= r.start+int64(r.n) {
		off := pos - r.start
		return r.buf[off : off+record.HeaderLen], nil
	}
	want := min(int64(scanBufSize), end-pos)
	if want < record.HeaderLen {
		return nil, errBatchTruncated
	}
	n, err := r.f.ReadAt(r.buf[:want], pos)
	if int64(n) < want {
		if err == nil || err == io.EOF {
			err = errBatchTruncated
		}
		r.n = 0
		return nil, err
	}
	r.start, r.n = pos, n
	return r.buf[:record.HeaderLen], nil
}

// next returns the position after the batch at pos, checking that the size
// is sane so a damaged length cannot send a scan backwards or loop.
func nextBatch(h []byte, pos, end int64) (int64, error) {
	size := record.Size(h)
	if size < record.HeaderLen || pos+size > end {
		return 0, errBatchTruncated
	}
	return pos + size, nil
}

// findBatch returns the position of the batch holding offset and the
// position just after it, scanning headers forward from the index hint (or
// from a remembered batch boundary). end is the committed end of the
// segment for this read.
// f is the segment's descriptor, held by the caller.
func (s *segment) findBatch(f *os.File, offset, end int64) (pos, next int64, err error) {
	pos = s.indexLookup(offset)
	if p, ok := s.boundary(offset); ok && p < end {
		pos = p
	}
	r := newHeaderReader(f)
	defer r.close()
	for pos < end {
		h, err := r.header(pos, end)
		if err != nil {
			return 0, 0, err
		}
		if next, err = nextBatch(h, pos, end); err != nil {
			return 0, 0, err
		}
		if record.LastOffset(h) >= offset {
			return pos, next, nil
		}
		pos = next
	}
	return 0, 0, errBeyondEnd
}

// findBatchOpen is findBatch for a caller that does not hold the
// descriptor.
func (s *segment) findBatchOpen(offset, end int64) (pos, next int64, err error) {
	f, err := s.file()
	if err != nil {
		return 0, 0, err
	}
	defer s.fileDone()
	return s.findBatch(f, offset, end)
}

// boundaryHints is the number of remembered batch boundaries per segment.
const boundaryHints = 8

// rememberBoundary records that the batch at pos starts with offset. Reads
// remember where they stopped, because a consumer's next fetch starts
// exactly there; the next Read then needs no header scan to find its start.
func (s *segment) rememberBoundary(offset, pos int64) {
	rel := offset - s.base
	if rel < 0 || rel > maxRel || pos > maxRel {
		return
	}
	v := uint64(rel)<<32 | uint64(pos)
	if h := &s.hints[rel%boundaryHints]; h.Load() != v {
		h.Store(v)
	}
}

// boundary returns the position of the batch starting with offset if it is
// remembered. A hint is one atomic word holding (relative offset, position),
// so it is never torn; the zero word says that offset base starts at 0,
// which is true of every segment.
func (s *segment) boundary(offset int64) (int64, bool) {
	rel := offset - s.base
	if rel < 0 || rel > maxRel {
		return 0, false
	}
	v := s.hints[rel%boundaryHints].Load()
	if int64(v>>32) != rel {
		return 0, false
	}
	return int64(v & maxRel), true
}

// errBeyondEnd says the batch holding an offset does not start before the
// end the search was limited to (e.g. the high watermark is inside it).
var errBeyondEnd = errors.New("storage: offset beyond read limit")

// boundaryBefore returns the largest batch boundary <= target that is
// after the batch at first (which is kept whole, KIP-74), and the offset
// that starts there. The index gives a boundary close below target, so only
// a short stretch is scanned; when that boundary is past first, the first
// batch is known to end by then and its header need not be read.
func (s *segment) boundaryBefore(f *os.File, target, first, end int64) (pos, offset int64, err error) {
	r := newHeaderReader(f)
	defer r.close()
	pos = s.indexLookupPos(target)
	if pos <= first {
		h, err := r.header(first, end)
		if err != nil {
			return 0, 0, err
		}
		if pos, err = nextBatch(h, first, end); err != nil || pos > target {
			return pos, record.LastOffset(h) + 1, err
		}
	}
	for pos < end {
		h, err := r.header(pos, end)
		if err != nil {
			return 0, 0, err
		}
		next, err := nextBatch(h, pos, end)
		if err != nil {
			return 0, 0, err
		}
		if next > target {
			return pos, record.BaseOffset(h), nil
		}
		pos = next
	}
	return end, -1, nil
}

// indexLookup is the position to start scanning for offset.
func (s *segment) indexLookup(offset int64) int64 {
	rel := offset - s.base
	if rel <= 0 || !s.acquire() {
		return 0
	}
	defer s.release()
	return int64(s.ix.off.lookup(uint32(min(rel, maxRel)), uint32(min(s.lastOff.Load()-s.base+1, maxRel))))
}

// indexLookupPos is the largest indexed batch position <= pos.
func (s *segment) indexLookupPos(pos int64) int64 {
	if pos <= 0 || !s.acquire() {
		return 0
	}
	defer s.release()
	return int64(s.ix.off.lookupPos(uint32(min(pos, maxRel)), uint32(min(s.size.Load(), maxRel))))
}

// timeLookup is the offset to start the scan for the first batch with
// maxTimestamp >= ts.
func (s *segment) timeLookup(ts int64) int64 {
	if !s.acquire() {
		return s.base
	}
	defer s.release()
	rel, ok := s.ix.tim.lookup(ts)
	if !ok {
		return s.base
	}
	return s.base + int64(rel)
}

// findTimestamp returns the first batch in the segment with maxTimestamp >=
// ts, scanning from the time index hint up to end.
func (s *segment) findTimestamp(ts, end int64) (offset, batchTs int64, ok bool, err error) {
	pos := s.indexLookup(s.timeLookup(ts))
	f, err := s.file()
	if err != nil {
		return 0, 0, false, err
	}
	defer s.fileDone()
	r := newHeaderReader(f)
	defer r.close()
	for pos < end {
		h, err := r.header(pos, end)
		if err != nil {
			return 0, 0, false, err
		}
		next, err := nextBatch(h, pos, end)
		if err != nil {
			return 0, 0, false, err
		}
		if t := record.MaxTimestamp(h); t >= ts {
			return record.BaseOffset(h), t, true, nil
		}
		pos = next
	}
	return 0, 0, false, nil
}
