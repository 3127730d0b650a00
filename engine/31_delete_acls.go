package engine

// DeleteAcls (key 31), versions 0-3.
//
// Needs ALTER on the cluster (else every filter answers
// CLUSTER_AUTHORIZATION_FAILED). Each filter (security/acl.Filter, as in
// DescribeAcls) lists the ACLs it matches, and each matched ACL is removed
// once (RemoveAccessControlEntryRecord). An UNKNOWN code in a filter is
// INVALID_REQUEST for that filter. In a cluster the request is forwarded
// to the active controller (controller.DeleteACLs decides in both cases)
// and answered once this broker's image has lost the matched ACLs.
// Without an authorizer every filter answers SECURITY_DISABLED, as in
// Kafka.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/controller"
	"github.com/sluice-broker/sluice/metadata"
	"github.com/sluice-broker/sluice/security/acl"
)

func init() { register(kmsg.DeleteACLs, 0, 3, (*Broker).handleDeleteACLs) }

func (b *Broker) handleDeleteACLs(r *Request) {
	req := r.Msg.(*kmsg.DeleteACLsRequest)
	failed := func(resp kmsg.Response, code int16) {
		out := resp.(*kmsg.DeleteACLsResponse)
		for i := range out.Results {
			if out.Results[i].ErrorCode == 0 {
				out.Results[i].ErrorCode, out.Results[i].MatchingACLs = code, nil
			}
		}
	}
	if b.authorizer() == nil {
		resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
		for range req.Filters {
			res := kmsg.NewDeleteACLsResponseResult()
			res.ErrorCode, res.ErrorMessage = kerr.SecurityDisabled.Code, kmsg.StringPtr(noAuthorizer)
			resp.Results = append(resp.Results, res)
		}
		r.Respond(resp)
		return
	}
	if !r.allowedCluster(acl.OpAlter) {
		_, resp := controller.DeleteACLs(metadata.Image{}, req)
		failed(resp, kerr.ClusterAuthorizationFailed.Code)
		r.Respond(resp)
		return
	}
	decide := func(img metadata.Image) ([]metadata.Record, kmsg.Response) { return controller.DeleteACLs(img, req) }
	r.Respond(b.adminChange(req, decide, func(resp kmsg.Response, img metadata.Image) bool {
		for _, f := range req.Filters {
			filter := controller.ACLFilter(f)
			for _, a := range img.ACLs() {
				if filter.Matches(controller.ACLBinding(a)) {
					return false
				}
			}
		}
		return true
	}, failed))
}
