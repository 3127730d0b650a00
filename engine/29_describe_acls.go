package engine

// DescribeAcls (key 29), versions 0-3.
//
// Needs DESCRIBE on the cluster (else CLUSTER_AUTHORIZATION_FAILED). The
// filter selects ACLs of the metadata image as Kafka's AclBindingFilter
// does (security/acl.Filter: ANY codes and null strings match all, MATCH
// selects every pattern that applies to a name); the answer groups them
// by resource pattern. An UNKNOWN code in the filter is INVALID_REQUEST.
// Without an authorizer (authorizer.class.name unset) the answer is
// SECURITY_DISABLED, as Kafka's: there are no ACLs to speak of.

import (
	"cmp"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/controller"
	"github.com/sluice-broker/sluice/security/acl"
)

func init() { register(kmsg.DescribeACLs, 0, 3, (*Broker).handleDescribeACLs) }

// noAuthorizer is the message of the ACL APIs' SECURITY_DISABLED.
const noAuthorizer = "No Authorizer is configured."

func (b *Broker) handleDescribeACLs(r *Request) {
	req := r.Msg.(*kmsg.DescribeACLsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	f := acl.Filter{ResourceType: acl.ResourceType(req.ResourceType), ResourceName: req.ResourceName,
		PatternType: acl.PatternType(req.ResourcePatternType), Principal: req.Principal, Host: req.Host,
		Operation: acl.Operation(req.Operation), Permission: acl.Permission(req.PermissionType)}
	switch err := f.Validate(); {
	case b.authorizer() == nil:
		resp.ErrorCode, resp.ErrorMessage = kerr.SecurityDisabled.Code, kmsg.StringPtr(noAuthorizer)
	case !r.allowedCluster(acl.OpDescribe):
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
	case err != nil:
		resp.ErrorCode, resp.ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr(err.Error())
	default:
		resp.Resources = describeACLs(b, f)
	}
	r.Respond(resp)
}

// describeACLs lists the image's ACLs f selects, grouped by resource
// pattern, in a stable order.
func describeACLs(b *Broker, f acl.Filter) []kmsg.DescribeACLsResponseResource {
	type pattern struct {
		typ  acl.ResourceType
		name string
		pat  acl.PatternType
	}
	byPattern := map[pattern][]kmsg.DescribeACLsResponseResourceACL{}
	for _, a := range b.image().ACLs() {
		bd := controller.ACLBinding(a)
		if !f.Matches(bd) {
			continue
		}
		e := kmsg.NewDescribeACLsResponseResourceACL()
		e.Principal, e.Host = bd.Principal, bd.Host
		e.Operation, e.PermissionType = kmsg.ACLOperation(bd.Operation), kmsg.ACLPermissionType(bd.Permission)
		k := pattern{bd.ResourceType, bd.ResourceName, bd.PatternType}
		byPattern[k] = append(byPattern[k], e)
	}
	out := make([]kmsg.DescribeACLsResponseResource, 0, len(byPattern))
	for k, acls := range byPattern {
		slices.SortFunc(acls, func(x, y kmsg.DescribeACLsResponseResourceACL) int {
			return cmp.Or(strings.Compare(x.Principal, y.Principal), strings.Compare(x.Host, y.Host),
				cmp.Compare(x.Operation, y.Operation), cmp.Compare(x.PermissionType, y.PermissionType))
		})
		res := kmsg.NewDescribeACLsResponseResource()
		res.ResourceType, res.ResourceName, res.ResourcePatternType = kmsg.ACLResourceType(k.typ), k.name, kmsg.ACLResourcePatternType(k.pat)
		res.ACLs = acls
		out = append(out, res)
	}
	slices.SortFunc(out, func(x, y kmsg.DescribeACLsResponseResource) int {
		return cmp.Or(cmp.Compare(x.ResourceType, y.ResourceType), strings.Compare(x.ResourceName, y.ResourceName),
			cmp.Compare(x.ResourcePatternType, y.ResourcePatternType))
	})
	return out
}
