package engine

// CreateAcls (key 30), versions 0-3.
//
// Needs ALTER on the cluster (else every creation answers
// CLUSTER_AUTHORIZATION_FAILED). Each creation is checked (concrete
// resource type, LITERAL or PREFIXED pattern, a Type:Name principal, a
// host, ALLOW or DENY, the cluster resource named kafka-cluster; else
// INVALID_REQUEST with the reason) and becomes an
// AccessControlEntryRecord under a random id; an ACL that exists already
// succeeds without a new record, as in Kafka. v0 has no pattern type:
// LITERAL. In a cluster the request is forwarded to the active controller
// (controller.CreateACLs decides in both cases) and answered once this
// broker's image has the new ACLs. Without an authorizer every creation
// answers SECURITY_DISABLED and nothing is written, as in Kafka.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/controller"
	"github.com/sluice-broker/sluice/metadata"
	"github.com/sluice-broker/sluice/security/acl"
)

func init() { register(kmsg.CreateACLs, 0, 3, (*Broker).handleCreateACLs) }

func (b *Broker) handleCreateACLs(r *Request) {
	req := r.Msg.(*kmsg.CreateACLsRequest)
	failed := func(resp kmsg.Response, code int16) {
		out := resp.(*kmsg.CreateACLsResponse)
		for i := range out.Results {
			if out.Results[i].ErrorCode == 0 {
				out.Results[i].ErrorCode = code
			}
		}
	}
	if b.authorizer() == nil {
		resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
		for range req.Creations {
			res := kmsg.NewCreateACLsResponseResult()
			res.ErrorCode, res.ErrorMessage = kerr.SecurityDisabled.Code, kmsg.StringPtr(noAuthorizer)
			resp.Results = append(resp.Results, res)
		}
		r.Respond(resp)
		return
	}
	if !r.allowedCluster(acl.OpAlter) {
		_, resp := controller.CreateACLs(metadata.Image{}, req, controller.NewACLID)
		failed(resp, kerr.ClusterAuthorizationFailed.Code)
		r.Respond(resp)
		return
	}
	decide := func(img metadata.Image) ([]metadata.Record, kmsg.Response) {
		return controller.CreateACLs(img, req, controller.NewACLID)
	}
	r.Respond(b.adminChange(req, decide, func(resp kmsg.Response, img metadata.Image) bool {
		return aclsCreated(req, resp.(*kmsg.CreateACLsResponse), img)
	}, failed))
}

// aclsCreated reports whether img has every ACL the controller created.
func aclsCreated(req *kmsg.CreateACLsRequest, resp *kmsg.CreateACLsResponse, img metadata.Image) bool {
	have := map[metadata.ACL]bool{}
	for _, a := range img.ACLs() {
		have[a] = true
	}
	for i, c := range req.Creations {
		if i >= len(resp.Results) || resp.Results[i].ErrorCode != 0 {
			continue
		}
		a := metadata.ACL{ResourceType: int8(c.ResourceType), ResourceName: c.ResourceName, PatternType: int8(c.ResourcePatternType),
			Principal: c.Principal, Host: c.Host, Operation: int8(c.Operation), Permission: int8(c.PermissionType)}
		if !have[a] {
			return false
		}
	}
	return true
}
