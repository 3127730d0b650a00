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
// broker. In a cluster, controllerISRLink sends AlterPartition over the
// cluster work's controller connection (cluster.go) and takes broker
// addresses from the image; tests install their own with SetClusterLink.

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
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

// installClusterLink gives a broker of a cluster the replication link over
// its controller connection (cluster.go); a single node keeps singleNodeLink.
func (b *Broker) installClusterLink() {
	if b.cluster != nil {
		b.SetClusterLink(controllerISRLink{b})
	}
}

// controllerISRLink is ClusterLink in a cluster: AlterPartition v3 to the
// active controller, broker addresses from the image.
type controllerISRLink struct{ b *Broker }

// alterPartitionTimeout bounds one AlterPartition round trip.
const alterPartitionTimeout = 10 * time.Second

func (l controllerISRLink) AlterPartition(topicID [16]byte, partition, leaderEpoch, partitionEpoch int32, isr []int32) error {
	req := kmsg.NewPtrAlterPartitionRequest()
	req.Version = 3
	rp := kmsg.NewAlterPartitionRequestTopicPartition()
	rp.Partition, rp.LeaderEpoch, rp.PartitionEpoch = partition, leaderEpoch, partitionEpoch
	for _, id := range isr {
		rp.NewEpochISR = append(rp.NewEpochISR, kmsg.AlterPartitionRequestTopicPartitionNewEpochISR{BrokerID: id, BrokerEpoch: -1})
	}
	rt := kmsg.NewAlterPartitionRequestTopic()
	rt.TopicID, rt.Partitions = topicID, []kmsg.AlterPartitionRequestTopicPartition{rp}
	req.Topics = []kmsg.AlterPartitionRequestTopic{rt}
	ctx, cancel := context.WithTimeout(context.Background(), alterPartitionTimeout)
	defer cancel()
	resp, err := l.b.cluster.AlterPartition(ctx, req)
	if err != nil {
		return err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return err
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return err
			}
		}
	}
	return nil
}

func (l controllerISRLink) BrokerAddr(id int32) (string, bool) { return l.b.BrokerAddr(id) }
