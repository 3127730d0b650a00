package engine

// DescribeGroups (key 15), versions 0-5.
//
// For each group: state, protocol type, and members with client id and
// host. The selected protocol and each member's metadata and assignment are
// only given while the group is Stable (as Kafka: mid-rebalance they are
// not meaningful). A group that does not exist is described as Dead with
// no error (GROUP_ID_NOT_FOUND only exists from v6, not served). v3+
// authorized operations, when asked for, are every group operation (READ,
// DELETE, DESCRIBE): Sluice has no ACLs. A KIP-848 consumer group is
// described as Kafka describes one: its state (Empty, Assigning,
// Reconciling, Stable), protocol type "consumer", its assignor as the
// protocol, and each member's subscription and assignment in the classic
// consumer protocol's encoding.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/engine/group"
)

func init() { register(kmsg.DescribeGroups, 0, 5, (*Broker).handleDescribeGroups) }

// groupOperations is the ACL-operations bitfield of a group resource with
// everything allowed: READ (3), DELETE (6), DESCRIBE (8).
const groupOperations = 1<<3 | 1<<6 | 1<<8

func (b *Broker) handleDescribeGroups(r *Request) {
	req := r.Msg.(*kmsg.DescribeGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, name := range req.Groups {
		d := describedGroup(name, b.groups.Describe(name))
		if req.IncludeAuthorizedOperations {
			d.AuthorizedOperations = groupOperations
		}
		resp.Groups = append(resp.Groups, d)
	}
	r.Respond(resp)
}

func describedGroup(name string, g group.Description) kmsg.DescribeGroupsResponseGroup {
	d := kmsg.NewDescribeGroupsResponseGroup()
	d.Group = name
	d.ErrorCode = g.ErrorCode
	d.State = g.State
	d.ProtocolType = g.ProtocolType
	d.Protocol = g.Protocol
	d.Members = make([]kmsg.DescribeGroupsResponseGroupMember, 0, len(g.Members))
	for _, m := range g.Members {
		dm := kmsg.DescribeGroupsResponseGroupMember{
			MemberID: m.MemberID, ClientID: m.ClientID, ClientHost: m.ClientHost,
			ProtocolMetadata: m.Metadata, MemberAssignment: m.Assignment,
		}
		if m.InstanceID != "" {
			dm.InstanceID = kmsg.StringPtr(m.InstanceID)
		}
		d.Members = append(d.Members, dm)
	}
	return d
}
