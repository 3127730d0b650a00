package netpoll

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// This file holds what the epoll and uring backends share: the server that
// owns the loops, the per-connection state, the reply hand-back from other
// goroutines and the write bookkeeping. Each backend supplies a loop type
// that moves bytes its own way.

// eventLoop is one backend's loop.
type eventLoop interface {
	base() *loopBase
	// run serves until the server is shut down and its connections are
	// gone; it is called on a goroutine locked to its OS thread when
	// loopServer.lockLoops says so.
	run()
}

// loopServer is the Server of the event-loop backends.
type loopServer struct {
	name    string
	h       Handler
	opts    Options
	newLoop func(s *loopServer, id int) (eventLoop, error)

	batch     BatchHandler // h, when it batches and Serve runs on the loops; else nil
	lockLoops bool         // each loop's goroutine is locked to its thread

	startOnce sync.Once
	startErr  error
	loops     []eventLoop
	loopsDone sync.WaitGroup
	work      chan *conn // to the Serve workers, when Options.Workers > 0

	tlsNext atomic.Uint32 // round-robin of TLS connections over the loops
	closing atomic.Bool   // Shutdown started: stop accepting, drain
	forced  atomic.Bool   // Shutdown's context ended: drop everything now
	done    chan struct{}

	mu struct {
		sync.Mutex
		listeners []net.Listener
		closed    bool
	}
}

func newLoopServer(name string, h Handler, opts Options, newLoop func(*loopServer, int) (eventLoop, error)) *loopServer {
	return &loopServer{name: name, h: h, opts: opts, newLoop: newLoop, done: make(chan struct{})}
}

func (s *loopServer) Backend() string { return s.name }

// start creates the loops, each on its own goroutine, locked to its
// thread when lockLoops is set: an io_uring created with SINGLE_ISSUER
// belongs to the thread that made it. A loop that parks in the runtime
// (park_linux.go) must not be locked: a locked goroutine that parks hands
// its P to another thread and is handed it back on every wake-up.
func (s *loopServer) start() error {
	s.startOnce.Do(func() {
		errs := make(chan error, s.opts.Loops)
		s.loops = make([]eventLoop, s.opts.Loops)
		if bh, ok := s.h.(BatchHandler); ok && s.opts.Workers <= 0 {
			s.batch = bh
			bh.BeginLoops(s.opts.Loops)
		}
		for i := range s.loops {
			s.loopsDone.Add(1)
			go func(i int) {
				defer s.loopsDone.Done()
				if s.lockLoops {
					runtime.LockOSThread()
				}
				l, err := s.newLoop(s, i)
				if err == nil {
					s.loops[i] = l // published to the others by errs
				}
				errs <- err
				if err != nil {
					return
				}
				l.run()
			}(i)
		}
		for range s.loops {
			if err := <-errs; err != nil && s.startErr == nil {
				s.startErr = err
			}
		}
		if s.startErr != nil {
			s.closing.Store(true)
			s.forced.Store(true)
			s.wakeAll()
			s.loopsDone.Wait()
			return
		}
		if s.opts.Workers > 0 {
			s.work = make(chan *conn, 4*s.opts.Workers)
			for i := 0; i < s.opts.Workers; i++ {
				go s.worker()
			}
		}
	})
	return s.startErr
}

func (s *loopServer) worker() {
	for c := range s.work {
		c.h.Serve(*c.frame, c.replyFn)
	}
}

func (s *loopServer) wakeAll() {
	for _, l := range s.loops {
		if l != nil {
			l.base().wake()
		}
	}
}

// Serve hands ln to the loops and waits for Shutdown. With a listener made
// by Listen (SO_REUSEPORT) every loop gets a listening socket of its own on
// the same address and the kernel spreads connections; otherwise loop 0
// accepts and hands connections off round-robin.
func (s *loopServer) Serve(ln net.Listener) error { return s.ServeListener(ln, ListenerOptions{}) }

