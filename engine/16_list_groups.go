package engine

// ListGroups (key 16), versions 0-5.
//
// Every group this broker coordinates (those of the loaded partitions of
// __consumer_offsets: in a single node, all of them), with its protocol
// type; v4+ also its state, filtered by StatesFilter when given; v5+ its
// type, filtered by TypesFilter. Both filters compare case-insensitively,
// as Kafka does. Every Sluice group is a "classic" group (no KIP-848
// consumer groups, no share groups).

import (
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.ListGroups, 0, 5, (*Broker).handleListGroups) }

const classicGroupType = "classic"

func (b *Broker) handleListGroups(r *Request) {
	req := r.Msg.(*kmsg.ListGroupsRequest)
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	resp.Groups = []kmsg.ListGroupsResponseGroup{}
	b.listShareGroups(req, resp)
	if !matchesFilter(req.TypesFilter, classicGroupType) {
		r.Respond(resp)
		return
	}
	for _, g := range b.groups.List() {
		if matchesFilter(req.StatesFilter, g.State) {
			resp.Groups = append(resp.Groups, kmsg.ListGroupsResponseGroup{Group: g.Group, ProtocolType: g.ProtocolType, GroupState: g.State, GroupType: classicGroupType})
		}
	}
	r.Respond(resp)
}

// matchesFilter reports whether v passes a filter (empty passes all).
func matchesFilter(filter []string, v string) bool {
	if len(filter) == 0 {
		return true
	}
	for _, f := range filter {
		if strings.EqualFold(f, v) {
			return true
		}
	}
	return false
}
