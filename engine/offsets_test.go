package engine_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/engine"
	"github.com/sluice-broker/sluice/internal/testbroker"
)

const offsetsTopicName = "__consumer_offsets"

func commitSimple(t *testing.T, tb *testbroker.Broker, group string, offsets map[string]map[int32]int64) {
	t.Helper()
	var os kadm.Offsets
	for topic, ps := range offsets {
		for p, at := range ps {
			os.Add(kadm.Offset{Topic: topic, Partition: p, At: at, LeaderEpoch: 3, Metadata: fmt.Sprintf("%s/%d", topic, p)})
		}
	}
	if err := tb.Admin(t).CommitAllOffsets(groupCtx(t), group, os); err != nil {
		t.Fatalf("commit for %s: %v", group, err)
	}
}

// fetchAll returns a group's committed offsets as topic → partition → offset.
func fetchAll(t *testing.T, tb *testbroker.Broker, group string) map[string]map[int32]int64 {
	t.Helper()
	fetched, err := tb.Admin(t).FetchOffsets(groupCtx(t), group)
	if err == nil {
		err = fetched.Error()
	}
	if err != nil {
		t.Fatalf("fetch offsets of %s: %v", group, err)
	}
	out := map[string]map[int32]int64{}
	for topic, ps := range fetched {
		for p, o := range ps {
			if out[topic] == nil {
				out[topic] = map[int32]int64{}
			}
			out[topic][p] = o.At
			if o.Metadata != fmt.Sprintf("%s/%d", topic, p) || o.LeaderEpoch != 3 {
				t.Errorf("%s %s/%d: metadata %q leader epoch %d", group, topic, p, o.Metadata, o.LeaderEpoch)
			}
		}
	}
	return out
}

func TestOffsetsTopicCreatedCompacted(t *testing.T) {
	tb := groupBroker(t)
	topic := tb.Broker.Topic(offsetsTopicName)
	if topic == nil || !topic.Internal || len(topic.Partitions()) != int(tb.Config.OffsetsTopicPartitions) {
		t.Fatalf("offsets topic: %+v", topic)
	}
	// Compacted, and never trimmed by age or size: offsets of an idle
	// group must outlive log.retention.ms.
	if l := topic.Settings().Log; !l.Compact || l.SegmentBytes != tb.Config.OffsetsTopicSegmentBytes || l.RetentionMs != -1 || l.RetentionBytes != -1 {
		t.Fatalf("offsets topic settings: %+v", l)
	}
	configs, err := tb.Admin(t).DescribeTopicConfigs(groupCtx(t), offsetsTopicName)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range configs[0].Configs {
		if c.Key == "cleanup.policy" && (c.Value == nil || *c.Value != "compact") {
			t.Fatalf("cleanup.policy %v", c.Value)
		}
	}
}

// Groups land in the partition Kafka picks: abs(groupId.hashCode()) % n.
// The expected partitions were computed independently of the broker code.
func TestOffsetsPartitionForGroup(t *testing.T) {
	tb := groupBroker(t)
	groupTopic(t, tb, "hashed", 1)
	parts := tb.Broker.Topic(offsetsTopicName).Partitions()
	for _, c := range []struct {
		group     string
		partition int
	}{
		{"hello", 2},              // hashCode 99162322
		{"polygenelubricants", 0}, // hashCode Integer.MIN_VALUE
		{"restart-group", 3},      // negative hashCode
		{"grüße-🚀", 1},            // non-ASCII, a surrogate pair
	} {
		before := make([]int64, len(parts))
		for i, p := range parts {
			before[i] = p.LogEndOffset()
		}
		commitSimple(t, tb, c.group, map[string]map[int32]int64{"hashed": {0: 1}})
		for i, p := range parts {
			if grew := p.LogEndOffset() > before[i]; grew != (i == c.partition) {
				t.Errorf("group %q: partition %d grew=%v, want the record in partition %d", c.group, i, grew, c.partition)
			}
		}
	}
}

