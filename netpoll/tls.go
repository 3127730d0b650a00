package netpoll

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// ListenerOptions describe one listening socket given to ServeListener.
type ListenerOptions struct {
	// Name is the listener's name (Kafka's listener name, "PLAINTEXT" …),
	// passed to Handler.Open with each connection.
	Name string
	// TLS, when set, makes every connection a TLS server connection with
	// this config (its GetConfigForClient may change certificates per
	// handshake: reload without restart).
	TLS *tls.Config
	// HandshakeTimeout bounds a TLS handshake (0: 10 s); a peer that has
	// not finished by then is closed.
	HandshakeTimeout time.Duration
	// MaxHandshakes bounds the TLS handshakes in progress at once (0:
	// 1024); further connections wait in the listen backlog.
	MaxHandshakes int
}

func (lo *ListenerOptions) defaults() {
	if lo.HandshakeTimeout <= 0 {
		lo.HandshakeTimeout = 10 * time.Second
	}
	if lo.MaxHandshakes <= 0 {
		lo.MaxHandshakes = 1024
	}
}

// ConnInfo is what a Handler learns about a new connection.
type ConnInfo struct {
	Remote   net.Addr
	Listener string               // ListenerOptions.Name
	TLS      *tls.ConnectionState // nil on a plaintext listener
}

// errWouldBlock is what memConn.Read returns when the event loop has handed
// it no more ciphertext. crypto/tls treats a temporary net.Error as "try
// again later" and keeps what it has read of a record.
var errWouldBlock error = wouldBlock{}

type wouldBlock struct{}

func (wouldBlock) Error() string   { return "netpoll: no more input yet" }
func (wouldBlock) Timeout() bool   { return true }
func (wouldBlock) Temporary() bool { return true }

// memConn is the net.Conn under a TLS connection. During the handshake it
// passes through to the socket (a goroutine blocks on it); once the
// connection moves to an event loop, sock is nil and it reads the
// ciphertext the loop received (in) and collects the ciphertext to send
// (out), which the loop writes like any reply bytes.
type memConn struct {
	sock          net.Conn // nil once on the loop
	local, remote net.Addr

	// Loop mode, owned by the loop. Invariant: inOff <= len(in).
	in    []byte
	inOff int
	out   []byte
}

func (m *memConn) Read(b []byte) (int, error) {
	if m.sock != nil {
		return m.sock.Read(b)
	}
	if m.inOff == len(m.in) {
		m.in, m.inOff = m.in[:0], 0
		return 0, errWouldBlock
	}
	n := copy(b, m.in[m.inOff:])
	m.inOff += n
	return n, nil
}

func (m *memConn) Write(b []byte) (int, error) {
	if m.sock != nil {
		return m.sock.Write(b)
	}
	m.out = append(m.out, b...)
	return len(b), nil
}

func (m *memConn) Close() error {
	if m.sock != nil {
		return m.sock.Close()
	}
	return nil
}

func (m *memConn) LocalAddr() net.Addr  { return m.local }
func (m *memConn) RemoteAddr() net.Addr { return m.remote }

func (m *memConn) SetDeadline(t time.Time) error {
	if m.sock != nil {
		return m.sock.SetDeadline(t)
	}
	return nil
}

func (m *memConn) SetReadDeadline(t time.Time) error {
	if m.sock != nil {
		return m.sock.SetReadDeadline(t)
	}
	return nil
}

func (m *memConn) SetWriteDeadline(t time.Time) error {
	if m.sock != nil {
		return m.sock.SetWriteDeadline(t)
	}
	return nil
}

// tlsLayer is a TLS connection's record layer on an event loop: ciphertext
// in from the loop's reads (feed), request frames out (pull), replies
// sealed into ciphertext a chunk at a time (seal, refill).
type tlsLayer struct {
	tc    *tls.Conn
	mc    *memConn
	state tls.ConnectionState
	spare []byte      // the other ciphertext buffer (double buffering)
	reply sealedReply // the one sealed reply in flight
	plain *[]byte     // staging for plaintext, pooled while sealing
}

