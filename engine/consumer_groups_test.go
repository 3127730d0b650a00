package engine_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/engine"
	"github.com/sluice-broker/sluice/internal/testbroker"
)

// consumerProtocolBroker starts a broker whose consumer groups heartbeat
// every 100 ms, so reconciliation takes a few hundred milliseconds.
func consumerProtocolBroker(t *testing.T, mutators ...func(*engine.Config)) *testbroker.Broker {
	t.Helper()
	return testbroker.Start(t, append([]func(*engine.Config){func(c *engine.Config) {
		engine.SetGroupBrokerInt(c, "group.consumer.heartbeat.interval.ms", 100)
		engine.SetGroupBrokerInt(c, "group.consumer.min.heartbeat.interval.ms", 50)
		engine.SetGroupBrokerInt(c, "group.consumer.session.timeout.ms", 6000)
		engine.SetGroupBrokerInt(c, "group.consumer.min.session.timeout.ms", 1000)
	}}, mutators...)...)
}

// ownership records which consumer holds each partition, as the
// consumers' callbacks report it, and fails on a partition held twice.
type ownership struct {
	t     *testing.T
	mu    sync.Mutex
	owner map[int32]string
}

func (o *ownership) opts(name, topic string) []kgo.Opt {
	return []kgo.Opt{
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			o.mu.Lock()
			defer o.mu.Unlock()
			for _, p := range m[topic] {
				if prev, ok := o.owner[p]; ok && prev != name {
					o.t.Errorf("partition %d assigned to %s while %s holds it", p, name, prev)
				}
				o.owner[p] = name
			}
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { o.drop(name, m[topic]) }),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { o.drop(name, m[topic]) }),
	}
}

func (o *ownership) drop(name string, ps []int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, p := range ps {
		if o.owner[p] == name {
			delete(o.owner, p)
		}
	}
}

func consumerProtocolClient(t *testing.T, tb *testbroker.Broker, group, topic string, more ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(tb.Addr), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ServerSideBalancer(), kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(),
		kgo.FetchMaxWait(100 * time.Millisecond),
	}, more...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func describeConsumerGroup(t *testing.T, tb *testbroker.Broker, group string) kmsg.ConsumerGroupDescribeResponseGroup {
	t.Helper()
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{group}
	resp, err := req.RequestWith(groupCtx(t), tb.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	return resp.Groups[0]
}

// waitConsumerGroup polls ConsumerGroupDescribe until cond holds.
func waitConsumerGroup(t *testing.T, tb *testbroker.Broker, group, what string, cond func(kmsg.ConsumerGroupDescribeResponseGroup) bool) kmsg.ConsumerGroupDescribeResponseGroup {
	t.Helper()
	var last kmsg.ConsumerGroupDescribeResponseGroup
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if last = describeConsumerGroup(t, tb, group); last.ErrorCode == 0 && cond(last) {
			return last
		}
	}
	t.Fatalf("group %s never reached %s; last %+v", group, what, last)
	return last
}

// stableWith reports whether every partition is assigned once among n
// members, each at the assignment epoch.
func stableWith(n, partitions int) func(kmsg.ConsumerGroupDescribeResponseGroup) bool {
	return func(g kmsg.ConsumerGroupDescribeResponseGroup) bool {
		if g.State != "Stable" || len(g.Members) != n {
			return false
		}
		seen := 0
		for _, m := range g.Members {
			if m.MemberEpoch != g.AssignmentEpoch {
				return false
			}
			for _, tp := range m.Assignment.TopicPartitions {
				seen += len(tp.Partitions)
			}
		}
		return seen == partitions
	}
}

// poll consumes until want records arrived, committing each batch.
func pollCommit(t *testing.T, cl *kgo.Client, want int, seen map[string]int) {
	t.Helper()
	ctx := groupCtx(t)
	for n := 0; n < want; {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("polled %d of %d records: %v", n, want, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			seen[string(r.Value)]++
			n++
		})
		if err := cl.CommitUncommittedOffsets(ctx); err != nil {
			t.Fatalf("commit: %v", err)
		}
	}
}

