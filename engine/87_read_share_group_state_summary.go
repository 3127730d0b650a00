package engine

// ReadShareGroupStateSummary (key 87), versions 0-1: the share
// coordinator's API (share.States). A share-partition's state epoch,
// leader epoch, start offset and (v1) delivery-complete count, without
// its batches: what Kafka's group coordinator asks to describe offsets.
// Start offset -1 for one never initialized; NOT_COORDINATOR where the
// key's state partition is not led here.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/engine/share"
)

func init() {
	register(kmsg.ReadShareGroupStateSummary, 0, 1, (*Broker).handleReadShareGroupStateSummary)
}

func (b *Broker) handleReadShareGroupStateSummary(r *Request) {
	req := r.Msg.(*kmsg.ReadShareGroupStateSummaryRequest)
	resp := req.ResponseKind().(*kmsg.ReadShareGroupStateSummaryResponse)
	for _, t := range req.Topics {
		rt := kmsg.ReadShareGroupStateSummaryResponseTopic{TopicID: t.TopicID}
		for _, p := range t.Partitions {
			rp := kmsg.ReadShareGroupStateSummaryResponseTopicPartition{Partition: p.Partition, StartOffset: -1, LeaderEpoch: -1, DeliveryCompleteCount: -1}
			v, found, code := b.share.coordinatorRead(share.SPKey{Group: req.GroupID, TopicID: t.TopicID, Partition: p.Partition})
			rp.ErrorCode = code
			if found {
				rp.StateEpoch, rp.LeaderEpoch, rp.StartOffset, rp.DeliveryCompleteCount = v.StateEpoch, v.LeaderEpoch, v.StartOffset, v.DeliveryCompleteCount
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	r.Respond(resp)
}
