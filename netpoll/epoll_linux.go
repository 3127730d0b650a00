package netpoll

import (
	"errors"
	"io"
	"time"

	"golang.org/x/sys/unix"
)

// The epoll backend: per loop, one epoll instance with every socket
// registered once, edge-triggered, for input and output. Sockets are
// non-blocking; a loop reads until a short read or EAGAIN, writes with
// writev and sendfile until EAGAIN, and otherwise waits for the next edge.
// It waits parked in the Go runtime's netpoller on the epoll fd (the
// epoll instance nests in the runtime's own), not in epoll_wait: see
// park_linux.go for why and what it measured.

const epollAvailable = true

func newEpoll(h Handler, opts Options) (Server, error) {
	s := newLoopServer(BackendEpoll, h, opts, newEpollLoop)
	s.lockLoops = !epollParks
	return s, nil
}

// Markers in the epoll event's data for the non-connection fds; connection
// events carry slot (Fd) and generation (Pad).
const (
	evWake     = -1
	evListener = -2 // Pad holds the listening fd
)

// scratchSize is the per-loop read buffer. Bytes received after a
// connection's complete frame are copied out of it into that connection's
// stash, so it also bounds a stash.
const scratchSize = 16 << 10

type epollLoop struct {
	loopBase
	epfd    int
	events  []unix.EpollEvent
	scratch []byte
	sfOff   int64                               // sendfile's offset argument, off the stack
	read    func(fd int, b []byte) (int, error) // unix.Read; a fake in fuzz tests
	hand    []handoff
	share   map[int]bool   // listening fd → hands connections off
	names   map[int]string // listening fd → listener name
	pollFn  func() bool    // l.pollReady, bound once (park mode)
	ready   int            // events taken by pollReady
	pollErr error          // its error
}

func newEpollLoop(s *loopServer, id int) (eventLoop, error) {
	l := &epollLoop{epfd: -1, share: map[int]bool{}, names: map[int]string{}, read: unix.Read}
	if err := l.init(s, id); err != nil {
		return nil, err
	}
	var err error
	if l.epfd, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err != nil {
		unix.Close(l.wakeFd)
		return nil, err
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: evWake}
	if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_ADD, l.wakeFd, &ev); err != nil {
		unix.Close(l.wakeFd)
		unix.Close(l.epfd)
		return nil, err
	}
	if epollParks {
		if l.park, err = newParker(l.epfd); err != nil {
			unix.Close(l.wakeFd)
			unix.Close(l.epfd)
			return nil, err
		}
		l.pollFn = l.pollReady
	}
	l.events = make([]unix.EpollEvent, 256)
	l.scratch = make([]byte, scratchSize)
	l.iov = make([]unix.Iovec, 64)
	return l, nil
}

func (l *epollLoop) base() *loopBase { return &l.loopBase }

func (l *epollLoop) run() {
	defer l.cleanup()
	for {
		l.now = time.Now().UnixNano()
		if l.srv.forced.Load() {
			l.endBatch() // answer what was held back before dropping the connections
			l.closeListeners()
			l.abandon(l.closeFd)
			return
		}
		if l.srv.closing.Load() && !l.draining {
			l.closeListeners()
			l.drainForShutdown(l.closeConn)
		}
		if l.draining && l.live == 0 {
			return
		}
		l.hand = l.takeHandoffs(l.hand[:0])
		for _, h := range l.hand {
			l.adoptHandoff(h)
		}
		l.endBatch()
		l.takeReplies(l.onReply)
		if rc := l.readyConns; len(rc) > 0 {
			l.readyConns = nil
			for _, c := range rc {
				l.drive(c)
			}
		}
		if l.now >= l.nextTick {
			l.tick(l.closeConn)
			if l.acceptWait {
				l.acceptWait = false
				for _, fd := range l.listeners {
					l.accept(fd)
				}
			}
		}
		l.wait()
	}
}

// wait blocks in epoll_wait until an event or the next tick, then handles
// the events.
func (l *epollLoop) wait() {
	l.endBatch() // frames served since the loop's top (replies, ready conns)
	n, err := l.collect()
	if err != nil {
		if err != unix.EINTR {
			l.srv.opts.Logger.Error("epoll_wait", "err", err)
		}
		return
	}
	l.now = time.Now().UnixNano()
	for i := range l.events[:n] {
		ev := &l.events[i]
		switch ev.Fd {
		case evWake:
			var b [8]byte
			unix.Read(l.wakeFd, b[:])
		case evListener:
			l.accept(int(ev.Pad))
		default:
			c := l.lookup(ev.Fd, uint32(ev.Pad))
			if c == nil {
				continue
			}
			if ev.Events&(unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
				c.readable = true
			}
			l.drive(c)
		}
	}
}

