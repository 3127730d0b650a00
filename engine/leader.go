package engine

import (
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
)

// hwLocks serialise high-watermark updates per partition (striped, so the
// Partition type needs no extra field). Reading the log end offset and
// storing it as the high watermark must be one step: two producers racing
// could otherwise store an older end offset after a newer one and move the
// high watermark backwards.
var hwLocks [64]sync.Mutex

func hwLock(p *Partition) *sync.Mutex {
	return &hwLocks[(uint(p.Topic.ID[0])+uint(p.Index))%uint(len(hwLocks))]
}

// advanceHighWatermark moves p's high watermark to the offset every in-sync
// replica has reached. Sluice runs one replica, so that is the log end
// offset; the replication work replaces this with the minimum over the ISR.
// It reports how far the watermark moved, in offsets.
func (b *Broker) advanceHighWatermark(p *Partition) int64 {
	mu := hwLock(p)
	mu.Lock()
	defer mu.Unlock()
	old := p.Log.HighWatermark()
	leo := p.Log.LogEndOffset()
	if leo <= old {
		return 0
	}
	p.Log.SetHighWatermark(leo)
	return leo - old
}

// checkLeaderEpoch fences a request that names a leader epoch (KIP-320):
// an older epoch than the partition's means the client's metadata is stale
// (FENCED_LEADER_EPOCH), a newer one that this broker is behind
// (UNKNOWN_LEADER_EPOCH). -1 skips the check.
func checkLeaderEpoch(p *Partition, epoch int32) int16 {
	if epoch < 0 {
		return 0
	}
	switch cur := p.LeaderEpoch.Load(); {
	case epoch < cur:
		return kerr.FencedLeaderEpoch.Code
	case epoch > cur:
		return kerr.UnknownLeaderEpoch.Code
	}
	return 0
}

// lookupPartition returns partition idx of t, or UNKNOWN_TOPIC_OR_PARTITION
// when t is nil or has no such partition.
func lookupPartition(t *Topic, idx int32) (*Partition, int16) {
	if t == nil {
		return nil, kerr.UnknownTopicOrPartition.Code
	}
	if p := t.Partition(idx); p != nil {
		return p, 0
	}
	return nil, kerr.UnknownTopicOrPartition.Code
}
