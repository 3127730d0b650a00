package engine

// DescribeShareGroupOffsets (key 90), versions 0-1.
//
// Each partition's share-partition start offset as the share coordinator
// holds it (-1 for one never initialized), its leader epoch, and (v1) the
// lag: the records from the start offset to the high watermark not yet
// acknowledged or archived (-1 when unknown). Topics null asks for every
// share-partition the group has state for.
//
// Errors: GROUP_ID_NOT_FOUND for an id that is not a share group
// (group-level), NOT_COORDINATOR, UNKNOWN_TOPIC_OR_PARTITION per
// partition.

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/engine/share"
)

func init() {
	register(kmsg.DescribeShareGroupOffsets, 0, 1, (*Broker).handleDescribeShareGroupOffsets)
}

func (b *Broker) handleDescribeShareGroupOffsets(r *Request) {
	req := r.Msg.(*kmsg.DescribeShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeShareGroupOffsetsResponse)
	for _, g := range req.Groups {
		resp.Groups = append(resp.Groups, b.describeShareOffsets(g))
	}
	r.Respond(resp)
}

func (b *Broker) describeShareOffsets(g kmsg.DescribeShareGroupOffsetsRequestGroup) kmsg.DescribeShareGroupOffsetsResponseGroup {
	out := kmsg.DescribeShareGroupOffsetsResponseGroup{GroupID: g.GroupID, Topics: []kmsg.DescribeShareGroupOffsetsResponseGroupTopic{}}
	if d := b.share.groups.Describe(g.GroupID); d.Code != 0 {
		out.ErrorCode = d.Code
		return out
	}
	if code := b.share.ensureStates(); code != 0 {
		out.ErrorCode = code
		return out
	}
	topics := g.Topics
	if topics == nil {
		topics = b.shareStateTopics(g.GroupID)
	}
	for _, t := range topics {
		ot := kmsg.DescribeShareGroupOffsetsResponseGroupTopic{Topic: t.Topic}
		ti := b.image().Topic(t.Topic)
		if ti != nil {
			ot.TopicID = ti.ID
		}
		for _, p := range t.Partitions {
			op := kmsg.DescribeShareGroupOffsetsResponseGroupTopicPartition{Partition: p, StartOffset: -1, LeaderEpoch: -1, Lag: -1}
			if ti == nil || p < 0 || int(p) >= len(ti.Partitions) {
				op.ErrorCode = kerr.UnknownTopicOrPartition.Code
			} else {
				b.shareOffsetOf(g.GroupID, ti.ID, p, &op)
			}
			ot.Partitions = append(ot.Partitions, op)
		}
		out.Topics = append(out.Topics, ot)
	}
	return out
}

// shareOffsetOf fills in one partition's start offset and lag.
func (b *Broker) shareOffsetOf(group string, id [16]byte, p int32, op *kmsg.DescribeShareGroupOffsetsResponseGroupTopicPartition) {
	snap, found, code := b.share.readState(share.SPKey{Group: group, TopicID: id, Partition: p})
	op.ErrorCode = code
	if code != 0 || !found {
		return
	}
	op.StartOffset, op.LeaderEpoch = snap.StartOffset, snap.LeaderEpoch
	if t := b.TopicByID(id); t != nil && snap.DeliveryCompleteCount >= 0 {
		if part := t.Partition(p); part != nil && part.isLeader() {
			op.Lag = max(part.HighWatermark()-snap.StartOffset-int64(snap.DeliveryCompleteCount), 0)
		}
	}
}

// shareStateTopics lists the topics and partitions a group has state
// for, by name, sorted.
func (b *Broker) shareStateTopics(group string) []kmsg.DescribeShareGroupOffsetsRequestGroupTopic {
	byName := map[string][]int32{}
	for _, k := range b.share.states.Keys(group) {
		if t := b.TopicByID(k.TopicID); t != nil {
			byName[t.Name] = append(byName[t.Name], k.Partition)
		}
	}
	var out []kmsg.DescribeShareGroupOffsetsRequestGroupTopic
	for _, name := range slices.Sorted(mapsKeys(byName)) {
		ps := byName[name]
		slices.Sort(ps)
		out = append(out, kmsg.DescribeShareGroupOffsetsRequestGroupTopic{Topic: name, Partitions: ps})
	}
	return out
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