// collect waits for events (or the tick) and returns how many are in
// l.events.
func (l *epollLoop) collect() (int, error) {
	if l.park == nil {
		timeout := 0
		if l.prepareSleep() {
			timeout = int((l.untilTick() + time.Millisecond - 1) / time.Millisecond)
		}
		n, err := unix.EpollWait(l.epfd, l.events, timeout)
		l.sleeping.Store(false)
		return n, err
	}
	if l.pollReady() {
		return l.ready, l.pollErr
	}
	l.park.arm(l.nextTick)
	if l.prepareSleep() {
		if err := l.park.sleep(l.pollFn); err != nil {
			l.srv.opts.Logger.Error("netpoll park", "err", err)
		}
	}
	l.sleeping.Store(false)
	if l.ready == 0 && l.pollErr == nil {
		l.pollReady()
	}
	return l.ready, l.pollErr
}

// pollReady takes the events ready now, without waiting.
func (l *epollLoop) pollReady() bool {
	l.ready, l.pollErr = unix.EpollWait(l.epfd, l.events, 0)
	if l.ready < 0 {
		l.ready = 0
	}
	return l.ready > 0 || l.pollErr != nil
}

func (l *epollLoop) adoptHandoff(h handoff) {
	if !h.listener {
		l.adopt(h.fd, h.name, h.tls)
		return
	}
	if l.srv.closing.Load() {
		unix.Close(h.fd)
		return
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLET, Fd: evListener, Pad: int32(h.fd)}
	if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_ADD, h.fd, &ev); err != nil {
		l.srv.opts.Logger.Error("epoll add listener", "err", err)
		unix.Close(h.fd)
		return
	}
	l.listeners = append(l.listeners, h.fd)
	l.share[h.fd] = h.share
	l.names[h.fd] = h.name
	l.accept(h.fd)
}

// accept takes every pending connection of a listening socket.
func (l *epollLoop) accept(lfd int) {
	for {
		fd, _, err := unix.Accept4(lfd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		switch {
		case err == nil:
		case err == unix.EAGAIN:
			return
		case err == unix.EINTR || err == unix.ECONNABORTED:
			continue
		case errors.Is(err, unix.EMFILE) || errors.Is(err, unix.ENFILE) || errors.Is(err, unix.ENOBUFS) || errors.Is(err, unix.ENOMEM):
			if !l.acceptWait {
				l.srv.opts.Logger.Warn("accept: out of resources; retrying", "err", err)
			}
			l.acceptWait = true
			return
		default:
			if !l.srv.closing.Load() {
				l.srv.opts.Logger.Error("accept", "err", err)
			}
			return
		}
		if l.share[lfd] {
			if i := l.pick(); i != l.id {
				l.srv.loops[i].base().handOff(handoff{fd: fd, name: l.names[lfd]})
				continue
			}
		}
		l.adopt(fd, l.names[lfd], nil)
	}
}

func (l *epollLoop) adopt(fd int, listener string, t *tlsLayer) {
	c := l.newConn(fd, listener, t)
	if c == nil {
		return
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLOUT | unix.EPOLLRDHUP | unix.EPOLLET, Fd: c.slot, Pad: int32(c.gen)}
	if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		l.srv.opts.Logger.Error("epoll add connection", "err", err)
		l.closeConn(c)
		return
	}
	if t != nil {
		// The handshake may have read records past its end.
		c.readable = true
		l.drive(c)
	}
}

// onReply takes a reply that arrived from another goroutine.
func (l *epollLoop) onReply(c *conn, r Reply) {
	c.replied(r)
	if c.closed {
		l.release(c)
		return
	}
	l.drive(c)
}

// frameBudget bounds how many requests of one connection a loop serves
// before it turns to the others.
const frameBudget = 16

// drive moves a connection as far as it can go without blocking: finish
// the reply being written, then take and serve the next frame, and so on.
func (l *epollLoop) drive(c *conn) {
	for budget := frameBudget; !c.closed; {
		if c.out.r != nil {
			if !l.flush(c) {
				return
			}
			if c.refillTLS() {
				continue // the next chunk of a reply sealed for TLS
			}
			if c.wroteReply() {
				l.closeConn(c)
				return
			}
			continue
		}
		if c.phase.Load() != phaseIdle {
			return
		}
		if budget == 0 {
			l.readyConns = append(l.readyConns, c)
			return
		}
		budget--
		f, err := l.nextFrame(c)
		if err != nil {
			l.closeConnErr(c, err)
			return
		}
		if f == nil {
			return
		}
		c.serve(f)
	}
}

