package quorum

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// TCPTransport carries raft messages between members over TCP, one
// outbound connection per peer. Each connection opens with a hello frame
// naming the cluster and the sender, and a member drops connections from
// another cluster, so a member configured with the wrong cluster id can
// never vote or replicate here.
//
// A frame is a 4-byte big-endian length and a protobuf pb.Message (the
// hello is the same shape with a hello payload). Messages to a peer whose
// queue is full, or that cannot be reached, are dropped and reported to
// raft as unreachable: raft retries by itself, and a slow peer must not
// stall the leader's loop.
type TCPTransport struct {
	id        uint64
	clusterID string
	log       *slog.Logger
	deliver   func(*pb.Message)
	report    func(to uint64, unreachable bool, snapshotFailed bool)

	ln net.Listener
	// dial opens connections to peers (SetDialer); nil dials plain TCP.
	dial func(ctx context.Context, addr string) (net.Conn, error)

	mu struct {
		sync.Mutex
		peers  map[uint64]*peer
		addrs  map[uint64]string
		conns  map[net.Conn]struct{}
		closed bool
	}
	wg sync.WaitGroup
}

// peer is one outbound link; its goroutine owns the connection.
type peer struct {
	id    uint64
	addr  string
	queue chan *pb.Message
	stop  chan struct{}
}

const (
	peerQueue = 4096
	// maxMessage bounds an inbound frame (snapshots of the image included).
	maxMessage  = 256 << 20
	dialTimeout = time.Second
	// securedDialTimeout bounds a connect, TLS handshake and SASL login.
	securedDialTimeout = 3 * time.Second
	writeTimeout       = 5 * time.Second
)

// NewTCPTransport listens on addr. deliver receives inbound messages;
// report tells raft about peers it could not reach and snapshots that did
// not go out.
func NewTCPTransport(id uint64, clusterID, addr string, log *slog.Logger, deliver func(*pb.Message), report func(to uint64, unreachable, snapshotFailed bool)) (*TCPTransport, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return NewTCPTransportOn(id, clusterID, ln, log, deliver, report), nil
}

// NewTCPTransportOn is NewTCPTransport over a listener the caller made:
// the controller listener hands it the connections that open with the
// hello (IsHello) and serves the broker RPCs on the others.
func NewTCPTransportOn(id uint64, clusterID string, ln net.Listener, log *slog.Logger, deliver func(*pb.Message), report func(to uint64, unreachable, snapshotFailed bool)) *TCPTransport {
	t := &TCPTransport{id: id, clusterID: clusterID, log: log, deliver: deliver, report: report, ln: ln}
	t.mu.peers, t.mu.addrs, t.mu.conns = map[uint64]*peer{}, map[uint64]string{}, map[net.Conn]struct{}{}
	t.wg.Add(1)
	go t.accept()
	return t
}

// SetDialer makes the transport open its connections to peers with dial
// (TLS and SASL on a secured controller listener). Call it before the
// first SetPeer.
func (t *TCPTransport) SetDialer(dial func(ctx context.Context, addr string) (net.Conn, error)) {
	t.dial = dial
}

// dialPeer opens a connection to addr within dialTimeout, or
// securedDialTimeout through a dialer (TLS and SASL follow the connect).
func (t *TCPTransport) dialPeer(addr string) (net.Conn, error) {
	if t.dial == nil {
		return net.DialTimeout("tcp", addr, dialTimeout)
	}
	ctx, cancel := context.WithTimeout(context.Background(), securedDialTimeout)
	defer cancel()
	return t.dial(ctx, addr)
}

// Addr is the bound listener address.
func (t *TCPTransport) Addr() string { return t.ln.Addr().String() }

// SetPeer records (or changes) where member id listens.
func (t *TCPTransport) SetPeer(id uint64, addr string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.closed || t.mu.addrs[id] == addr {
		return
	}
	if old := t.mu.peers[id]; old != nil {
		close(old.stop)
		delete(t.mu.peers, id)
	}
	t.mu.addrs[id] = addr
}

// Send queues msgs to their peers without blocking.
func (t *TCPTransport) Send(msgs []*pb.Message) {
	for _, m := range msgs {
		p := t.peer(m.GetTo())
		if p == nil {
			t.report(m.GetTo(), true, m.GetType() == pb.MsgSnap)
			continue
		}
		select {
		case p.queue <- m:
		default:
			t.report(m.GetTo(), true, m.GetType() == pb.MsgSnap)
		}
	}
}

func (t *TCPTransport) peer(id uint64) *peer {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.closed {
		return nil
	}
	if p := t.mu.peers[id]; p != nil {
		return p
	}
	addr, ok := t.mu.addrs[id]
	if !ok {
		return nil
	}
	p := &peer{id: id, addr: addr, queue: make(chan *pb.Message, peerQueue), stop: make(chan struct{})}
	t.mu.peers[id] = p
	t.wg.Add(1)
	go t.runPeer(p)
	return p
}

// runPeer dials the peer when there is something to send and writes the
// queue to it, redialling after an error.
func (t *TCPTransport) runPeer(p *peer) {
	defer t.wg.Done()
	var (
		conn net.Conn
		w    *bufio.Writer
		buf  []byte
	)
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	for {
		var m *pb.Message
		select {
		case <-p.stop:
			return
		case m = <-p.queue:
		}
		if conn == nil {
			c, err := t.dialPeer(p.addr)
			if err != nil {
				t.report(p.id, true, m.GetType() == pb.MsgSnap)
				continue
			}
			conn, w = c, bufio.NewWriterSize(c, 64<<10)
			buf = appendHello(buf[:0], t.clusterID, t.id)
			w.Write(buf)
		}
		err := t.writeBatch(conn, w, m, p, &buf)
		if err != nil {
			conn.Close()
			conn = nil
			t.report(p.id, true, false)
		}
	}
}

