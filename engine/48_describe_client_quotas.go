package engine

// DescribeClientQuotas (key 48), versions 0-1.
//
// Needs DESCRIBE_CONFIGS on the cluster (else
// CLUSTER_AUTHORIZATION_FAILED). Lists the client quotas of the metadata
// image whose entity matches every component: MatchType 0 (exact) a part
// of that type with that name, 1 (default) the type's default, 2 (any) a
// part of that type, named or default. Strict leaves out entities with a
// part of a type no component names. An unknown entity type, a type named
// twice or an exact match without a name is INVALID_REQUEST.

import (
	"maps"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/metadata"
	"github.com/sluice-broker/sluice/security/acl"
)

func init() { register(kmsg.DescribeClientQuotas, 0, 1, (*Broker).handleDescribeClientQuotas) }

func (b *Broker) handleDescribeClientQuotas(r *Request) {
	req := r.Msg.(*kmsg.DescribeClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	switch msg := checkQuotaComponents(req.Components); {
	case !r.allowedCluster(acl.OpDescribeConfigs):
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
	case msg != "":
		resp.ErrorCode, resp.ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr(msg)
	default:
		resp.Entries = describeQuotas(b.image(), req)
	}
	r.Respond(resp)
}

func checkQuotaComponents(cs []kmsg.DescribeClientQuotasRequestComponent) string {
	seen := map[string]bool{}
	for _, c := range cs {
		switch {
		case entityPart(metadata.QuotaEntity{}, c.EntityType) == nil:
			return "unknown entity type " + c.EntityType
		case seen[c.EntityType]:
			return "entity type " + c.EntityType + " given twice"
		case c.MatchType == 0 && c.Match == nil:
			return "an exact match needs a name"
		case c.MatchType > 2:
			return "unknown match type"
		}
		seen[c.EntityType] = true
	}
	return ""
}

// entityPart returns the part of e of the given type (nil if none).
func entityPart(e metadata.QuotaEntity, typ string) *metadata.EntityName {
	switch typ {
	case "user":
		return &e.User
	case "client-id":
		return &e.ClientID
	case "ip":
		return &e.IP
	}
	return nil
}

func describeQuotas(img metadata.Image, req *kmsg.DescribeClientQuotasRequest) []kmsg.DescribeClientQuotasResponseEntry {
	out := []kmsg.DescribeClientQuotasResponseEntry{} // null would mean an error to Java's admin client
	for e, kv := range img.ClientQuotas() {
		if !quotaMatches(e, req) {
			continue
		}
		entry := kmsg.NewDescribeClientQuotasResponseEntry()
		for _, typ := range []string{"user", "client-id", "ip"} {
			p := entityPart(e, typ)
			if p.Kind == metadata.EntityAbsent {
				continue
			}
			en := kmsg.DescribeClientQuotasResponseEntryEntity{Type: typ}
			if p.Kind == metadata.EntityNamed {
				en.Name = kmsg.StringPtr(p.Name)
			}
			entry.Entity = append(entry.Entity, en)
		}
		for _, k := range slices.Sorted(maps.Keys(kv)) {
			entry.Values = append(entry.Values, kmsg.DescribeClientQuotasResponseEntryValue{Key: k, Value: kv[k]})
		}
		out = append(out, entry)
	}
	slices.SortFunc(out, func(a, b kmsg.DescribeClientQuotasResponseEntry) int {
		return strings.Compare(entityString(a), entityString(b))
	})
	return out
}

func entityString(e kmsg.DescribeClientQuotasResponseEntry) string {
	var sb strings.Builder
	for _, p := range e.Entity {
		sb.WriteString(p.Type + "=" + quotaName(p.Name) + ";")
	}
	return sb.String()
}

func quotaName(s *string) string {
	if s == nil {
		return "<default>"
	}
	return *s
}

func quotaMatches(e metadata.QuotaEntity, req *kmsg.DescribeClientQuotasRequest) bool {
	named := map[string]bool{}
	for _, c := range req.Components {
		p := entityPart(e, c.EntityType)
		named[c.EntityType] = true
		switch c.MatchType {
		case 0:
			if p.Kind != metadata.EntityNamed || p.Name != *c.Match {
				return false
			}
		case 1:
			if p.Kind != metadata.EntityDefault {
				return false
			}
		default:
			if p.Kind == metadata.EntityAbsent {
				return false
			}
		}
	}
	if req.Strict {
		for _, typ := range []string{"user", "client-id", "ip"} {
			if entityPart(e, typ).Kind != metadata.EntityAbsent && !named[typ] {
				return false
			}
		}
	}
	return true
}