func TestOffsetsSurviveRestart(t *testing.T) {
	tb := groupBroker(t)
	groupTopic(t, tb, "kept", 3)
	groupTopic(t, tb, "kept2", 1)
	want := map[string]map[int32]int64{"kept": {0: 5, 1: 0, 2: 1 << 40}, "kept2": {0: 9}}
	commitSimple(t, tb, "survivor", want)
	commitSimple(t, tb, "survivor", map[string]map[int32]int64{"kept": {1: 77}}) // later commit wins
	want["kept"][1] = 77
	commitSimple(t, tb, "doomed", map[string]map[int32]int64{"kept": {0: 1}})
	if r, err := tb.Admin(t).DeleteGroup(groupCtx(t), "doomed"); err != nil || r.Err != nil {
		t.Fatal(err, r.Err)
	}
	del, err := tb.Admin(t).DeleteOffsets(groupCtx(t), "survivor", kadm.TopicsSet{"kept2": {0: {}}})
	if err != nil || del.Error() != nil {
		t.Fatal(err, del.Error())
	}
	delete(want, "kept2")

	tb.Restart(t)
	if got := fetchAll(t, tb, "survivor"); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after restart: %v, want %v", got, want)
	}
	listed, err := tb.Admin(t).ListGroups(groupCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := listed["doomed"]; ok || listed["survivor"].State != "Empty" {
		t.Fatalf("groups after restart: %+v", listed)
	}
}

