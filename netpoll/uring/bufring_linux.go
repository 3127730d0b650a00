package uring

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// bufEntry is struct io_uring_buf. The ring's tail overlays the resv field
// of entry 0 (bytes 14-15 of the ring).
type bufEntry struct {
	Addr uint64
	Len  uint32
	Bid  uint16
	Resv uint16
}

// BufRing is a provided-buffer ring (IORING_REGISTER_PBUF_RING, Linux 5.19):
// a group of equal buffers the kernel picks from when a buffer-select recv
// completes. The application hands buffers back with Recycle.
//
// Buffer memory and the ring itself are mmap'd, outside the Go heap, so the
// garbage collector never sees or moves them.
type BufRing struct {
	ring    *Ring
	group   uint16
	size    int
	mask    uint16
	entries []bufEntry // mapped ring, shared with the kernel
	ringMem []byte
	bufMem  []byte
	// Invariant: tail - (buffers the kernel consumed) <= len(entries).
	tail     uint16
	tailWord *uint32 // bytes 12-15: entry 0's Bid and the ring tail
}

// NewBufRing registers a ring of n buffers (a power of two, ≤ 32768) of
// size bytes each as buffer group group, all initially available.
func (r *Ring) NewBufRing(group uint16, n int, size int) (*BufRing, error) {
	if n <= 0 || n > 1<<15 || n&(n-1) != 0 {
		return nil, fmt.Errorf("uring: buffer ring size %d is not a power of two ≤ 32768", n)
	}
	ringMem, err := unix.Mmap(-1, 0, n*int(unsafe.Sizeof(bufEntry{})), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANONYMOUS|unix.MAP_PRIVATE)
	if err != nil {
		return nil, fmt.Errorf("uring: mmap buffer ring: %w", err)
	}
	bufMem, err := unix.Mmap(-1, 0, n*size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANONYMOUS|unix.MAP_PRIVATE)
	if err != nil {
		unix.Munmap(ringMem)
		return nil, fmt.Errorf("uring: mmap buffers: %w", err)
	}
	b := &BufRing{
		ring: r, group: group, size: size, mask: uint16(n - 1),
		entries: unsafe.Slice((*bufEntry)(unsafe.Pointer(&ringMem[0])), n),
		ringMem: ringMem, bufMem: bufMem,
		tailWord: (*uint32)(unsafe.Pointer(&ringMem[12])),
	}
	reg := &bufReg{RingAddr: uint64(uintptr(unsafe.Pointer(&ringMem[0]))), RingEntries: uint32(n), Bgid: group}
	if err := r.register(registerPbufRing, unsafe.Pointer(reg), 1); err != nil {
		b.unmap()
		return nil, fmt.Errorf("uring: register buffer ring: %w", err)
	}
	for i := 0; i < n; i++ {
		b.add(uint16(i))
	}
	b.publish()
	return b, nil
}

// Group is the buffer group id to pass to PrepRecvSelect.
func (b *BufRing) Group() uint16 { return b.group }

// Size is each buffer's length.
func (b *BufRing) Size() int { return b.size }

// Buf returns the first n bytes of buffer id. It stays valid until the
// buffer is recycled.
func (b *BufRing) Buf(id uint16, n int) []byte {
	off := int(id) * b.size
	return b.bufMem[off : off+n : off+b.size]
}

// Recycle hands buffer id back to the kernel.
func (b *BufRing) Recycle(id uint16) {
	b.add(id)
	b.publish()
}

func (b *BufRing) add(id uint16) {
	e := &b.entries[b.tail&b.mask]
	e.Addr = uint64(uintptr(unsafe.Pointer(&b.bufMem[int(id)*b.size])))
	e.Len = uint32(b.size)
	e.Bid = id
	b.tail++
}

// publish makes the added entries visible: a release store of the 16-bit
// tail. Go has no 16-bit atomics, so it stores the aligned 32-bit word that
// also holds entry 0's Bid, which only this side writes.
func (b *BufRing) publish() {
	var w [2]uint16
	w[0] = b.entries[0].Bid
	w[1] = b.tail
	atomic.StoreUint32(b.tailWord, *(*uint32)(unsafe.Pointer(&w)))
}

// Close unregisters the group and frees its memory. In-flight buffer-select
// requests must be finished or cancelled first.
func (b *BufRing) Close() error {
	reg := &bufReg{Bgid: b.group}
	err := b.ring.register(unregisterPbufRing, unsafe.Pointer(reg), 1)
	b.unmap()
	return err
}

func (b *BufRing) unmap() {
	unix.Munmap(b.bufMem)
	unix.Munmap(b.ringMem)
}
