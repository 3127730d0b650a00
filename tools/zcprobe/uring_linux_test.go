package zcprobe

import (
	"encoding/binary"
	"io"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ioUringSend sends b on the socket fd with one IORING_OP_SEND through a
// throwaway ring, and returns the completion's result. A test helper: just
// enough io_uring to prove the probe sees operations that issue no syscall.
func ioUringSend(fd int, b []byte) (int32, error) {
	var p [120]byte // struct io_uring_params
	ringFD, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, 4, uintptr(unsafe.Pointer(&p[0])), 0)
	if errno != 0 {
		return 0, errno
	}
	defer unix.Close(int(ringFD))
	u32 := func(off int) uint32 { return binary.LittleEndian.Uint32(p[off:]) }
	sqEntries, cqEntries := u32(0), u32(4)
	// io_sqring_offsets at 40, io_cqring_offsets at 80.
	sqTail, sqMask, sqArray := u32(44), u32(48), u32(64)
	cqHead, cqTail, cqMask, cqes := u32(80), u32(84), u32(88), u32(100)

	sq, err := unix.Mmap(int(ringFD), 0, int(sqArray+sqEntries*4), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return 0, err
	}
	defer unix.Munmap(sq)
	cq, err := unix.Mmap(int(ringFD), 0x8000000, int(cqes+cqEntries*16), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return 0, err
	}
	defer unix.Munmap(cq)
	sqes, err := unix.Mmap(int(ringFD), 0x10000000, int(sqEntries*64), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return 0, err
	}
	defer unix.Munmap(sqes)

	const opSendCode = 26 // IORING_OP_SEND
	sqe := sqes[0:64]
	clear(sqe)
	sqe[0] = opSendCode
	binary.LittleEndian.PutUint32(sqe[4:], uint32(fd))
	binary.LittleEndian.PutUint64(sqe[16:], uint64(uintptr(unsafe.Pointer(&b[0]))))
	binary.LittleEndian.PutUint32(sqe[24:], uint32(len(b)))
	binary.LittleEndian.PutUint64(sqe[32:], 42) // user_data

	tail := (*uint32)(unsafe.Pointer(&sq[sqTail]))
	t := atomic.LoadUint32(tail)
	idx := t & *(*uint32)(unsafe.Pointer(&sq[sqMask]))
	*(*uint32)(unsafe.Pointer(&sq[sqArray+4*idx])) = 0
	atomic.StoreUint32(tail, t+1)

	const enterGetEvents = 1
	if _, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, ringFD, 1, 1, enterGetEvents, 0, 0); errno != 0 {
		return 0, errno
	}
	head := atomic.LoadUint32((*uint32)(unsafe.Pointer(&cq[cqHead])))
	if head == atomic.LoadUint32((*uint32)(unsafe.Pointer(&cq[cqTail]))) {
		return 0, io.ErrNoProgress
	}
	cqe := cq[cqes+16*(head&*(*uint32)(unsafe.Pointer(&cq[cqMask]))):]
	res := int32(binary.LittleEndian.Uint32(cqe[8:]))
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&cq[cqHead])), head+1)
	return res, nil
}

// TestCountsIOURingSends: a send submitted through io_uring makes no
// syscall the write-family tracepoints see; the io_uring tracepoints must
// count it as copied.
func TestCountsIOURingSends(t *testing.T) {
	p, err := Attach(os.Getpid())
	if err != nil {
		t.Skipf("BPF unavailable here: %v", err)
	}
	defer p.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan int64, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- -1
			return
		}
		n, _ := io.Copy(io.Discard, c)
		c.Close()
		got <- n
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := conn.(*net.TCPConn).SyscallConn()
	before, _ := p.Counts()
	const size = 64 << 10
	var res int32
	var serr error
	if err := raw.Control(func(fd uintptr) { res, serr = ioUringSend(int(fd), make([]byte, size)) }); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	if serr != nil {
		t.Skipf("io_uring unavailable here: %v", serr)
	}
	if res <= 0 {
		t.Skipf("io_uring send failed: %d", res)
	}
	<-got
	after, err := p.Counts()
	if err != nil {
		t.Fatal(err)
	}
	c := after.Sub(before)
	t.Logf("sent %d through io_uring; counts %+v", res, c)
	if c.URingSendBytes != uint64(res) {
		t.Errorf("io_uring send bytes %d, want %d", c.URingSendBytes, res)
	}
	if c.Method == MethodSyscalls && c.CopiedBytes() < uint64(res) {
		t.Errorf("copied bytes %d do not include the io_uring send", c.CopiedBytes())
	}
}
