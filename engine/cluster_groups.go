package engine

// The group coordinator in a cluster: groups live with the leader of
// their __consumer_offsets partition. After every image the broker loads
// the offsets partitions it now leads and unloads those it no longer
// does (syncGroups); FindCoordinator answers with the partition's leader.
// The topic is created through the controller on the first FindCoordinator
// (as Kafka does), not at start, when no controller may be reachable yet.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/engine/group"
	"github.com/sluice-broker/sluice/metadata"
)

func newClusterGroupCoordinator(b *Broker) *groupCoordinator {
	return &groupCoordinator{group.New(b.groupConfig(b.cfg.OffsetsTopicPartitions))}
}

// syncGroups loads the offsets partitions this broker leads in img and
// unloads the others. The caller holds meta.mu.
func (b *Broker) syncGroups(img metadata.Image) {
	defer b.syncShare(img)
	ti, t := img.Topic(offsetsTopic), b.Topic(offsetsTopic)
	if b.groups == nil || ti == nil || t == nil {
		return
	}
	for i := range ti.Partitions {
		idx := int32(i)
		p := t.Partition(idx)
		leads := p != nil && ti.Partitions[i].Leader == b.cfg.NodeID
		switch loaded := b.groups.Loaded(idx); {
		case leads && !loaded:
			p.advanceHighWatermark()
			if _, err := b.groups.LoadPartition(idx, b.groups.offsetsLog(p)); err != nil {
				b.log.Error("cannot load consumer groups", "partition", idx, "err", err)
			}
		case !leads && loaded:
			b.groups.UnloadPartition(idx)
		}
	}
}

// clusterCoordinator answers FindCoordinator for a group in a cluster:
// the leader of the group's offsets partition, or
// COORDINATOR_NOT_AVAILABLE while there is none (creating the topic if it
// does not exist yet).
func (b *Broker) clusterCoordinator(key string, c *kmsg.FindCoordinatorResponseCoordinator, listener string) {
	img := b.image()
	ti := img.Topic(offsetsTopic)
	if ti == nil {
		b.ensureOffsetsTopic()
		c.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return
	}
	idx := b.groups.PartitionFor(key)
	if int(idx) >= len(ti.Partitions) || ti.Partitions[idx].Leader < 0 {
		c.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return
	}
	leader := ti.Partitions[idx].Leader
	host, port, ok := brokerEndpointFor(img, leader, listener)
	if !ok {
		c.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return
	}
	c.NodeID, c.Host, c.Port = leader, host, port
}

// ensureOffsetsTopic creates __consumer_offsets in the background, once
// at a time.
func (b *Broker) ensureOffsetsTopic() {
	if !b.cluster.creatingOffsets.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer b.cluster.creatingOffsets.Store(false)
		if _, err := b.offsetsTopic(); err != nil && ErrorCode(err) != kerr.TopicAlreadyExists.Code {
			b.log.Warn("cannot create the offsets topic", "err", err)
		}
	}()
}
