package controller

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
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
type Client struct {
	addrs []string
	lines [lineCount]line
	// switched holds a signal when a line reached the active controller
	// after failing on another (see Switched).
	switched chan struct{}
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
}

// NewClient returns a client of the controllers at addrs (host:port of
// their CONTROLLER listeners).
func NewClient(addrs []string) *Client {
	c := &Client{addrs: addrs, switched: make(chan struct{}, 1)}
	return c
}

// Close closes every connection.
func (c *Client) Close() {
	for i := range c.lines {
		l := &c.lines[i]
		l.mu.Lock()
		l.drop()
		l.mu.Unlock()
	}
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
// included (voters.go). Signals do not queue beyond one.
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
	var last error
	for attempt := 0; ; attempt++ {
		err := fn(l)
		if err == nil {
			if attempt > 0 {
				select {
				case c.switched <- struct{}{}:
				default:
				}
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

// roundTrip writes one request frame and returns the response body after
// the correlation id.
func (l *line) roundTrip(ctx context.Context, c *Client, key, version int16, flexible bool, body []byte) ([]byte, error) {
	if l.conn == nil {
		d := net.Dialer{Timeout: time.Second}
		conn, err := d.DialContext(ctx, "tcp", c.addrs[l.next])
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
	case *kmsg.DescribeQuorumResponse:
		// A controller that does not lead answers its partition
		// NOT_LEADER_OR_FOLLOWER, as KRaft does; ask the next one.
		return len(r.Topics) > 0 && len(r.Topics[0].Partitions) > 0 &&
			r.Topics[0].Partitions[0].ErrorCode == kerr.NotLeaderForPartition.Code
	}
	return false
}