// ServeListener is Serve for a named listener. On a TLS listener a
// goroutine accepts and runs each handshake (crypto/tls cannot resume a
// handshake that would block); a connection whose handshake is done moves
// to a loop, which runs its record layer from then on (tls.go).
func (s *loopServer) ServeListener(ln net.Listener, lo ListenerOptions) error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		ln.Close()
		return nil
	}
	s.mu.listeners = append(s.mu.listeners, ln)
	s.mu.Unlock()
	if err := s.start(); err != nil {
		return err
	}
	if lo.TLS != nil {
		return serveTLS(ln, lo, &s.opts, s.closing.Load, func(nc net.Conn, tc *tls.Conn, mc *memConn) {
			s.adoptTLS(nc, lo.Name, tc, mc)
		})
	}
	fds, err := s.listenerFds(ln)
	// The hand-off happens under mu so that it either precedes Shutdown
	// (the loops are running and close the listeners as they stop) or sees
	// it and gives the descriptors back; a Shutdown that closed ln while we
	// were starting is not Serve's error.
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		for _, fd := range fds {
			unix.Close(fd)
		}
		return nil
	}
	if err != nil {
		s.mu.Unlock()
		return err
	}
	share := len(fds) == 1 && len(s.loops) > 1
	for i, fd := range fds {
		s.loops[i].base().handOff(handoff{fd: fd, listener: true, share: share, name: lo.Name})
	}
	s.mu.Unlock()
	<-s.done
	return nil
}

// listenerFds returns one listening fd per loop (reuseport) or one for loop
// 0 (hand-off). They are the loops' own; ln stays the caller's.
func (s *loopServer) listenerFds(ln net.Listener) ([]int, error) {
	tl, ok := ln.(*net.TCPListener)
	if !ok {
		return nil, fmt.Errorf("netpoll: %s backend needs a TCP listener, got %T", s.name, ln)
	}
	fd, err := dupConn(tl)
	if err != nil {
		return nil, err
	}
	fds := []int{fd}
	if s.opts.Accept == AcceptHandoff || len(s.loops) == 1 {
		return fds, nil
	}
	if v, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT); err != nil || v == 0 {
		if s.opts.Accept == AcceptReusePort {
			s.opts.Logger.Warn("listener lacks SO_REUSEPORT (make it with netpoll.Listen); handing connections off instead")
		}
		return fds, nil
	}
	for i := 1; i < len(s.loops); i++ {
		extra, err := listenReusePort(ln.Addr().(*net.TCPAddr))
		if err != nil {
			for _, fd := range fds {
				unix.Close(fd)
			}
			return nil, err
		}
		fds = append(fds, extra)
	}
	return fds, nil
}

func dupConn(sc syscall.Conn) (int, error) {
	rc, err := sc.SyscallConn()
	if err != nil {
		return -1, err
	}
	nfd := -1
	cerr := rc.Control(func(fd uintptr) {
		nfd, err = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0)
	})
	if cerr != nil {
		return -1, cerr
	}
	if err != nil {
		return -1, fmt.Errorf("dup listener: %w", err)
	}
	return nfd, nil
}

// Shutdown stops accepting, lets each connection finish the request it is
// serving, closes every connection and waits (or until ctx ends, when the
// rest is dropped).
func (s *loopServer) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if !s.mu.closed {
		s.mu.closed = true
		for _, ln := range s.mu.listeners {
			ln.Close()
		}
		close(s.done)
	}
	s.mu.Unlock()
	// A Serve may be creating the loops right now: wait for it (or create
	// them), so that every loop exists before it is told to stop. A failed
	// start has stopped its loops already.
	_ = s.start()
	s.closing.Store(true)
	s.wakeAll()
	finished := make(chan struct{})
	go func() { s.loopsDone.Wait(); close(finished) }()
	select {
	case <-finished:
		return nil
	case <-ctx.Done():
		s.forced.Store(true)
		s.wakeAll()
		<-finished
		return ctx.Err()
	}
}

