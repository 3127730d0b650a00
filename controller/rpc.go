package controller

// The CONTROLLER listener. One port carries two protocols, told apart by
// a connection's first 8 bytes: raft connections open with the quorum's
// hello (quorum.IsHello) and go to the transport; every other connection
// speaks Kafka's framing and is served here, one request at a time and in
// order:
//
//	BrokerRegistration (62), BrokerHeartbeat (63), UnregisterBroker (64),
//	AlterPartition (56), DescribeQuorum (55), AllocateProducerIds (67),
//	CreateTopics (19), CreatePartitions (37), DeleteTopics (20),
//	ElectLeaders (43), IncrementalAlterConfigs (44, TOPIC resources; SET
//	and DELETE, the values already checked by the broker),
//	SluiceMetadataFetch (MetadataFetchKey, ours; see metadata_fetch.go)
//
// Admin requests arrive as brokers forward them: the broker has checked
// the topic configs (it owns the config table) and sends the Kafka
// request itself, not wrapped in an Envelope (58). Envelope exists to
// carry the client's principal for the controller's ACL checks; Sluice
// has no principals yet, and an enveloped request would need the broker's
// handlers to be run here, which the package layering does not allow.
//
// A broker's presence connection opens with a hello of its own and is
// held until it closes (voters.go).
//
// A connection that carried a BrokerHeartbeat is that broker's heartbeat
// connection: when its peer closes it (FIN/RST: the process died) the
// active controller hears ConnectionLost(id, epoch, now), the fast path
// of docs/cluster.md.

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/controller/quorum"
)

// rpcServer serves the broker RPCs of the CONTROLLER listener.
type rpcServer struct {
	ln net.Listener
	mu struct {
		sync.Mutex
		conns  map[net.Conn]struct{}
		closed bool
	}
	wg sync.WaitGroup
}

const maxRPCFrame = 64 << 20

func (r *rpcServer) serve(s *Service, ln net.Listener) {
	defer s.wg.Done()
	r.mu.Lock()
	r.ln, r.mu.conns = ln, map[net.Conn]struct{}{}
	r.mu.Unlock()
	for {
		c, err := ln.Accept()
		if err != nil {
			r.wg.Wait()
			return
		}
		if !r.track(c) {
			c.Close()
			continue
		}
		r.wg.Add(1)
		go r.route(s, c)
	}
}

func (r *rpcServer) track(c net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.closed {
		return false
	}
	r.mu.conns[c] = struct{}{}
	return true
}

func (r *rpcServer) untrack(c net.Conn) {
	r.mu.Lock()
	delete(r.mu.conns, c)
	r.mu.Unlock()
}

func (r *rpcServer) close() {
	r.mu.Lock()
	r.mu.closed = true
	ln := r.ln
	for c := range r.mu.conns {
		c.Close()
	}
	r.mu.Unlock()
	if ln != nil {
		ln.Close()
	}
}

// peekedConn is a connection whose first bytes were read into r.
type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *peekedConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// voterConn is a raft connection from another voter, watched for its
// close (voters.go). The voter's id is the hello's; the transport checks
// the rest of it.
type voterConn struct {
	peekedConn
	s    *Service
	id   int32
	once sync.Once
}

func newVoterConn(s *Service, c net.Conn, br *bufio.Reader) net.Conn {
	pc := peekedConn{Conn: c, r: br}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	hello, err := br.Peek(16) // frame length, magic, from
	c.SetReadDeadline(time.Time{})
	if err != nil {
		return &pc
	}
	vc := &voterConn{peekedConn: pc, s: s, id: int32(binary.BigEndian.Uint64(hello[8:]))}
	s.voterOpened(vc.id)
	return vc
}

// Read reports a close by the peer: EOF (FIN) or a reset.
func (c *voterConn) Read(b []byte) (int, error) {
	n, err := c.peekedConn.Read(b)
	if err != nil {
		byPeer := errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)
		c.once.Do(func() { c.s.voterClosed(c.id, byPeer) })
	}
	return n, err
}

func (c *voterConn) Close() error {
	c.once.Do(func() { c.s.voterClosed(c.id, false) })
	return c.peekedConn.Close()
}

