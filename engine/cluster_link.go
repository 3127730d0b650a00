package engine

// The broker's link to the rest of the cluster, as replication needs it:
// where other brokers listen (the replica fetchers dial their leaders) and
// the controller's AlterPartition (key 56), through which a leader asks to
// change a partition's ISR. The leader acts on a new ISR only when an image
// carrying it reaches applyImage, never on the answer of AlterPartition:
// the controller and the leader never disagree on who may be elected
// (KIP-497, docs/cluster.md).
//
// A single node has no followers, so its link is never asked to change an
// ISR (an ISR of self alone cannot shrink or grow) and knows no other
// broker. The cluster work implements ClusterLink over its
// broker↔controller connection and installs it with SetClusterLink.

import (
	"errors"
	"sync/atomic"
)

// ClusterLink is what the Broker needs of the cluster for replication.
type ClusterLink interface {
	// AlterPartition asks the controller to set the ISR of a partition,
	// based on partitionEpoch, at leaderEpoch. It may block for a round
	// trip (it is called on a goroutine of its own); a nil error means
	// the controller accepted it and an image will carry it, an error
	// that it was refused or not delivered (the leader proposes again
	// from its state at a later tick or fetch).
	AlterPartition(topicID [16]byte, partition, leaderEpoch, partitionEpoch int32, isr []int32) error
	// BrokerAddr is host:port of broker id's inter-broker listener.
	BrokerAddr(id int32) (string, bool)
}

// errSingleNode answers an AlterPartition on a single node.
var errSingleNode = errors.New("single node: no controller to change an ISR")

// singleNodeLink is the link of a broker alone: no other broker, no ISR
// change to make.
type singleNodeLink struct{}

func (singleNodeLink) AlterPartition([16]byte, int32, int32, int32, []int32) error {
	return errSingleNode
}

func (singleNodeLink) BrokerAddr(int32) (string, bool) { return "", false }

// linkHolder lets the link be swapped atomically (an interface cannot sit
// in an atomic.Pointer).
type linkHolder struct{ ClusterLink }

// linkSlot holds the broker's current link; never empty once the
// replica manager exists.
type linkSlot struct{ p atomic.Pointer[linkHolder] }

func (c *linkSlot) load() ClusterLink {
	if h := c.p.Load(); h != nil {
		return h.ClusterLink
	}
	return singleNodeLink{}
}

// SetClusterLink installs the cluster's link (the cluster work, or a test
// standing in for the controller). Fetchers pick it up at their next dial.
func (b *Broker) SetClusterLink(l ClusterLink) {
	if l == nil {
		l = singleNodeLink{}
	}
	b.replicas.link.p.Store(&linkHolder{l})
}
