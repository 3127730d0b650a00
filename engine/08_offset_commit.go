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
// A commit with a generation to a group that does not exist is answered
// ILLEGAL_GENERATION (GROUP_ID_NOT_FOUND from v9, as Kafka 4 does). Per
// partition: UNKNOWN_TOPIC_OR_PARTITION for a topic that does not exist,
// OFFSET_METADATA_TOO_LARGE past 4096 bytes of metadata
// (offset.metadata.max.bytes). The response is sent only after the
// offsets are appended to __consumer_offsets; a failed append answers
// NOT_COORDINATOR (or INVALID_COMMIT_OFFSET_SIZE for a batch too large).
//
// v2-4 RetentionTimeMillis other than -1 sets an explicit expiry for the
// offsets; v5+ rely on offsets.retention.minutes. v6+ leader epochs are
// stored and returned by OffsetFetch. v10 (topic ids) is not advertised:
// Kafka 4.0 does not serve it either.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.OffsetCommit, 2, 9, (*Broker).handleOffsetCommit) }

func (b *Broker) handleOffsetCommit(r *Request) {
	req := r.Msg.(*kmsg.OffsetCommitRequest)
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	resp.Topics = make([]kmsg.OffsetCommitResponseTopic, len(req.Topics))
	for i, t := range req.Topics {
		rt := &resp.Topics[i]
		rt.Topic = t.Topic
		rt.Partitions = make([]kmsg.OffsetCommitResponseTopicPartition, len(t.Partitions))
		for j, p := range t.Partitions {
			rt.Partitions[j].Partition = p.Partition
		}
	}
	b.groups.commit(r, req, resp)
	r.Respond(resp)
}

func (c *groupCoordinator) commit(r *Request, req *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse) {
	// Unknown topics fail first, whatever the group says (as Kafka's
	// request layer filters them before the coordinator).
	for i, t := range req.Topics {
		if c.b.Topic(t.Topic) == nil {
			setCommitErrors(resp.Topics[i:i+1], kerr.UnknownTopicOrPartition.Code)
		}
	}
	g := c.lockGroup(req.Group, false)
	if g == nil {
		if req.Generation >= 0 {
			code := kerr.IllegalGeneration.Code
			if r.Version >= 9 {
				code = kerr.GroupIDNotFound.Code
			}
			setCommitErrors(resp.Topics, code)
			return
		}
		if g = c.lockGroup(req.Group, true); g == nil {
			setCommitErrors(resp.Topics, kerr.CoordinatorNotAvailable.Code)
			return
		}
	}
	defer g.unlock()
	instanceID := ""
	if req.InstanceID != nil {
		instanceID = *req.InstanceID
	}
	if code := g.checkCommit(req.Generation, req.MemberID, instanceID); code != 0 {
		setCommitErrors(resp.Topics, code)
		g.dropIfUnused()
		return
	}
	if m := g.members[req.MemberID]; m != nil {
		g.touch(m, m.session) // a commit proves the member is alive
	}
	g.commitOffsets(stageCommit(r, req, resp))
	g.dropIfUnused()
}

// stageCommit validates each partition and builds its offset.
func stageCommit(r *Request, req *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse) []stagedOffset {
	now := r.Received.UnixMilli()
	expireMs := int64(-1)
	if r.Version <= 4 && req.RetentionTimeMillis != -1 {
		expireMs = now + req.RetentionTimeMillis
	}
	var staged []stagedOffset
	for i, t := range req.Topics {
		for j, p := range t.Partitions {
			out := &resp.Topics[i].Partitions[j]
			if out.ErrorCode != 0 {
				continue
			}
			o := &committedOffset{offset: p.Offset, leaderEpoch: -1, commitMs: now, expireMs: expireMs}
			if p.Metadata != nil {
				o.metadata = *p.Metadata
			}
			if len(o.metadata) > maxOffsetMetadata {
				out.ErrorCode = kerr.OffsetMetadataTooLarge.Code
				continue
			}
			if r.Version >= 6 {
				o.leaderEpoch = p.LeaderEpoch
			}
			staged = append(staged, stagedOffset{tp: offsetTP{t.Topic, p.Partition}, o: o, code: &out.ErrorCode})
		}
	}
	return staged
}

// setCommitErrors sets code on every partition not already failed.
func setCommitErrors(topics []kmsg.OffsetCommitResponseTopic, code int16) {
	for i := range topics {
		for j := range topics[i].Partitions {
			if p := &topics[i].Partitions[j]; p.ErrorCode == 0 {
				p.ErrorCode = code
			}
		}
	}
}
