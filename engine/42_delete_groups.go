package engine

// DeleteGroups (key 42), versions 0-2.
//
// Deletes groups that have no members: their offsets and metadata are
// tombstoned in __consumer_offsets, then the group is gone (a later join
// or commit starts a new one). Per group: GROUP_ID_NOT_FOUND if it does
// not exist, NON_EMPTY_GROUP if it has members (or is rebalancing), and
// NOT_COORDINATOR if the tombstones cannot be written.

import "github.com/twmb/franz-go/pkg/kmsg"

func init() { register(kmsg.DeleteGroups, 0, 2, (*Broker).handleDeleteGroups) }

func (b *Broker) handleDeleteGroups(r *Request) {
	req := r.Msg.(*kmsg.DeleteGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	for _, name := range req.Groups {
		code, share := b.deleteShareGroup(name)
		if !share {
			code = b.groups.DeleteGroup(name)
		}
		resp.Groups = append(resp.Groups, kmsg.DeleteGroupsResponseGroup{Group: name, ErrorCode: code})
	}
	r.Respond(resp)
}
