package controller

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Client is a broker's link to the active controller: requests go to the
// controller listeners in turn until one answers as the active controller.
// Each Line is a connection of its own, so a long poll of the metadata
// log never delays a heartbeat, and the heartbeat connection carries
// nothing else (its close is what tells the controller the broker died).
// Present adds an idle presence connection to every controller, whose
// close tells the others too (voters.go).
type Client struct {
	addrs []string
	// dial opens connections to controllers (SetDialer); nil dials plain
	// TCP.
	dial  func(ctx context.Context, addr string) (net.Conn, error)
	lines [lineCount]line
	// switched holds a signal when a line reached the active controller
	// after failing on another, or the idle heartbeat connection was
	// closed by the controller's side (see Switched).
	switched chan struct{}
	// presence holds the presence connections (see Present).
	presence struct {
		sync.Mutex
		conns   map[net.Conn]struct{}
		started bool
		closed  bool
	}
	done chan struct{} // closed by Close
	wg   sync.WaitGroup
}

// Line names one of the client's connections.
type Line int

const (
	// LineHeartbeat carries registration and heartbeats.
	LineHeartbeat Line = iota
	// LineAdmin carries forwarded admin requests, AlterPartition and
	// producer-id allocation.
	LineAdmin
	// LineMetadata carries the long poll of the metadata log.
	LineMetadata
	lineCount
)

type line struct {
	mu   sync.Mutex
	conn net.Conn
	br   *bufio.Reader
	next int // index into addrs of the controller to try
	corr uint32
	// watching, when set, reads the idle connection for a close by the
	// controller's side (watch); it owns br until unwatch.
	watching *watcher
}

// watcher is one idle wait on a line's connection.
type watcher struct {
	done chan struct{}
	// err is what the read ended with; set before done closes.
	err error
}

// NewClient returns a client of the controllers at addrs (host:port of
// their CONTROLLER listeners).
func NewClient(addrs []string) *Client {
	c := &Client{addrs: addrs, switched: make(chan struct{}, 1), done: make(chan struct{})}
	c.presence.conns = map[net.Conn]struct{}{}
	return c
}

// securedDialTimeout bounds a connection through a dialer: the connect,
// TLS handshake and SASL login.
const securedDialTimeout = 3 * time.Second

// SetDialer makes the client open its connections with dial (TLS and SASL
// on a secured controller listener). Call it before the client is used.
func (c *Client) SetDialer(dial func(ctx context.Context, addr string) (net.Conn, error)) {
	c.dial = dial
}