func produceValues(t *testing.T, tb *testbroker.Broker, topic string, from, n int) {
	t.Helper()
	cl := tb.Client(t)
	for i := from; i < from+n; i++ {
		if err := cl.ProduceSync(groupCtx(t), &kgo.Record{Topic: topic, Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// Two franz-go consumers on the KIP-848 protocol share a topic, a third
// joins and the first leaves; the broker's assignment moves with them and
// no partition is ever held by two consumers. Offsets committed by the
// members carry them across a broker restart.
func TestConsumerProtocolFranzGo(t *testing.T) {
	tb := consumerProtocolBroker(t)
	const topic, group, parts = "kip848", "g848", 6
	groupTopic(t, tb, topic, parts)
	produceValues(t, tb, topic, 0, 60)
	own := &ownership{t: t, owner: map[int32]string{}}
	a := consumerProtocolClient(t, tb, group, topic, own.opts("a", topic)...)
	seen := map[string]int{}
	pollCommit(t, a, 60, seen)
	waitConsumerGroup(t, tb, group, "one member with every partition", stableWith(1, parts))

	b := consumerProtocolClient(t, tb, group, topic, own.opts("b", topic)...)
	c := consumerProtocolClient(t, tb, group, topic, own.opts("c", topic)...)
	for _, cl := range []*kgo.Client{b, c} {
		go func() {
			for cl.PollFetches(t.Context()).Err0() == nil {
			}
		}()
	}
	g := waitConsumerGroup(t, tb, group, "three members, two partitions each", stableWith(3, parts))
	for _, m := range g.Members {
		if n := len(m.Assignment.TopicPartitions[0].Partitions); n != 2 {
			t.Errorf("member %s holds %d partitions, want 2", m.MemberID, n)
		}
	}
	a.Close()
	waitConsumerGroup(t, tb, group, "two members after a left", stableWith(2, parts))

	// ListGroups shows the type; DescribeGroups the classic view.
	listed, err := tb.Admin(t).ListGroups(groupCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if lg := listed[group]; lg.ProtocolType != "consumer" {
		t.Fatalf("listed %+v", lg)
	}
	lreq := kmsg.NewPtrListGroupsRequest()
	lreq.TypesFilter = []string{"consumer"}
	lresp, err := lreq.RequestWith(groupCtx(t), tb.Client(t))
	if err != nil || len(lresp.Groups) != 1 || lresp.Groups[0].GroupType != "consumer" {
		t.Fatalf("ListGroups types=consumer: %+v %v", lresp, err)
	}
	b.Close()
	c.Close()
	waitConsumerGroup(t, tb, group, "empty", func(g kmsg.ConsumerGroupDescribeResponseGroup) bool { return g.State == "Empty" })

	// The committed offsets and the group survive a restart.
	tb.Restart(t)
	if g := describeConsumerGroup(t, tb, group); g.ErrorCode != 0 || g.State != "Empty" || g.Epoch == 0 {
		t.Fatalf("after restart: %+v", g)
	}
	produceValues(t, tb, topic, 60, 30)
	d := consumerProtocolClient(t, tb, group, topic)
	later := map[string]int{}
	pollCommit(t, d, 30, later)
	for v, n := range later {
		if n != 1 || seen[v] > 0 {
			t.Errorf("record %s delivered again after the restart (%d times here, %d before)", v, n, seen[v])
		}
	}
}

// With group.consumer.migration.policy=disabled a classic group with
// members refuses the consumer protocol (GROUP_ID_NOT_FOUND), as Kafka does.
func TestConsumerProtocolRefusedByClassicGroup(t *testing.T) {
	tb := consumerProtocolBroker(t, func(c *engine.Config) { c.GroupConsumerMigrationPolicy = "disabled" })
	groupTopic(t, tb, "mixed", 2)
	classic := tb.Client(t, kgo.ConsumerGroup("mixed-g"), kgo.ConsumeTopics("mixed"))
	go func() {
		for classic.PollFetches(t.Context()).Err0() == nil {
		}
	}()
	adm := tb.Admin(t)
	waitGroup(t, adm, "mixed-g", "Stable", func(d kadm.DescribedGroup) bool { return d.State == "Stable" })
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = 1
	req.Group, req.MemberID, req.RebalanceTimeoutMillis = "mixed-g", "m-1", 30000
	req.SubscribedTopicNames = []string{"mixed"}
	req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	resp, err := req.RequestWith(groupCtx(t), tb.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != kerr.GroupIDNotFound {
		t.Fatalf("heartbeat to a classic group: %v", err)
	}
}

// joinRaw joins a consumer group with one raw ConsumerGroupHeartbeat.
func joinRaw(t *testing.T, tb *testbroker.Broker, group, member string) *kmsg.ConsumerGroupHeartbeatResponse {
	t.Helper()
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = 1
	req.Group, req.MemberID, req.RebalanceTimeoutMillis = group, member, 30000
	req.SubscribedTopicNames = []string{"cfg-topic"}
	req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	resp, err := req.RequestWith(groupCtx(t), tb.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != 0 {
		t.Fatalf("join %s: %v", group, kerr.ErrorForCode(resp.ErrorCode))
	}
	return resp
}

// A group's consumer.heartbeat.interval.ms, set with
// IncrementalAlterConfigs, is what its members are told from the next
// heartbeat on; other groups keep the broker's.
func TestConsumerGroupConfigHeartbeatInterval(t *testing.T) {
	tb := consumerProtocolBroker(t)
	groupTopic(t, tb, "cfg-topic", 1)
	if got := joinRaw(t, tb, "cfg-a", "m1").HeartbeatIntervalMillis; got != 100 {
		t.Fatalf("broker default interval: %d ms, want 100", got)
	}
	if code, msg := alterGroup(t, tb, "cfg-a", false, groupOp(kmsg.IncrementalAlterConfigOpSet, "consumer.heartbeat.interval.ms", "7000")); code != 0 {
		t.Fatalf("alter: %v %s", kerr.ErrorForCode(code), msg)
	}
	if got := joinRaw(t, tb, "cfg-a", "m2").HeartbeatIntervalMillis; got != 7000 {
		t.Fatalf("group's own interval: %d ms, want 7000", got)
	}
	if got := joinRaw(t, tb, "cfg-b", "m3").HeartbeatIntervalMillis; got != 100 {
		t.Fatalf("another group: %d ms, want 100", got)
	}
}

// A running classic group is upgraded when a KIP-848 consumer joins: the
// classic members stay and reconcile through JoinGroup/SyncGroup, the
// three share the partitions, and no partition is ever held by two
// consumers. When the KIP-848 consumer leaves, the group is classic again.
func TestConsumerProtocolOnlineMigration(t *testing.T) {
	tb := consumerProtocolBroker(t)
	const topic, group, parts = "migrate", "migrate-g", 6
	groupTopic(t, tb, topic, parts)
	produceValues(t, tb, topic, 0, 30)
	own := &ownership{t: t, owner: map[int32]string{}}
	poll := func(cl *kgo.Client) {
		go func() {
			for cl.PollFetches(t.Context()).Err0() == nil {
			}
		}()
	}
	classicOpts := func(name string) []kgo.Opt {
		return append(own.opts(name, topic), kgo.SeedBrokers(tb.Addr), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.SessionTimeout(6*time.Second),
			kgo.HeartbeatInterval(100*time.Millisecond), kgo.FetchMaxWait(100*time.Millisecond))
	}
	for _, name := range []string{"classic-1", "classic-2"} {
		cl, err := kgo.NewClient(classicOpts(name)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		poll(cl)
	}
	adm := tb.Admin(t)
	waitGroup(t, adm, group, "two classic members", func(d kadm.DescribedGroup) bool { return balanced(d, topic, 2, parts) })

	next := consumerProtocolClient(t, tb, group, topic, own.opts("kip848", topic)...)
	poll(next)
	g := waitConsumerGroup(t, tb, group, "three members after the upgrade", stableWith(3, parts))
	classic := 0
	for _, m := range g.Members {
		if m.MemberType == 0 {
			classic++
		}
	}
	if classic != 2 {
		t.Fatalf("%d classic members in the upgraded group, want 2: %+v", classic, g.Members)
	}

	next.Close()
	waitGroup(t, adm, group, "classic again with two members", func(d kadm.DescribedGroup) bool { return balanced(d, topic, 2, parts) })
	if d := describeConsumerGroup(t, tb, group); d.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("ConsumerGroupDescribe after the downgrade: %+v", d)
	}
}

// A franz-go consumer subscribing by regular expression on the consumer
// protocol is assigned a topic created after it joined: the broker
// re-evaluates the regex as topics come.
func TestConsumerProtocolRegexTakesNewTopic(t *testing.T) {
	tb := consumerProtocolBroker(t)
	groupTopic(t, tb, "rx-a", 2)
	produceValues(t, tb, "rx-a", 0, 5)
	cl := consumerProtocolClient(t, tb, "rx-g", "rx-.*", kgo.ConsumeRegex())
	seen := map[string]int{}
	pollCommit(t, cl, 5, seen)
	groupTopic(t, tb, "rx-b", 2)
	produceValues(t, tb, "rx-b", 5, 5)
	pollCommit(t, cl, 5, seen)
	g := describeConsumerGroup(t, tb, "rx-g")
	// franz-go sends the regex for the broker to resolve (wrapped to
	// match anywhere in a name, as Go's regexp does).
	if len(g.Members) != 1 || g.Members[0].SubscribedTopicRegex == nil || len(g.Members[0].SubscribedTopics) != 0 {
		t.Fatalf("member's subscription: %+v", g.Members)
	}
	if n := len(g.Members[0].Assignment.TopicPartitions); n != 2 {
		t.Fatalf("assigned %d topics, want rx-a and rx-b: %+v", n, g.Members[0].Assignment)
	}
}