func TestOffsetsConsumerResumesAfterRestart(t *testing.T) {
	tb := groupBroker(t)
	const topic, group = "resume", "resumers"
	groupTopic(t, tb, topic, 1)
	producer := tb.Client(t, kgo.DefaultProduceTopic(topic))
	for i := 0; i < 10; i++ {
		if err := producer.ProduceSync(groupCtx(t), kgo.StringRecord(fmt.Sprint(i))).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	consume := func() *kgo.Client {
		return tb.Client(t, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
			kgo.FetchMaxWait(100*time.Millisecond), kgo.HeartbeatInterval(100*time.Millisecond))
	}
	first := consume()
	var got []*kgo.Record
	for len(got) < 5 {
		fs := first.PollFetches(groupCtx(t))
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		got = append(got, fs.Records()...)
	}
	if err := first.CommitRecords(groupCtx(t), got[4]); err != nil {
		t.Fatal(err)
	}
	first.Close()

	tb.Restart(t)
	second := consume()
	fs := second.PollFetches(groupCtx(t))
	if err := fs.Err0(); err != nil {
		t.Fatal(err)
	}
	if recs := fs.Records(); len(recs) == 0 || recs[0].Offset != 5 || string(recs[0].Value) != "5" {
		t.Fatalf("resumed at %v", recs)
	}
}

// A Stable group comes back Stable after a restart: its members keep
// heartbeating in the same generation, with their assignments.
func TestOffsetsGroupMembershipSurvivesRestart(t *testing.T) {
	tb := groupBroker(t)
	const group = "members-persist"
	c := dialGroup(t, tb.Addr)
	j := awaitJoin(t, c.start(joinRequest(group, joinOpts{version: 5, instance: "i", session: 10 * time.Second, rebalance: 5 * time.Second})))
	s := syncRequest(3, group, j.MemberID, j.Generation, map[string]string{j.MemberID: "assigned"})
	s.InstanceID = kmsg.StringPtr("i")
	c.do(t, s)

	tb.Restart(t)
	c = dialGroup(t, tb.Addr)
	wantCode(t, "heartbeat after restart", heartbeat(t, c, 3, group, j.MemberID, "i", j.Generation), nil)
	d := describeState(t, c, group)
	if d.State != "Stable" || len(d.Members) != 1 || string(d.Members[0].MemberAssignment) != "assigned" || *d.Members[0].InstanceID != "i" {
		t.Fatalf("after restart: %+v", d)
	}
	s.Version = 3
	if a := c.do(t, s).(*kmsg.SyncGroupResponse); a.ErrorCode != 0 || string(a.MemberAssignment) != "assigned" {
		t.Fatalf("sync after restart: %v %q", kerr.ErrorForCode(a.ErrorCode), a.MemberAssignment)
	}
}

func TestOffsetsExpiry(t *testing.T) {
	tb := groupBroker(t, func(c *engine.Config) { c.OffsetsRetention = time.Hour })
	groupTopic(t, tb, "sub", 1)
	groupTopic(t, tb, "other", 1)
	now := time.Now()

	// A simple group: each offset expires an hour after its commit.
	commitSimple(t, tb, "simple", map[string]map[int32]int64{"sub": {0: 1}})
	tb.Broker.ExpireGroupOffsets(now.Add(30 * time.Minute))
	if got := fetchAll(t, tb, "simple"); len(got) != 1 {
		t.Fatalf("offsets expired early: %v", got)
	}

	// A Stable consumer group: only offsets of topics nobody subscribes to expire.
	c := dialGroup(t, tb.Addr)
	j := awaitJoin(t, c.start(joinRequest("stable", joinOpts{version: 3, session: 10 * time.Second, rebalance: 5 * time.Second, topics: []string{"sub"}})))
	c.do(t, syncRequest(2, "stable", j.MemberID, j.Generation, nil))
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Version = 8
	commit.Group, commit.Generation, commit.MemberID = "stable", j.Generation, j.MemberID
	for _, topic := range []string{"sub", "other"} {
		commit.Topics = append(commit.Topics, kmsg.OffsetCommitRequestTopic{Topic: topic, Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 4, LeaderEpoch: -1}}})
	}
	for _, rt := range c.do(t, commit).(*kmsg.OffsetCommitResponse).Topics {
		wantCode(t, "member commit", rt.Partitions[0].ErrorCode, nil)
	}

	// An offset committed with an explicit retention time (v2-4) keeps it.
	short := kmsg.NewPtrOffsetCommitRequest()
	short.Version = 2
	short.Group, short.Generation, short.RetentionTimeMillis = "short", -1, 1000
	short.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "sub", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 8}}}}
	wantCode(t, "commit v2 with retention", c.do(t, short).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode, nil)

	tb.Broker.ExpireGroupOffsets(now.Add(10 * time.Second))
	if fetchOffset(t, c, "short", "sub") != -1 {
		t.Fatal("offset with a 1s retention time survived 10s")
	}
	tb.Broker.ExpireGroupOffsets(now.Add(2 * time.Hour))
	if fetchOffset(t, c, "stable", "sub") != 4 || fetchOffset(t, c, "stable", "other") != -1 {
		t.Fatalf("stable group after expiry: sub %d other %d", fetchOffset(t, c, "stable", "sub"), fetchOffset(t, c, "stable", "other"))
	}
	listed, _ := tb.Admin(t).ListGroups(groupCtx(t))
	if _, ok := listed["simple"]; ok {
		t.Fatal("a simple group without offsets was kept")
	}

	// Once the group is Empty, all its offsets expire an hour later.
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Version = 1
	leave.Group, leave.MemberID = "stable", j.MemberID
	c.do(t, leave)
	tb.Broker.ExpireGroupOffsets(now.Add(30 * time.Minute))
	if fetchOffset(t, c, "stable", "sub") != 4 {
		t.Fatal("offsets of a just-emptied group expired")
	}
	tb.Broker.ExpireGroupOffsets(time.Now().Add(61 * time.Minute))
	if fetchOffset(t, c, "stable", "sub") != -1 {
		t.Fatal("offsets of a group empty for an hour kept")
	}
	tb.Restart(t)
	listed, _ = tb.Admin(t).ListGroups(groupCtx(t))
	if len(listed) != 0 {
		t.Fatalf("expired groups back after restart: %v", listed.Groups())
	}
}

func fetchOffset(t *testing.T, c *groupConn, group, topic string) int64 {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = 7
	req.Group = group
	req.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: topic, Partitions: []int32{0}}}
	return c.do(t, req).(*kmsg.OffsetFetchResponse).Topics[0].Partitions[0].Offset
}