// sealChunk is how much plaintext is staged before it is encrypted: a file
// region is read in chunks of this size (Fetch over TLS cannot sendfile).
const sealChunk = 256 << 10

// maxKeptCiphertext is the largest ciphertext buffer kept between replies;
// a bigger one (a large fetch) is dropped after it is written.
const maxKeptCiphertext = 1 << 20

// feed appends ciphertext received from the socket.
func (t *tlsLayer) feed(b []byte) { t.mc.in = append(t.mc.in, b...) }

// pull decrypts buffered records into fr until a frame is complete (it is
// returned) or no whole record is buffered (nil, nil). Plaintext past the
// frame stays inside the TLS connection, so no stash is needed.
func (t *tlsLayer) pull(fr *frameReader) (*[]byte, error) {
	for {
		n, err := t.tc.Read(fr.space())
		if n > 0 {
			if f, ferr := fr.got(n); f != nil || ferr != nil {
				return f, ferr
			}
			continue
		}
		if errors.Is(err, errWouldBlock) {
			return nil, nil
		}
		if err == nil {
			err = io.ErrNoProgress
		}
		return nil, err
	}
}

// seal starts sending r over TLS: it returns a reply holding r's first
// ciphertext chunk (up to sealChunk of plaintext, file regions read with
// pread); refill moves it to the next chunk once that one is written, so a
// connection holds at most one chunk of ciphertext whatever the reply's
// size. Ciphertext the connection wrote on its own (a key update answer)
// goes out ahead of it.
func (t *tlsLayer) seal(r Reply) Reply {
	t.reply = sealedReply{t: t, r: r, n: r.NumParts()}
	t.reply.fill()
	return &t.reply
}

// sealedReply is a reply being sent over TLS, one chunk at a time.
type sealedReply struct {
	t    *tlsLayer
	r    Reply  // the plaintext reply; released with the last chunk
	n    int    // r's parts
	part int    // the next plaintext to seal: part, and offset in it
	off  int64  //
	b    []byte // the current chunk's ciphertext
	err  error  // sticky: a failed read ends the reply and the connection
}

// fill seals the next chunk into b.
func (s *sealedReply) fill() {
	t := s.t
	if buf := s.stage(); len(buf) > 0 && s.err == nil {
		_, s.err = t.tc.Write(buf) // into t.mc.out
	}
	s.b = t.mc.out
	t.mc.out = t.spare[:0]
	t.spare = nil
}

// stage gathers the next chunk of plaintext (up to sealChunk) into the
// staging buffer, which it returns to the pool after the last chunk.
func (s *sealedReply) stage() []byte {
	t := s.t
	if t.plain == nil {
		t.plain = getFrame(sealChunk)
	}
	buf := (*t.plain)[:0]
	for s.part < s.n && len(buf) < cap(buf) && s.err == nil {
		b, f, foff, size := s.r.PartAt(s.part)
		if b == nil && f == nil {
			s.part, s.off = s.part+1, 0
			continue
		}
		var k int64
		if b != nil {
			k, size = int64(copy(buf[len(buf):cap(buf)], b[s.off:])), int64(len(b))
		} else {
			k = min(size-s.off, int64(cap(buf)-len(buf)))
			got, err := f.ReadAt(buf[len(buf):len(buf)+int(k)], foff+s.off)
			if int64(got) < k {
				s.err = fmt.Errorf("netpoll: reading file region for TLS: %w", errors.Join(err, errShortFile))
				break
			}
		}
		buf, s.off = buf[:len(buf)+int(k)], s.off+k
		if s.off == size {
			s.part, s.off = s.part+1, 0
		}
	}
	return buf
}

// more reports whether chunks are left after the current one.
func (s *sealedReply) more() bool { return s.part < s.n && s.err == nil }

