package netpoll

import (
	"fmt"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// parkInRuntime makes the uring and epoll loops sleep in the Go runtime's
// netpoller instead of a blocking syscall (see parker).
var parkInRuntime = os.Getenv("SLUICE_NET_PARK") != "0"

// parkCoop (experiment): the uring ring of a parking loop uses
// COOP_TASKRUN.
var parkCoop = os.Getenv("SLUICE_NET_PARK") == "coop"

// parker lets a loop sleep by parking its goroutine in the Go runtime's
// netpoller rather than blocking its thread in io_uring_enter or
// epoll_wait. The loop's own epoll or io_uring fd is pollable (readable
// when it holds events or completions), so a duplicate of it is handed to
// the runtime as a non-blocking os.File and the loop waits with
// RawConn.Read. The wait ends when that fd becomes readable, at the
// loop's next tick (a read deadline) or when another goroutine wakes the
// loop — which it does by setting the deadline in the past, a runtime
// call with no syscall.
//
// Why: a goroutine blocked in a syscall keeps the runtime's sysmon thread
// retaking its P and the loop coming back without one (BENCHMARKS.md,
// issue 16). A parked goroutine holds no P: when nothing else runs, the
// thread that ran the loop is the one that waits in the runtime's
// epoll_wait, and it runs the loop again when that returns.
//
// The loop goroutine is then not locked to its thread (a parked locked
// goroutine hands its P to another thread and back on every wake-up), so
// the uring ring cannot be SINGLE_ISSUER/DEFER_TASKRUN, nor COOP_TASKRUN
// (its task work goes without a wake-up to the thread that submitted,
// which may by then be an idle runtime thread asleep).
type parker struct {
	f      *os.File
	rc     syscall.RawConn
	fn     func(uintptr) bool // p.poll, bound once
	check  func() bool        // the loop's "is anything ready" test
	waited bool
}

// longAgo is a non-zero deadline in the past: it ends a wait at once.
var longAgo = time.Unix(1, 0)

func newParker(fd int) (*parker, error) {
	nfd, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("dup loop fd: %w", err)
	}
	if err := unix.SetNonblock(nfd, true); err != nil {
		unix.Close(nfd)
		return nil, err
	}
	f := os.NewFile(uintptr(nfd), "netpoll-loop")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	p := &parker{f: f, rc: rc}
	p.fn = p.poll
	// A fd the runtime poller refused (not pollable) would make Read
	// return at once: test it with a deadline already passed.
	p.f.SetReadDeadline(longAgo)
	p.waited = false
	p.check = func() bool { return false }
	if err := p.rc.Read(p.fn); err != os.ErrDeadlineExceeded {
		f.Close()
		return nil, fmt.Errorf("loop fd not pollable by the Go runtime (%v)", err)
	}
	return p, nil
}

// poll is RawConn.Read's callback: true ends the wait. It runs once before
// waiting (after the runtime has reset the fd's readiness, so an event
// that arrives after check is not lost) and once after.
func (p *parker) poll(uintptr) bool {
	if p.check() || p.waited {
		return true
	}
	p.waited = true
	return false
}

// arm sets when the next sleep ends at the latest (unix nanoseconds). It
// must come before the loop announces that it sleeps, so that a wake-up
// is never overwritten by it.
func (p *parker) arm(deadline int64) {
	p.f.SetReadDeadline(time.Unix(0, deadline))
}

// sleep parks until check reports work, the fd becomes readable, the
// deadline passes or wake is called.
func (p *parker) sleep(check func() bool) error {
	p.check = check
	p.waited = false
	err := p.rc.Read(p.fn)
	if err == os.ErrDeadlineExceeded {
		return nil
	}
	return err
}

// wake ends the current or next sleep (any goroutine).
func (p *parker) wake() { p.f.SetReadDeadline(longAgo) }

func (p *parker) close() { p.f.Close() }