// adoptTLS moves a connection whose TLS handshake is done onto a loop: the
// loop gets a duplicate of the socket and the TLS connection switches to
// the loop's buffers.
func (s *loopServer) adoptTLS(nc net.Conn, name string, tc *tls.Conn, mc *memConn) {
	defer nc.Close() // the loop owns the duplicate
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return
	}
	fd, err := dupConn(sc)
	if err != nil {
		s.opts.Logger.Warn("TLS connection not adopted", "err", err)
		return
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return
	}
	mc.sock = nil
	t := &tlsLayer{tc: tc, mc: mc, state: tc.ConnectionState()}
	i := int(s.tlsNext.Add(1)) % len(s.loops)
	s.loops[i].base().handOff(handoff{fd: fd, name: name, tls: t})
}

// handoff passes a new fd to a loop from another goroutine.
type handoff struct {
	fd       int
	listener bool
	share    bool   // listener: hand its connections off round-robin
	name     string // the listener's name
	tls      *tlsLayer
}

// loopBase is the backend-independent part of a loop.
type loopBase struct {
	srv *loopServer
	id  int

	// Shared with other goroutines.
	inbox    inbox       // connections whose reply arrived off the loop
	sleeping atomic.Bool // the loop is (about to be) asleep: blocked in the kernel or parked
	wakeFd   int         // eventfd that ends the loop's wait
	park     *parker     // set when the loop parks in the runtime; then wakeFd is not written
	hand     struct {
		sync.Mutex
		items []handoff
	}
	handPending atomic.Bool

	// Owned by the loop goroutine.
	conns      []*conn // by slot; nil slots are free
	free       []int32
	live       int     // non-nil conns
	gen        uint32  // last connection generation handed out
	draining   bool    // drainForShutdown has run
	now        int64   // unix nanoseconds, refreshed once per iteration
	nextTick   int64   // when to look for idle and stuck connections
	listeners  []int   // accepting fds owned by this loop
	rr         int     // next loop for hand-off
	acceptWait bool    // accept failed for lack of fds; retry on the tick
	readyConns []*conn // connections to drive again (fairness cap hit)
	iov        []unix.Iovec
}

func (b *loopBase) init(s *loopServer, id int) error {
	b.srv, b.id = s, id
	fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return fmt.Errorf("eventfd: %w", err)
	}
	b.wakeFd = fd
	b.now = time.Now().UnixNano()
	b.nextTick = b.now + int64(b.tickEvery())
	return nil
}

var wakeOne = [8]byte{1}

// wake ends the loop's wait if it is waiting (any goroutine).
func (b *loopBase) wake() {
	if b.sleeping.CompareAndSwap(true, false) {
		if b.park != nil {
			b.park.wake()
			return
		}
		unix.Write(b.wakeFd, wakeOne[:])
	}
}

// prepareSleep marks the loop as about to block and reports whether it may:
// work queued before the mark is seen here, work queued after it wakes the
// loop through the eventfd.
func (b *loopBase) prepareSleep() bool {
	b.sleeping.Store(true)
	if b.inbox.nonEmpty() || b.handPending.Load() || b.srv.closing.Load() != b.draining || len(b.readyConns) > 0 ||
		b.draining && b.live == 0 {
		b.sleeping.Store(false)
		return false
	}
	return true
}

func (b *loopBase) handOff(h handoff) {
	b.hand.Lock()
	b.hand.items = append(b.hand.items, h)
	b.hand.Unlock()
	b.handPending.Store(true)
	b.wake()
}

func (b *loopBase) takeHandoffs(dst []handoff) []handoff {
	if !b.handPending.Load() {
		return dst
	}
	b.hand.Lock()
	dst = append(dst, b.hand.items...)
	b.hand.items = b.hand.items[:0]
	b.handPending.Store(false)
	b.hand.Unlock()
	return dst
}

// tickEvery is how often the loop looks for idle and stuck connections.
func (b *loopBase) tickEvery() time.Duration {
	d := min(b.srv.opts.IdleTimeout, b.srv.opts.WriteTimeout) / 4
	return max(5*time.Millisecond, min(d, time.Second))
}

// untilTick is how long the loop may sleep.
func (b *loopBase) untilTick() time.Duration {
	return time.Duration(max(0, b.nextTick-b.now))
}

