package group

// Committed offsets of a group: commit (written to __consumer_offsets
// before it is acknowledged), fetch, delete, and expiry by
// offsets.retention.minutes as Kafka applies it since KIP-211:
//
//   - Empty group that had members: every offset expires once the group
//     has been Empty for the retention time.
//   - Stable consumer group: offsets of topics no member subscribes to
//     expire the retention time after their commit.
//   - Simple group (offsets only, never had members): each offset expires
//     the retention time after its commit.
//   - An offset committed with an explicit retention time (OffsetCommit
//     v2-4) expires at that time, under the same group conditions.
//
// An Empty group left with no offsets is removed (Dead).

import (
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// MaxOffsetMetadata is Kafka's offset.metadata.max.bytes default.
const MaxOffsetMetadata = 4096

// CommitRequest is an OffsetCommit.
type CommitRequest struct {
	Group      string
	Generation int32 // -1 for a standalone committer (no member)
	MemberID   string
	InstanceID string
	// Now is when the request arrived: the offsets' commit time.
	Now time.Time
	// RetentionMs is an explicit retention time (OffsetCommit v2-4); -1
	// lets offsets.retention.minutes apply.
	RetentionMs int64
	// GroupIDNotFound: a commit with a generation to an unknown group
	// answers GROUP_ID_NOT_FOUND (v9+) rather than ILLEGAL_GENERATION.
	GroupIDNotFound bool
	Offsets         []CommitOffset
}

// CommitOffset is one partition of a commit. ErrorCode is the result; a
// partition that comes in with one set (an unknown topic) is skipped.
type CommitOffset struct {
	Topic       string
	Partition   int32
	Offset      int64
	LeaderEpoch int32 // -1 if unknown
	Metadata    string
	ErrorCode   int16
}

// Commit handles an OffsetCommit, setting each offset's ErrorCode. It
// returns once the offsets are in the log (or failed to get there).
func (c *Coordinator) Commit(req *CommitRequest) {
	g, m := c.lockGroup(req.Group, false)
	if g == nil && m != notLoaded && req.Generation >= 0 {
		code := kerr.IllegalGeneration.Code
		if req.GroupIDNotFound {
			code = kerr.GroupIDNotFound.Code
		}
		setCommitErrors(req.Offsets, code)
		return
	}
	if g == nil && m == noGroup {
		g, m = c.lockGroup(req.Group, true) // a standalone committer's first commit
	}
	if g == nil {
		setCommitErrors(req.Offsets, m.code(0, kerr.CoordinatorNotAvailable.Code))
		return
	}
	defer g.unlock()
	if code := g.checkCommit(req.Generation, req.MemberID, req.InstanceID); code != 0 {
		setCommitErrors(req.Offsets, code)
		g.dropIfUnused()
		return
	}
	if m := g.members[req.MemberID]; m != nil {
		g.touch(m, m.session) // a commit proves the member is alive
	}
	g.commitOffsets(stageCommit(req))
	g.dropIfUnused()
}

// setCommitErrors sets code on every offset not already failed.
func setCommitErrors(offsets []CommitOffset, code int16) {
	for i := range offsets {
		if offsets[i].ErrorCode == 0 {
			offsets[i].ErrorCode = code
		}
	}
}

// stageCommit validates each offset and builds what is stored.
func stageCommit(req *CommitRequest) []stagedOffset {
	now := req.Now.UnixMilli()
	expireMs := int64(-1)
	if req.RetentionMs != -1 {
		expireMs = now + req.RetentionMs
	}
	var staged []stagedOffset
	for i := range req.Offsets {
		in := &req.Offsets[i]
		if in.ErrorCode != 0 {
			continue
		}
		if len(in.Metadata) > MaxOffsetMetadata {
			in.ErrorCode = kerr.OffsetMetadataTooLarge.Code
			continue
		}
		o := &committedOffset{offset: in.Offset, leaderEpoch: in.LeaderEpoch, metadata: in.Metadata, commitMs: now, expireMs: expireMs}
		staged = append(staged, stagedOffset{tp: offsetTP{in.Topic, in.Partition}, o: o, code: &in.ErrorCode})
	}
	return staged
}

// checkCommit validates a commit's generation and member against the group
// (Kafka's rules: a commit without generation and member is accepted only
// while the group is Empty).
func (g *group) checkCommit(generation int32, memberID, instanceID string) int16 {
	if g.cons != nil {
		return g.checkConsumerCommit(generation, memberID)
	}
	if generation < 0 && g.state == groupEmpty {
		return 0
	}
	if generation >= 0 || memberID != "" || instanceID != "" {
		if code := g.checkMember(memberID, instanceID); code != 0 {
			return code
		}
		if generation != g.generation {
			return kerr.IllegalGeneration.Code
		}
	} else if g.state != groupEmpty {
		return kerr.UnknownMemberID.Code
	}
	if g.state == groupCompletingRebalance {
		// The member has its new generation but not its assignment yet.
		return kerr.RebalanceInProgress.Code
	}
	return 0
}

// stagedOffset is a validated offset waiting for its record to be written;
// code is where its result goes.
type stagedOffset struct {
	tp   offsetTP
	o    *committedOffset
	code *int16
}

// commitOffsets writes staged offsets and, once the append succeeded,
// makes them visible; every staged result gets the append's outcome.
func (g *group) commitOffsets(staged []stagedOffset) {
	recs := make([]offsetsRecord, len(staged))
	for i, s := range staged {
		recs[i] = offsetCommitRecord(g.name, s.tp, s.o)
	}
	if err := g.append(recs); err != nil {
		g.c.log.Error("writing offset commit failed", "group", g.name, "err", err)
		code := appendErrorCode(err, true)
		for _, s := range staged {
			*s.code = code
		}
		return
	}
	for _, s := range staged {
		g.offsets[s.tp] = s.o
	}
}

// FetchedOffset is one partition's answer to OffsetFetch.
type FetchedOffset struct {
	Partition   int32
	Offset      int64 // -1 when nothing is committed
	LeaderEpoch int32
	Metadata    string
}

// FetchedTopic is one topic's answer to OffsetFetch.
type FetchedTopic struct {
	Topic      string
	Partitions []FetchedOffset
}

// FetchOffsets answers OffsetFetch for one group: the requested partitions
// (-1 for those without a commit), or every committed offset when topics
// is nil. An unknown group has no offsets. The error code is
// NOT_COORDINATOR when the group is not coordinated here.
func (c *Coordinator) FetchOffsets(name string, topics []FetchedTopic) ([]FetchedTopic, int16) {
	g, m := c.lockGroup(name, false)
	if m == notLoaded {
		return topics, kerr.NotCoordinator.Code
	}
	if g == nil {
		for i := range topics {
			for j := range topics[i].Partitions {
				topics[i].Partitions[j].fill(nil)
			}
		}
		return topics, 0
	}
	defer g.unlock()
	if topics == nil {
		return g.allOffsets(), 0
	}
	for i := range topics {
		t := &topics[i]
		for j := range t.Partitions {
			p := &t.Partitions[j]
			p.fill(g.offsets[offsetTP{t.Topic, p.Partition}])
		}
	}
	return topics, 0
}

func (f *FetchedOffset) fill(o *committedOffset) {
	if o == nil {
		f.Offset, f.LeaderEpoch, f.Metadata = -1, -1, ""
		return
	}
	f.Offset, f.LeaderEpoch, f.Metadata = o.offset, o.leaderEpoch, o.metadata
}

// allOffsets lists every committed offset, sorted by topic and partition.
func (g *group) allOffsets() []FetchedTopic {
	tps := make([]offsetTP, 0, len(g.offsets))
	for tp := range g.offsets {
		tps = append(tps, tp)
	}
	sort.Slice(tps, func(i, j int) bool {
		if tps[i].topic != tps[j].topic {
			return tps[i].topic < tps[j].topic
		}
		return tps[i].partition < tps[j].partition
	})
	out := []FetchedTopic{}
	for _, tp := range tps {
		if len(out) == 0 || out[len(out)-1].Topic != tp.topic {
			out = append(out, FetchedTopic{Topic: tp.topic})
		}
		f := FetchedOffset{Partition: tp.partition}
		f.fill(g.offsets[tp])
		t := &out[len(out)-1]
		t.Partitions = append(t.Partitions, f)
	}
	return out
}

// OffsetToDelete is one partition of an OffsetDelete. ErrorCode is the
// result; one that comes in set (an unknown partition) is skipped.
type OffsetToDelete struct {
	Topic     string
	Partition int32
	ErrorCode int16
}

// DeleteOffsets handles an OffsetDelete (KIP-496): an Empty group may lose
// any offset; a consumer group with members only those of topics its
// members do not subscribe to. It returns the group-level error code.
func (c *Coordinator) DeleteOffsets(groupID string, offsets []OffsetToDelete) int16 {
	if groupID == "" {
		return kerr.InvalidGroupID.Code
	}
	g, m := c.lockGroup(groupID, false)
	if g == nil {
		return m.code(kerr.GroupIDNotFound.Code, kerr.GroupIDNotFound.Code)
	}
	defer g.unlock()
	if g.state != groupEmpty && g.protocolType != consumerProtocolType {
		return kerr.NonEmptyGroup.Code
	}
	var eligible []offsetTP
	var codes []*int16
	for i := range offsets {
		o := &offsets[i]
		switch {
		case o.ErrorCode != 0:
		case g.state != groupEmpty && g.subscribed[o.Topic]:
			o.ErrorCode = kerr.GroupSubscribedToTopic.Code
		default:
			eligible = append(eligible, offsetTP{o.Topic, o.Partition})
			codes = append(codes, &o.ErrorCode)
		}
	}
	if err := g.deleteOffsets(eligible); err != nil {
		g.c.log.Error("deleting offsets failed", "group", g.name, "err", err)
		code := appendErrorCode(err, false)
		for _, p := range codes {
			*p = code
		}
	}
	return 0
}

// deleteOffsets removes offsets; the records are tombstoned first.
func (g *group) deleteOffsets(tps []offsetTP) error {
	var recs []offsetsRecord
	for _, tp := range tps {
		if g.offsets[tp] != nil {
			recs = append(recs, offsetCommitRecord(g.name, tp, nil))
		}
	}
	if err := g.append(recs); err != nil {
		return err
	}
	for _, tp := range tps {
		delete(g.offsets, tp)
	}
	return nil
}

// dropTopicOffsets removes the group's offsets of a deleted topic.
func (g *group) dropTopicOffsets(topic string) {
	var tps []offsetTP
	for tp := range g.offsets {
		if tp.topic == topic {
			tps = append(tps, tp)
		}
	}
	if err := g.deleteOffsets(tps); err != nil {
		g.c.log.Error("deleting offsets of a deleted topic failed", "group", g.name, "topic", topic, "err", err)
	}
}

// expire deletes the group's expired offsets and, if that leaves an Empty
// group with nothing, the group itself.
func (g *group) expire(now time.Time) {
	expired := g.expiredOffsets(now.UnixMilli(), g.c.cfg.OffsetsRetention.Milliseconds())
	dead := g.state == groupEmpty && len(g.pending) == 0 && len(expired) == len(g.offsets)
	if len(expired) == 0 && !dead {
		return
	}
	recs := make([]offsetsRecord, 0, len(expired)+1)
	for _, tp := range expired {
		recs = append(recs, offsetCommitRecord(g.name, tp, nil))
	}
	if dead {
		recs = append(recs, g.metadataTombstones()...)
	}
	if err := g.append(recs); err != nil {
		g.c.log.Error("expiring offsets failed", "group", g.name, "err", err)
		return
	}
	for _, tp := range expired {
		delete(g.offsets, tp)
	}
	if len(expired) > 0 {
		g.c.log.Info("expired committed offsets", "group", g.name, "partitions", len(expired))
	}
	if dead {
		g.markDead()
	}
}

// expiredOffsets lists the offsets past retention, per the rules above.
func (g *group) expiredOffsets(nowMs, retentionMs int64) []offsetTP {
	base := func(o *committedOffset) int64 { return o.commitMs }
	var keep map[string]bool
	switch {
	case g.protocolType != "" && g.state == groupEmpty:
		if !g.stateSince.IsZero() {
			since := g.stateSince.UnixMilli()
			base = func(*committedOffset) int64 { return since }
		}
	case g.protocolType == consumerProtocolType && g.subscribed != nil && g.state == groupStable:
		keep = g.subscribed
	case g.protocolType == "":
	default:
		return nil
	}
	var out []offsetTP
	for tp, o := range g.offsets {
		if keep[tp.topic] {
			continue
		}
		if o.expireMs >= 0 && nowMs >= o.expireMs || o.expireMs < 0 && nowMs-base(o) >= retentionMs {
			out = append(out, tp)
		}
	}
	return out
}