// nextFrame returns the next complete frame, from the stash or the socket,
// or nil when the socket has no more for now.
func (l *epollLoop) nextFrame(c *conn) (*[]byte, error) {
	if c.tls != nil {
		return l.nextTLSFrame(c)
	}
	if c.hasQueuedInput() {
		if f, err := c.takeQueuedFrame(); f != nil || err != nil {
			return f, err
		}
	}
	for c.readable {
		buf, direct := l.scratch, false
		if space := c.in.bodySpace(); len(space) >= len(l.scratch) {
			buf, direct = space, true // a large body: read it in place
		}
		n, err := l.read(c.fd, buf)
		switch {
		case err == unix.EAGAIN:
			c.readable = false
			return nil, nil
		case err == unix.EINTR:
			continue
		case err != nil:
			return nil, err
		case n == 0:
			return nil, io.EOF
		}
		if n < len(buf) {
			c.readable = false // a short read drained the socket
		}
		if direct {
			if f := c.in.filled(n); f != nil {
				return f, nil
			}
			continue
		}
		if f, err := c.consume(buf[:n]); f != nil || err != nil {
			return f, err
		}
	}
	return nil, nil
}

// nextTLSFrame is nextFrame through the TLS record layer: decrypt what is
// buffered, and read ciphertext only when no whole record is.
func (l *epollLoop) nextTLSFrame(c *conn) (*[]byte, error) {
	for {
		if f, err := c.tls.pull(&c.in); f != nil || err != nil {
			return f, err
		}
		if !c.readable {
			return nil, nil
		}
		n, err := l.read(c.fd, l.scratch)
		switch {
		case err == unix.EAGAIN:
			c.readable = false
			return nil, nil
		case err == unix.EINTR:
			continue
		case err != nil:
			return nil, err
		case n == 0:
			return nil, io.EOF
		}
		if n < len(l.scratch) {
			c.readable = false
		}
		c.tls.feed(l.scratch[:n])
	}
}

// flush writes the current reply until it is out (true) or the socket is
// full or broken (false).
func (l *epollLoop) flush(c *conn) bool {
	for !c.out.done() {
		var n int
		var err error
		if fd, off, size, ok := c.out.fileRegion(); ok {
			l.sfOff = off
			n, err = sendfileOnce(c.fd, fd, &l.sfOff, size)
		} else {
			k, _, _ := c.out.gather(l.iov)
			n, err = writev(c.fd, l.iov[:k])
		}
		switch {
		case err == unix.EAGAIN:
			if c.writeWait == 0 {
				c.writeWait = l.now
			}
			return false
		case err == unix.EINTR:
			continue
		case err != nil:
			l.closeConnErr(c, err)
			return false
		}
		c.out.advance(int64(n))
	}
	return true
}

func (l *epollLoop) closeConnErr(c *conn, err error) {
	if !errors.Is(err, io.EOF) && !isPeerGone(err) {
		l.srv.opts.Logger.Debug("closing connection", "fd", c.fd, "err", err)
	}
	l.closeConn(c)
}

// closeConn closes the socket; the connection is released now, or when the
// reply the engine still owes arrives.
func (l *epollLoop) closeConn(c *conn) {
	if c.closed {
		return
	}
	l.closeFd(c)
	if p := c.phase.Load(); p == phaseAwaiting || p == phaseReplied {
		return // onReply releases it
	}
	l.release(c)
}

func (l *epollLoop) closeFd(c *conn) {
	if !c.closed {
		c.closed = true
		unix.Close(c.fd) // also leaves the epoll set
	}
}

func (l *epollLoop) closeListeners() {
	for _, fd := range l.listeners {
		unix.Close(fd)
	}
	l.listeners = nil
	// Listening fds handed to this loop but not yet adopted.
	for _, h := range l.takeHandoffs(nil) {
		unix.Close(h.fd)
	}
}

func (l *epollLoop) cleanup() {
	l.closeListeners()
	if l.park != nil {
		l.park.close()
	}
	unix.Close(l.epfd)
	unix.Close(l.wakeFd)
}