// newConn registers an accepted socket. It returns nil (and closes fd) when
// the server is shutting down.
func (b *loopBase) newConn(fd int, listener string, t *tlsLayer) *conn {
	if b.srv.closing.Load() {
		unix.Close(fd)
		return nil
	}
	unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	if n := b.srv.opts.SendBuffer; n > 0 {
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, n)
	}
	if n := b.srv.opts.ReceiveBuffer; n > 0 {
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, n)
	}
	c := &conn{fd: fd, loop: b, lastActive: b.now, tls: t}
	c.in.max = b.srv.opts.MaxFrame
	c.replyFn = c.deliver
	if n := len(b.free); n > 0 {
		c.slot = b.free[n-1]
		b.free = b.free[:n-1]
		b.conns[c.slot] = c
	} else {
		c.slot = int32(len(b.conns))
		b.conns = append(b.conns, c)
	}
	b.gen++
	c.gen = b.gen & genMask
	b.live++
	info := ConnInfo{Remote: peerAddr(fd), Listener: listener}
	if t != nil {
		info.TLS = &t.state
	}
	if bh := b.srv.batch; bh != nil {
		c.h = bh.OpenOnLoop(info, b.id)
	} else {
		c.h = b.srv.h.Open(info)
	}
	c.dl, _ = c.h.(Deadliner)
	c.in.max = frameLimit(c.h, b.srv.opts.MaxFrame)
	return c
}

// endBatch lets a batching handler answer what it held back; the loop
// calls it before writing replies and before waiting.
func (b *loopBase) endBatch() {
	if bh := b.srv.batch; bh != nil {
		bh.EndBatch(b.id)
	}
}

// pick returns the loop that takes the next handed-off connection.
func (b *loopBase) pick() int {
	n := len(b.srv.loops)
	i := b.rr % n
	b.rr++
	return i
}

// lookup finds a connection by slot and generation (nil if it is gone).
func (b *loopBase) lookup(slot int32, gen uint32) *conn {
	if slot < 0 || int(slot) >= len(b.conns) {
		return nil
	}
	c := b.conns[slot]
	if c == nil || c.gen != gen {
		return nil
	}
	return c
}

// release frees a connection's slot and tells the handler it is gone. The
// socket is already closed and no reply is outstanding.
func (b *loopBase) release(c *conn) {
	if c.released {
		return
	}
	c.released = true
	c.in.reset()
	if c.rbuf != nil {
		putFrame(c.rbuf)
		c.rbuf = nil
	}
	if c.ready != nil {
		putFrame(c.ready)
		c.ready = nil
	}
	if c.stash != nil {
		putFrame(c.stash)
		c.stash = nil
	}
	if c.frame != nil {
		putFrame(c.frame)
		c.frame = nil
	}
	if c.out.r != nil {
		c.out.r.Release()
		c.out = outState{}
	}
	c.tls = nil
	b.conns[c.slot] = nil
	b.free = append(b.free, c.slot)
	b.live--
	c.h.Closed()
}

// tick closes connections idle for IdleTimeout and those whose peer has not
// taken a reply for WriteTimeout.
func (b *loopBase) tick(closeConn func(*conn)) {
	b.nextTick = b.now + int64(b.tickEvery())
	idle := int64(b.srv.opts.IdleTimeout)
	stuck := int64(b.srv.opts.WriteTimeout)
	for _, c := range b.conns {
		if c == nil || c.closed {
			continue
		}
		switch {
		case c.writeWait != 0 && b.now-c.writeWait > stuck:
			b.srv.opts.Logger.Debug("closing connection whose peer stopped reading", "fd", c.fd)
			closeConn(c)
		case c.out.r == nil && c.phase.Load() == phaseIdle && b.now-c.lastActive > idle:
			b.srv.opts.Logger.Debug("closing idle connection", "fd", c.fd)
			closeConn(c)
		case c.dl != nil && c.out.r == nil && c.phase.Load() == phaseIdle && pastDeadline(c.dl, b.now):
			b.srv.opts.Logger.Debug("closing connection past its handler's deadline", "fd", c.fd)
			closeConn(c)
		}
	}
}

