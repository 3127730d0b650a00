package engine

// DescribeCluster (key 60), versions 0-1.
//
// Answers this node as the cluster's only broker and as its controller id
// (clients only use it to route admin requests, which this broker serves);
// in a cluster, every registered unfenced broker, as Metadata does.
// v1 carries the endpoint type: this is a broker endpoint, so a request for
// controllers answers MISMATCHED_ENDPOINT_TYPE and an unknown type
// UNSUPPORTED_ENDPOINT_TYPE (both INVALID_REQUEST in v0), as Kafka does.
// With no authorizer, requested cluster authorized operations are every
// operation Kafka supports on the cluster. v2 (fenced brokers) is not
// advertised: a single node is never fenced, but Kafka 4.0 serves 0-1.

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.DescribeCluster, 0, 1, (*Broker).handleDescribeCluster) }

// Endpoint types of DescribeCluster v1+.
const (
	endpointBrokers     int8 = 1
	endpointControllers int8 = 2
)

func (b *Broker) handleDescribeCluster(r *Request) {
	req := r.Msg.(*kmsg.DescribeClusterRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	if err := checkEndpointType(req.EndpointType, r.Version); err != nil {
		resp.ErrorCode = ErrorCode(err)
		resp.ErrorMessage = stringPtr(err.Error())
		r.Respond(resp)
		return
	}
	resp.EndpointType = endpointBrokers
	resp.ClusterID = b.clusterID
	resp.ControllerID = b.cfg.NodeID
	for _, br := range b.metadataBrokers(r.listener()) {
		resp.Brokers = append(resp.Brokers, kmsg.DescribeClusterResponseBroker{NodeID: br.NodeID, Host: br.Host, Port: br.Port, Rack: br.Rack})
	}
	if req.IncludeClusterAuthorizedOperations {
		resp.ClusterAuthorizedOperations = clusterAuthorizedOps
	}
	r.Respond(resp)
}

func checkEndpointType(t int8, version int16) error {
	code := kerr.UnsupportedEndpointType
	switch t {
	case endpointBrokers:
		return nil
	case endpointControllers:
		code = kerr.MismatchedEndpointType
	}
	if version == 0 {
		code = kerr.InvalidRequest
	}
	if t == endpointControllers {
		return &TopicError{Code: code, Msg: "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER"}
	}
	return &TopicError{Code: code, Msg: fmt.Sprintf("Unsupported endpoint type %d", t)}
}
