package group

// Consumer-protocol groups as the admin APIs and the classic entry points
// see them: ConsumerGroupDescribe, ListGroups' type and state,
// DescribeGroups' classic view, OffsetCommit's member check, JoinGroup's
// group-type rule and the tombstones that delete a group.

import (
	"slices"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Group types, as ListGroups names them.
const (
	TypeClassic  = "classic"
	TypeConsumer = "consumer"
)

// ConsumerDescription is ConsumerGroupDescribe's answer for one group.
type ConsumerDescription struct {
	ErrorCode       int16
	ErrorMessage    string
	State           string
	Epoch           int32
	AssignmentEpoch int32
	Assignor        string
	Members         []ConsumerMemberDescription
}

// ConsumerMemberDescription is one member of a described consumer group.
type ConsumerMemberDescription struct {
	MemberID, InstanceID, RackID string
	ClientID, ClientHost         string
	MemberEpoch                  int32
	Topics                       []string
	Regex                        string
	Assignment, Target           []TopicPartitions
	Classic                      bool // the member speaks the classic protocol
}

// ConsumerDescribe describes a consumer group: GROUP_ID_NOT_FOUND for one
// that does not exist or is a classic group (the admin client then asks
// DescribeGroups).
func (c *Coordinator) ConsumerDescribe(name string) ConsumerDescription {
	if name == "" {
		return ConsumerDescription{ErrorCode: kerr.InvalidGroupID.Code}
	}
	g, m := c.lockGroup(name, false)
	if g == nil {
		return ConsumerDescription{ErrorCode: m.code(kerr.GroupIDNotFound.Code, kerr.CoordinatorNotAvailable.Code),
			ErrorMessage: "Group " + name + " not found."}
	}
	defer g.unlock()
	if g.cons == nil {
		return ConsumerDescription{ErrorCode: kerr.GroupIDNotFound.Code, ErrorMessage: "Group " + name + " is not a consumer group."}
	}
	st := g.cons.st
	d := ConsumerDescription{State: st.stateName(), Epoch: st.epoch, AssignmentEpoch: st.targetEpoch, Assignor: g.chooseAssignor(st)}
	for _, id := range st.sortedMemberIDs() {
		m := st.members[id]
		d.Members = append(d.Members, ConsumerMemberDescription{
			MemberID: m.id, InstanceID: m.instanceID, RackID: m.rackID, ClientID: m.clientID, ClientHost: m.clientHost,
			MemberEpoch: m.epoch, Topics: slices.Clone(m.topics), Regex: m.regex,
			Assignment: m.assigned.toTopicPartitions(), Target: st.target[id].toTopicPartitions(),
			Classic: m.classic != nil,
		})
	}
	return d
}

// stateName is Kafka's ConsumerGroupState: Empty, Assigning (the target
// is behind the group epoch), Reconciling (a member has not reached it),
// Stable.
func (st *cgState) stateName() string {
	switch {
	case len(st.members) == 0:
		return "Empty"
	case st.epoch > st.targetEpoch:
		return "Assigning"
	}
	for _, m := range st.members {
		if m.epoch != st.targetEpoch || m.state != memberStable {
			return "Reconciling"
		}
	}
	return "Stable"
}

// listing is the group's ListGroups row.
func (g *group) listing() Listing {
	if g.cons != nil {
		return Listing{Group: g.name, ProtocolType: consumerProtocolType, State: g.cons.st.stateName(), Type: TypeConsumer}
	}
	return Listing{Group: g.name, ProtocolType: g.protocolType, State: g.state.String(), Type: TypeClassic}
}

// joinConsumerGroup applies the group-type rule to a JoinGroup: an empty
// consumer group becomes a classic one (an error code if its tombstones
// failed); one with members serves the join itself (served).
func (g *group) joinConsumerGroup(req *JoinRequest, done func(JoinResult)) (code int16, served bool) {
	if g.cons == nil {
		return 0, false
	}
	if !g.consumerEmpty() {
		g.classicJoin(req, done)
		return 0, true
	}
	return g.toClassic(), false
}

// checkConsumerCommit validates an OffsetCommit to a consumer group: a
// commit without member (epoch < 0) only while the group has no members;
// a member's with its current epoch, or its previous one unless it is
// giving partitions up (the commit raced the heartbeat answer that moved
// its epoch): STALE_MEMBER_EPOCH otherwise.
func (g *group) checkConsumerCommit(epoch int32, memberID string) int16 {
	st := g.cons.st
	if epoch < 0 && memberID == "" && len(st.members) == 0 {
		return 0
	}
	m := st.members[memberID]
	if m == nil {
		return kerr.UnknownMemberID.Code
	}
	if m.classic != nil && epoch != m.epoch {
		return kerr.IllegalGeneration.Code
	}
	if epoch == m.epoch || epoch == m.prevEpoch && m.state != memberUnrevoked && epoch > 0 {
		return 0
	}
	return kerr.StaleMemberEpoch.Code
}

// metadataTombstones deletes the group's metadata records: the classic
// one, and every consumer-group record.
func (g *group) metadataTombstones() []offsetsRecord {
	recs := []offsetsRecord{{key: groupMetadataKey(g.name)}}
	if g.cons != nil {
		recs = append(recs, cgTombstones(g.name, g.cons.st)...)
	}
	return recs
}

// describeConsumerAsClassic is DescribeGroups' view of a consumer group,
// as Kafka gives it: the state's name, protocol type "consumer", the
// assignor as the protocol, and each member's subscription and assignment
// in the classic consumer protocol's encoding.
func (g *group) describeConsumerAsClassic() Description {
	st := g.cons.st
	d := Description{State: st.stateName(), ProtocolType: consumerProtocolType, Protocol: g.chooseAssignor(st),
		Members: []MemberDescription{}}
	for _, id := range st.sortedMemberIDs() {
		m := st.members[id]
		meta := kmsg.NewConsumerMemberMetadata()
		meta.Version = 3
		meta.Topics = slices.Clone(m.topics)
		if m.rackID != "" {
			meta.Rack = kmsg.StringPtr(m.rackID)
		}
		asg := kmsg.NewConsumerMemberAssignment()
		asg.Version = 3
		for _, tp := range m.assigned.toTopicPartitions() {
			if name, ok := g.topicName(tp.TopicID); ok {
				asg.Topics = append(asg.Topics, kmsg.ConsumerMemberAssignmentTopic{Topic: name, Partitions: tp.Partitions})
			}
		}
		sort.Slice(asg.Topics, func(i, j int) bool { return asg.Topics[i].Topic < asg.Topics[j].Topic })
		d.Members = append(d.Members, MemberDescription{MemberID: m.id, InstanceID: m.instanceID,
			ClientID: m.clientID, ClientHost: m.clientHost, Metadata: meta.AppendTo(nil), Assignment: asg.AppendTo(nil)})
	}
	return d
}

// topicName resolves a topic id through the subscribed metadata.
func (g *group) topicName(id [16]byte) (string, bool) {
	for name, t := range g.cons.st.subscribed {
		if t.id == id {
			return name, true
		}
	}
	if t := g.c.cfg.Consumer.Topics; t != nil {
		if meta, ok := t.ByID(id); ok {
			return meta.Name, true
		}
	}
	return "", false
}