// drainForShutdown closes the connections with nothing in flight and marks
// the rest to close after their reply.
func (b *loopBase) drainForShutdown(closeConn func(*conn)) {
	b.draining = true
	for _, c := range b.conns {
		if c == nil || c.closed {
			continue
		}
		if c.out.r == nil && c.phase.Load() == phaseIdle {
			closeConn(c)
		} else {
			c.closeAfterReply = true
		}
	}
}

// abandon ends every connection at once (forced shutdown): replies still
// owed by the engine are released by deliver when they come.
func (b *loopBase) abandon(closeFd func(*conn)) {
	b.takeReplies(func(c *conn, r Reply) {
		if r != nil {
			r.Release()
		}
	})
	for _, c := range b.conns {
		if c == nil {
			continue
		}
		closeFd(c)
		if c.phase.CompareAndSwap(phaseAwaiting, phaseDead) || c.phase.CompareAndSwap(phaseServing, phaseDead) {
			c.frame = nil // the handler may still read it; leave it to the GC
		}
		c.closed = true
		b.release(c)
	}
}

// takeReplies hands each reply that arrived from another goroutine to fn.
func (b *loopBase) takeReplies(fn func(*conn, Reply)) {
	for c := b.inbox.takeAll(); c != nil; {
		next := c.next
		c.next = nil
		r := c.reply
		c.reply = nil
		fn(c, r)
		c = next
	}
}

func pastDeadline(d Deadliner, now int64) bool {
	t := d.Deadline()
	return t != 0 && now > t
}

// peerAddr is the remote address of a connected socket.
func peerAddr(fd int) net.Addr {
	sa, err := unix.Getpeername(fd)
	if err != nil {
		return &net.TCPAddr{}
	}
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return &net.TCPAddr{IP: net.IP(a.Addr[:]).To16(), Port: a.Port}
	case *unix.SockaddrInet6:
		return &net.TCPAddr{IP: net.IP(a.Addr[:]), Port: a.Port}
	}
	return &net.TCPAddr{}
}

// Phases of a connection's current request: the only connection state that
// other goroutines touch (through deliver).
const (
	phaseIdle     int32 = iota // no request in flight
	phaseServing               // inside ConnHandler.Serve on the loop
	phaseAwaiting              // the reply will come from another goroutine
	phaseReplied               // reply stored in conn.reply for the loop
	phaseDead                  // the loop dropped the connection (forced shutdown)
)

const genMask = 1<<24 - 1

// conn is one connection of an event loop.
type conn struct {
	fd      int
	slot    int32
	gen     uint32 // tells a reused slot from its previous connection
	loop    *loopBase
	h       ConnHandler
	dl      Deadliner   // c.h, when it has deadlines
	replyFn func(Reply) // c.deliver, bound once

	// Shared with the goroutine that replies.
	phase atomic.Int32
	reply Reply // written by deliver before phase/inbox publish it
	next  *conn // inbox link

	// Owned by the loop.
	in       frameReader
	stash    *[]byte // bytes received after the frame in flight
	stashOff int
	frame    *[]byte  // the frame the handler holds
	out      outState // the reply being written
	// Invariant: at most one of {frame in flight, out.r != nil} is being
	// worked on; the next frame is taken only when both are done.
	lastActive int64 // when the last request arrived or reply left
	// servedAt is when the frame in flight was handed to Serve (monotonic;
	// TimedReply). Stamped per request rather than taken from now, which
	// is refreshed once per loop iteration and would hide the loop's own
	// queueing.
	servedAt        time.Time
	writeWait       int64 // since when a write waits for the peer; 0 if none
	closeAfterReply bool
	closed          bool // socket closed; release once the reply is in
	released        bool

	readable bool // epoll: the socket may hold unread bytes

	// tls is the record layer of a connection from a TLS listener (nil
	// otherwise): reads feed it ciphertext and take frames from it,
	// replies are sealed into ciphertext before they are written.
	tls *tlsLayer

	// uring: operations in flight and their memory.
	pending    int8
	recvBusy   bool
	sendBusy   bool
	pollBusy   bool
	recvDirect bool    // the recv in flight reads into the frame body
	ready      *[]byte // a complete frame waiting for the reply ahead of it
	rbuf       *[]byte // the recv's buffer when there is no buffer ring
	iov        [maxIovPerOp]unix.Iovec
	msg        unix.Msghdr
}

