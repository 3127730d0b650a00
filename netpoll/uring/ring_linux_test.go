package uring

import (
	"bytes"
	"errors"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func newRing(t testing.TB, p Params) *Ring {
	t.Helper()
	r, err := New(p)
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) {
		t.Skipf("io_uring unavailable: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// waitCQE submits and waits for one completion, failing after 5s.
func waitCQE(t testing.TB, r *Ring) CQE {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	var c [1]CQE
	for r.Reap(c[:]) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no completion within 5s")
		}
		if _, err := r.SubmitAndWait(1, 100*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	return c[0]
}

// waitCQEs collects n completions keyed by user data.
func waitCQEs(t testing.TB, r *Ring, n int) map[uint64]CQE {
	t.Helper()
	got := map[uint64]CQE{}
	for len(got) < n {
		c := waitCQE(t, r)
		if _, dup := got[c.UserData]; dup {
			t.Fatalf("user data %d completed twice", c.UserData)
		}
		got[c.UserData] = c
	}
	return got
}

// tcpPair returns two connected TCP sockets as raw, blocking fds.
func tcpPair(t testing.TB) (a, b int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	return dupFd(t, c), dupFd(t, s)
}

func dupFd(t testing.TB, c net.Conn) int {
	t.Helper()
	f, err := c.(*net.TCPConn).File() // dup'd, blocking
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	fd, err := unix.Dup(int(f.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

func TestProbe(t *testing.T) {
	r := newRing(t, Params{Entries: 4})
	p, err := r.Probe()
	if err != nil {
		t.Fatal(err)
	}
	if !p.Supports(OpNop) {
		t.Fatal("NOP not supported?")
	}
	if m := p.Missing(OpNop, OpRecv, OpSend); len(m) != 0 {
		t.Fatalf("missing basic ops on this kernel: %v", m)
	}
	if p.Supports(255) {
		t.Fatal("op 255 reported as supported")
	}
}

// TestFullSubmissionQueue: GetSQE refuses past the ring size and works again
// once the queue is submitted; nothing is lost.
func TestFullSubmissionQueue(t *testing.T) {
	r := newRing(t, Params{Entries: 4})
	n := int(r.SQEntries())
	for i := 0; i < n; i++ {
		s := r.GetSQE()
		if s == nil {
			t.Fatalf("GetSQE nil after %d of %d", i, n)
		}
		s.PrepNop()
		s.UserData = uint64(i)
	}
	if s := r.GetSQE(); s != nil {
		t.Fatal("GetSQE returned an entry on a full queue")
	}
	if r.SQSpace() != 0 {
		t.Fatalf("SQSpace %d on a full queue", r.SQSpace())
	}
	if _, err := r.Submit(); err != nil {
		t.Fatal(err)
	}
	s := r.GetSQE()
	if s == nil {
		t.Fatal("GetSQE nil after submit")
	}
	s.PrepNop()
	s.UserData = uint64(n)
	waitCQEs(t, r, n+1)
}

// TestCQOverflow: completions beyond the CQ size wait on the kernel's
// overflow list (FeatNoDrop) and are all delivered once reaped.
func TestCQOverflow(t *testing.T) {
	r := newRing(t, Params{Entries: 4, CQEntries: 4})
	if r.Features()&FeatNoDrop == 0 {
		t.Skip("kernel drops overflowed completions (no IORING_FEAT_NODROP)")
	}
	const total = 64
	next := 0
	for next < total {
		s := r.GetSQE()
		if s == nil {
			if _, err := r.Submit(); errors.Is(err, ErrBusy) {
				break // the kernel pushes back: reap first
			} else if err != nil {
				t.Fatal(err)
			}
			continue
		}
		s.PrepNop()
		s.UserData = uint64(next)
		next++
	}
	r.Submit()
	if !r.CQOverflowed() && next > int(r.CQEntries()) {
		t.Fatalf("submitted %d NOPs into a CQ of %d without overflow", next, r.CQEntries())
	}
	got := waitCQEs(t, r, next)
	for i := 0; i < next; i++ {
		if c, ok := got[uint64(i)]; !ok || c.Res != 0 {
			t.Fatalf("nop %d: %+v present=%v", i, c, ok)
		}
	}
	if _, cq := r.Dropped(); cq != 0 {
		t.Fatalf("%d completions dropped", cq)
	}
	if r.CQOverflowed() {
		t.Fatal("overflow flag still set after reaping everything")
	}
}

func TestRecvShortRead(t *testing.T) {
	r := newRing(t, Params{Entries: 8})
	a, b := tcpPair(t)
	buf := make([]byte, 100)
	s := r.GetSQE()
	s.PrepRecv(b, buf, 0)
	s.UserData = 1
	r.Submit()
	if _, err := unix.Write(a, []byte("0123456789")); err != nil {
		t.Fatal(err)
	}
	c := waitCQE(t, r)
	if c.Res != 10 || string(buf[:10]) != "0123456789" {
		t.Fatalf("recv res %d buf %q", c.Res, buf[:max(c.Res, 0)])
	}
}

// TestPartialSend: a send bigger than the socket buffers, to a peer that
// reads slowly, may complete short; resubmitting the rest delivers every
// byte in order.
func TestPartialSend(t *testing.T) {
	r := newRing(t, Params{Entries: 8})
	a, b := tcpPair(t)
	unix.SetsockoptInt(a, unix.SOL_SOCKET, unix.SO_SNDBUF, 16<<10)
	unix.SetNonblock(a, true)                                  // the uring backend's sockets are non-blocking
	payload := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	got := make(chan []byte)
	go func() {
		buf := make([]byte, 0, len(payload))
		tmp := make([]byte, 8<<10)
		for len(buf) < len(payload) {
			n, err := unix.Read(b, tmp)
			if err != nil || n == 0 {
				break
			}
			buf = append(buf, tmp[:n]...)
		}
		got <- buf
	}()
	sent, partial := 0, 0
	for sent < len(payload) {
		s := r.GetSQE()
		s.PrepSend(a, payload[sent:], unix.MSG_NOSIGNAL)
		s.UserData = 7
		c := waitCQE(t, r)
		if c.Res <= 0 {
			t.Fatalf("send res %d", c.Res)
		}
		if int(c.Res) < len(payload)-sent {
			partial++
		}
		sent += int(c.Res)
	}
	t.Logf("%d partial sends", partial)
	if b := <-got; !bytes.Equal(b, payload) {
		t.Fatal("payload corrupted by partial sends")
	}
}

// TestPeerReset: a pending recv sees the peer's RST; a later send fails
// instead of hanging.
func TestPeerReset(t *testing.T) {
	r := newRing(t, Params{Entries: 8})
	a, b := tcpPair(t)
	buf := make([]byte, 16)
	s := r.GetSQE()
	s.PrepRecv(b, buf, 0)
	s.UserData = 1
	r.Submit()
	unix.SetsockoptLinger(a, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 0})
	unix.Close(a)
	c := waitCQE(t, r)
	if c.Res != -int32(unix.ECONNRESET) && c.Res != 0 {
		t.Fatalf("recv after RST: res %d", c.Res)
	}
	s = r.GetSQE()
	s.PrepSend(b, []byte("x"), unix.MSG_NOSIGNAL)
	s.UserData = 2
	c = waitCQE(t, r)
	if c.Res >= 0 {
		t.Fatalf("send to reset peer succeeded: %d", c.Res)
	}
}

// TestCancelOnClose: cancelling by fd ends a pending recv with ECANCELED,
// which is what a connection close must do before the fd is reused.
func TestCancelOnClose(t *testing.T) {
	r := newRing(t, Params{Entries: 8})
	_, b := tcpPair(t)
	buf := make([]byte, 16)
	s := r.GetSQE()
	s.PrepRecv(b, buf, 0)
	s.UserData = 1
	r.Submit()
	s = r.GetSQE()
	s.PrepCancelFD(b)
	s.UserData = 2
	got := waitCQEs(t, r, 2)
	if got[1].Res != -int32(unix.ECANCELED) {
		t.Fatalf("recv res %d, want ECANCELED", got[1].Res)
	}
	if got[2].Res != 1 {
		t.Fatalf("cancel res %d, want 1 request cancelled", got[2].Res)
	}
	// Cancelling by user data, nothing left: ENOENT.
	s = r.GetSQE()
	s.PrepCancel(1, 0)
	s.UserData = 3
	if c := waitCQE(t, r); c.Res != -int32(unix.ENOENT) {
		t.Fatalf("cancel of finished request: %d", c.Res)
	}
}

func TestMultishotAccept(t *testing.T) {
	r := newRing(t, Params{Entries: 8})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	lf, _ := ln.(*net.TCPListener).File()
	defer lf.Close()
	s := r.GetSQE()
	s.PrepAccept(int(lf.Fd()), unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, true)
	s.UserData = 9
	r.Submit()
	for i := 0; i < 3; i++ {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		cqe := waitCQE(t, r)
		if cqe.UserData != 9 || cqe.Res < 0 || !cqe.More() {
			t.Fatalf("accept %d: %+v", i, cqe)
		}
		unix.Close(int(cqe.Res))
	}
}

func TestBufRingRecv(t *testing.T) {
	r := newRing(t, Params{Entries: 8})
	br, err := r.NewBufRing(3, 2, 64)
	if err != nil {
		t.Skipf("provided buffer rings unavailable: %v", err)
	}
	defer br.Close()
	a, b := tcpPair(t)
	recv := func() CQE {
		s := r.GetSQE()
		s.PrepRecvSelect(b, br.Group(), 0, 0)
		s.UserData = 5
		return waitCQE(t, r)
	}
	var ids []uint16
	for i, msg := range []string{"first", "second"} {
		unix.Write(a, []byte(msg))
		c := recv()
		if c.Res != int32(len(msg)) || !c.HasBuffer() {
			t.Fatalf("recv %d: %+v", i, c)
		}
		if got := br.Buf(c.BufferID(), int(c.Res)); string(got) != msg {
			t.Fatalf("buffer %d holds %q want %q", c.BufferID(), got, msg)
		}
		ids = append(ids, c.BufferID())
	}
	unix.Write(a, []byte("third"))
	if c := recv(); c.Res != -int32(unix.ENOBUFS) {
		t.Fatalf("recv with no buffers: %+v, want ENOBUFS", c)
	}
	br.Recycle(ids[0])
	c := recv()
	if c.Res != 5 || c.BufferID() != ids[0] || string(br.Buf(c.BufferID(), 5)) != "third" {
		t.Fatalf("recv after recycle: %+v", c)
	}
}

// TestSpliceFileToSocket sends a file region file→pipe→socket with two
// linked splices, looping on partial progress, as the uring backend can.
func TestSpliceFileToSocket(t *testing.T) {
	r := newRing(t, Params{Entries: 8})
	p, _ := r.Probe()
	if !p.Supports(OpSplice) {
		t.Skip("no IORING_OP_SPLICE")
	}
	data := bytes.Repeat([]byte("sluice!!"), 40000) // 320 KB, > pipe size
	path := filepath.Join(t.TempDir(), "seg")
	os.WriteFile(path, data, 0o644)
	f, _ := os.Open(path)
	defer f.Close()
	var pfd [2]int
	if err := unix.Pipe2(pfd[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pfd[0])
	defer unix.Close(pfd[1])
	a, b := tcpPair(t)
	got := make(chan []byte)
	go func() {
		buf := make([]byte, 0, len(data)-1000)
		tmp := make([]byte, 64<<10)
		for len(buf) < len(data)-1000 {
			n, err := unix.Read(b, tmp)
			if err != nil || n == 0 {
				break
			}
			buf = append(buf, tmp[:n]...)
		}
		got <- buf
	}()
	off, left := int64(1000), int64(len(data)-1000)
	for left > 0 {
		// A short splice breaks a link (the next one is cancelled), so
		// the file half asks only for what surely fits the pipe: its 16
		// page-sized slots, less the misalignment of the first page.
		n := uint32(min(left, 16*4096-off%4096))
		s := r.GetSQE()
		s.PrepSplice(int(f.Fd()), off, pfd[1], -1, n, 0)
		s.Flags |= SQEIOLink
		s.UserData = 1
		s = r.GetSQE()
		s.PrepSplice(pfd[0], -1, a, -1, n, 0)
		s.UserData = 2
		res := waitCQEs(t, r, 2)
		in, out := res[1].Res, res[2].Res
		if in <= 0 || out <= 0 {
			t.Fatalf("splice results in=%d out=%d", in, out)
		}
		// The socket half can move less than the file half; drain the pipe.
		for out < in {
			s = r.GetSQE()
			s.PrepSplice(pfd[0], -1, a, -1, uint32(in-out), 0)
			s.UserData = 3
			c := waitCQE(t, r)
			if c.Res <= 0 {
				t.Fatalf("pipe drain: %d", c.Res)
			}
			out += c.Res
		}
		off += int64(in)
		left -= int64(in)
	}
	if b := <-got; !bytes.Equal(b, data[1000:]) {
		t.Fatalf("spliced %d bytes, mismatch", len(b))
	}
}

func TestTimeouts(t *testing.T) {
	r := newRing(t, Params{Entries: 8})
	ts := &unix.Timespec{Nsec: int64(20 * time.Millisecond)}
	start := time.Now()
	s := r.GetSQE()
	s.PrepTimeout(ts, 0, 0)
	s.UserData = 1
	if c := waitCQE(t, r); c.Res != -int32(unix.ETIME) {
		t.Fatalf("timeout res %d", c.Res)
	}
	if el := time.Since(start); el < 15*time.Millisecond {
		t.Fatalf("timeout fired after %v", el)
	}
	// A recv bounded by a linked timeout.
	_, b := tcpPair(t)
	buf := make([]byte, 8)
	s = r.GetSQE()
	s.PrepRecv(b, buf, 0)
	s.Flags |= SQEIOLink
	s.UserData = 2
	s = r.GetSQE()
	s.PrepLinkTimeout(ts, 0)
	s.UserData = 3
	got := waitCQEs(t, r, 2)
	if got[2].Res != -int32(unix.ECANCELED) || got[3].Res != -int32(unix.ETIME) {
		t.Fatalf("linked timeout: recv %d timeout %d", got[2].Res, got[3].Res)
	}
	// A bounded wait with nothing to complete returns (at the timeout, or
	// earlier when a signal interrupts it: the Go runtime's preemption
	// signals do, and SubmitAndWait reports that as an empty wait rather
	// than an error, so no lower bound holds) with nothing completed.
	if _, err := r.SubmitAndWait(1, 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if n := r.Ready(); n != 0 {
		t.Fatalf("empty wait completed %d entries", n)
	}
}

func TestPollAndRead(t *testing.T) {
	r := newRing(t, Params{Entries: 8})
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(efd)
	s := r.GetSQE()
	s.PrepPollAdd(efd, unix.POLLIN, false)
	s.UserData = 1
	buf := make([]byte, 8)
	s = r.GetSQE()
	s.PrepRead(efd, buf, 0)
	s.UserData = 2
	r.Submit()
	unix.Write(efd, []byte{1, 0, 0, 0, 0, 0, 0, 0})
	got := waitCQEs(t, r, 2)
	if got[1].Res&unix.POLLIN == 0 || got[2].Res != 8 {
		t.Fatalf("poll %d read %d", got[1].Res, got[2].Res)
	}
}

func TestRingClosedSocketErrors(t *testing.T) {
	r := newRing(t, Params{Entries: 8})
	s := r.GetSQE()
	s.PrepRecv(1<<20, make([]byte, 1), 0) // no such fd
	s.UserData = 1
	if c := waitCQE(t, r); c.Res != -int32(syscall.EBADF) {
		t.Fatalf("recv on bad fd: %d", c.Res)
	}
}

// FuzzRing drives a small ring with an arbitrary interleaving of NOP
// submissions and partial reaps (into a CQ small enough to overflow) and
// checks that every request completes exactly once.
func FuzzRing(f *testing.F) {
	f.Add([]byte{4, 4, 4, 4, 0x81, 4, 0x82})
	f.Add([]byte{8, 8, 8, 8, 8, 8, 0xff})
	f.Add([]byte{1, 0x81, 1, 0x81})
	f.Fuzz(func(t *testing.T, script []byte) {
		r := newRing(t, Params{Entries: 4, CQEntries: 8})
		var next uint64
		seen := map[uint64]bool{}
		cqes := make([]CQE, 16)
		reap := func(max int) {
			n := r.Reap(cqes[:min(max, len(cqes))])
			for _, c := range cqes[:n] {
				if seen[c.UserData] || c.UserData >= next {
					t.Fatalf("unexpected completion %d (next %d)", c.UserData, next)
				}
				seen[c.UserData] = true
			}
		}
		for _, op := range script {
			if op&0x80 != 0 {
				r.SubmitAndWait(0, 0)
				reap(int(op & 0x7f))
				continue
			}
			for i := 0; i < int(op%16); i++ {
				s := r.GetSQE()
				if s == nil {
					if _, err := r.Submit(); err != nil && !errors.Is(err, ErrBusy) {
						t.Fatal(err)
					}
					reap(len(cqes))
					continue
				}
				s.PrepNop()
				s.UserData = next
				next++
			}
		}
		deadline := time.Now().Add(5 * time.Second)
		for uint64(len(seen)) < next {
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d completions after 5s", len(seen), next)
			}
			if _, err := r.SubmitAndWait(1, 10*time.Millisecond); err != nil && !errors.Is(err, ErrBusy) {
				t.Fatal(err)
			}
			reap(len(cqes))
		}
	})
}
