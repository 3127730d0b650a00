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

// minClass and maxClass bound the pooled frame sizes (512 B … 1 MiB);
// bigger frames are allocated for the request and dropped after it, so a
// rare huge produce request never pins memory in the pool.
const (
	minClass = 9
	maxClass = 20
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
