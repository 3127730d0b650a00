package netpoll

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sluice-broker/sluice/netpoll/uring"
)

// The uring backend: per loop, one io_uring created on the loop's locked
// thread. Accepts are multishot; a connection waiting for a request has a
// recv in flight that takes its buffer from a provided-buffer ring only when
// bytes arrive (an idle connection pins no buffer); replies go out with
// send/sendmsg; file regions go out with sendfile from the loop, waiting
// for socket space with an io_uring poll. One io_uring_enter per loop
// iteration submits every queued operation and reaps every completion.
//
// Why sendfile rather than IORING_OP_SPLICE for file regions: io_uring
// runs a splice from a regular file on an io-wq worker thread (it cannot
// be done without blocking), so each pipe-sized step costs a hand-off to a
// kernel worker, and every region in flight needs a pipe (two fds and up to
// 1 MiB of pipe buffers per connection). sendfile of page-cached data from
// the loop is one copy-free call. BenchmarkFileToSocket in netpoll/uring
// measures both (BENCHMARKS.md, "Network layer"): sendfile moved
// 1.7-1.9 GB/s, linked splices 0.9-1.0 GB/s through a 64 KiB pipe and
// 0.5-1.2 GB/s through a 1 MiB one.
//
// Why not SEND_ZC for byte slices: in-memory reply parts are response
// headers (record bytes are file regions), and on loopback the kernel
// copies zero-copy pages anyway; BenchmarkSendLarge shows SEND_ZC at about
// twice the CPU per GB of SEND for 1 MiB buffers.

// uringCaps is what the kernel offers, probed once per process.
type uringCaps struct {
	bufRing    bool   // provided buffer rings (5.19)
	setupFlags uint32 // the best ring flags the kernel accepts
}

var uringProbe struct {
	once sync.Once
	err  error
	caps uringCaps
}

// uringDisabledForTest lets tests exercise the fallback to epoll, and
// uringCompatForTest the fallbacks inside the backend (what it does on
// kernels without provided buffer rings, multishot accept or the
// TASKRUN setup flags).
var (
	uringDisabledForTest error
	uringCompatForTest   bool
)

func uringAvailable() error {
	if uringDisabledForTest != nil {
		return uringDisabledForTest
	}
	uringProbe.once.Do(func() { uringProbe.caps, uringProbe.err = probeUring() })
	return uringProbe.err
}

// uringRequired are the ops the backend cannot do without.
var uringRequired = []uint8{uring.OpNop, uring.OpAccept, uring.OpRecv, uring.OpSend,
	uring.OpSendmsg, uring.OpPollAdd, uring.OpAsyncCancel, uring.OpRead}

// uringSetupChoices are tried in order: the first the kernel accepts wins.
var uringSetupChoices = []uint32{
	uring.SetupSingleIssuer | uring.SetupDeferTaskrun | uring.SetupSubmitAll, // 6.1
	uring.SetupCoopTaskrun | uring.SetupTaskrunFlag | uring.SetupSubmitAll,   // 5.19
	uring.SetupSubmitAll, // 5.18
	0,
}

func probeUring() (uringCaps, error) {
	var caps uringCaps
	r, err := uring.New(uring.Params{Entries: 8})
	if err != nil {
		return caps, explainSetupError(err)
	}
	defer r.Close()
	const need = uring.FeatNoDrop | uring.FeatFastPoll | uring.FeatExtArg
	if r.Features()&need != need {
		return caps, fmt.Errorf("kernel lacks io_uring features (NODROP, FAST_POLL, EXT_ARG: Linux 5.11+)")
	}
	p, err := r.Probe()
	if err != nil {
		return caps, err
	}
	if missing := p.Missing(uringRequired...); len(missing) > 0 {
		return caps, fmt.Errorf("kernel lacks io_uring ops %s", strings.Join(missing, ", "))
	}
	if br, err := r.NewBufRing(0, 8, 4096); err == nil {
		caps.bufRing = true
		br.Close()
	}
	for _, f := range uringSetupChoices {
		if t, err := uring.New(uring.Params{Entries: 8, Flags: f}); err == nil {
			t.Close()
			caps.setupFlags = f
			break
		}
	}
	return caps, nil
}

