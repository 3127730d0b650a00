package engine

// DescribeGroups (key 15), versions 0-5.
//
// For each group: state, protocol type, and members with client id and
// host. The selected protocol and each member's metadata and assignment are
// only given while the group is Stable (as Kafka: mid-rebalance they are
// not meaningful). A group that does not exist is described as Dead with
// no error (GROUP_ID_NOT_FOUND only exists from v6, not served). v3+
// authorized operations, when asked for, are every group operation (READ,
// DELETE, DESCRIBE): Sluice has no ACLs.

import "github.com/twmb/franz-go/pkg/kmsg"

func init() { register(kmsg.DescribeGroups, 0, 5, (*Broker).handleDescribeGroups) }

// groupOperations is the ACL-operations bitfield of a group resource with
// everything allowed: READ (3), DELETE (6), DESCRIBE (8).
const groupOperations = 1<<3 | 1<<6 | 1<<8

func (b *Broker) handleDescribeGroups(r *Request) {
	req := r.Msg.(*kmsg.DescribeGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, name := range req.Groups {
		d := b.groups.describe(name)
		if req.IncludeAuthorizedOperations {
			d.AuthorizedOperations = groupOperations
		}
		resp.Groups = append(resp.Groups, d)
	}
	r.Respond(resp)
}

func (c *groupCoordinator) describe(name string) kmsg.DescribeGroupsResponseGroup {
	d := kmsg.NewDescribeGroupsResponseGroup()
	d.Group = name
	d.State = groupDead.String()
	d.Members = []kmsg.DescribeGroupsResponseGroupMember{}
	// "" is a valid name here: commits may use it (as in Kafka).
	g := c.lockGroup(name, false)
	if g == nil {
		return d
	}
	defer g.unlock()
	d.State = g.state.String()
	d.ProtocolType = g.protocolType
	stable := g.state == groupStable
	if stable {
		d.Protocol = g.protocol
	}
	for _, m := range g.sortedMembers() {
		dm := kmsg.DescribeGroupsResponseGroupMember{MemberID: m.id, ClientID: m.clientID, ClientHost: m.clientHost}
		if m.instanceID != "" {
			dm.InstanceID = kmsg.StringPtr(m.instanceID)
		}
		dm.ProtocolMetadata, dm.MemberAssignment = []byte{}, []byte{}
		if stable {
			dm.ProtocolMetadata = m.metadataFor(g.protocol)
			if m.assignment != nil {
				dm.MemberAssignment = m.assignment
			}
		}
		d.Members = append(d.Members, dm)
	}
	return d
}