// deliver is the reply callback given to the handler (any goroutine).
func (c *conn) deliver(r Reply) {
	c.reply = r
	if c.phase.CompareAndSwap(phaseServing, phaseReplied) {
		return // still inside Serve on the loop; it takes the reply there
	}
	if c.phase.CompareAndSwap(phaseAwaiting, phaseReplied) {
		c.loop.inbox.push(c)
		c.loop.wake()
		return
	}
	if r != nil { // phaseDead: nobody will write it
		r.Release()
	}
}

// hasQueuedInput reports whether received bytes wait in the stash.
func (c *conn) hasQueuedInput() bool { return c.stash != nil }

// takeQueuedFrame feeds stashed bytes to the frame reader.
func (c *conn) takeQueuedFrame() (*[]byte, error) {
	n, f, err := c.in.feed((*c.stash)[c.stashOff:])
	c.stashOff += n
	if c.stashOff == len(*c.stash) {
		putFrame(c.stash)
		c.stash, c.stashOff = nil, 0
	}
	return f, err
}

// consume feeds freshly received bytes to the frame reader; what follows a
// complete frame is stashed until that frame's reply has been written.
func (c *conn) consume(b []byte) (*[]byte, error) {
	n, f, err := c.in.feed(b)
	if err != nil || f == nil {
		return f, err
	}
	if rest := b[n:]; len(rest) > 0 {
		c.stash = getFrame(len(rest))
		copy(*c.stash, rest)
		c.stashOff = 0
	}
	return f, nil
}

// serve hands a frame to the handler, on the loop or a worker, and reports
// whether the reply is already there (in c.out, or nil for no reply).
func (c *conn) serve(f *[]byte) bool {
	c.frame = f
	c.lastActive = c.loop.now
	c.servedAt = time.Now()
	if w := c.loop.srv.work; w != nil {
		c.phase.Store(phaseAwaiting)
		w <- c
		return false
	}
	c.phase.Store(phaseServing)
	c.h.Serve(*f, c.replyFn)
	if c.phase.CompareAndSwap(phaseServing, phaseAwaiting) {
		return false
	}
	r := c.reply
	c.reply = nil
	c.replied(r)
	return true
}

// replied takes the reply to the frame in flight (on the loop).
func (c *conn) replied(r Reply) {
	putFrame(c.frame)
	c.frame = nil
	c.in.max = frameLimit(c.h, c.loop.srv.opts.MaxFrame)
	c.phase.Store(phaseIdle)
	if r != nil && c.tls != nil {
		r = c.tls.seal(r)
	}
	if r != nil {
		c.out.start(r)
	}
}

// refillTLS moves a TLS reply whose current chunk is out to its next one
// (tls.go); false when there is none.
func (c *conn) refillTLS() bool {
	if c.tls == nil || c.out.r != Reply(&c.tls.reply) || !c.tls.reply.refill() {
		return false
	}
	c.out.start(c.out.r)
	return true
}

// wroteReply finishes a reply whose parts are all out; it reports whether
// the connection must now close.
func (c *conn) wroteReply() bool {
	r := c.out.r
	c.out = outState{}
	c.writeWait = 0
	c.lastActive = c.loop.now
	closeNow := r.ShouldClose()
	if t, ok := r.(TimedReply); ok {
		t.Written(time.Since(c.servedAt))
	}
	r.Release()
	return closeNow || c.closeAfterReply
}

// outState walks a reply's parts as bytes leave.
type outState struct {
	r    Reply
	n    int   // parts
	part int   // current part
	off  int64 // bytes of the current part already written
}

