package engine

// ListGroups (key 16), versions 0-5.
//
// Every group this broker coordinates (those of the loaded partitions of
// __consumer_offsets: in a single node, all of them), with its protocol
// type; v4+ also its state, filtered by StatesFilter when given; v5+ its
// type, filtered by TypesFilter. Both filters compare case-insensitively,
// as Kafka does. A group's type is "classic" or "consumer" (KIP-848,
// whose states are Empty, Assigning, Reconciling and Stable).

import (
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.ListGroups, 0, 5, (*Broker).handleListGroups) }

func (b *Broker) handleListGroups(r *Request) {
	req := r.Msg.(*kmsg.ListGroupsRequest)
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	resp.Groups = []kmsg.ListGroupsResponseGroup{}
	b.listShareGroups(req, resp)
	for _, g := range b.groups.List() {
		if matchesFilter(req.StatesFilter, g.State) && matchesFilter(req.TypesFilter, g.Type) {
			resp.Groups = append(resp.Groups, kmsg.ListGroupsResponseGroup{Group: g.Group, ProtocolType: g.ProtocolType, GroupState: g.State, GroupType: g.Type})
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