// explainSetupError says why io_uring_setup failed in terms an operator
// can act on.
func explainSetupError(err error) error {
	switch {
	case errors.Is(err, unix.ENOSYS):
		return fmt.Errorf("%w (kernel without io_uring, or filtered by seccomp)", err)
	case errors.Is(err, unix.EPERM):
		if b, rerr := os.ReadFile("/proc/sys/kernel/io_uring_disabled"); rerr == nil {
			switch strings.TrimSpace(string(b)) {
			case "2":
				return fmt.Errorf("%w (kernel.io_uring_disabled=2)", err)
			case "1":
				return fmt.Errorf("%w (kernel.io_uring_disabled=1 and not in kernel.io_uring_group)", err)
			}
		}
		return fmt.Errorf("%w (denied, likely by seccomp or an LSM)", err)
	}
	return err
}

func newUring(h Handler, opts Options) (Server, error) {
	if err := uringAvailable(); err != nil {
		return nil, err
	}
	s := newLoopServer(BackendUring, h, opts, newUringLoop)
	s.lockLoops = true // SINGLE_ISSUER ring; the loop blocks in io_uring_enter (park_linux.go says why)
	return s, nil
}

// Kinds of operation, in the top byte of the user data. Below it: the
// connection's generation (24 bits) and slot (32 bits), or for accepts the
// listening fd.
const (
	kindWake uint8 = iota + 1
	kindAccept
	kindRecv       // recv from the provided-buffer ring
	kindRecvDirect // recv into the frame being assembled
	kindSend
	kindPollOut
	kindCancel
)

func userData(kind uint8, slot int32, gen uint32) uint64 {
	return uint64(kind)<<56 | uint64(gen&genMask)<<32 | uint64(uint32(slot))
}

func splitUserData(ud uint64) (kind uint8, slot int32, gen uint32) {
	return uint8(ud >> 56), int32(uint32(ud)), uint32(ud>>32) & genMask
}

const (
	uringEntries = 1024 // SQ; the CQ is 8× (completions of 10k connections)
	pbufCount    = 512
	pbufSize     = 8 << 10
)

type uringLoop struct {
	loopBase
	ring      *uring.Ring
	br        *uring.BufRing // nil without provided buffer rings
	cqes      []uring.CQE
	backlog   []uring.CQE // reaped while making room in the SQ
	wakeBuf   [8]byte
	sfOff     int64
	hand      []handoff
	accepts   map[int]*uringListener
	acceptOn  int  // listeners with an accept in flight
	multishot bool // try multishot accepts (Linux 5.19)
}

type uringListener struct {
	fd        int
	name      string
	share     bool
	multishot bool
	armed     bool
}

func newUringLoop(s *loopServer, id int) (eventLoop, error) {
	l := &uringLoop{accepts: map[int]*uringListener{}}
	if err := l.init(s, id); err != nil {
		return nil, err
	}
	caps := uringProbe.caps
	l.multishot = true
	if uringCompatForTest {
		caps = uringCaps{}
		l.multishot = false
	}
	var err error
	l.ring, err = uring.New(uring.Params{Entries: uringEntries, CQEntries: 8 * uringEntries, Flags: caps.setupFlags})
	if err != nil {
		unix.Close(l.wakeFd)
		return nil, explainSetupError(err)
	}
	if caps.bufRing {
		if l.br, err = l.ring.NewBufRing(0, pbufCount, pbufSize); err != nil {
			s.opts.Logger.Warn("io_uring provided buffers unavailable; receiving into per-connection buffers", "err", err)
		}
	}
	l.cqes = make([]uring.CQE, 512)
	l.armWake()
	return l, nil
}

func (l *uringLoop) base() *loopBase { return &l.loopBase }

func (l *uringLoop) run() {
	defer l.cleanup()
	for {
		l.now = time.Now().UnixNano()
		if l.srv.forced.Load() {
			l.endBatch() // answer what was held back before dropping the connections
			l.abandonAll()
			return
		}
		if l.srv.closing.Load() && !l.draining {
			l.stopAccepting()
			l.drainForShutdown(l.closeConn)
		}
		if l.draining && l.live == 0 && l.acceptOn == 0 {
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
				if !c.closed {
					l.drive(c)
				}
			}
		}
		if l.now >= l.nextTick {
			l.tick(l.closeConn)
			if l.acceptWait {
				l.acceptWait = false
				for _, a := range l.accepts {
					l.armAccept(a)
				}
			}
		}
		l.wait()
	}
}

