package controller

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"slices"
	"syscall"

	"github.com/sluice-broker/sluice/metadata"
)

// Voters that died with the controller.
//
// A broker's death is seen through its heartbeat connection closing
// (ConnectionLost). When the node that dies is also the active
// controller — combined roles, the common three-node layout — its
// broker heartbeated to itself, and the newly active controller has no
// connection of that broker to see close: KRaft's rule (every broker
// starts a fresh session) would leave its partitions leaderless for a
// whole broker.session.timeout.ms.
//
// But every voter holds the raft connections the other voters opened to
// it, and the dying node's close (FIN or RST from its kernel) reaches
// them too. A voter whose inbound raft connections were all closed by
// their peer, and which has opened none since, is a process that died:
// the new active controller reports it as ConnectionLost at the time of
// the close, so its broker is fenced after the grace unless it heartbeats
// or registers first. Silence is not a close: a paused or cut-off voter
// closes nothing and keeps its full session, so a stall does not move
// leadership. A voter that is alive reopens a connection as soon as it
// has anything to send (its vote for the new leader, or its answers to
// it), which clears the suspicion.
//
// A broker-only node has no raft connection, so every broker also holds a
// presence connection to every voter (Client.Present): an idle stream
// that opens with its node id and carries nothing else. Its close by the
// broker's kernel is read the same way as a voter's raft connections
// closing, so a broker-only node that dies together with the active
// controller is fenced after the grace too. A broker whose presence
// connection is reset while it lives reconnects at once, which clears
// the suspicion, and a paused one closes nothing.

// VoterLoss is when a voter's process went: the time its last raft
// connection here was closed by its peer, and this node's metadata log
// end then. A broker registration at or after LogEnd was made after the
// loss, by a restarted process, and is not suspected.
type VoterLoss struct {
	AtMs   int64
	LogEnd int64
}

// voterConns tracks the raft connections other voters opened to this
// node. Not safe for concurrent use; the Service guards it.
type voterConns struct {
	// open counts open inbound connections by voter.
	open map[int32]int
	// lost holds the voters whose last open connection was closed by its
	// peer. Invariant: a voter in lost has no open connection.
	lost map[int32]VoterLoss
}

func newVoterConns() voterConns {
	return voterConns{open: map[int32]int{}, lost: map[int32]VoterLoss{}}
}

// opened records a new inbound connection from voter id: it is alive.
func (v *voterConns) opened(id int32) {
	v.open[id]++
	delete(v.lost, id)
}

// closed records the end of a connection from voter id, closed by the
// peer (byPeer) or by this node, at nowMs with the log ending at logEnd.
func (v *voterConns) closed(id int32, byPeer bool, nowMs, logEnd int64) {
	v.open[id]--
	if v.open[id] > 0 {
		return
	}
	delete(v.open, id)
	if byPeer {
		v.lost[id] = VoterLoss{AtMs: nowMs, LogEnd: logEnd}
	}
}

// losses returns the voters whose process is gone.
func (v *voterConns) losses() map[int32]VoterLoss {
	out := make(map[int32]VoterLoss, len(v.lost))
	for id, l := range v.lost {
		out[id] = l
	}
	return out
}

// VotersLost tells a newly active controller which voters' processes
// are gone: each one's broker registration is treated as a heartbeat
// connection lost at the time of the loss, so the next Tick past the
// grace fences it unless it has heartbeated or registered since. Left
// alone are brokers fenced or not registered, registrations newer than
// the loss (a restarted process), and losses older than a session (the
// controller active then had the broker's own connection to see close).
// It returns the brokers it suspects.
func (c *Controller) VotersLost(img metadata.Image, losses map[int32]VoterLoss, nowMs int64) []int32 {
	var out []int32
	for id, l := range losses {
		br, ok := img.Broker(id)
		if !ok || br.Fenced || br.Epoch >= l.LogEnd || l.AtMs < nowMs-c.cfg.SessionTimeoutMs {
			continue
		}
		c.ConnectionLost(id, br.Epoch, l.AtMs)
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// nodeConns is what one controller node sees of the other processes: the
// raft connections voters opened to it and the presence connections
// brokers opened to it, both by node id.
type nodeConns struct {
	raft, presence voterConns
}

func newNodeConns() nodeConns {
	return nodeConns{raft: newVoterConns(), presence: newVoterConns()}
}

// losses returns the nodes whose process is gone: lost on one kind of
// connection and with none of the other kind open (a node that still
// holds a connection here is alive). A node lost on both is dated by the
// later loss.
func (n *nodeConns) losses() map[int32]VoterLoss {
	out := map[int32]VoterLoss{}
	for _, pair := range [2][2]*voterConns{{&n.raft, &n.presence}, {&n.presence, &n.raft}} {
		lost, other := pair[0], pair[1]
		for id, l := range lost.lost {
			if other.open[id] > 0 {
				continue
			}
			if prev, ok := out[id]; !ok || l.AtMs > prev.AtMs {
				out[id] = l
			}
		}
	}
	return out
}

// presenceMagic opens a broker's presence connection: "SLB1". Read as a
// Kafka frame's API key it is 21324, which no request uses, and it is not
// the quorum's hello.
const presenceMagic = 0x534c4231

// presenceHelloLen is the hello's size: frame length, magic, node id.
const presenceHelloLen = 12

// isPresence reports whether a connection's first 8 bytes open a presence
// connection.
func isPresence(first8 []byte) bool {
	return len(first8) >= 8 && binary.BigEndian.Uint32(first8[4:]) == presenceMagic
}

// appendPresence appends the hello of broker id's presence connection.
func appendPresence(dst []byte, id int32) []byte {
	dst = binary.BigEndian.AppendUint32(dst, presenceHelloLen-4)
	dst = binary.BigEndian.AppendUint32(dst, presenceMagic)
	return binary.BigEndian.AppendUint32(dst, uint32(id))
}

// servePresence holds a broker's presence connection until it ends and
// records who it was and how it ended: EOF or a reset is the broker's
// side closing it; anything else (this node closing it) is not.
func (s *Service) servePresence(c net.Conn, br *bufio.Reader) {
	var hello [presenceHelloLen]byte
	if _, err := io.ReadFull(br, hello[:]); err != nil || binary.BigEndian.Uint32(hello[:]) != presenceHelloLen-4 {
		return
	}
	id := int32(binary.BigEndian.Uint32(hello[8:]))
	if id < 0 {
		return
	}
	s.nodeConn(func(n *nodeConns) { n.presence.opened(id) })
	_, err := io.Copy(io.Discard, br) // nil at EOF
	byPeer := err == nil || errors.Is(err, syscall.ECONNRESET)
	now, logEnd := nowMs(), s.store.NextOffset()
	s.nodeConn(func(n *nodeConns) { n.presence.closed(id, byPeer, now, logEnd) })
}
