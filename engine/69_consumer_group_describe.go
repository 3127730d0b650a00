package engine

// ConsumerGroupDescribe (key 69), versions 0-1.
//
// Describes KIP-848 consumer groups: state (Empty, Assigning,
// Reconciling, Stable), group and assignment epochs, the assignor, and per
// member its epoch, subscription (names and regex), current and target
// assignment (topic ids with their names), rack, instance id and, v1+,
// its type (1 for a consumer-protocol member, 0 for a classic member of
// a group being migrated). A classic group or one that does not exist answers
// GROUP_ID_NOT_FOUND, which sends the admin client (kafka-consumer-groups
// --describe) to DescribeGroups. Authorized operations, when asked for,
// are every group operation: Sluice has no ACLs.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/engine/group"
)

func init() { register(kmsg.ConsumerGroupDescribe, 0, 1, (*Broker).handleConsumerGroupDescribe) }

func (b *Broker) handleConsumerGroupDescribe(r *Request) {
	req := r.Msg.(*kmsg.ConsumerGroupDescribeRequest)
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	for _, name := range req.Groups {
		g := b.describedConsumerGroup(name, b.groups.ConsumerDescribe(name))
		if req.IncludeAuthorizedOperations && g.ErrorCode == 0 {
			g.AuthorizedOperations = groupOperations
		}
		resp.Groups = append(resp.Groups, g)
	}
	r.Respond(resp)
}

func (b *Broker) describedConsumerGroup(name string, d group.ConsumerDescription) kmsg.ConsumerGroupDescribeResponseGroup {
	g := kmsg.NewConsumerGroupDescribeResponseGroup()
	g.Group = name
	g.ErrorCode = d.ErrorCode
	if d.ErrorCode != 0 {
		if d.ErrorMessage != "" {
			g.ErrorMessage = kmsg.StringPtr(d.ErrorMessage)
		} else if e := kerr.ErrorForCode(d.ErrorCode); e != nil {
			g.ErrorMessage = kmsg.StringPtr(e.Error())
		}
		return g
	}
	g.State, g.Epoch, g.AssignmentEpoch, g.AssignorName = d.State, d.Epoch, d.AssignmentEpoch, d.Assignor
	g.Members = []kmsg.ConsumerGroupDescribeResponseGroupMember{}
	topics := imageTopics{b}
	for _, m := range d.Members {
		dm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
		dm.MemberID, dm.MemberEpoch, dm.ClientID, dm.ClientHost = m.MemberID, m.MemberEpoch, m.ClientID, m.ClientHost
		dm.InstanceID, dm.RackID, dm.SubscribedTopicRegex = optional(m.InstanceID), optional(m.RackID), optional(m.Regex)
		dm.SubscribedTopics = append([]string{}, m.Topics...)
		dm.Assignment = describedAssignment(topics, m.Assignment)
		dm.TargetAssignment = describedAssignment(topics, m.Target)
		dm.MemberType = 1
		if m.Classic {
			dm.MemberType = 0
		}
		g.Members = append(g.Members, dm)
	}
	return g
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return kmsg.StringPtr(s)
}

// describedAssignment names each topic (one deleted since is left out).
func describedAssignment(topics imageTopics, tps []group.TopicPartitions) kmsg.Assignment {
	a := kmsg.NewAssignment()
	a.TopicPartitions = []kmsg.AssignmentTopicPartition{}
	for _, t := range tps {
		meta, ok := topics.ByID(t.TopicID)
		if !ok {
			continue
		}
		a.TopicPartitions = append(a.TopicPartitions, kmsg.AssignmentTopicPartition{TopicID: t.TopicID, Topic: meta.Name, Partitions: t.Partitions})
	}
	return a
}
