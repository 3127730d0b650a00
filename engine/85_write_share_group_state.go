package engine

// WriteShareGroupState (key 85), versions 0-1: the share coordinator's
// API (share.States). Stores a share-partition's whole state (start
// offset and state batches) as one ShareSnapshot record, answered once it
// is in __share_group_state. Kafka's leaders send only the batches that
// changed (the coordinator merges them); Sluice's leaders send the whole
// window, and a partial write from another leader replaces the state
// rather than merging into it. FENCED_STATE_EPOCH for an older state
// epoch, NOT_COORDINATOR where the key's state partition is not led here.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/engine/share"
)

func init() { register(kmsg.WriteShareGroupState, 0, 1, (*Broker).handleWriteShareGroupState) }

func (b *Broker) handleWriteShareGroupState(r *Request) {
	req := r.Msg.(*kmsg.WriteShareGroupStateRequest)
	resp := req.ResponseKind().(*kmsg.WriteShareGroupStateResponse)
	for _, t := range req.Topics {
		rt := kmsg.WriteShareGroupStateResponseTopic{TopicID: t.TopicID}
		for _, p := range t.Partitions {
			v := share.SnapshotValue{StateEpoch: p.StateEpoch, LeaderEpoch: p.LeaderEpoch, StartOffset: p.StartOffset, DeliveryCompleteCount: -1}
			if r.Version >= 1 {
				v.DeliveryCompleteCount = p.DeliveryCompleteCount
			}
			for _, sb := range p.StateBatches {
				v.Batches = append(v.Batches, share.StateBatch{First: sb.FirstOffset, Last: sb.LastOffset, State: share.RecordState(sb.DeliveryState), Count: sb.DeliveryCount})
			}
			k := share.SPKey{Group: req.GroupID, TopicID: t.TopicID, Partition: p.Partition}
			rt.Partitions = append(rt.Partitions, kmsg.WriteShareGroupStateResponseTopicPartition{Partition: p.Partition, ErrorCode: b.share.coordinatorWrite(k, v)})
		}
		resp.Topics = append(resp.Topics, rt)
	}
	r.Respond(resp)
}