func (o *outState) start(r Reply) {
	*o = outState{r: r, n: r.NumParts()}
	o.skipEmpty()
}

func (o *outState) done() bool { return o.part >= o.n }

func partLen(b []byte, f *os.File, n int64) int64 {
	if b != nil {
		return int64(len(b))
	}
	if f == nil {
		return 0
	}
	return n
}

func (o *outState) skipEmpty() {
	for o.part < o.n {
		b, f, _, n := o.r.PartAt(o.part)
		if partLen(b, f, n)-o.off > 0 {
			return
		}
		o.part++
		o.off = 0
	}
}

// advance records n bytes written from the current position.
func (o *outState) advance(n int64) {
	for n > 0 && o.part < o.n {
		b, f, _, size := o.r.PartAt(o.part)
		left := partLen(b, f, size) - o.off
		if n < left {
			o.off += n
			return
		}
		n -= left
		o.part++
		o.off = 0
	}
	o.skipEmpty()
}

// gather fills iov with the byte parts from the current position up to the
// next file region; it returns how many entries it used, their bytes, and
// whether they finish the reply.
func (o *outState) gather(iov []unix.Iovec) (k int, total int64, last bool) {
	off := o.off
	i := o.part
	for ; i < o.n && k < len(iov); i++ {
		b, _, _, _ := o.r.PartAt(i)
		if b == nil {
			break
		}
		b = b[off:]
		off = 0
		if len(b) == 0 {
			continue
		}
		iov[k].Base = &b[0]
		iov[k].SetLen(len(b))
		total += int64(len(b))
		k++
	}
	return k, total, i == o.n
}

// fileRegion returns the rest of the current part when it is a file region.
func (o *outState) fileRegion() (fd int, off, n int64, ok bool) {
	b, f, foff, size := o.r.PartAt(o.part)
	if b != nil || f == nil {
		return 0, 0, 0, false
	}
	return int(f.Fd()), foff + o.off, size - o.off, true
}

// maxIovPerOp bounds one writev/sendmsg (IOV_MAX is 1024; replies rarely
// have more than a handful of byte parts between file regions).
const maxIovPerOp = 8

// writev is writev(2) without the allocation of unix.Writev.
func writev(fd int, iov []unix.Iovec) (int, error) {
	n, _, errno := unix.Syscall(unix.SYS_WRITEV, uintptr(fd), uintptr(unsafe.Pointer(&iov[0])), uintptr(len(iov)))
	if errno != 0 {
		return 0, errno
	}
	return int(n), nil
}

// sendfileOnce sends up to n bytes of file fd at off to the socket; it
// returns the bytes sent (≥ 0) or an error (EAGAIN when the socket is full).
func sendfileOnce(sock, fd int, off *int64, n int64) (int, error) {
	n = min(n, maxSendfile)
	for {
		w, err := unix.Sendfile(sock, fd, off, int(n))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, err
		}
		if w == 0 {
			return 0, errShortFile
		}
		return w, nil
	}
}

// maxSendfile bounds one sendfile call (Linux moves at most about 2 GiB).
const maxSendfile = 1 << 30

var errShortFile = errors.New("netpoll: file region extends past the end of the file")

// isPeerGone reports errors that only mean the client went away.
func isPeerGone(err error) bool {
	return errors.Is(err, unix.ECONNRESET) || errors.Is(err, unix.EPIPE) || errors.Is(err, unix.ETIMEDOUT)
}

// inbox is a lock-free list of connections whose reply arrived from another
// goroutine (multi-producer push, single consumer takes all). A connection
// is in it at most once: it has at most one request in flight.
type inbox struct{ head atomic.Pointer[conn] }

func (q *inbox) push(c *conn) {
	for {
		old := q.head.Load()
		c.next = old
		if q.head.CompareAndSwap(old, c) {
			return
		}
	}
}

func (q *inbox) takeAll() *conn { return q.head.Swap(nil) }
func (q *inbox) nonEmpty() bool { return q.head.Load() != nil }
