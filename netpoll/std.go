package netpoll

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
	"time"
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
func (s *StdServer) Serve(ln net.Listener) error {
	if !s.track(ln) {
		ln.Close()
		return nil
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
		s.startConn(c)
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

func (s *StdServer) startConn(nc net.Conn) {
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		nc.Close()
		return
	}
	_ = tc.SetNoDelay(true)
	rc, err := tc.SyscallConn()
	if err != nil {
		nc.Close()
		return
	}
	c := &stdConn{srv: s, nc: tc, rc: rc, replies: make(chan Reply, 1)}
	c.replyFn = c.deliver
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
	bufs    net.Buffers // scratch for writev, reused across replies
}

func (c *stdConn) deliver(r Reply) { c.replies <- r }

// stopReading wakes a connection blocked waiting for its next request; a
// request already being served still completes and its reply is written.
func (c *stdConn) stopReading() { _ = c.nc.SetReadDeadline(time.Unix(1, 0)) }

func (c *stdConn) serve() {
	h := c.srv.h.Open(c.nc.RemoteAddr())
	defer c.finish(h)
	for {
		if err := c.nc.SetReadDeadline(time.Now().Add(c.srv.opts.IdleTimeout)); err != nil {
			return
		}
		frame, err := readFrame(c.nc, c.hdr[:], c.srv.opts.MaxFrame)
		if err != nil {
			c.logReadError(err)
			return
		}
		h.Serve(*frame, c.replyFn)
		r := <-c.replies
		putFrame(frame)
		if r == nil {
			continue
		}
		err = c.write(r)
		closeAfter := r.ShouldClose()
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
// regions with sendfile.
func (c *stdConn) write(r Reply) error {
	if err := c.nc.SetWriteDeadline(time.Now().Add(c.srv.opts.WriteTimeout)); err != nil {
		return err
	}
	n := r.NumParts()
	for i := 0; i < n; {
		b, f, off, size := r.PartAt(i)
		if b == nil {
			if err := sendFileRegion(c.rc, f, off, size); err != nil {
				return err
			}
			i++
			continue
		}
		j := i
		c.bufs = c.bufs[:0]
		for ; j < n; j++ {
			b, _, _, _ := r.PartAt(j)
			if b == nil {
				break
			}
			c.bufs = append(c.bufs, b)
		}
		// WriteTo consumes the Buffers slice header; write through a copy
		// so the scratch array stays reusable.
		bufs := c.bufs
		if _, err := bufs.WriteTo(c.nc); err != nil {
			return err
		}
		i = j
	}
	return nil
}
