package engine

// ShareGroupDescribe (key 77), version 1.
//
// Describes share groups: state (Empty or Stable; Dead with
// GROUP_ID_NOT_FOUND for an id that is not a share group), group and
// assignment epochs, the assignor ("simple") and each member with its
// subscription and assignment (topic names resolved). Authorized
// operations are not computed (-2147483648, "not requested", as from a
// broker without an authorizer).

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/engine/share"
)

func init() { register(kmsg.ShareGroupDescribe, 1, 1, (*Broker).handleShareGroupDescribe) }

func (b *Broker) handleShareGroupDescribe(r *Request) {
	req := r.Msg.(*kmsg.ShareGroupDescribeRequest)
	resp := req.ResponseKind().(*kmsg.ShareGroupDescribeResponse)
	for _, name := range req.GroupIDs {
		resp.Groups = append(resp.Groups, b.describeShareGroup(name))
	}
	r.Respond(resp)
}

func (b *Broker) describeShareGroup(name string) kmsg.ShareGroupDescribeResponseGroup {
	g := kmsg.NewShareGroupDescribeResponseGroup()
	g.GroupID = name
	d := b.share.groups.Describe(name)
	g.ErrorCode, g.GroupState = d.Code, d.State
	if d.Code != 0 {
		if d.State == "Dead" {
			g.ErrorMessage = kmsg.StringPtr("Group " + name + " not found.")
		}
		return g
	}
	g.GroupEpoch, g.AssignmentEpoch, g.Assignor = d.Epoch, d.AssignmentEpoch, "simple"
	g.AuthorizedOperations = -2147483648
	g.Members = []kmsg.ShareGroupDescribeResponseGroupMember{}
	for _, m := range d.Members {
		dm := kmsg.NewShareGroupDescribeResponseGroupMember()
		dm.MemberID, dm.RackID, dm.MemberEpoch = m.ID, m.Rack, m.Epoch
		dm.ClientID, dm.ClientHost, dm.SubscribedTopicNames = m.ClientID, m.ClientHost, m.Subscribed
		dm.Assignment.TopicPartitions = b.describeAssigned(m.Assigned)
		g.Members = append(g.Members, dm)
	}
	return g
}

func (b *Broker) describeAssigned(tps []share.TopicPartitions) []kmsg.ShareGroupDescribeResponseGroupMemberAssignmentTopicPartition {
	out := []kmsg.ShareGroupDescribeResponseGroupMemberAssignmentTopicPartition{}
	for _, tp := range tps {
		out = append(out, kmsg.ShareGroupDescribeResponseGroupMemberAssignmentTopicPartition{
			TopicID: tp.TopicID, Topic: b.share.groups.TopicName(tp.TopicID), Partitions: tp.Partitions})
	}
	return out
}
