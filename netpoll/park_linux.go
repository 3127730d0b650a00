package netpoll

import (
	"fmt"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// epollParks makes the epoll loops sleep parked in the Go runtime's
// netpoller (parker) rather than blocked in epoll_wait. It is the default;
// SLUICE_NET_PARK=0 in the environment gives the blocking loop back (for
// A/B measurements).
var epollParks = os.Getenv("SLUICE_NET_PARK") != "0"

// parker lets a loop sleep by parking its goroutine in the Go runtime's
// netpoller rather than blocking its thread in a syscall. The loop's
// epoll fd is pollable (readable while it holds events), so a duplicate of
// it is handed to the runtime as a non-blocking os.File and the loop waits
// with RawConn.Read. The wait ends when that fd becomes readable, at the
// loop's next tick (a read deadline) or when another goroutine wakes the
// loop — which it does by moving the deadline into the past, a runtime
// call with no syscall (the blocking loop writes an eventfd).
//
// Why: a goroutine blocked in a syscall keeps the runtime's sysmon
// retaking its P and the loop coming back without one (BENCHMARKS.md,
// issue 16). A parked goroutine holds no P: when nothing else runs, the
// thread that ran the loop is the one that waits in the runtime's
// epoll_wait and runs the loop again when it returns. The loop goroutine
// is not locked to its thread (a locked goroutine that parks hands its P
// to another thread and back on every wake-up).
//
// Measured (BENCHMARKS.md, issue 16, "Fourth pass"), 20 MB/s, broker
// pinned, broker-side Produce: p50 13 → 9 µs, p90 34–35 → 19–20, p99
// 48–49 → 34–41 (at load 6–8 p99 did not move), p99.9 unchanged; context
// switches per request 1.43–1.48 → 0.93; CPU per GB of raw produce the
// same or 7–12% lower, of raw fetch the same. The uring backend does not
// park: a ring used from any thread cannot be SINGLE_ISSUER/DEFER_TASKRUN,
// and without them its raw fetch cost more CPU per GB and its p99 was
// worse in one run of two; it keeps its locked thread and blocking
// io_uring_enter.
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
