package engine

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

// maxOffsetMetadata is Kafka's offset.metadata.max.bytes default.
const maxOffsetMetadata = 4096

// checkCommit validates a commit's generation and member against the group
// (Kafka's rules: a commit without generation and member is accepted only
// while the group is Empty).
func (g *group) checkCommit(generation int32, memberID, instanceID string) int16 {
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
	if err := g.c.append(g.part, recs); err != nil {
		g.c.b.log.Error("writing offset commit failed", "group", g.name, "err", err)
		code := coordinatorAppendError(err, true)
		for _, s := range staged {
			*s.code = code
		}
		return
	}
	for _, s := range staged {
		g.offsets[s.tp] = s.o
	}
}

// fetchedOffset is one partition's answer to OffsetFetch.
type fetchedOffset struct {
	partition   int32
	offset      int64 // -1 when nothing is committed
	leaderEpoch int32
	metadata    string
}

type fetchedTopic struct {
	topic      string
	partitions []fetchedOffset
}

// fetchOffsets answers OffsetFetch for one group: the requested partitions
// (-1 for those without a commit), or every committed offset when topics
// is nil. An unknown group has no offsets.
func (c *groupCoordinator) fetchOffsets(name string, topics []fetchedTopic) []fetchedTopic {
	g := c.lockGroup(name, false)
	if g == nil {
		for i := range topics {
			for j := range topics[i].partitions {
				topics[i].partitions[j].fill(nil)
			}
		}
		return topics
	}
	defer g.unlock()
	if topics == nil {
		return g.allOffsets()
	}
	for i := range topics {
		t := &topics[i]
		for j := range t.partitions {
			p := &t.partitions[j]
			p.fill(g.offsets[offsetTP{t.topic, p.partition}])
		}
	}
	return topics
}

func (f *fetchedOffset) fill(o *committedOffset) {
	if o == nil {
		f.offset, f.leaderEpoch, f.metadata = -1, -1, ""
		return
	}
	f.offset, f.leaderEpoch, f.metadata = o.offset, o.leaderEpoch, o.metadata
}

// allOffsets lists every committed offset, sorted by topic and partition.
func (g *group) allOffsets() []fetchedTopic {
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
	out := []fetchedTopic{}
	for _, tp := range tps {
		if len(out) == 0 || out[len(out)-1].topic != tp.topic {
			out = append(out, fetchedTopic{topic: tp.topic})
		}
		f := fetchedOffset{partition: tp.partition}
		f.fill(g.offsets[tp])
		t := &out[len(out)-1]
		t.partitions = append(t.partitions, f)
	}
	return out
}

// deleteOffsets removes offsets; the records are tombstoned first.
func (g *group) deleteOffsets(tps []offsetTP) error {
	var recs []offsetsRecord
	for _, tp := range tps {
		if g.offsets[tp] != nil {
			recs = append(recs, offsetCommitRecord(g.name, tp, nil))
		}
	}
	if err := g.c.append(g.part, recs); err != nil {
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
		g.c.b.log.Error("deleting offsets of a deleted topic failed", "group", g.name, "topic", topic, "err", err)
	}
}

// deleteGroup tombstones an Empty group's offsets and metadata and
// removes it.
func (g *group) deleteGroup() int16 {
	if g.state != groupEmpty {
		return kerr.NonEmptyGroup.Code
	}
	recs := make([]offsetsRecord, 0, len(g.offsets)+1)
	for tp := range g.offsets {
		recs = append(recs, offsetCommitRecord(g.name, tp, nil))
	}
	recs = append(recs, offsetsRecord{key: groupMetadataKey(g.name)})
	if err := g.c.append(g.part, recs); err != nil {
		g.c.b.log.Error("deleting group failed", "group", g.name, "err", err)
		return coordinatorAppendError(err, false)
	}
	g.offsets = map[offsetTP]*committedOffset{}
	g.markDead()
	return 0
}

// expireOffsets is one retention sweep over every group.
func (c *groupCoordinator) expireOffsets(now time.Time) {
	for _, g := range c.allGroups() {
		g.mu.Lock()
		if g.state != groupDead {
			g.expire(now)
		}
		g.unlock()
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
		recs = append(recs, offsetsRecord{key: groupMetadataKey(g.name)})
	}
	if err := g.c.append(g.part, recs); err != nil {
		g.c.b.log.Error("expiring offsets failed", "group", g.name, "err", err)
		return
	}
	for _, tp := range expired {
		delete(g.offsets, tp)
	}
	if len(expired) > 0 {
		g.c.b.log.Info("expired committed offsets", "group", g.name, "partitions", len(expired))
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