// writeBatch writes m and whatever else is queued, then flushes once.
func (t *TCPTransport) writeBatch(conn net.Conn, w *bufio.Writer, m *pb.Message, p *peer, buf *[]byte) error {
	conn.SetWriteDeadline(time.Now().Add(writeTimeout))
	for {
		var err error
		*buf, err = appendMessage((*buf)[:0], m)
		if err != nil {
			return err
		}
		if _, err := w.Write(*buf); err != nil {
			if m.GetType() == pb.MsgSnap {
				t.report(p.id, false, true)
			}
			return err
		}
		if m.GetType() == pb.MsgSnap {
			if err := w.Flush(); err != nil {
				t.report(p.id, false, true)
				return err
			}
			t.report(p.id, false, false)
		}
		select {
		case m = <-p.queue:
			continue
		default:
		}
		return w.Flush()
	}
}

func (t *TCPTransport) accept() {
	defer t.wg.Done()
	for {
		c, err := t.ln.Accept()
		if err != nil {
			return
		}
		t.mu.Lock()
		if t.mu.closed {
			t.mu.Unlock()
			c.Close()
			return
		}
		t.mu.conns[c] = struct{}{}
		t.mu.Unlock()
		t.wg.Add(1)
		go t.serve(c)
	}
}

// serve reads one inbound connection: the hello, then messages.
func (t *TCPTransport) serve(c net.Conn) {
	defer t.wg.Done()
	defer func() {
		c.Close()
		t.mu.Lock()
		delete(t.mu.conns, c)
		t.mu.Unlock()
	}()
	r := bufio.NewReaderSize(c, 64<<10)
	var buf []byte
	cluster, from, err := readHello(r, &buf)
	if err != nil {
		return
	}
	if cluster != t.clusterID {
		t.log.Warn("refused controller connection from another cluster", "remote", c.RemoteAddr(), "node", from, "cluster", cluster, "ours", t.clusterID)
		return
	}
	for {
		m, err := readMessage(r, &buf)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				t.log.Debug("controller connection closed", "node", from, "err", err)
			}
			return
		}
		if m.GetFrom() != from || m.GetTo() != t.id {
			t.log.Warn("controller message with wrong addresses dropped", "hello", from, "from", m.GetFrom(), "to", m.GetTo())
			return
		}
		t.deliver(m)
	}
}

// Close stops listening, closes every connection and waits for the
// transport's goroutines.
func (t *TCPTransport) Close() error {
	t.mu.Lock()
	if t.mu.closed {
		t.mu.Unlock()
		return nil
	}
	t.mu.closed = true
	for _, p := range t.mu.peers {
		close(p.stop)
	}
	for c := range t.mu.conns {
		c.Close()
	}
	t.mu.Unlock()
	err := t.ln.Close()
	t.wg.Wait()
	return err
}

// helloMagic opens every connection: "SLQ1".
const helloMagic = 0x534c5131

// IsHello reports whether the first 8 bytes of a connection are a
// member's hello: a frame length, then the magic. No Kafka request starts
// so (the magic read as an API key is 21324).
func IsHello(first8 []byte) bool {
	return len(first8) >= 8 && binary.BigEndian.Uint32(first8[4:]) == helloMagic
}

func appendHello(dst []byte, clusterID string, from uint64) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(4+8+2+len(clusterID)))
	dst = binary.BigEndian.AppendUint32(dst, helloMagic)
	dst = binary.BigEndian.AppendUint64(dst, from)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(clusterID)))
	return append(dst, clusterID...)
}

func readHello(r *bufio.Reader, buf *[]byte) (string, uint64, error) {
	body, err := readFrameBody(r, buf, 1024)
	if err != nil {
		return "", 0, err
	}
	if len(body) < 14 || binary.BigEndian.Uint32(body) != helloMagic {
		return "", 0, errors.New("quorum: bad hello")
	}
	n := int(binary.BigEndian.Uint16(body[12:]))
	if len(body) != 14+n {
		return "", 0, errors.New("quorum: bad hello")
	}
	return string(body[14:]), binary.BigEndian.Uint64(body[4:]), nil
}

func appendMessage(dst []byte, m *pb.Message) ([]byte, error) {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst, err := proto.MarshalOptions{}.MarshalAppend(dst, m)
	if err != nil {
		return dst[:start], err
	}
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst, nil
}

func readMessage(r *bufio.Reader, buf *[]byte) (*pb.Message, error) {
	body, err := readFrameBody(r, buf, maxMessage)
	if err != nil {
		return nil, err
	}
	m := &pb.Message{}
	if err := proto.Unmarshal(body, m); err != nil {
		return nil, fmt.Errorf("quorum: bad message: %w", err)
	}
	return m, nil
}

func readFrameBody(r *bufio.Reader, buf *[]byte, limit int) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint32(hdr[:]))
	if n > limit {
		return nil, fmt.Errorf("quorum: frame of %d bytes exceeds %d", n, limit)
	}
	if cap(*buf) < n {
		*buf = make([]byte, n)
	}
	body := (*buf)[:n]
	_, err := io.ReadFull(r, body)
	return body, err
}
