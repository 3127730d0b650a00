package controller

import (
	"slices"

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
