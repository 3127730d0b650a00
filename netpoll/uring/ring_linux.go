package uring

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Params configure New.
type Params struct {
	// Entries is the SQ size; the kernel rounds it up to a power of two.
	Entries uint32
	// CQEntries sizes the CQ (0: the kernel's default, twice Entries).
	CQEntries uint32
	// Flags are IORING_SETUP_* bits. SetupCQSize is added when CQEntries
	// is set.
	Flags uint32
}

// ErrBusy is returned by submission when the kernel refuses new work until
// completions are reaped (EBUSY/EAGAIN: the CQ and its overflow list are
// full). Reap, then submit again.
var ErrBusy = errors.New("uring: completion queue busy; reap before submitting")

// Ring is one io_uring instance with its mapped queues.
type Ring struct {
	fd       int
	features uint32
	flags    uint32

	ringMem []byte // SQ ring (and CQ ring with FeatSingleMmap)
	cqMem   []byte // CQ ring when mapped separately, else nil
	sqeMem  []byte

	sq struct {
		head, tail, flags, dropped *uint32 // in ringMem
		mask, entries              uint32
		sqes                       []SQE
		// Invariant: *head <= submitted <= local and local-*head <= entries
		// (all modulo 2^32). local counts SQEs handed out by GetSQE;
		// submitted is the last tail published to the kernel.
		local uint32
	}
	cq struct {
		head, tail, overflow *uint32
		mask, entries        uint32
		cqes                 []CQE
	}
	arg geteventsArg  // reused for EXT_ARG waits (heap, not stack)
	ts  unix.Timespec // reused wait timeout
}

// New creates a ring. It fails with the kernel's errno when io_uring is
// unavailable (ENOSYS: too old; EPERM: io_uring_disabled or seccomp).
func New(p Params) (*Ring, error) {
	var kp params
	kp.Flags = p.Flags
	if p.CQEntries != 0 {
		kp.Flags |= SetupCQSize
		kp.CQEntries = p.CQEntries
	}
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(p.Entries), uintptr(unsafe.Pointer(&kp)), 0)
	if errno != 0 {
		return nil, fmt.Errorf("io_uring_setup: %w", errno)
	}
	r := &Ring{fd: int(fd), features: kp.Features, flags: kp.Flags}
	if err := r.mmap(&kp); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

func (r *Ring) mmap(kp *params) error {
	sqSize := int(kp.SQOff.Array + kp.SQEntries*4)
	cqSize := int(kp.CQOff.Cqes + kp.CQEntries*uint32(unsafe.Sizeof(CQE{})))
	single := kp.Features&FeatSingleMmap != 0
	if single && cqSize > sqSize {
		sqSize = cqSize
	}
	var err error
	r.ringMem, err = unix.Mmap(r.fd, offSQRing, sqSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return fmt.Errorf("mmap sq ring: %w", err)
	}
	cqMem := r.ringMem
	if !single {
		if r.cqMem, err = unix.Mmap(r.fd, offCQRing, cqSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
			return fmt.Errorf("mmap cq ring: %w", err)
		}
		cqMem = r.cqMem
	}
	sqeSize := int(kp.SQEntries) * int(unsafe.Sizeof(SQE{}))
	if r.sqeMem, err = unix.Mmap(r.fd, offSQEs, sqeSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
		return fmt.Errorf("mmap sqes: %w", err)
	}

	o := &kp.SQOff
	r.sq.head = u32At(r.ringMem, o.Head)
	r.sq.tail = u32At(r.ringMem, o.Tail)
	r.sq.flags = u32At(r.ringMem, o.Flags)
	r.sq.dropped = u32At(r.ringMem, o.Dropped)
	r.sq.mask = *u32At(r.ringMem, o.RingMask)
	r.sq.entries = *u32At(r.ringMem, o.RingEntries)
	r.sq.sqes = unsafe.Slice((*SQE)(unsafe.Pointer(&r.sqeMem[0])), r.sq.entries)
	array := unsafe.Slice(u32At(r.ringMem, o.Array), r.sq.entries)
	for i := range array {
		array[i] = uint32(i)
	}
	r.sq.local = atomic.LoadUint32(r.sq.tail)

	c := &kp.CQOff
	r.cq.head = u32At(cqMem, c.Head)
	r.cq.tail = u32At(cqMem, c.Tail)
	r.cq.overflow = u32At(cqMem, c.Overflow)
	r.cq.mask = *u32At(cqMem, c.RingMask)
	r.cq.entries = *u32At(cqMem, c.RingEntries)
	r.cq.cqes = unsafe.Slice((*CQE)(unsafe.Pointer(&cqMem[c.Cqes])), r.cq.entries)
	return nil
}

func u32At(mem []byte, off uint32) *uint32 { return (*uint32)(unsafe.Pointer(&mem[off])) }

// Close unmaps the queues and closes the ring; in-flight requests are
// cancelled by the kernel.
func (r *Ring) Close() error {
	for _, m := range [][]byte{r.sqeMem, r.cqMem, r.ringMem} {
		if m != nil {
			unix.Munmap(m)
		}
	}
	r.sqeMem, r.cqMem, r.ringMem = nil, nil, nil
	if r.fd < 0 {
		return nil
	}
	err := unix.Close(r.fd)
	r.fd = -1
	return err
}

// Fd is the ring's file descriptor.
func (r *Ring) Fd() int { return r.fd }

// Features are the IORING_FEAT_* bits the kernel reported.
func (r *Ring) Features() uint32 { return r.features }

// Flags are the setup flags the ring was created with.
func (r *Ring) Flags() uint32 { return r.flags }