// wait submits everything queued and waits for a completion or the next
// tick, then handles what completed.
func (l *uringLoop) wait() {
	l.endBatch() // frames served since the loop's top (replies, ready conns)
	var err error
	if l.prepareSleep() {
		_, err = l.ring.SubmitAndWait(1, l.untilTick())
	} else {
		_, err = l.ring.SubmitAndWait(0, -1)
	}
	l.sleeping.Store(false)
	if err != nil && !errors.Is(err, uring.ErrBusy) {
		l.srv.opts.Logger.Error("io_uring_enter", "err", err)
		time.Sleep(time.Millisecond) // do not spin on a persistent error
	}
	l.now = time.Now().UnixNano()
	l.reap()
}

func (l *uringLoop) reap() {
	for len(l.backlog) > 0 {
		b := l.backlog
		l.backlog = nil
		for i := range b {
			l.complete(&b[i])
		}
	}
	for {
		n := l.ring.Reap(l.cqes)
		for i := range l.cqes[:n] {
			l.complete(&l.cqes[i])
		}
		if n < len(l.cqes) {
			return
		}
	}
}

// sqe returns a free SQE, submitting (and if the kernel pushes back,
// setting completions aside) to make room.
func (l *uringLoop) sqe() *uring.SQE {
	for {
		if s := l.ring.GetSQE(); s != nil {
			return s
		}
		_, err := l.ring.Submit()
		if errors.Is(err, uring.ErrBusy) {
			var tmp [64]uring.CQE
			n := l.ring.Reap(tmp[:])
			l.backlog = append(l.backlog, tmp[:n]...)
			if n == 0 {
				l.ring.SubmitAndWait(0, 0) // flush the overflow list
			}
		} else if err != nil {
			l.srv.opts.Logger.Error("io_uring submit", "err", err)
			time.Sleep(time.Millisecond)
		}
	}
}

func (l *uringLoop) armWake() {
	s := l.sqe()
	s.PrepRead(l.wakeFd, l.wakeBuf[:], 0)
	s.UserData = userData(kindWake, 0, 0)
}

// complete handles one completion.
func (l *uringLoop) complete(cqe *uring.CQE) {
	kind, slot, gen := splitUserData(cqe.UserData)
	switch kind {
	case kindWake:
		l.armWake()
		return
	case kindAccept:
		l.accepted(int(slot), cqe)
		return
	case kindCancel:
		return
	}
	c := l.lookup(slot, gen)
	if c == nil {
		if cqe.HasBuffer() && l.br != nil {
			l.br.Recycle(cqe.BufferID())
		}
		return
	}
	c.pending--
	switch kind {
	case kindRecv, kindRecvDirect:
		c.recvBusy = false
		l.received(c, kind, cqe)
	case kindSend:
		c.sendBusy = false
		l.sent(c, cqe.Res)
	case kindPollOut:
		c.pollBusy = false
		if cqe.Res < 0 && !c.closed && cqe.Res != -int32(unix.ECANCELED) {
			l.closeConnErr(c, syscall.Errno(-cqe.Res))
		}
	}
	if c.closed {
		l.maybeFinish(c)
		return
	}
	l.drive(c)
}

