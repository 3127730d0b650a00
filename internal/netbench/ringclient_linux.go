package main

import (
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluice-broker/sluice/netpoll/uring"
)

// ringClient drives many connections from one thread with io_uring, each
// in a closed loop (send a request, read its response, repeat), so that
// the load generator costs little CPU next to the broker it measures: one
// io_uring_enter per batch for all connections. Every backend is measured
// with this same client.
type ringClient struct {
	ring  *uring.Ring
	conns []*rconn
	req   []byte
	count int64
	err   error
}

type rconn struct {
	fd  int
	buf []byte
	got int
}

const respBuf = 4 << 10

// dialAll opens n blocking connections to addr (in parallel) and returns
// their fds.
func dialAll(addr string, n int) ([]int, error) {
	fds := make([]int, n)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	next := make(chan int, n)
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	for w := 0; w < min(n, 64); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				fd, err := dialFd(addr)
				if err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					fd = -1
				}
				fds[i] = fd
			}
		}()
	}
	wg.Wait()
	if first != nil {
		closeFds(fds)
		return nil, first
	}
	return fds, nil
}

func dialFd(addr string) (int, error) {
	ta, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		return -1, err
	}
	sa := &unix.SockaddrInet4{Port: ta.Port}
	copy(sa.Addr[:], ta.IP.To4())
	for attempt := 0; ; attempt++ {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return -1, err
		}
		if err = unix.Connect(fd, sa); err == nil {
			unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
			return fd, nil
		}
		unix.Close(fd)
		if attempt == 5 {
			return -1, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// resetFds closes with RST (SO_LINGER 0), leaving no TIME_WAIT behind.
func resetFds(fds []int) {
	for _, fd := range fds {
		if fd >= 0 {
			unix.SetsockoptLinger(fd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 0})
			unix.Close(fd)
		}
	}
	time.Sleep(500 * time.Millisecond) // let the broker see the resets
}

func closeFds(fds []int) {
	for _, fd := range fds {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
}

// warmConns does one round trip of req on each fd (the broker then holds
// an engine session per connection).
func warmConns(fds []int, req []byte) error {
	rc, err := newRingClient(fds, req)
	if err != nil {
		return err
	}
	defer rc.ring.Close()
	for _, c := range rc.conns {
		rc.post(c)
	}
	for rc.count < int64(len(fds)) && rc.err == nil {
		rc.step(true)
	}
	return rc.err
}

func newRingClient(fds []int, req []byte) (*ringClient, error) {
	entries := uint32(4096)
	r, err := uring.New(uring.Params{Entries: entries, CQEntries: 4 * entries})
	if err != nil {
		return nil, err
	}
	rc := &ringClient{ring: r, req: req}
	maxFd := 0
	for _, fd := range fds {
		rc.conns = append(rc.conns, &rconn{fd: fd, buf: make([]byte, respBuf)})
		maxFd = max(maxFd, fd)
	}
	fdConn = make([]*rconn, maxFd+1)
	for _, c := range rc.conns {
		fdConn[c.fd] = c
	}
	return rc, nil
}

func (rc *ringClient) sqe() *uring.SQE {
	for {
		if s := rc.ring.GetSQE(); s != nil {
			return s
		}
		rc.ring.Submit()
	}
}

// post sends the request and queues the read of its response, linked so
// both go in one submission.
func (rc *ringClient) post(c *rconn) {
	s := rc.sqe()
	s.PrepSend(c.fd, rc.req, unix.MSG_NOSIGNAL)
	s.Flags |= uring.SQEIOLink
	s.UserData = uint64(c.fd) << 1
	s = rc.sqe()
	s.PrepRecv(c.fd, c.buf, 0)
	s.UserData = uint64(c.fd)<<1 | 1
}

var cqes = make([]uring.CQE, 8192)

// step submits, waits for completions and handles them; counting says
// whether completed responses count (false during warm-up).
func (rc *ringClient) step(stop bool) {
	rc.ring.SubmitAndWait(1, 100*time.Millisecond)
	for {
		n := rc.ring.Reap(cqes)
		for i := range cqes[:n] {
			rc.complete(&cqes[i], stop)
		}
		if n < len(cqes) {
			return
		}
	}
}

var fdConn []*rconn // by fd, built by newRingClient

func (rc *ringClient) complete(cqe *uring.CQE, stop bool) {
	fd := int(cqe.UserData >> 1)
	c := fdConn[fd]
	if cqe.UserData&1 == 0 { // send
		if cqe.Res != int32(len(rc.req)) && rc.err == nil && cqe.Res != -int32(unix.ECANCELED) {
			rc.err = fmt.Errorf("send: %d", cqe.Res)
		}
		return
	}
	if cqe.Res <= 0 {
		if rc.err == nil {
			rc.err = fmt.Errorf("recv: %d", cqe.Res)
		}
		return
	}
	c.got += int(cqe.Res)
	if c.got >= 4 {
		need := 4 + int(binary.BigEndian.Uint32(c.buf))
		if need > len(c.buf) {
			rc.err = fmt.Errorf("response of %d bytes exceeds the client buffer", need)
			return
		}
		if c.got >= need {
			c.got = 0
			rc.count++
			if !stop {
				rc.post(c)
			}
			return
		}
	}
	s := rc.sqe()
	s.PrepRecv(c.fd, c.buf[c.got:], 0)
	s.UserData = uint64(c.fd)<<1 | 1
}

// rate runs the closed loops for warm-up + d and returns responses per
// second over d and the broker's CPU time per response.
func rate(b *brokerProc, fds []int, req []byte, warm, d time.Duration) (float64, time.Duration, error) {
	rc, err := newRingClient(fds, req)
	if err != nil {
		return 0, 0, err
	}
	defer rc.ring.Close()
	for _, c := range rc.conns {
		rc.post(c)
	}
	start := time.Now()
	for time.Since(start) < warm && rc.err == nil {
		rc.step(false)
	}
	base, t0, cpu0, self0 := rc.count, time.Now(), b.cpu(), selfCPU()
	for time.Since(t0) < d && rc.err == nil {
		rc.step(false)
	}
	done, el, cpu := rc.count-base, time.Since(t0), b.cpu()-cpu0
	lastClientCPU = (selfCPU() - self0) / time.Duration(max(done, 1))
	// Let in-flight requests finish so the connections can be reused.
	inflight := int64(len(fds))
	target := rc.count + inflight
	drainUntil := time.Now().Add(10 * time.Second)
	for rc.count < target && rc.err == nil && time.Now().Before(drainUntil) {
		rc.step(true)
	}
	if rc.err != nil {
		return 0, 0, rc.err
	}
	return float64(done) / el.Seconds(), cpu / time.Duration(max(done, 1)), nil
}

// lastClientCPU is the load generator's own CPU time per response in the
// last rate run: the share of the machine the measurement itself costs.
var lastClientCPU time.Duration

func selfCPU() time.Duration {
	var ru unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
