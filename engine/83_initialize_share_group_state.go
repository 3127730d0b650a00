package engine

// InitializeShareGroupState (key 83), version 0: the share coordinator's
// API (share.States). Sets a share-partition's start offset at a state
// epoch, with nothing in flight. Kafka's group coordinator calls it when a
// share group first subscribes to a topic; Sluice's share-partition
// leaders initialize lazily (share.go), and serve it for Kafka's tools and
// for completeness. NOT_COORDINATOR where the key's state partition is not
// led here; FENCED_STATE_EPOCH for an older state epoch.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/engine/share"
)

func init() {
	register(kmsg.InitializeShareGroupState, 0, 0, (*Broker).handleInitializeShareGroupState)
}

func (b *Broker) handleInitializeShareGroupState(r *Request) {
	req := r.Msg.(*kmsg.InitializeShareGroupStateRequest)
	resp := req.ResponseKind().(*kmsg.InitializeShareGroupStateResponse)
	for _, t := range req.Topics {
		rt := kmsg.InitializeShareGroupStateResponseTopic{TopicID: t.TopicID}
		for _, p := range t.Partitions {
			k := share.SPKey{Group: req.GroupID, TopicID: t.TopicID, Partition: p.Partition}
			v := share.SnapshotValue{StateEpoch: p.StateEpoch, LeaderEpoch: -1, StartOffset: p.StartOffset, DeliveryCompleteCount: 0}
			rt.Partitions = append(rt.Partitions, kmsg.InitializeShareGroupStateResponseTopicPartition{
				Partition: p.Partition, ErrorCode: b.share.coordinatorWrite(k, v)})
		}
		resp.Topics = append(resp.Topics, rt)
	}
	r.Respond(resp)
}
