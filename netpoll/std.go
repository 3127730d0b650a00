package netpoll

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// StdServer serves connections with one goroutine each on Go's net package.
type StdServer struct {
	h    Handler
	opts Options

	mu struct {
		sync.Mutex
		listeners map[net.Listener]struct{}
		conns     map[*stdConn]struct{}
		closing   bool
	}
	wg sync.WaitGroup // one per live connection goroutine
}

// NewStd returns a server that hands frames to h.
func NewStd(h Handler, opts Options) *StdServer {
	opts.defaults()
	s := &StdServer{h: h, opts: opts}
	s.mu.listeners = map[net.Listener]struct{}{}
	s.mu.conns = map[*stdConn]struct{}{}
	return s
}

// Serve accepts on ln until Shutdown; it returns nil after Shutdown.
func (s *StdServer) Serve(ln net.Listener) error { return s.ServeListener(ln, ListenerOptions{}) }

// ServeListener is Serve for a named, possibly TLS, listener.
func (s *StdServer) ServeListener(ln net.Listener, lo ListenerOptions) error {
	if !s.track(ln) {
		ln.Close()
		return nil
	}
	if lo.TLS != nil {
		return serveTLS(ln, lo, &s.opts, s.isClosing, func(nc net.Conn, tc *tls.Conn, _ *memConn) {
			s.startConn(nc, lo.Name, tc)
		})
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			if s.isClosing() {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(5 * time.Millisecond)
				continue
			}
			return err
		}
		s.startConn(c, lo.Name, nil)
	}
}

func (s *StdServer) track(ln net.Listener) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closing {
		return false
	}
	s.mu.listeners[ln] = struct{}{}
	return true
}

func (s *StdServer) isClosing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.closing
}

// startConn serves one connection; tc is its TLS connection (handshake
// done) on a TLS listener.
func (s *StdServer) startConn(nc net.Conn, listener string, tc *tls.Conn) {
	tcp, ok := nc.(*net.TCPConn)
	if !ok {
		nc.Close()
		return
	}
	_ = tcp.SetNoDelay(true)
	if n := s.opts.SendBuffer; n > 0 {
		_ = tcp.SetWriteBuffer(n)
	}
	if n := s.opts.ReceiveBuffer; n > 0 {
		_ = tcp.SetReadBuffer(n)
	}
	rc, err := tcp.SyscallConn()
	if err != nil {
		nc.Close()
		return
	}
	c := &stdConn{srv: s, nc: tcp, rc: rc, replies: make(chan Reply, 1), listener: listener, tc: tc}
	c.replyFn = c.deliver
	c.writevFn, c.sendfileFn = c.writevOnce, c.sendfileOnce
	s.mu.Lock()
	if s.mu.closing {
		s.mu.Unlock()
		nc.Close()
		return
	}
	s.mu.conns[c] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	go c.serve()
}

// Shutdown stops accepting, lets each connection finish the request it is
// serving, closes every connection and waits (or until ctx ends).
func (s *StdServer) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.mu.closing = true
	for ln := range s.mu.listeners {
		ln.Close()
	}
	for c := range s.mu.conns {
		c.stopReading()
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		s.mu.Lock()
		for c := range s.mu.conns {
			c.nc.Close()
		}
		s.mu.Unlock()
		return ctx.Err()
	}
}

// stdConn is one connection. Only its own goroutine reads and writes the
// socket; replies arrive on the replies channel, one per request.
type stdConn struct {
	srv     *StdServer
	nc      *net.TCPConn
	rc      syscall.RawConn
	replies chan Reply // cap 1: exactly one reply per request in flight
	replyFn func(Reply)
	hdr     [4]byte

	// The reply being written and the arguments of the poller callbacks.
	out                  outState
	iov                  [maxIovPerOp]unix.Iovec
	iovN                 int
	sfFd                 int
	sfOff, sfLeft, wrote int64
	werr                 error
	writevFn, sendfileFn func(fd uintptr) bool

	listener string
	tc       *tls.Conn // TLS listeners: reads and writes go through it
}

func (c *stdConn) deliver(r Reply) { c.replies <- r }

// stdBeforeReadForTest, when set, runs before a connection sets the read
// deadline for its next request, with the number of requests it has served
// (tests widen a race window with it).
var stdBeforeReadForTest atomic.Pointer[func(served int)]

