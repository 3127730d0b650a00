package engine

// ListPartitionReassignments (key 46), version 0 (Kafka 4.x's range).
//
// Lists the reassignments in progress (each partition's replicas, and
// which of them are being added and removed) among the named partitions,
// or all of them for null topics; partitions that are not being
// reassigned, or do not exist, are left out, as Kafka does. In a cluster
// the request is forwarded to the active controller and its answer
// relayed; a single node never has a reassignment in progress, so it
// answers an empty list.

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(kmsg.ListPartitionReassignments, 0, 0, (*Broker).handleListPartitionReassignments)
}

func (b *Broker) handleListPartitionReassignments(r *Request) {
	req := r.Msg.(*kmsg.ListPartitionReassignmentsRequest)
	if b.cluster != nil {
		r.Respond(b.cluster.forwardAdmin(req))
		return
	}
	r.Respond(req.ResponseKind())
}
