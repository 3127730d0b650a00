package engine

// ReadShareGroupState (key 84), version 0: the share coordinator's API
// (share.States), what a share-partition leader on another broker loads
// a share-partition with. A share-partition never initialized answers
// start offset -1 and state epoch 0, as Kafka's coordinator does.
// NOT_COORDINATOR where the key's state partition is not led here.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/engine/share"
)

func init() { register(kmsg.ReadShareGroupState, 0, 0, (*Broker).handleReadShareGroupState) }

func (b *Broker) handleReadShareGroupState(r *Request) {
	req := r.Msg.(*kmsg.ReadShareGroupStateRequest)
	resp := req.ResponseKind().(*kmsg.ReadShareGroupStateResponse)
	for _, t := range req.Topics {
		rt := kmsg.ReadShareGroupStateResponseTopic{TopicID: t.TopicID}
		for _, p := range t.Partitions {
			rp := kmsg.ReadShareGroupStateResponseTopicPartition{Partition: p.Partition, StartOffset: -1}
			v, found, code := b.share.coordinatorRead(share.SPKey{Group: req.GroupID, TopicID: t.TopicID, Partition: p.Partition})
			rp.ErrorCode, rp.StateEpoch = code, v.StateEpoch
			if found {
				rp.StateEpoch, rp.StartOffset = v.StateEpoch, v.StartOffset
				for _, sb := range v.Batches {
					rp.StateBatches = append(rp.StateBatches, kmsg.ReadShareGroupStateResponseTopicPartitionStateBatch{
						FirstOffset: sb.First, LastOffset: sb.Last, DeliveryState: int8(sb.State), DeliveryCount: sb.Count})
				}
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	r.Respond(resp)
}