// SQEntries and CQEntries are the queue sizes the kernel chose.
func (r *Ring) SQEntries() uint32 { return r.sq.entries }

// CQEntries is the completion queue size.
func (r *Ring) CQEntries() uint32 { return r.cq.entries }

// GetSQE returns a zeroed SQE to fill, or nil when the submission queue is
// full (submit, then try again).
func (r *Ring) GetSQE() *SQE {
	head := atomic.LoadUint32(r.sq.head) // acquire: slots the kernel has consumed
	if r.sq.local-head >= r.sq.entries {
		return nil
	}
	sqe := &r.sq.sqes[r.sq.local&r.sq.mask]
	*sqe = SQE{}
	r.sq.local++
	return sqe
}

// SQSpace is how many SQEs GetSQE can still hand out before a submit.
func (r *Ring) SQSpace() int {
	return int(r.sq.entries - (r.sq.local - atomic.LoadUint32(r.sq.head)))
}

// flushSQ publishes the SQEs handed out so far and returns how many the
// kernel has yet to consume.
func (r *Ring) flushSQ() uint32 {
	atomic.StoreUint32(r.sq.tail, r.sq.local) // release: SQE contents first
	return r.sq.local - atomic.LoadUint32(r.sq.head)
}

// Submit hands the queued SQEs to the kernel without waiting.
func (r *Ring) Submit() (int, error) {
	n := r.flushSQ()
	var flags uint32
	if r.needEnterForCQ() {
		flags |= enterGetEvents
	}
	if n == 0 && flags == 0 {
		return 0, nil
	}
	return r.enter(n, 0, flags, nil, 0)
}

// SubmitAndWait submits the queued SQEs and waits until at least want
// completions are ready or timeout passes (timeout < 0: no limit). A
// timeout, a signal or a spurious wake-up return normally; callers reap
// whatever is ready.
func (r *Ring) SubmitAndWait(want uint32, timeout time.Duration) (int, error) {
	n := r.flushSQ()
	flags := uint32(enterGetEvents)
	var argp unsafe.Pointer
	var argsz uintptr
	if timeout >= 0 {
		if r.features&FeatExtArg == 0 {
			return 0, errors.New("uring: timed wait needs IORING_FEAT_EXT_ARG (Linux 5.11)")
		}
		r.ts = unix.NsecToTimespec(int64(timeout))
		r.arg = geteventsArg{Ts: uint64(uintptr(unsafe.Pointer(&r.ts)))}
		flags |= enterExtArg
		argp, argsz = unsafe.Pointer(&r.arg), unsafe.Sizeof(r.arg)
	}
	done, err := r.enter(n, want, flags, argp, argsz)
	if errors.Is(err, unix.ETIME) || errors.Is(err, unix.EINTR) {
		return done, nil
	}
	return done, err
}

// needEnterForCQ reports whether completions are held back in the kernel:
// overflowed CQEs (NODROP keeps them on a list until GETEVENTS flushes
// them) or deferred task work (COOP/DEFER_TASKRUN).
func (r *Ring) needEnterForCQ() bool {
	f := atomic.LoadUint32(r.sq.flags)
	return f&(sqCQOverflow|sqTaskrun) != 0 || r.flags&SetupDeferTaskrun != 0
}

// enter calls io_uring_enter, retrying EINTR on pure submissions.
func (r *Ring) enter(submit, want, flags uint32, argp unsafe.Pointer, sz uintptr) (int, error) {
	for {
		n, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), uintptr(submit), uintptr(want), uintptr(flags), uintptr(argp), sz)
		switch errno {
		case 0:
			return int(n), nil
		case unix.EINTR:
			if flags&enterGetEvents != 0 {
				return 0, errno
			}
			continue
		case unix.EBUSY, unix.EAGAIN:
			return 0, ErrBusy
		default:
			return 0, fmt.Errorf("io_uring_enter: %w", errno)
		}
	}
}

// Ready is how many completions can be reaped without entering the kernel.
func (r *Ring) Ready() int {
	return int(atomic.LoadUint32(r.cq.tail) - atomic.LoadUint32(r.cq.head))
}

// Reap copies up to len(dst) ready completions into dst, frees their
// slots and returns how many it copied. It never blocks or enters the
// kernel.
func (r *Ring) Reap(dst []CQE) int {
	head := atomic.LoadUint32(r.cq.head)
	tail := atomic.LoadUint32(r.cq.tail) // acquire: CQE contents are visible
	n := 0
	for ; head != tail && n < len(dst); n++ {
		dst[n] = r.cq.cqes[head&r.cq.mask]
		head++
	}
	atomic.StoreUint32(r.cq.head, head) // release: slots may be reused
	return n
}

// CQOverflowed reports whether completions are waiting on the kernel's
// overflow list (the CQ was full when they completed).
func (r *Ring) CQOverflowed() bool { return atomic.LoadUint32(r.sq.flags)&sqCQOverflow != 0 }

// Dropped counts SQEs the kernel rejected as invalid (sq.dropped) and
// completions lost to overflow on kernels without FeatNoDrop.
func (r *Ring) Dropped() (sq, cq uint32) {
	return atomic.LoadUint32(r.sq.dropped), atomic.LoadUint32(r.cq.overflow)
}

// register calls io_uring_register.
func (r *Ring) register(op uint32, arg unsafe.Pointer, nr uint32) error {
	_, _, errno := unix.Syscall6(unix.SYS_IO_URING_REGISTER, uintptr(r.fd), uintptr(op), uintptr(arg), uintptr(nr), 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}