// refill moves to the next chunk once the current one is written; false
// when the reply is done.
func (s *sealedReply) refill() bool {
	if !s.more() {
		return false
	}
	s.recycle()
	s.fill()
	return true
}

func (s *sealedReply) recycle() {
	if cap(s.b) <= maxKeptCiphertext {
		s.t.spare = s.b[:0]
	}
	s.b = nil
}

func (s *sealedReply) NumParts() int { return 1 }
func (s *sealedReply) PartAt(int) ([]byte, *os.File, int64, int64) {
	return s.b, nil, 0, 0
}
func (s *sealedReply) ShouldClose() bool { return s.err != nil || s.r.ShouldClose() }

// Release ends the reply (written or dropped) and releases the plaintext
// reply.
func (s *sealedReply) Release() {
	s.recycle()
	if s.t.plain != nil {
		putFrame(s.t.plain)
		s.t.plain = nil
	}
	if s.r != nil {
		s.r.Release()
		s.r = nil
	}
}

// sealTo writes a reply's plaintext to w (the std backend's TLS
// connection) in chunks of sealChunk: byte parts are coalesced with the
// file regions read after them.
func sealTo(w io.Writer, r Reply) error {
	s := sealedReply{t: &tlsLayer{}, r: r, n: r.NumParts()}
	defer func() {
		if s.t.plain != nil {
			putFrame(s.t.plain)
		}
	}()
	for s.more() {
		buf := s.stage()
		if s.err != nil {
			return s.err
		}
		if _, err := w.Write(buf); err != nil {
			return err
		}
	}
	return nil
}

// handshake runs a TLS server handshake on a goroutine of its own, bounded
// by lo.HandshakeTimeout. The returned connection reads and writes the
// socket until the connection moves onto an event loop (memConn.sock
// cleared) or, on the std backend, for its whole life.
func handshake(nc net.Conn, lo *ListenerOptions) (*tls.Conn, *memConn, error) {
	mc := &memConn{sock: nc, local: nc.LocalAddr(), remote: nc.RemoteAddr()}
	tc := tls.Server(mc, lo.TLS)
	if err := nc.SetDeadline(time.Now().Add(lo.HandshakeTimeout)); err != nil {
		return nil, nil, err
	}
	if err := tc.Handshake(); err != nil {
		return nil, nil, err
	}
	if err := nc.SetDeadline(time.Time{}); err != nil {
		return nil, nil, err
	}
	return tc, mc, nil
}

// serveTLS accepts on ln and runs each connection's handshake on its own
// goroutine (at most lo.MaxHandshakes at once); ready gets the connections
// whose handshake finished. It returns when ln is closed.
func serveTLS(ln net.Listener, lo ListenerOptions, opts *Options, closing func() bool, ready func(net.Conn, *tls.Conn, *memConn)) error {
	lo.defaults()
	sem := make(chan struct{}, lo.MaxHandshakes)
	var wg sync.WaitGroup
	var mu sync.Mutex
	shaking := map[net.Conn]struct{}{} // handshakes in progress, closed when the listener is
	defer func() {
		mu.Lock()
		for nc := range shaking {
			nc.Close()
		}
		mu.Unlock()
		wg.Wait()
	}()
	for {
		nc, err := ln.Accept()
		if err != nil {
			if closing() || errors.Is(err, net.ErrClosed) {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(5 * time.Millisecond)
				continue
			}
			return err
		}
		sem <- struct{}{}
		mu.Lock()
		shaking[nc] = struct{}{}
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			tc, mc, err := handshake(nc, &lo)
			mu.Lock()
			delete(shaking, nc)
			mu.Unlock()
			if err != nil {
				opts.Logger.Debug("TLS handshake failed", "listener", lo.Name, "remote", nc.RemoteAddr(), "err", err)
				nc.Close()
				return
			}
			if closing() {
				nc.Close()
				return
			}
			ready(nc, tc, mc)
		}()
	}
}
