package engine

// ElectLeaders (key 43), versions 1-2.
//
// PREFERRED (0) moves each named partition's leadership to its first
// replica when that replica is in the ISR; UNCLEAN (1) elects a leader for
// a partition that has none. Null topics means every partition. On a
// single node each partition has one replica, which already leads:
// ELECTION_NOT_NEEDED (UNKNOWN_TOPIC_OR_PARTITION for one that does not
// exist), and null topics answers an empty list. In a cluster the request
// is forwarded to the active controller (controller/rpc.go), which
// decides and commits the new leaders before it answers; the answer is
// relayed as it is. v0 (no election type) is not served: Kafka 4 removed it.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/controller"
)

func init() { register(kmsg.ElectLeaders, 1, 2, (*Broker).handleElectLeaders) }

func (b *Broker) handleElectLeaders(r *Request) {
	req := r.Msg.(*kmsg.ElectLeadersRequest)
	if b.cluster != nil {
		r.Respond(b.cluster.forwardElectLeaders(req))
		return
	}
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewElectLeadersResponseTopic()
		rt.Topic = t.Topic
		topic := b.Topic(t.Topic)
		for _, p := range t.Partitions {
			rp := kmsg.NewElectLeadersResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p, kerr.ElectionNotNeeded.Code
			if topic == nil || topic.Partition(p) == nil {
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	r.Respond(resp)
}

// forwardElectLeaders sends an ElectLeaders to the active controller and
// returns its answer (REQUEST_TIMED_OUT when none answers).
func (l *clusterLink) forwardElectLeaders(req *kmsg.ElectLeadersRequest) kmsg.Response {
	resp, err := l.call(controller.LineAdmin, req)
	if err != nil {
		out := req.ResponseKind().(*kmsg.ElectLeadersResponse)
		out.ErrorCode = kerr.RequestTimedOut.Code
		return out
	}
	return resp
}
