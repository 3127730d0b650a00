package engine

// FindCoordinator (key 10), versions 0-6.
//
// A group key (type 0; v0 has no type) answers with this broker when the
// group's partition of __consumer_offsets is loaded here (in a single node,
// always), and COORDINATOR_NOT_AVAILABLE otherwise, which clients retry.
// In a cluster it answers with the broker that leads the group's offsets
// partition in the image (cluster_groups.go), COORDINATOR_NOT_AVAILABLE
// while it has no leader or __consumer_offsets does not exist yet (the
// first such request has it created through the controller).
// v4+ batch several keys (CoordinatorKeys), each answered on its own.
//
// Transaction keys (type 1) answer with the leader of the transactional
// id's __transaction_state partition (txns.go); the first one creates the
// topic, and answers COORDINATOR_NOT_AVAILABLE in a cluster until the
// controller has created it. An empty transactional id is INVALID_REQUEST.
// Share-group keys (type 2) and unknown types answer INVALID_REQUEST, as
// Kafka does without share groups enabled.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.FindCoordinator, 0, 6, (*Broker).handleFindCoordinator) }

const (
	coordinatorGroup       int8 = 0
	coordinatorTransaction int8 = 1
)

func (b *Broker) handleFindCoordinator(r *Request) {
	req := r.Msg.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	if r.Version >= 4 {
		for _, key := range req.CoordinatorKeys {
			resp.Coordinators = append(resp.Coordinators, b.coordinatorFor(key, req.CoordinatorType, r.Session.Listener))
		}
		r.Respond(resp)
		return
	}
	c := b.coordinatorFor(req.CoordinatorKey, req.CoordinatorType, r.Session.Listener)
	resp.ErrorCode, resp.ErrorMessage = c.ErrorCode, c.ErrorMessage
	resp.NodeID, resp.Host, resp.Port = c.NodeID, c.Host, c.Port
	r.Respond(resp)
}

func (b *Broker) coordinatorFor(key string, keyType int8, listener string) kmsg.FindCoordinatorResponseCoordinator {
	c := kmsg.FindCoordinatorResponseCoordinator{Key: key, NodeID: -1, Port: -1}
	switch keyType {
	case coordinatorGroup:
		if b.cluster != nil {
			b.clusterCoordinator(key, &c, listener)
			break
		}
		if !b.groups.Owns(key) {
			c.ErrorCode = kerr.CoordinatorNotAvailable.Code
			break
		}
		c.Host, c.Port = b.advertised(listener)
		c.NodeID = b.cfg.NodeID
	case coordinatorTransaction:
		if key == "" {
			c.ErrorCode = kerr.InvalidRequest.Code
			break
		}
		b.txnCoordinatorFor(key, &c)
	default:
		c.ErrorCode = kerr.InvalidRequest.Code
		c.ErrorMessage = kmsg.StringPtr("unsupported coordinator key type")
	}
	return c
}
