package engine

// OffsetCommit (key 8), versions 2-9.
//
// Commits offsets for a group. Two kinds of committers, as in Kafka:
//
//   - group members send their generation and member id (and, v7+, their
//     group.instance.id); these are checked against the group:
//     UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, ILLEGAL_GENERATION, and
//     REBALANCE_IN_PROGRESS between JoinGroup and SyncGroup. Commits are
//     accepted during a join phase (the member learns of it by heartbeat).
//   - standalone consumers and admin tools send generation -1 and no
//     member id; they may commit only while the group has no members
//     (UNKNOWN_MEMBER_ID otherwise), and their first commit creates a
//     "simple" group.
//
// A KIP-848 consumer group checks the member id and its member epoch
// (sent as the generation): UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH; the
// previous epoch passes unless the member is revoking partitions (its
// commit raced the heartbeat answer that moved it on).
//
// A commit with a generation to a group that does not exist is answered
// ILLEGAL_GENERATION (GROUP_ID_NOT_FOUND from v9, as Kafka 4 does). Per
// partition: UNKNOWN_TOPIC_OR_PARTITION for a topic that does not exist,
// OFFSET_METADATA_TOO_LARGE past 4096 bytes of metadata
// (offset.metadata.max.bytes). The response is sent only after the
// offsets are appended to __consumer_offsets; a failed append answers
// NOT_COORDINATOR (or INVALID_COMMIT_OFFSET_SIZE for a batch too large),
// as does a group whose __consumer_offsets partition is not loaded here.
//
// v2-4 RetentionTimeMillis other than -1 sets an explicit expiry for the
// offsets; v5+ rely on offsets.retention.minutes. v6+ leader epochs are
// stored and returned by OffsetFetch. v10 (topic ids) is not advertised:
// Kafka 4.0 does not serve it either.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/engine/group"
)

func init() { register(kmsg.OffsetCommit, 2, 9, (*Broker).handleOffsetCommit) }

func (b *Broker) handleOffsetCommit(r *Request) {
	req := r.Msg.(*kmsg.OffsetCommitRequest)
	c := commitRequest(r, req)
	// Unknown topics fail first, whatever the group says (as Kafka's
	// request layer filters them before the coordinator).
	shareID := b.isShareGroup(req.Group) // Kafka: "Group g is not a consumer group."
	for i := range c.Offsets {
		switch {
		case b.Topic(c.Offsets[i].Topic) == nil:
			c.Offsets[i].ErrorCode = kerr.UnknownTopicOrPartition.Code
		case shareID:
			c.Offsets[i].ErrorCode = kerr.GroupIDNotFound.Code
		}
	}
	if !shareID {
		b.groups.Commit(c)
	}
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	resp.Topics = make([]kmsg.OffsetCommitResponseTopic, len(req.Topics))
	k := 0
	for i, t := range req.Topics {
		rt := &resp.Topics[i]
		rt.Topic = t.Topic
		rt.Partitions = make([]kmsg.OffsetCommitResponseTopicPartition, len(t.Partitions))
		for j, p := range t.Partitions {
			rt.Partitions[j] = kmsg.OffsetCommitResponseTopicPartition{Partition: p.Partition, ErrorCode: c.Offsets[k].ErrorCode}
			k++
		}
	}
	r.Respond(resp)
}

// commitRequest translates an OffsetCommit, one offset per partition in
// request order.
func commitRequest(r *Request, req *kmsg.OffsetCommitRequest) *group.CommitRequest {
	c := &group.CommitRequest{
		Group: req.Group, Generation: req.Generation, MemberID: req.MemberID,
		Now: r.Received, RetentionMs: -1, GroupIDNotFound: r.Version >= 9,
	}
	if req.InstanceID != nil {
		c.InstanceID = *req.InstanceID
	}
	if r.Version <= 4 {
		c.RetentionMs = req.RetentionTimeMillis
	}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			o := group.CommitOffset{Topic: t.Topic, Partition: p.Partition, Offset: p.Offset, LeaderEpoch: -1}
			if p.Metadata != nil {
				o.Metadata = *p.Metadata
			}
			if r.Version >= 6 {
				o.LeaderEpoch = p.LeaderEpoch
			}
			c.Offsets = append(c.Offsets, o)
		}
	}
	return c
}
