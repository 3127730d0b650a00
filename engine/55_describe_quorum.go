package engine

// DescribeQuorum (key 55), versions 0-2.
//
// kafka-metadata-quorum describe --status asks a broker, which (as in
// Kafka) forwards the request to the active controller; the answer names
// the raft leader, its term as the epoch, the commit index as the high
// watermark and each voter's replicated index, and (v2) the voters'
// CONTROLLER listeners. A single node is its own one-voter quorum: it
// answers itself as leader and only voter, its metadata log offset as
// the high watermark. Only __cluster_metadata partition 0 exists; another
// partition answers UNKNOWN_TOPIC_OR_PARTITION.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/controller"
)

func init() { register(kmsg.DescribeQuorum, 0, 2, (*Broker).handleDescribeQuorum) }

func (b *Broker) handleDescribeQuorum(r *Request) {
	req := r.Msg.(*kmsg.DescribeQuorumRequest)
	if b.cluster != nil {
		resp, err := b.cluster.call(controller.LineAdmin, req)
		if err == nil {
			r.Respond(resp)
			return
		}
		out := req.ResponseKind().(*kmsg.DescribeQuorumResponse)
		out.ErrorCode = kerr.NotController.Code
		r.Respond(out)
		return
	}
	resp := req.ResponseKind().(*kmsg.DescribeQuorumResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewDescribeQuorumResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewDescribeQuorumResponseTopicPartition()
			rp.Partition = p.Partition
			if t.Topic != "__cluster_metadata" || p.Partition != 0 {
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			}
			rp.LeaderID, rp.LeaderEpoch, rp.HighWatermark = b.cfg.NodeID, 1, 0
			v := kmsg.NewDescribeQuorumResponseTopicPartitionReplicaState()
			v.ReplicaID, v.LastFetchTimestamp, v.LastCaughtUpTimestamp = b.cfg.NodeID, -1, -1
			rp.CurrentVoters = append(rp.CurrentVoters, v)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	r.Respond(resp)
}
