package engine

// Requests the transaction coordinator's side sends to other brokers of a
// cluster: WriteTxnMarkers to partition leaders, and a leader's verify-only
// AddPartitionsToTxn to a transactional id's coordinator (KIP-890). One
// connection per peer, one request at a time on it, reopened after any
// error; these requests are few (one per transaction end and per first
// produce of a transaction to a partition) so a pool would not pay.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// peerTimeout bounds one request to a peer, connection included.
const peerTimeout = 10 * time.Second

// maxPeerResponse bounds a peer's response frame (these answers are small).
const maxPeerResponse = 16 << 20

type peerClients struct {
	mu    sync.Mutex
	conns map[int32]*peerConn
}

type peerConn struct {
	mu   sync.Mutex // one request at a time
	conn net.Conn   // nil until dialled, and after an error
	addr string
	dial DialFunc // Config.InterBroker.Dial
	corr int32
	fmt  *kmsg.RequestFormatter
}

// call sends req at version to broker id and reads the answer into resp.
func (pc *peerClients) call(b *Broker, id int32, req kmsg.Request, version int16, resp kmsg.Response) error {
	addr, ok := b.BrokerAddr(id)
	if !ok {
		return fmt.Errorf("no address for broker %d", id)
	}
	c := pc.conn(b, id)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.addr != addr && c.conn != nil {
		c.conn.Close()
		c.conn = nil
	}
	c.addr = addr
	err := c.roundTrip(req, version, resp)
	if err != nil && c.conn != nil {
		c.conn.Close()
		c.conn = nil
	}
	return err
}

func (pc *peerClients) conn(b *Broker, id int32) *peerConn {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.conns == nil {
		pc.conns = map[int32]*peerConn{}
	}
	c := pc.conns[id]
	if c == nil {
		c = &peerConn{dial: b.cfg.InterBroker.Dial, fmt: kmsg.NewRequestFormatter(kmsg.FormatterClientID("sluice-broker-" + strconv.Itoa(int(b.cfg.NodeID))))}
		pc.conns[id] = c
	}
	return c
}

// close closes every connection (broker shutdown).
func (pc *peerClients) close() {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	for _, c := range pc.conns {
		c.mu.Lock()
		if c.conn != nil {
			c.conn.Close()
			c.conn = nil
		}
		c.mu.Unlock()
	}
}

// roundTrip writes one request frame and reads its response; c.mu is held.
func (c *peerConn) roundTrip(req kmsg.Request, version int16, resp kmsg.Response) error {
	if c.conn == nil {
		conn, err := dialPeer(c.dial, c.addr, peerTimeout)
		if err != nil {
			return err
		}
		c.conn = conn
	}
	if err := c.conn.SetDeadline(time.Now().Add(peerTimeout)); err != nil {
		return err
	}
	req.SetVersion(version)
	resp.SetVersion(version)
	c.corr++
	if _, err := c.conn.Write(c.fmt.AppendRequest(nil, req, c.corr)); err != nil {
		return err
	}
	var size [4]byte
	if _, err := io.ReadFull(c.conn, size[:]); err != nil {
		return err
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 4 || n > maxPeerResponse {
		return fmt.Errorf("response frame of %d bytes", n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(c.conn, body); err != nil {
		return err
	}
	if int32(binary.BigEndian.Uint32(body)) != c.corr {
		return errors.New("response with a wrong correlation id")
	}
	body = body[4:]
	if resp.IsFlexible() {
		var err error
		if body, err = skipTags(body); err != nil {
			return err
		}
	}
	return resp.ReadFrom(body)
}