// stopReading wakes a connection blocked waiting for its next request; a
// request already being served still completes and its reply is written.
func (c *stdConn) stopReading() { _ = c.nc.SetReadDeadline(time.Unix(1, 0)) }

func (c *stdConn) serve() {
	info := ConnInfo{Remote: c.nc.RemoteAddr(), Listener: c.listener}
	var in io.Reader = c.nc
	if c.tc != nil {
		st := c.tc.ConnectionState()
		info.TLS, in = &st, c.tc
	}
	h := c.srv.h.Open(info)
	dl, _ := h.(Deadliner)
	defer c.finish(h)
	for served := 0; ; served++ {
		if hook := stdBeforeReadForTest.Load(); hook != nil {
			(*hook)(served)
		}
		until := time.Now().Add(c.srv.opts.IdleTimeout)
		if dl != nil {
			if t := dl.Deadline(); t != 0 && t < until.UnixNano() {
				until = time.Unix(0, t)
			}
		}
		if err := c.nc.SetReadDeadline(until); err != nil {
			return
		}
		// Shutdown sets closing before it sets every read deadline to the
		// past; checked after ours, either Shutdown's deadline came later
		// or we see closing. Unchecked, a Shutdown between the last reply
		// and the line above left this connection waiting out the idle
		// timeout.
		if c.srv.isClosing() {
			return
		}
		frame, err := readFrame(in, c.hdr[:], frameLimit(h, c.srv.opts.MaxFrame))
		if err != nil {
			c.logReadError(err)
			return
		}
		servedAt := time.Now()
		h.Serve(*frame, c.replyFn)
		r := <-c.replies
		putFrame(frame)
		if r == nil {
			continue
		}
		err = c.write(r)
		closeAfter := r.ShouldClose()
		if t, ok := r.(TimedReply); ok && err == nil && c.tc == nil {
			t.Written(time.Since(servedAt))
		}
		r.Release()
		if err != nil || closeAfter || c.srv.isClosing() {
			return
		}
	}
}

func (c *stdConn) finish(h ConnHandler) {
	c.nc.Close()
	h.Closed()
	c.srv.mu.Lock()
	delete(c.srv.mu.conns, c)
	c.srv.mu.Unlock()
	c.srv.wg.Done()
}

func (c *stdConn) logReadError(err error) {
	if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || c.srv.isClosing() {
		return
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		c.srv.opts.Logger.Debug("closing idle connection", "remote", c.nc.RemoteAddr())
		return
	}
	c.srv.opts.Logger.Debug("closing connection", "remote", c.nc.RemoteAddr(), "err", err)
}

// write sends a reply: runs of byte slices with one writev each, file
// regions with sendfile, through the runtime poller (EAGAIN parks the
// goroutine until the socket is writable). The poller callbacks are bound
// once per connection and take their arguments from it, so writing
// allocates nothing.
func (c *stdConn) write(r Reply) error {
	if err := c.nc.SetWriteDeadline(time.Now().Add(c.srv.opts.WriteTimeout)); err != nil {
		return err
	}
	if c.tc != nil {
		return sealTo(c.tc, r)
	}
	c.out.start(r)
	defer func() { c.out = outState{} }()
	for !c.out.done() {
		c.wrote, c.werr = 0, nil
		var err error
		if fd, off, n, ok := c.out.fileRegion(); ok {
			c.sfFd, c.sfOff, c.sfLeft = fd, off, n
			err = c.rc.Write(c.sendfileFn)
		} else {
			c.iovN, _, _ = c.out.gather(c.iov[:])
			err = c.rc.Write(c.writevFn)
		}
		if err == nil {
			err = c.werr
		}
		if err != nil {
			return err
		}
		c.out.advance(c.wrote)
	}
	return nil
}

// writevOnce and sendfileOnce are the poller callbacks of write: false
// means "wait until writable and call again".
func (c *stdConn) writevOnce(fd uintptr) bool {
	for {
		n, err := writev(int(fd), c.iov[:c.iovN])
		switch err {
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false
		}
		c.wrote, c.werr = int64(n), err
		return true
	}
}

func (c *stdConn) sendfileOnce(fd uintptr) bool {
	n, err := sendfileOnce(int(fd), c.sfFd, &c.sfOff, c.sfLeft)
	if err == unix.EAGAIN {
		return false
	}
	c.wrote, c.werr = int64(n), err
	return true
}
