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

// voterConns tracks the raft connections other voters opened to this
// node. Not safe for concurrent use; the Service guards it.
type voterConns struct {
	// open counts open inbound connections by voter.
	open map[int32]int
	// lostAtMs is when voter id's last open connection was closed by its
	// peer. Invariant: an id in lostAtMs has no open connection.
	lostAtMs map[int32]int64
}

func newVoterConns() voterConns {
	return voterConns{open: map[int32]int{}, lostAtMs: map[int32]int64{}}
}

// opened records a new inbound connection from voter id: it is alive.
func (v *voterConns) opened(id int32) {
	v.open[id]++
	delete(v.lostAtMs, id)
}

// closed records the end of a connection from voter id, closed by the
// peer (byPeer) or by this node.
func (v *voterConns) closed(id int32, byPeer bool, nowMs int64) {
	v.open[id]--
	if v.open[id] > 0 {
		return
	}
	delete(v.open, id)
	if byPeer {
		v.lostAtMs[id] = nowMs
	}
}

// lost returns the voters whose process is gone, with when it went.
func (v *voterConns) lost() map[int32]int64 {
	out := make(map[int32]int64, len(v.lostAtMs))
	for id, at := range v.lostAtMs {
		out[id] = at
	}
	return out
}

// VotersLost tells a newly active controller which voters' processes
// are gone and since when (lostAtMs): each one's broker registration, if
// unfenced, is treated as a heartbeat connection lost at that time, so
// the next Tick past the grace fences it unless it has heartbeated or
// registered since. It returns the brokers it suspects.
func (c *Controller) VotersLost(img metadata.Image, lostAtMs map[int32]int64) []int32 {
	var out []int32
	for id, at := range lostAtMs {
		if br, ok := img.Broker(id); ok && !br.Fenced {
			c.ConnectionLost(id, br.Epoch, at)
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}