func (l *uringLoop) received(c *conn, kind uint8, cqe *uring.CQE) {
	res := cqe.Res
	var data []byte
	if cqe.HasBuffer() {
		data = l.br.Buf(cqe.BufferID(), int(max(res, 0)))
		defer l.br.Recycle(cqe.BufferID())
	} else if c.rbuf != nil {
		// No provided buffers: the recv went into a pooled buffer that
		// the connection held while it was in flight.
		data = (*c.rbuf)[:max(res, 0)]
		defer func(p *[]byte) { putFrame(p) }(c.rbuf)
		c.rbuf = nil
	}
	switch {
	case c.closed:
		return
	case res == -int32(unix.ENOBUFS):
		l.readyConns = append(l.readyConns, c) // retry once buffers are back
		return
	case res == -int32(unix.ECANCELED):
		return // the send it was linked to came up short
	case res < 0:
		l.closeConnErr(c, syscall.Errno(-res))
		return
	case res == 0:
		l.closeConnErr(c, io.EOF)
		return
	}
	var f *[]byte
	var err error
	switch {
	case c.tls != nil:
		c.tls.feed(data)
		f, err = c.tls.pull(&c.in)
	case kind == kindRecvDirect:
		f = c.in.filled(int(res))
	default:
		f, err = c.consume(data)
	}
	if err != nil {
		l.closeConnErr(c, err)
		return
	}
	if f != nil {
		// A recv linked behind a send that the kernel completed short
		// (possible where MSG_WAITALL is not honoured) can deliver the
		// next request before the reply is out: it waits its turn.
		c.ready = f
	}
}

func (l *uringLoop) sent(c *conn, res int32) {
	if c.closed {
		return
	}
	if res < 0 {
		l.closeConnErr(c, syscall.Errno(-res))
		return
	}
	c.out.advance(int64(res))
}

