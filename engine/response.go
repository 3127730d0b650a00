package engine

import (
	"encoding/binary"
	"os"
	"sync"
	"time"

	"github.com/sluice-broker/sluice/storage"
)

// Part is one piece of a response frame: Bytes, or when Bytes is nil, a
// region of a segment file that the network layer sends with sendfile/splice.
// Bytes may be shared by many responses at once (a cached Metadata body):
// the network layer reads them and never writes to them (a TLS layer
// encrypts into its own buffer).
type Part struct {
	Bytes  []byte
	Region storage.Region
}

// Response is a complete response frame, size prefix included, as a list of
// parts. A nil *Response passed to the callback means "no response" (acks=0
// produce). Close asks the network layer to close the connection after
// writing the parts (Kafka's answer to a request it cannot parse).
//
// Invariant: Size == sum of len(Bytes) or Region.Len over Parts.
type Response struct {
	Parts []Part
	Size  int64
	Close bool
	// Mute asks the network layer to serve the connection's next request
	// no sooner than this after the response (a client quota's throttle,
	// quota.go).
	Mute time.Duration

	buf []byte // pooled backing array of the in-memory parts

	// metrics, when set (Request.finish), receive the broker-side
	// latency of the request, of API key, once the response is written.
	metrics *Metrics
	key     int16
}

var responsePool = sync.Pool{New: func() any {
	return &Response{buf: make([]byte, 0, 4096), Parts: make([]Part, 0, 4)}
}}

// maxPooledBuf keeps one huge response from pinning memory in the pool.
const maxPooledBuf = 1 << 20

func newResponse() *Response {
	r := responsePool.Get().(*Response)
	r.buf = r.buf[:0]
	r.Parts = r.Parts[:0]
	r.Size = 0
	r.Close = false
	r.Mute = 0
	r.metrics = nil
	return r
}

// Release releases the response's file regions (storage.Region.Release:
// their descriptors may close now) and returns its buffers for reuse. The
// network layer calls it exactly once, when every part has been written or
// the connection is gone; no part may be used after it.
func (r *Response) Release() {
	if r == nil {
		return
	}
	for i := range r.Parts {
		r.Parts[i].Region.Release()
	}
	if cap(r.buf) > maxPooledBuf {
		return
	}
	clear(r.Parts)
	responsePool.Put(r)
}

// NumParts, Part and the methods below let the network layer walk a
// response without importing this package.
func (r *Response) NumParts() int { return len(r.Parts) }

// PartAt returns part i as either a byte slice or a file region.
func (r *Response) PartAt(i int) (b []byte, f *os.File, off, n int64) {
	p := &r.Parts[i]
	if p.Bytes != nil {
		return p.Bytes, nil, 0, int64(len(p.Bytes))
	}
	return nil, p.Region.File, p.Region.Pos, p.Region.Len
}

// Written records the request's broker-side latency (netpoll.TimedReply).
func (r *Response) Written(sinceFrame time.Duration) {
	if r.metrics != nil {
		r.metrics.requestWritten(r.key, sinceFrame)
	}
}

// ShouldClose reports whether the connection must close after this response.
func (r *Response) ShouldClose() bool { return r.Close }

// frameWriter builds a response whose in-memory bytes live in one buffer and
// whose file regions are spliced between them. Parts that point into buf are
// recorded as offsets until finish, because buf may grow (and move) while
// the frame is built.
type frameWriter struct {
	r      *Response
	marks  []partMark
	cursor int // start in r.buf of the bytes not yet turned into a part
}

type partMark struct {
	start, end int // byte range in r.buf, or end < 0 for a region or ext
	region     storage.Region
	ext        []byte // bytes kept elsewhere that no one writes to again
}

func (w *frameWriter) begin(r *Response) {
	w.r = r
	w.marks = w.marks[:0]
	r.buf = append(r.buf, 0, 0, 0, 0) // size prefix, set in finish
	w.cursor = 0
}

// region appends a file region after the bytes written so far. The
// response takes a reference of its own to it (finish), released with the
// response; the caller still releases reg.
func (w *frameWriter) region(reg storage.Region) {
	if reg.Len == 0 {
		return
	}
	w.flushBytes()
	w.marks = append(w.marks, partMark{end: -1, region: reg})
}

// bytes appends b, which must stay unchanged until the response is
// released, as a part of its own instead of copying it (a cached body).
func (w *frameWriter) bytes(b []byte) {
	if len(b) == 0 {
		return
	}
	w.flushBytes()
	w.marks = append(w.marks, partMark{end: -1, ext: b})
}

func (w *frameWriter) flushBytes() {
	if len(w.r.buf) > w.cursor {
		w.marks = append(w.marks, partMark{start: w.cursor, end: len(w.r.buf)})
		w.cursor = len(w.r.buf)
	}
}

// finish fixes the size prefix and materialises the parts.
func (w *frameWriter) finish() *Response {
	w.flushBytes()
	r := w.r
	var size int64
	for _, m := range w.marks {
		if m.ext != nil {
			r.Parts = append(r.Parts, Part{Bytes: m.ext})
			size += int64(len(m.ext))
			continue
		}
		if m.end < 0 {
			r.Parts = append(r.Parts, Part{Region: m.region.Retain()})
			size += m.region.Len
			continue
		}
		r.Parts = append(r.Parts, Part{Bytes: r.buf[m.start:m.end]})
		size += int64(m.end - m.start)
	}
	binary.BigEndian.PutUint32(r.buf[:4], uint32(size-4))
	r.Size = size
	return r
}
