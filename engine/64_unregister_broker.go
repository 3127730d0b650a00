package engine

// UnregisterBroker (key 64), version 0.
//
// Removes a broker's registration (kafka-cluster unregister, after the
// broker is gone for good): its leaderships move and it leaves every ISR
// first; its replicas stay assigned until a reassignment moves them. In a
// cluster the request is forwarded to the active controller and its answer
// relayed (BROKER_ID_NOT_REGISTERED for an unknown id). A single node has
// no registrations to remove: it answers BROKER_ID_NOT_REGISTERED.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/controller"
)

func init() { register(kmsg.UnregisterBroker, 0, 0, (*Broker).handleUnregisterBroker) }

func (b *Broker) handleUnregisterBroker(r *Request) {
	req := r.Msg.(*kmsg.UnregisterBrokerRequest)
	resp := req.ResponseKind().(*kmsg.UnregisterBrokerResponse)
	resp.ErrorCode = kerr.BrokerIDNotRegistered.Code
	if b.cluster != nil {
		out, err := b.cluster.call(controller.LineAdmin, req)
		if err == nil {
			r.Respond(out)
			return
		}
		resp.ErrorCode = kerr.RequestTimedOut.Code
	}
	r.Respond(resp)
}