// dialController opens a connection to addr within a second, or three
// with a dialer (a TLS handshake and a SASL login follow the connect).
func (c *Client) dialController(ctx context.Context, addr string) (net.Conn, error) {
	if c.dial != nil {
		ctx, cancel := context.WithTimeout(ctx, securedDialTimeout)
		defer cancel()
		return c.dial(ctx, addr)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}

// Close closes every connection.
func (c *Client) Close() {
	c.presence.Lock()
	if !c.presence.closed {
		c.presence.closed = true
		close(c.done)
		for conn := range c.presence.conns {
			conn.Close()
		}
	}
	c.presence.Unlock()
	for i := range c.lines {
		l := &c.lines[i]
		l.mu.Lock()
		l.drop()
		l.mu.Unlock()
	}
	c.wg.Wait()
}

func (l *line) drop() {
	if l.conn != nil {
		l.conn.Close()
		l.conn, l.br = nil, nil
	}
}

// Switched signals when one of the client's lines has found the active
// controller after failing on the one it used (it died, or answered
// NOT_CONTROLLER): the controller may have changed. A broker heartbeats
// at once then, rather than at its next interval, so a newly active
// controller hears at once from every live broker, a suspected one
// included (voters.go). It also signals when the idle heartbeat
// connection is closed by the controller's side: the controller reads
// that close as the broker's death and fences it after
// ConnectionLostGraceMs unless it hears from it, while the broker's next
// heartbeat may be a whole interval away. Signals do not queue beyond
// one.
func (c *Client) Switched() <-chan struct{} { return c.switched }

// ErrNoController is returned when no controller answered as active
// before the context ended.
var ErrNoController = errors.New("controller: no active controller answered")

// Call sends req on line ln to the active controller and returns its
// response, trying each controller in turn (with a short backoff) while
// they are unreachable or answer NOT_CONTROLLER, until ctx ends.
func (c *Client) Call(ctx context.Context, ln Line, req kmsg.Request) (kmsg.Response, error) {
	var resp kmsg.Response
	err := c.retry(ctx, ln, func(l *line) error {
		body := req.AppendTo(nil)
		out, err := l.roundTrip(ctx, c, req.Key(), req.GetVersion(), req.IsFlexible(), body)
		if err != nil {
			return err
		}
		r := req.ResponseKind()
		r.SetVersion(req.GetVersion())
		if r.IsFlexible() {
			if len(out) == 0 {
				return errors.New("controller: short response")
			}
			out = out[1:]
		}
		if err := r.ReadFrom(out); err != nil {
			return err
		}
		if notController(r) {
			return errNotControllerCode
		}
		resp = r
		return nil
	})
	return resp, err
}

// FetchMetadata reads the committed metadata log from offset from on,
// long-polling up to wait (SluiceMetadataFetch).
func (c *Client) FetchMetadata(ctx context.Context, from int64, wait time.Duration) (LogRead, error) {
	var rd LogRead
	err := c.retry(ctx, LineMetadata, func(l *line) error {
		body := binary.BigEndian.AppendUint64(nil, uint64(from))
		body = binary.BigEndian.AppendUint32(body, uint32(wait.Milliseconds()))
		out, err := l.roundTrip(ctx, c, MetadataFetchKey, 0, false, body)
		if err != nil {
			return err
		}
		rd, err = decodeLogRead(out)
		return err
	})
	return rd, err
}

func (c *Client) retry(ctx context.Context, ln Line, fn func(l *line) error) error {
	l := &c.lines[ln]
	l.mu.Lock()
	defer l.mu.Unlock()
	l.unwatch()
	var last error
	for attempt := 0; ; attempt++ {
		err := fn(l)
		if err == nil {
			if attempt > 0 {
				c.signalSwitched()
			}
			if ln == LineHeartbeat {
				l.watch(c)
			}
			return nil
		}
		last = err
		l.drop()
		l.next = (l.next + 1) % len(c.addrs)
		if attempt%len(c.addrs) == len(c.addrs)-1 {
			select {
			case <-ctx.Done():
				return fmt.Errorf("%w: %v", ErrNoController, last)
			case <-time.After(100 * time.Millisecond):
			}
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%w: %v", ErrNoController, last)
		}
	}
}

func (c *Client) signalSwitched() {
	select {
	case c.switched <- struct{}{}:
	default:
	}
}

// watch waits, while the line is idle, for its connection to be closed by
// the controller's side, and signals Switched when it is. Called with
// l.mu held; the watcher owns l.br until unwatch.
func (l *line) watch(c *Client) {
	if l.conn == nil {
		return
	}
	w := &watcher{done: make(chan struct{})}
	l.watching = w
	l.conn.SetReadDeadline(time.Time{})
	br := l.br
	go func() {
		defer close(w.done)
		_, w.err = br.Peek(1)
		if w.err != nil && !errors.Is(w.err, os.ErrDeadlineExceeded) && !errors.Is(w.err, net.ErrClosed) {
			c.signalSwitched() // EOF, a reset or an abort: not unwatch, not Close
		}
	}()
}

// unwatch ends the line's watch, if any, and drops a connection the watch
// found closed. Called with l.mu held.
func (l *line) unwatch() {
	w := l.watching
	if w == nil {
		return
	}
	l.watching = nil
	if l.conn != nil {
		l.conn.SetReadDeadline(time.Unix(1, 0)) // wakes the Peek
	}
	<-w.done
	if w.err != nil && !errors.Is(w.err, os.ErrDeadlineExceeded) {
		l.drop() // the next attempt redials the same controller
	}
}

// Present holds a presence connection from broker id to every controller
// listener until Close: an idle connection whose close by this process's
// kernel tells every controller, not only the active one, that the
// broker's process is gone (voters.go). One closed by the controller's
// side while this process lives is opened again at once, which clears
// the suspicion. Calling Present again does nothing.
func (c *Client) Present(id int32) {
	c.presence.Lock()
	defer c.presence.Unlock()
	if c.presence.started || c.presence.closed {
		return
	}
	c.presence.started = true
	for _, addr := range c.addrs {
		c.wg.Add(1)
		go c.presenceLoop(addr, id)
	}
}

// presenceLoop keeps one presence connection open to addr.
func (c *Client) presenceLoop(addr string, id int32) {
	defer c.wg.Done()
	var backoff time.Duration
	for {
		if up := c.holdPresence(addr, id); up >= time.Second {
			backoff = 0 // it was up: reconnect at once
		} else {
			backoff = min(max(2*backoff, 50*time.Millisecond), time.Second)
		}
		select {
		case <-c.done:
			return
		case <-time.After(backoff):
		}
	}
}

// holdPresence dials addr, says who this is and waits for the connection
// to end; it returns how long the connection was up.
func (c *Client) holdPresence(addr string, id int32) time.Duration {
	conn, err := c.dialController(context.Background(), addr)
	if err != nil {
		return 0
	}
	start := time.Now()
	c.presence.Lock()
	if c.presence.closed {
		c.presence.Unlock()
		conn.Close()
		return 0
	}
	c.presence.conns[conn] = struct{}{}
	c.presence.Unlock()
	if _, err := conn.Write(appendPresence(nil, id)); err == nil {
		_, _ = io.Copy(io.Discard, conn) // nothing comes; returns at the close
	}
	c.presence.Lock()
	delete(c.presence.conns, conn)
	c.presence.Unlock()
	conn.Close()
	return time.Since(start)
}

// roundTrip writes one request frame and returns the response body after
// the correlation id.
func (l *line) roundTrip(ctx context.Context, c *Client, key, version int16, flexible bool, body []byte) ([]byte, error) {
	if l.conn == nil {
		conn, err := c.dialController(ctx, c.addrs[l.next])
		if err != nil {
			return nil, err
		}
		l.conn, l.br = conn, bufio.NewReaderSize(conn, 64<<10)
	}
	l.corr++
	frame := make([]byte, 4, 32+len(body))
	frame = binary.BigEndian.AppendUint16(frame, uint16(key))
	frame = binary.BigEndian.AppendUint16(frame, uint16(version))
	frame = binary.BigEndian.AppendUint32(frame, l.corr)
	frame = binary.BigEndian.AppendUint16(frame, 6)
	frame = append(frame, "sluice"...)
	if flexible {
		frame = append(frame, 0)
	}
	frame = append(frame, body...)
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
	deadline := time.Now().Add(rpcTimeout + maxMetadataWait)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	l.conn.SetDeadline(deadline)
	if _, err := l.conn.Write(frame); err != nil {
		return nil, err
	}
	var hdr [8]byte
	if _, err := io.ReadFull(l.br, hdr[:]); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint32(hdr[:]))
	if binary.BigEndian.Uint32(hdr[4:]) != l.corr || n < 4 || n > maxRPCFrame {
		return nil, errors.New("controller: bad response frame")
	}
	out := make([]byte, n-4)
	_, err := io.ReadFull(l.br, out)
	return out, err
}