// drive moves a connection as far as it can go: finish the reply, then
// take the next frame from the stash or post a recv for it.
func (l *uringLoop) drive(c *conn) {
	for budget := frameBudget; !c.closed; {
		if c.out.r != nil {
			if c.sendBusy || c.pollBusy || !l.flush(c) {
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
		if c.ready != nil {
			f := c.ready
			c.ready = nil
			c.serve(f)
			continue
		}
		if c.recvBusy {
			return
		}
		if budget == 0 {
			l.readyConns = append(l.readyConns, c)
			return
		}
		budget--
		if c.tls != nil {
			// Records the handshake or an earlier recv left buffered.
			f, err := c.tls.pull(&c.in)
			if err != nil {
				l.closeConnErr(c, err)
				return
			}
			if f != nil {
				c.serve(f)
				continue
			}
		} else if c.hasQueuedInput() {
			f, err := c.takeQueuedFrame()
			if err != nil {
				l.closeConnErr(c, err)
				return
			}
			if f != nil {
				c.serve(f)
			}
			continue
		}
		l.postRecv(c)
		return
	}
}

// postRecv asks for the next bytes: straight into a large frame's body, or
// into whichever provided buffer is free when they arrive.
func (l *uringLoop) postRecv(c *conn) {
	s := l.sqe()
	space := c.in.bodySpace()
	if c.tls != nil {
		space = nil // ciphertext: never straight into the frame
	}
	switch {
	case len(space) >= pbufSize || l.br == nil && len(space) > 0:
		// The body's size is known: MSG_WAITALL has the kernel retry
		// until it is all in, one completion per large frame.
		s.PrepRecv(c.fd, space, unix.MSG_WAITALL)
		s.UserData = userData(kindRecvDirect, c.slot, c.gen)
	case l.br != nil:
		s.PrepRecvSelect(c.fd, l.br.Group(), 0, 0)
		s.UserData = userData(kindRecv, c.slot, c.gen)
	default:
		c.rbuf = getFrame(pbufSize)
		s.PrepRecv(c.fd, *c.rbuf, 0)
		s.UserData = userData(kindRecv, c.slot, c.gen)
	}
	c.recvDirect = len(space) > 0 && c.rbuf == nil && (len(space) >= pbufSize || l.br == nil)
	c.recvBusy = true
	c.pending++
}

// flush sends the current reply. It returns true when every part is out;
// false when an operation was queued (or the connection failed).
func (l *uringLoop) flush(c *conn) bool {
	if c.writeWait == 0 {
		c.writeWait = l.now
	}
	for !c.out.done() {
		if fd, off, size, ok := c.out.fileRegion(); ok {
			l.sfOff = off
			n, err := sendfileOnce(c.fd, fd, &l.sfOff, size)
			switch {
			case err == unix.EAGAIN:
				l.pollOut(c)
				return false
			case err != nil:
				l.closeConnErr(c, err)
				return false
			}
			c.out.advance(int64(n))
			if int64(n) < size && n < maxSendfile {
				// Short: the socket buffer filled. Wait for room now
				// rather than learn it from one more sendfile's EAGAIN
				// (one syscall less per buffer's worth; the poll
				// completes at once if room came meanwhile).
				l.pollOut(c)
				return false
			}
			continue
		}
		l.reserve(2) // a send and its linked recv go in one submission
		k, _, last := c.out.gather(c.iov[:])
		s := l.sqe()
		if k == 1 {
			s.PrepSend(c.fd, unsafe.Slice(c.iov[0].Base, c.iov[0].Len), sendFlags)
		} else {
			c.msg = unix.Msghdr{Iov: &c.iov[0]}
			c.msg.SetIovlen(k)
			s.PrepSendmsg(c.fd, &c.msg, sendFlags)
		}
		s.UserData = userData(kindSend, c.slot, c.gen)
		c.sendBusy = true
		c.pending++
		if last && l.mayLinkRecv(c) {
			// Post the next recv now, linked behind the send: one
			// submission instead of two round trips through the loop. A
			// short send cuts the link and the recv ends ECANCELED.
			s.Flags |= uring.SQEIOLink
			l.postRecv(c)
		}
		return false
	}
	return true
}

// pollOut waits for room in c's socket buffer.
func (l *uringLoop) pollOut(c *conn) {
	s := l.sqe()
	s.PrepPollAdd(c.fd, unix.POLLOUT, false)
	s.UserData = userData(kindPollOut, c.slot, c.gen)
	c.pollBusy = true
	c.pending++
}

// sendFlags: MSG_WAITALL makes io_uring retry a partial send itself until
// everything is out (Linux 5.18), so a send completes short only on error,
// which is also what cuts a link.
const sendFlags = unix.MSG_NOSIGNAL | unix.MSG_WAITALL

// mayLinkRecv reports whether the next request can be asked for before the
// reply's send has completed.
func (l *uringLoop) mayLinkRecv(c *conn) bool {
	return !c.recvBusy && c.stash == nil && c.tls == nil && !c.closeAfterReply && !c.out.r.ShouldClose() && !l.srv.closing.Load()
}

// reserve makes room for n SQEs in the submission queue.
func (l *uringLoop) reserve(n int) {
	if l.ring.SQSpace() < n {
		l.ring.Submit()
	}
}

// onReply takes a reply that arrived from another goroutine.
func (l *uringLoop) onReply(c *conn, r Reply) {
	c.replied(r)
	if c.closed {
		l.maybeFinish(c)
		return
	}
	l.drive(c)
}

func (l *uringLoop) closeConnErr(c *conn, err error) {
	if !errors.Is(err, io.EOF) && !isPeerGone(err) && !errors.Is(err, unix.ECANCELED) {
		l.srv.opts.Logger.Debug("closing connection", "fd", c.fd, "err", err)
	}
	l.closeConn(c)
}

// closeConn cancels the connection's operations; the socket is closed and
// the connection released once they have all completed and the engine has
// answered the request in flight.
func (l *uringLoop) closeConn(c *conn) {
	if c.closed {
		return
	}
	c.closed = true
	if c.recvBusy {
		kind := kindRecv
		if c.recvDirect {
			kind = kindRecvDirect
		}
		l.cancel(userData(kind, c.slot, c.gen))
	}
	if c.sendBusy {
		l.cancel(userData(kindSend, c.slot, c.gen))
	}
	if c.pollBusy {
		l.cancel(userData(kindPollOut, c.slot, c.gen))
	}
	l.maybeFinish(c)
}

func (l *uringLoop) cancel(target uint64) {
	s := l.sqe()
	s.PrepCancel(target, 0)
	s.UserData = userData(kindCancel, 0, 0)
}

func (l *uringLoop) maybeFinish(c *conn) {
	if c.pending > 0 {
		return
	}
	if c.fd >= 0 {
		unix.Close(c.fd)
		c.fd = -1
	}
	if p := c.phase.Load(); p == phaseAwaiting || p == phaseReplied {
		return // onReply finishes it
	}
	l.release(c)
}

func (l *uringLoop) adoptHandoff(h handoff) {
	if !h.listener {
		l.adopt(h.fd, h.name, h.tls)
		return
	}
	if l.srv.closing.Load() {
		unix.Close(h.fd)
		return
	}
	a := &uringListener{fd: h.fd, name: h.name, share: h.share, multishot: l.multishot}
	l.accepts[h.fd] = a
	l.armAccept(a)
}

func (l *uringLoop) armAccept(a *uringListener) {
	if a.armed || l.srv.closing.Load() {
		return
	}
	s := l.sqe()
	s.PrepAccept(a.fd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, a.multishot)
	s.UserData = userData(kindAccept, int32(a.fd), 0)
	a.armed = true
	l.acceptOn++
}

func (l *uringLoop) accepted(lfd int, cqe *uring.CQE) {
	a := l.accepts[lfd]
	if a == nil { // stopped accepting
		if cqe.Res >= 0 {
			unix.Close(int(cqe.Res))
		}
		if !cqe.More() {
			l.acceptOn--
		}
		return
	}
	if !cqe.More() {
		a.armed = false
		l.acceptOn--
	}
	res := cqe.Res
	switch {
	case res >= 0:
		l.place(a, int(res))
	case res == -int32(unix.EINVAL) && a.multishot:
		a.multishot = false // kernel before 5.19: one accept per SQE
	case res == -int32(unix.EMFILE) || res == -int32(unix.ENFILE) || res == -int32(unix.ENOBUFS) || res == -int32(unix.ENOMEM):
		if !l.acceptWait {
			l.srv.opts.Logger.Warn("accept: out of resources; retrying", "err", syscall.Errno(-res))
		}
		l.acceptWait = true
		return
	case res == -int32(unix.ECANCELED) || l.srv.closing.Load():
		return
	default:
		l.srv.opts.Logger.Error("accept", "err", syscall.Errno(-res))
	}
	if !a.armed {
		l.armAccept(a)
	}
}

func (l *uringLoop) place(a *uringListener, fd int) {
	if a.share {
		if i := l.pick(); i != l.id {
			l.srv.loops[i].base().handOff(handoff{fd: fd, name: a.name})
			return
		}
	}
	l.adopt(fd, a.name, nil)
}

func (l *uringLoop) adopt(fd int, listener string, t *tlsLayer) {
	if c := l.newConn(fd, listener, t); c != nil {
		l.drive(c)
	}
}

// stopAccepting cancels the accepts and closes the listening sockets (the
// accept's completion still arrives; acceptOn counts it down).
func (l *uringLoop) stopAccepting() {
	for fd, a := range l.accepts {
		if a.armed {
			l.cancel(userData(kindAccept, int32(fd), 0))
		}
		unix.Close(fd)
	}
	l.accepts = map[int]*uringListener{}
	for _, h := range l.takeHandoffs(nil) {
		unix.Close(h.fd)
	}
}

// abandonAll ends everything now (forced shutdown). Operations still in
// flight may write into connection memory, so they are cancelled and
// waited for (briefly) before that memory is released.
func (l *uringLoop) abandonAll() {
	l.stopAccepting()
	for _, c := range l.conns {
		if c != nil {
			l.closeConn(c)
		}
	}
	deadline := time.Now().Add(time.Second)
	for l.pendingOps() && time.Now().Before(deadline) {
		l.ring.SubmitAndWait(1, 10*time.Millisecond)
		l.reap()
	}
	l.acceptOn = 0
	l.abandon(func(c *conn) {
		if c.fd >= 0 {
			unix.Close(c.fd)
			c.fd = -1
		}
	})
}

func (l *uringLoop) pendingOps() bool {
	if l.acceptOn > 0 {
		return true
	}
	for _, c := range l.conns {
		if c != nil && c.pending > 0 {
			return true
		}
	}
	return false
}

func (l *uringLoop) cleanup() {
	for fd := range l.accepts {
		unix.Close(fd)
	}
	for _, h := range l.takeHandoffs(nil) {
		unix.Close(h.fd)
	}
	if l.br != nil {
		l.br.Close()
	}
	l.ring.Close()
	unix.Close(l.wakeFd)
}
