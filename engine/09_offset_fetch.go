package engine

// OffsetFetch (key 9), versions 1-9.
//
// Returns a group's committed offsets: for the requested partitions (-1,
// no metadata, leader epoch -1 where nothing is committed, including
// unknown topics and unknown groups), or, when topics is null (v2+), every
// partition the group has committed. v8+ batch several groups, each with
// its own error. RequireStable (v7+) needs no waiting: Sluice has no
// transactional offset commits, so no offset is ever unstable. v9's member
// id and epoch belong to KIP-848 groups; they are not checked (Kafka
// answers a stale epoch STALE_MEMBER_EPOCH; Sluice answers the offsets).
// The only group-level error is NOT_COORDINATOR, for a
// group whose __consumer_offsets partition is not loaded here (never in a
// single node, which loads every partition before the listener opens, so
// never COORDINATOR_LOAD_IN_PROGRESS either). v0 (offsets in ZooKeeper)
// and v10 (topic ids) are not served, like Kafka 4.0.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/engine/group"
)

func init() { register(kmsg.OffsetFetch, 1, 9, (*Broker).handleOffsetFetch) }

func (b *Broker) handleOffsetFetch(r *Request) {
	req := r.Msg.(*kmsg.OffsetFetchRequest)
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	if r.Version >= 8 {
		for _, rg := range req.Groups {
			var topics []group.FetchedTopic
			if rg.Topics != nil {
				topics = make([]group.FetchedTopic, 0, len(rg.Topics))
				for _, t := range rg.Topics {
					topics = append(topics, requestedTopic(t.Topic, t.Partitions))
				}
			}
			fetched, code := b.groups.FetchOffsets(rg.Group, topics)
			g := fetchGroupResponse(rg.Group, fetched)
			g.ErrorCode = code
			resp.Groups = append(resp.Groups, g)
		}
		r.Respond(resp)
		return
	}
	var topics []group.FetchedTopic
	if req.Topics != nil {
		topics = make([]group.FetchedTopic, 0, len(req.Topics))
		for _, t := range req.Topics {
			topics = append(topics, requestedTopic(t.Topic, t.Partitions))
		}
	}
	fetched, code := b.groups.FetchOffsets(req.Group, topics)
	resp.ErrorCode = code
	for _, t := range fetched {
		rt := kmsg.OffsetFetchResponseTopic{Topic: t.Topic}
		for _, p := range t.Partitions {
			rt.Partitions = append(rt.Partitions, kmsg.OffsetFetchResponseTopicPartition{
				Partition: p.Partition, Offset: p.Offset, LeaderEpoch: p.LeaderEpoch, Metadata: kmsg.StringPtr(p.Metadata), ErrorCode: code,
			})
		}
		resp.Topics = append(resp.Topics, rt)
	}
	r.Respond(resp)
}

func requestedTopic(topic string, partitions []int32) group.FetchedTopic {
	t := group.FetchedTopic{Topic: topic, Partitions: make([]group.FetchedOffset, len(partitions))}
	for i, p := range partitions {
		t.Partitions[i] = group.FetchedOffset{Partition: p, Offset: -1, LeaderEpoch: -1}
	}
	return t
}

func fetchGroupResponse(name string, topics []group.FetchedTopic) kmsg.OffsetFetchResponseGroup {
	g := kmsg.OffsetFetchResponseGroup{Group: name, Topics: []kmsg.OffsetFetchResponseGroupTopic{}}
	for _, t := range topics {
		rt := kmsg.OffsetFetchResponseGroupTopic{Topic: t.Topic}
		for _, p := range t.Partitions {
			rt.Partitions = append(rt.Partitions, kmsg.OffsetFetchResponseGroupTopicPartition{
				Partition: p.Partition, Offset: p.Offset, LeaderEpoch: p.LeaderEpoch, Metadata: kmsg.StringPtr(p.Metadata),
			})
		}
		g.Topics = append(g.Topics, rt)
	}
	return g
}