func TestOffsetsCommitErrors(t *testing.T) {
	tb := groupBroker(t)
	groupTopic(t, tb, "t", 1)
	c := dialGroup(t, tb.Addr)
	commit := func(version int16, group string, gen int32, topic, metadata string) int16 {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version = version
		req.Group, req.Generation = group, gen
		req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: topic, Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1, LeaderEpoch: -1, Metadata: kmsg.StringPtr(metadata)}}}}
		return c.do(t, req).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
	}
	wantCode(t, "v8 generation for an unknown group", commit(8, "nobody", 5, "t", ""), kerr.IllegalGeneration)
	wantCode(t, "v9 generation for an unknown group", commit(9, "nobody", 5, "t", ""), kerr.GroupIDNotFound)
	wantCode(t, "metadata at the limit", commit(9, "g", -1, "t", strings.Repeat("m", 4096)), nil)
	wantCode(t, "metadata over the limit", commit(9, "g", -1, "t", strings.Repeat("m", 4097)), kerr.OffsetMetadataTooLarge)
	wantCode(t, "unknown topic", commit(5, "g", -1, "missing", ""), kerr.UnknownTopicOrPartition)
	wantCode(t, "empty group id", commit(3, "", -1, "t", ""), nil) // allowed, as in Kafka
}

func TestOffsetsFetchBatched(t *testing.T) {
	tb := groupBroker(t)
	groupTopic(t, tb, "a", 2)
	commitSimple(t, tb, "g1", map[string]map[int32]int64{"a": {0: 10, 1: 11}})
	commitSimple(t, tb, "g2", map[string]map[int32]int64{"a": {1: 21}})
	c := dialGroup(t, tb.Addr)
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = 8
	req.Groups = []kmsg.OffsetFetchRequestGroup{
		{Group: "g1"}, // all topics
		{Group: "g2", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "a", Partitions: []int32{0, 1}}}},
		{Group: "none"},
	}
	resp := c.do(t, req).(*kmsg.OffsetFetchResponse)
	if len(resp.Groups) != 3 {
		t.Fatalf("%d groups", len(resp.Groups))
	}
	summary := func(g kmsg.OffsetFetchResponseGroup) string {
		var s []string
		for _, t := range g.Topics {
			for _, p := range t.Partitions {
				s = append(s, fmt.Sprintf("%s/%d=%d", t.Topic, p.Partition, p.Offset))
			}
		}
		return strings.Join(s, " ")
	}
	for i, want := range []string{"a/0=10 a/1=11", "a/0=-1 a/1=21", ""} {
		if got := summary(resp.Groups[i]); got != want || resp.Groups[i].ErrorCode != 0 {
			t.Errorf("group %s: %q, want %q", resp.Groups[i].Group, got, want)
		}
	}
	// v2-7: null topics means all.
	old := kmsg.NewPtrOffsetFetchRequest()
	old.Version = 2
	old.Group = "g1"
	if r := c.do(t, old).(*kmsg.OffsetFetchResponse); len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 2 {
		t.Fatalf("v2 all topics: %+v", r.Topics)
	}
}

// Deleting a topic deletes the offsets committed for it (as Kafka does), so
// a topic created again under the name does not inherit them.
func TestOffsetsDeletedTopicDropsOffsets(t *testing.T) {
	tb := groupBroker(t)
	groupTopic(t, tb, "gone", 2)
	groupTopic(t, tb, "stays", 1)
	commitSimple(t, tb, "g", map[string]map[int32]int64{"gone": {0: 1, 1: 2}, "stays": {0: 3}})
	if _, err := tb.Admin(t).DeleteTopic(groupCtx(t), "gone"); err != nil {
		t.Fatal(err)
	}
	want := map[string]map[int32]int64{"stays": {0: 3}}
	if got := fetchAll(t, tb, "g"); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after deleting the topic: %v", got)
	}
	tb.Restart(t)
	if got := fetchAll(t, tb, "g"); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after restart: %v", got)
	}
}