// notController reports a response that says the controller asked is not
// the active one (every partition of it, for per-topic answers).
func notController(r kmsg.Response) bool {
	nc := kerr.NotController.Code
	switch r := r.(type) {
	case *kmsg.BrokerRegistrationResponse:
		return r.ErrorCode == nc
	case *kmsg.BrokerHeartbeatResponse:
		return r.ErrorCode == nc
	case *kmsg.UnregisterBrokerResponse:
		return r.ErrorCode == nc
	case *kmsg.AlterPartitionResponse:
		return r.ErrorCode == nc
	case *kmsg.AllocateProducerIDsResponse:
		return r.ErrorCode == nc
	case *kmsg.CreateTopicsResponse:
		return len(r.Topics) > 0 && r.Topics[0].ErrorCode == nc
	case *kmsg.CreatePartitionsResponse:
		return len(r.Topics) > 0 && r.Topics[0].ErrorCode == nc
	case *kmsg.DeleteTopicsResponse:
		return len(r.Topics) > 0 && r.Topics[0].ErrorCode == nc
	case *kmsg.ElectLeadersResponse:
		return r.ErrorCode == nc
	case *kmsg.IncrementalAlterConfigsResponse:
		return len(r.Resources) > 0 && r.Resources[0].ErrorCode == nc
	case *kmsg.AlterPartitionAssignmentsResponse:
		return r.ErrorCode == nc
	case *kmsg.ListPartitionReassignmentsResponse:
		return r.ErrorCode == nc
	case *kmsg.AlterUserSCRAMCredentialsResponse:
		return len(r.Results) > 0 && r.Results[0].ErrorCode == nc
	case *kmsg.CreateACLsResponse: // authz.go
		return len(r.Results) > 0 && r.Results[0].ErrorCode == nc
	case *kmsg.DeleteACLsResponse:
		return len(r.Results) > 0 && r.Results[0].ErrorCode == nc
	case *kmsg.AlterClientQuotasResponse:
		return len(r.Entries) > 0 && r.Entries[0].ErrorCode == nc
	case *kmsg.DescribeQuorumResponse:
		// A controller that does not lead answers its partition
		// NOT_LEADER_OR_FOLLOWER, as KRaft does; ask the next one.
		return len(r.Topics) > 0 && len(r.Topics[0].Partitions) > 0 &&
			r.Topics[0].Partitions[0].ErrorCode == kerr.NotLeaderForPartition.Code
	}
	return false
}
