package uring

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// The Prep methods fill an SQE from GetSQE (which zeroes it) for one
// operation. The caller sets UserData (and link flags) afterwards. Every
// pointer argument must stay valid, on the heap and reachable until the
// operation's completion (see the package doc).

func addrOf(b []byte) uint64 {
	if len(b) == 0 {
		return 0
	}
	return uint64(uintptr(unsafe.Pointer(&b[0])))
}

// PrepNop completes immediately with res 0.
func (s *SQE) PrepNop() { s.Opcode = OpNop }

// PrepAccept accepts on a listening socket; flags are accept4 flags
// (SOCK_NONBLOCK, SOCK_CLOEXEC). A multishot accept (Linux 5.19) posts one
// CQE per connection, each with CQEFMore while it stays armed. The peer
// address is not collected (a multishot accept would overwrite one buffer);
// use getpeername.
func (s *SQE) PrepAccept(fd int, flags uint32, multishot bool) {
	s.Opcode = OpAccept
	s.Fd = int32(fd)
	s.OpFlags = flags
	if multishot {
		s.IOPrio = AcceptMultishot
	}
}

// PrepRecv receives into b (recv(2) with msgFlags).
func (s *SQE) PrepRecv(fd int, b []byte, msgFlags uint32) {
	s.Opcode = OpRecv
	s.Fd = int32(fd)
	s.Addr = addrOf(b)
	s.Len = uint32(len(b))
	s.OpFlags = msgFlags
}

// PrepRecvSelect receives into a buffer the kernel picks from provided
// buffer group (a BufRing) at completion time, up to max bytes (0: the
// buffer's size). The CQE names the buffer (BufferID) or fails with ENOBUFS
// when the group is empty; no memory is tied up while the socket is idle.
func (s *SQE) PrepRecvSelect(fd int, group uint16, max uint32, msgFlags uint32) {
	s.Opcode = OpRecv
	s.Fd = int32(fd)
	s.Len = max
	s.OpFlags = msgFlags
	s.Flags |= SQEBufferSelect
	s.BufIndex = group
}

// PrepSend sends b (send(2) with msgFlags).
func (s *SQE) PrepSend(fd int, b []byte, msgFlags uint32) {
	s.Opcode = OpSend
	s.Fd = int32(fd)
	s.Addr = addrOf(b)
	s.Len = uint32(len(b))
	s.OpFlags = msgFlags
}

// PrepSendZC sends b without copying it into the kernel (Linux 6.0). It
// posts two CQEs: the result (with CQEFMore), then a notification (CQEFNotif)
// once the kernel no longer reads b; b must stay untouched until then.
func (s *SQE) PrepSendZC(fd int, b []byte, msgFlags uint32) {
	s.PrepSend(fd, b, msgFlags)
	s.Opcode = OpSendZC
}

// PrepSendmsg sends the iovecs of msg (sendmsg(2)).
func (s *SQE) PrepSendmsg(fd int, msg *unix.Msghdr, msgFlags uint32) {
	s.Opcode = OpSendmsg
	s.Fd = int32(fd)
	s.Addr = uint64(uintptr(unsafe.Pointer(msg)))
	s.Len = 1
	s.OpFlags = msgFlags
}

// PrepWritev writes iov (writev(2)); off -1 uses the file position, which
// is what sockets and pipes need.
func (s *SQE) PrepWritev(fd int, iov []unix.Iovec, off int64) {
	s.Opcode = OpWritev
	s.Fd = int32(fd)
	if len(iov) > 0 {
		s.Addr = uint64(uintptr(unsafe.Pointer(&iov[0])))
	}
	s.Len = uint32(len(iov))
	s.Off = uint64(off)
}

// PrepSplice moves n bytes from fdIn to fdOut, one of which must be a pipe
// (splice(2)). An offset of -1 means "none" (required for the pipe side).
// Chain file→pipe and pipe→socket with SQEIOLink to send a file region
// without it entering user space; each half may move fewer bytes than
// asked, so callers loop on the results.
func (s *SQE) PrepSplice(fdIn int, offIn int64, fdOut int, offOut int64, n uint32, flags uint32) {
	s.Opcode = OpSplice
	s.SpliceFdIn = int32(fdIn)
	s.Addr = spliceOff(offIn)
	s.Fd = int32(fdOut)
	s.Off = spliceOff(offOut)
	s.Len = n
	s.OpFlags = flags
}

func spliceOff(off int64) uint64 {
	if off < 0 {
		return spliceOffsetNone
	}
	return uint64(off)
}

// PrepPollAdd completes when fd has any of events (POLLIN, POLLOUT, …)
// ready; a multishot poll stays armed and posts a CQE per readiness.
func (s *SQE) PrepPollAdd(fd int, events uint32, multishot bool) {
	s.Opcode = OpPollAdd
	s.Fd = int32(fd)
	s.OpFlags = events
	if multishot {
		s.Len = PollAddMulti
	}
}

// PrepRead reads into b at off (-1: the file position).
func (s *SQE) PrepRead(fd int, b []byte, off int64) {
	s.Opcode = OpRead
	s.Fd = int32(fd)
	s.Addr = addrOf(b)
	s.Len = uint32(len(b))
	s.Off = uint64(off)
}

// PrepTimeout completes with -ETIME after ts, or with 0 once count other
// completions have been posted (count 0: time only). flags may hold
// TimeoutAbs.
func (s *SQE) PrepTimeout(ts *unix.Timespec, count uint32, flags uint32) {
	s.Opcode = OpTimeout
	s.Addr = uint64(uintptr(unsafe.Pointer(ts)))
	s.Len = 1
	s.Off = uint64(count)
	s.OpFlags = flags
}

// PrepLinkTimeout bounds the SQE before it (which must carry SQEIOLink):
// if that one has not completed after ts it is cancelled (-ECANCELED) and
// this one completes with -ETIME; otherwise this one gets -ECANCELED.
func (s *SQE) PrepLinkTimeout(ts *unix.Timespec, flags uint32) {
	s.Opcode = OpLinkTimeout
	s.Addr = uint64(uintptr(unsafe.Pointer(ts)))
	s.Len = 1
	s.OpFlags = flags
}

// PrepCancel cancels the in-flight request whose user data is target. Its
// own result is 0 (found), -ENOENT (not found) or -EALREADY (running).
func (s *SQE) PrepCancel(target uint64, flags uint32) {
	s.Opcode = OpAsyncCancel
	s.Addr = target
	s.OpFlags = flags
}

// PrepCancelFD cancels every in-flight request on fd (Linux 5.19); the
// result is the number cancelled or -ENOENT.
func (s *SQE) PrepCancelFD(fd int) {
	s.Opcode = OpAsyncCancel
	s.Fd = int32(fd)
	s.OpFlags = CancelFD | CancelAll
}

// PrepClose closes fd.
func (s *SQE) PrepClose(fd int) {
	s.Opcode = OpClose
	s.Fd = int32(fd)
}

// PrepShutdown shuts a socket down (how: unix.SHUT_RD, SHUT_WR, SHUT_RDWR).
func (s *SQE) PrepShutdown(fd int, how int) {
	s.Opcode = OpShutdown
	s.Fd = int32(fd)
	s.Len = uint32(how)
}