// route sends a raft connection to the transport and serves the others.
func (r *rpcServer) route(s *Service, c net.Conn) {
	defer r.wg.Done()
	br := bufio.NewReaderSize(c, 64<<10)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	first, err := br.Peek(8)
	c.SetReadDeadline(time.Time{})
	if err != nil {
		r.untrack(c)
		c.Close()
		return
	}
	if quorum.IsHello(first) {
		r.untrack(c) // the transport owns it now
		s.raftLn.hand(newVoterConn(s, c, br))
		return
	}
	if isPresence(first) {
		defer r.untrack(c)
		defer c.Close()
		s.servePresence(c, br) // voters.go
		return
	}
	defer r.untrack(c)
	defer c.Close()
	cs := &connState{s: s, id: connSeq.Add(1)}
	defer cs.closed()
	w := bufio.NewWriterSize(c, 64<<10)
	var frame []byte
	for {
		var err error
		if frame, err = readFrame(br, frame); err != nil {
			return
		}
		out, ok := cs.handle(frame)
		if !ok {
			return
		}
		if _, err := w.Write(out); err != nil || w.Flush() != nil {
			return
		}
	}
}

func readFrame(r *bufio.Reader, buf []byte) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint32(hdr[:]))
	if n < 8 || n > maxRPCFrame {
		return nil, errors.New("controller: bad frame size")
	}
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	_, err := io.ReadFull(r, buf)
	return buf, err
}

// connSeq numbers broker connections, so the controller can tell a
// broker's current heartbeat connection from an older one.
var connSeq atomic.Uint64

// connState is one broker connection.
type connState struct {
	s  *Service
	id uint64 // from connSeq; never 0
	// heartbeat is the broker (and epoch) this connection last
	// heartbeated for; hbID is -1 until then.
	hbID    int32
	hbEpoch int64
	hbSeen  bool
}

// closed reports a lost heartbeat connection to the active controller.
func (cs *connState) closed() {
	if !cs.hbSeen {
		return
	}
	id, epoch, now := cs.hbID, cs.hbEpoch, time.Now().UnixMilli()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	cs.s.submit(ctx, func(a *active) {
		a.ctrl.HeartbeatConnClosed(id, epoch, cs.id, now)
		a.s.log.Info("broker heartbeat connection closed", "broker", id, "epoch", epoch)
	})
}

// handle decodes one request frame and returns the whole response frame;
// false closes the connection.
func (cs *connState) handle(frame []byte) ([]byte, bool) {
	key := int16(binary.BigEndian.Uint16(frame))
	version := int16(binary.BigEndian.Uint16(frame[2:]))
	corr := binary.BigEndian.Uint32(frame[4:])
	body := frame[8:]
	if len(body) < 2 {
		return nil, false
	}
	n := int(int16(binary.BigEndian.Uint16(body)))
	body = body[2:]
	if n > 0 {
		if n > len(body) {
			return nil, false
		}
		body = body[n:]
	}
	if key == MetadataFetchKey {
		return cs.metadataFetch(corr, body)
	}
	req := kmsg.RequestForKey(key)
	if req == nil || version < 0 || version > req.MaxVersion() {
		return nil, false
	}
	req.SetVersion(version)
	if req.IsFlexible() {
		var err error
		if body, err = skipTags(body); err != nil {
			return nil, false
		}
	}
	if err := req.ReadFrom(body); err != nil {
		return nil, false
	}
	resp := cs.serve(req)
	if resp == nil {
		return nil, false
	}
	resp.SetVersion(version)
	out := binary.BigEndian.AppendUint32(make([]byte, 4, 256), corr)
	if resp.IsFlexible() && key != kmsg.ApiVersions.Int16() {
		out = append(out, 0)
	}
	out = resp.AppendTo(out)
	binary.BigEndian.PutUint32(out, uint32(len(out)-4))
	return out, true
}

// skipTags skips a flexible request header's tagged fields.
func skipTags(b []byte) ([]byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 {
		return nil, errors.New("bad tags")
	}
	b = b[k:]
	for range n {
		_, k := binary.Uvarint(b)
		if k <= 0 {
			return nil, errors.New("bad tags")
		}
		b = b[k:]
		l, k := binary.Uvarint(b)
		if k <= 0 || l > uint64(len(b)-k) {
			return nil, errors.New("bad tags")
		}
		b = b[k+int(l):]
	}
	return b, nil
}
