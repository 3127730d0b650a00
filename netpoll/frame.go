package netpoll

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"sync"
)

// ErrFrameSize is returned for a size prefix outside [1, MaxFrame].
var ErrFrameSize = errors.New("netpoll: bad frame size")

// minClass and maxClass bound the pooled frame sizes (512 B … 16 MiB);
// bigger frames are allocated for the request and dropped after it, so a
// rare huge produce request never pins memory in the pool.
//
// 16 MiB and not 1 MiB: a producer writing many partitions sends requests
// of one batch (up to 1 MB) per partition, several MiB each; allocating
// each afresh cost a zeroed allocation, its page faults and GC work per
// request, and the garbage let the heap (RSS) double from 1 to 16
// partitions (BENCHMARKS.md, "Produce path"). A pooled buffer that stops
// being used is still dropped by sync.Pool within two GC cycles.
const (
	minClass = 9
	maxClass = 24
)

var framePools [maxClass + 1]sync.Pool

// getFrame returns a buffer of length n from its size class. The pool holds
// *[]byte so that putting a buffer back does not allocate a slice header.
func getFrame(n int) *[]byte {
	c := sizeClass(n)
	if c > maxClass {
		b := make([]byte, n)
		return &b
	}
	if p, _ := framePools[c].Get().(*[]byte); p != nil {
		*p = (*p)[:n]
		return p
	}
	b := make([]byte, n, 1<<c)
	return &b
}

// putFrame returns a buffer from getFrame to its pool.
func putFrame(p *[]byte) {
	c := sizeClass(cap(*p))
	if c > maxClass || cap(*p) != 1<<c {
		return
	}
	framePools[c].Put(p)
}

func sizeClass(n int) int {
	if n <= 1<<minClass {
		return minClass
	}
	return bits.Len(uint(n - 1))
}

// readFrame reads one size-prefixed frame into a pooled buffer. hdr is a
// 4-byte scratch buffer owned by the caller (so reading allocates nothing).
func readFrame(r io.Reader, hdr []byte, max int32) (*[]byte, error) {
	if _, err := io.ReadFull(r, hdr[:4]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(hdr))
	if err := checkFrameSize(n, max); err != nil {
		return nil, err
	}
	buf := getFrame(int(n))
	if _, err := io.ReadFull(r, *buf); err != nil {
		putFrame(buf)
		return nil, err
	}
	return buf, nil
}

func checkFrameSize(n, max int32) error {
	if n <= 0 || n > max {
		return fmt.Errorf("%w: %d (max %d)", ErrFrameSize, n, max)
	}
	return nil
}

// frameReader assembles frames from bytes that arrive in chunks of any
// size: the read path of the event-loop backends, which read whatever the
// socket holds instead of exactly one frame. The size prefix is checked
// before the frame's buffer is taken from the pool.
type frameReader struct {
	max   int32
	hdr   [4]byte
	nhdr  int     // bytes of hdr received
	frame *[]byte // frame being filled; nil until its size prefix is complete
	nbody int     // bytes of *frame received
}

// feed consumes bytes of b up to the end of the current frame. It returns
// how many it consumed and, when the frame is complete, the frame (which
// the caller owns and returns with putFrame). Bytes after a complete frame
// are left for the next call.
func (r *frameReader) feed(b []byte) (n int, frame *[]byte, err error) {
	if r.frame == nil {
		n = copy(r.hdr[r.nhdr:], b)
		r.nhdr += n
		if r.nhdr < len(r.hdr) {
			return n, nil, nil
		}
		size := int32(binary.BigEndian.Uint32(r.hdr[:]))
		if err := checkFrameSize(size, r.max); err != nil {
			return n, nil, err
		}
		r.frame = getFrame(int(size))
		r.nbody = 0
		b = b[n:]
	}
	k := copy((*r.frame)[r.nbody:], b)
	r.nbody += k
	return n + k, r.complete(), nil
}

// bodySpace is the unfilled rest of the frame being read, so that a large
// body can be read from the socket straight into it; nil between frames.
func (r *frameReader) bodySpace() []byte {
	if r.frame == nil {
		return nil
	}
	return (*r.frame)[r.nbody:]
}

// filled records n bytes read into bodySpace and returns the frame if that
// completed it.
func (r *frameReader) filled(n int) *[]byte {
	r.nbody += n
	return r.complete()
}

func (r *frameReader) complete() *[]byte {
	if r.nbody < len(*r.frame) {
		return nil
	}
	f := r.frame
	r.frame, r.nhdr, r.nbody = nil, 0, 0
	return f
}

// reset drops a partly read frame (the connection is closing).
func (r *frameReader) reset() {
	if r.frame != nil {
		putFrame(r.frame)
	}
	r.frame, r.nhdr, r.nbody = nil, 0, 0
}

// space is where the next bytes of the stream belong: the rest of the size
// prefix, or the rest of the frame's body. TLS decrypts straight into it,
// so plaintext past the current frame stays in the TLS connection.
func (r *frameReader) space() []byte {
	if r.frame == nil {
		return r.hdr[r.nhdr:]
	}
	return (*r.frame)[r.nbody:]
}

// got records n bytes written into space; it returns the frame when that
// completed it.
func (r *frameReader) got(n int) (*[]byte, error) {
	if r.frame != nil {
		return r.filled(n), nil
	}
	r.nhdr += n
	if r.nhdr < len(r.hdr) {
		return nil, nil
	}
	size := int32(binary.BigEndian.Uint32(r.hdr[:]))
	if err := checkFrameSize(size, r.max); err != nil {
		return nil, err
	}
	r.frame = getFrame(int(size))
	r.nbody = 0
	return nil, nil
}
