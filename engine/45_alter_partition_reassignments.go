package engine

// AlterPartitionReassignments (key 45), versions 0-1 (Kafka 4.x's range).
//
// Moves partitions onto the replicas the client names, or cancels the move
// in progress (null replicas). In a cluster the request is forwarded to the
// active controller (controller/reassign.go), which validates each target,
// commits the reassignment as PartitionChangeRecords and answers once they
// have; the answer is relayed as it is. The brokers then open the new
// replicas as followers, the leader takes them into the ISR once they have
// caught up, and the controller drops the old replicas, whose brokers
// delete their logs. v1's AllowReplicationFactorChange = false (KIP-860)
// refuses a target of another size with INVALID_REPLICATION_FACTOR.
//
// A single node has one replica per partition, on itself: a target of
// exactly this node is accepted (nothing moves), any other is
// INVALID_REPLICA_ASSIGNMENT, a cancel is NO_REASSIGNMENT_IN_PROGRESS.
// Throttles are not part of this request: kafka-reassign-partitions
// --throttle sets the *.replication.throttled.* configs apart, and the
// replica fetchers read them.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(kmsg.AlterPartitionAssignments, 0, 1, (*Broker).handleAlterPartitionReassignments)
}

func (b *Broker) handleAlterPartitionReassignments(r *Request) {
	req := r.Msg.(*kmsg.AlterPartitionAssignmentsRequest)
	if b.cluster != nil {
		r.Respond(b.cluster.forwardAdmin(req))
		return
	}
	resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	resp.AllowReplicationFactorChange = req.Version < 1 || req.AllowReplicationFactorChange
	for _, t := range req.Topics {
		rt := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		rt.Topic = t.Topic
		topic := b.Topic(t.Topic)
		for _, p := range t.Partitions {
			rp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, b.singleNodeReassignment(topic, p)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	r.Respond(resp)
}

// singleNodeReassignment answers one partition's reassignment on a node
// that hosts every replica itself.
func (b *Broker) singleNodeReassignment(t *Topic, p kmsg.AlterPartitionAssignmentsRequestTopicPartition) int16 {
	switch {
	case t == nil || t.Partition(p.Partition) == nil:
		return kerr.UnknownTopicOrPartition.Code
	case p.Replicas == nil:
		return kerr.NoReassignmentInProgress.Code
	case len(p.Replicas) != 1 || p.Replicas[0] != b.cfg.NodeID:
		return kerr.InvalidReplicaAssignment.Code
	}
	return 0
}
