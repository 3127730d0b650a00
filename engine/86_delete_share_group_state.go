package engine

// DeleteShareGroupState (key 86), version 0: the share coordinator's API
// (share.States). Tombstones share-partitions' state. NOT_COORDINATOR
// where the key's state partition is not led here.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/engine/share"
)

func init() { register(kmsg.DeleteShareGroupState, 0, 0, (*Broker).handleDeleteShareGroupState) }

func (b *Broker) handleDeleteShareGroupState(r *Request) {
	req := r.Msg.(*kmsg.DeleteShareGroupStateRequest)
	resp := req.ResponseKind().(*kmsg.DeleteShareGroupStateResponse)
	for _, t := range req.Topics {
		rt := kmsg.DeleteShareGroupStateResponseTopic{TopicID: t.TopicID}
		for _, p := range t.Partitions {
			code := b.share.coordinatorCheck()
			if code == 0 {
				code = b.share.states.Delete(share.SPKey{Group: req.GroupID, TopicID: t.TopicID, Partition: p.Partition})
			}
			rt.Partitions = append(rt.Partitions, kmsg.DeleteShareGroupStateResponseTopicPartition{Partition: p.Partition, ErrorCode: code})
		}
		resp.Topics = append(resp.Topics, rt)
	}
	r.Respond(resp)
}
