package engine_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/engine"
	"github.com/sluice-broker/sluice/internal/testbroker"
)

func TestCreateTopics(t *testing.T) {
	tb := testbroker.Start(t, func(c *engine.Config) { c.NumPartitions = 2 })
	adm := tb.Admin(t)
	resp, err := adm.CreateTopic(adminCtx(t), 3, 1, map[string]*string{"retention.ms": kadm.StringPtr("1000")}, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if resp.NumPartitions != 3 || resp.ReplicationFactor != 1 || resp.ID == [16]byte{} {
		t.Fatalf("created: %+v", resp)
	}
	if c := resp.Configs["retention.ms"]; c.MaybeValue() != "1000" || c.Source != kmsg.ConfigSourceDynamicTopicConfig {
		t.Errorf("retention.ms in response: %q source %v", c.MaybeValue(), c.Source)
	}
	if c := resp.Configs["cleanup.policy"]; c.MaybeValue() != "delete" || c.Source != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("cleanup.policy in response: %q source %v", c.MaybeValue(), c.Source)
	}
	if got := tb.Broker.Topic("orders").Settings().Log.RetentionMs; got != 1000 {
		t.Errorf("retention applied to the topic: %d", got)
	}
	// -1/-1 take the broker defaults.
	if resp, err := adm.CreateTopic(adminCtx(t), -1, -1, nil, "defaults"); err != nil || resp.NumPartitions != 2 {
		t.Fatalf("defaults: %+v %v", resp, err)
	}
	for _, c := range []struct {
		name    string
		p       int32
		rf      int16
		configs map[string]*string
		want    error
	}{
		{"orders", 1, 1, nil, kerr.TopicAlreadyExists},
		{"replicated", 1, 3, nil, kerr.InvalidReplicationFactor},
		{"no-partitions", 0, 1, nil, kerr.InvalidPartitions},
		{"bad-value", 1, 1, map[string]*string{"retention.ms": kadm.StringPtr("soon")}, kerr.InvalidConfig},
		{"bad-key", 1, 1, map[string]*string{"no.such.config": kadm.StringPtr("1")}, kerr.InvalidConfig},
		{"null-value", 1, 1, map[string]*string{"retention.ms": nil}, kerr.InvalidConfig},
		{"bad/name", 1, 1, nil, kerr.InvalidTopicException},
		{"ord.ers", 1, 1, nil, nil},
		{"ord_ers", 1, 1, nil, kerr.InvalidTopicException}, // collides with ord.ers
	} {
		resp, err := adm.CreateTopic(adminCtx(t), c.p, c.rf, c.configs, c.name)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: error %v (%s), want %v", c.name, err, resp.ErrMessage, c.want)
		}
		if c.want != nil && resp.ErrMessage == "" {
			t.Errorf("%s: no error message", c.name)
		}
	}
	if resp, _ := adm.CreateTopic(adminCtx(t), 1, 1, map[string]*string{"retention.ms": kadm.StringPtr("soon")}, "bad-value"); !strings.Contains(resp.ErrMessage, "retention.ms") {
		t.Errorf("config error message does not name the key: %q", resp.ErrMessage)
	}
}

func TestCreateTopicsValidateOnly(t *testing.T) {
	tb := testbroker.Start(t)
	adm := tb.Admin(t)
	resp, err := adm.ValidateCreateTopics(adminCtx(t), 4, 1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}, "dry")
	if err != nil || resp["dry"].Err != nil {
		t.Fatalf("validate: %v %v", err, resp["dry"].Err)
	}
	r := resp["dry"]
	if c := r.Configs["cleanup.policy"]; r.NumPartitions != 4 || c.MaybeValue() != "compact" {
		t.Errorf("validate-only response: %+v", r)
	}
	if tb.Broker.Topic("dry") != nil {
		t.Fatal("validate-only created the topic")
	}
	resp, _ = adm.ValidateCreateTopics(adminCtx(t), 1, 1, map[string]*string{"cleanup.policy": kadm.StringPtr("shred")}, "dry")
	if !errors.Is(resp["dry"].Err, kerr.InvalidConfig) {
		t.Fatalf("validate-only with a bad config: %v", resp["dry"].Err)
	}
}

func createTopicsRaw(t *testing.T, tb *testbroker.Broker, version int16, topics ...kmsg.CreateTopicsRequestTopic) *kmsg.CreateTopicsResponse {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version = version
	req.TimeoutMillis = 5000
	req.Topics = topics
	return adminRaw(t, tb.Addr, req).(*kmsg.CreateTopicsResponse)
}

func newTopicReq(name string, partitions int32, rf int16, assignment ...[]int32) kmsg.CreateTopicsRequestTopic {
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, rf
	for i, replicas := range assignment {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = int32(i), replicas
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
	}
	return rt
}

func TestCreateTopicsAssignmentsAndDuplicates(t *testing.T) {
	tb := testbroker.Start(t)
	node := tb.Broker.Config().NodeID
	resp := createTopicsRaw(t, tb, 7,
		newTopicReq("manual", -1, -1, []int32{node}, []int32{node}),
		newTopicReq("other-broker", -1, -1, []int32{node + 1}),
		newTopicReq("twice-listed", -1, -1, []int32{node, node}),
		newTopicReq("both-set", 2, -1, []int32{node}),
		newTopicReq("dup", 1, 1), newTopicReq("dup", 1, 1),
	)
	want := map[string]int16{
		"manual":       0,
		"other-broker": kerr.InvalidReplicaAssignment.Code,
		"twice-listed": kerr.InvalidReplicaAssignment.Code,
		"both-set":     kerr.InvalidRequest.Code,
		"dup":          kerr.InvalidRequest.Code,
	}
	if len(resp.Topics) != len(want) {
		t.Fatalf("%d results, want %d (one per distinct name)", len(resp.Topics), len(want))
	}
	for _, rt := range resp.Topics {
		if rt.ErrorCode != want[rt.Topic] {
			t.Errorf("%s: error %d, want %d", rt.Topic, rt.ErrorCode, want[rt.Topic])
		}
	}
	if p := tb.Broker.Topic("manual"); p == nil || len(p.Partitions()) != 2 {
		t.Fatal("manual assignment did not create 2 partitions")
	}
	if tb.Broker.Topic("dup") != nil {
		t.Fatal("a topic named twice was created")
	}
}

func TestCreateTopicsV2(t *testing.T) {
	tb := testbroker.Start(t)
	resp := createTopicsRaw(t, tb, 2, newTopicReq("v2-topic", 2, 1), newTopicReq("v2-topic-bad", 1, 2))
	if len(resp.Topics) != 2 || resp.Topics[0].ErrorCode != 0 || resp.Topics[1].ErrorCode != kerr.InvalidReplicationFactor.Code {
		t.Fatalf("v2: %+v", resp.Topics)
	}
	if resp.Topics[1].ErrorMessage == nil {
		t.Error("v2 error without a message")
	}
	if tp := tb.Broker.Topic("v2-topic"); tp == nil || len(tp.Partitions()) != 2 {
		t.Fatal("v2 did not create the topic")
	}
}

func TestDeleteTopics(t *testing.T) {
	tb := testbroker.Start(t)
	adm := tb.Admin(t)
	createTopic(t, tb, "doomed", 2)
	resp, err := adm.DeleteTopics(adminCtx(t), "doomed", "never-was")
	if err != nil {
		t.Fatal(err)
	}
	if resp["doomed"].Err != nil || !errors.Is(resp["never-was"].Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("delete: doomed %v, never-was %v", resp["doomed"].Err, resp["never-was"].Err)
	}
	if tb.Broker.Topic("doomed") != nil {
		t.Fatal("topic still registered")
	}
	if _, err := os.Stat(filepath.Join(tb.Config.DataDir, "doomed-0")); !os.IsNotExist(err) {
		t.Fatalf("partition directory left behind: %v", err)
	}
	// The name can be reused at once.
	createTopic(t, tb, "doomed", 1)
}

func TestDeleteTopicsByID(t *testing.T) {
	tb := testbroker.Start(t)
	createTopic(t, tb, "by-id", 1)
	id := tb.Broker.Topic("by-id").ID
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.Version = 6
	known, unknown := kmsg.NewDeleteTopicsRequestTopic(), kmsg.NewDeleteTopicsRequestTopic()
	known.TopicID, unknown.TopicID = id, [16]byte{9}
	req.Topics = []kmsg.DeleteTopicsRequestTopic{known, unknown}
	resp := adminRaw(t, tb.Addr, req).(*kmsg.DeleteTopicsResponse)
	if len(resp.Topics) != 2 {
		t.Fatalf("%d results", len(resp.Topics))
	}
	if r := resp.Topics[0]; r.ErrorCode != 0 || r.Topic == nil || *r.Topic != "by-id" || r.TopicID != id {
		t.Errorf("delete by id: %+v", r)
	}
	if r := resp.Topics[1]; r.ErrorCode != kerr.UnknownTopicID.Code {
		t.Errorf("unknown id: error %d", r.ErrorCode)
	}
	if tb.Broker.Topic("by-id") != nil {
		t.Fatal("topic still registered")
	}
}

func TestDeleteTopicsDisabled(t *testing.T) {
	tb := testbroker.Start(t, func(c *engine.Config) { c.DeleteTopicEnable = false })
	createTopic(t, tb, "kept", 1)
	resp, err := tb.Admin(t).DeleteTopics(adminCtx(t), "kept")
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(resp["kept"].Err, kerr.TopicDeletionDisabled) || tb.Broker.Topic("kept") == nil {
		t.Fatalf("delete with delete.topic.enable=false: %v", resp["kept"].Err)
	}
	// v1-2 predate TOPIC_DELETION_DISABLED and get INVALID_REQUEST.
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.Version, req.TopicNames = 1, []string{"kept"}
	if r := adminRaw(t, tb.Addr, req).(*kmsg.DeleteTopicsResponse); len(r.Topics) != 1 || r.Topics[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("v1 delete while disabled: %+v", r.Topics)
	}
}

func TestCreatePartitions(t *testing.T) {
	tb := testbroker.Start(t)
	adm := tb.Admin(t)
	createTopic(t, tb, "growing", 1)
	if resp, err := adm.CreatePartitions(adminCtx(t), 2, "growing"); err != nil || resp["growing"].Err != nil {
		t.Fatalf("add 2: %v %v", err, resp["growing"].Err)
	}
	if n := len(tb.Broker.Topic("growing").Partitions()); n != 3 {
		t.Fatalf("%d partitions after adding 2 to 1", n)
	}
	if resp, _ := adm.ValidateCreatePartitions(adminCtx(t), 1, "growing"); resp["growing"].Err != nil || len(tb.Broker.Topic("growing").Partitions()) != 3 {
		t.Fatalf("validate-only: %v, %d partitions", resp["growing"].Err, len(tb.Broker.Topic("growing").Partitions()))
	}
	for _, c := range []struct {
		set   int
		topic string
		want  error
	}{
		{2, "growing", kerr.InvalidPartitions},
		{3, "growing", kerr.InvalidPartitions},
		{5, "nowhere", kerr.UnknownTopicOrPartition},
		{100, "__consumer_offsets", kerr.InvalidRequest},
	} {
		resp, err := adm.UpdatePartitions(adminCtx(t), c.set, c.topic)
		if err != nil || !errors.Is(resp[c.topic].Err, c.want) {
			t.Errorf("set %s to %d: %v %v, want %v", c.topic, c.set, err, resp[c.topic].Err, c.want)
		}
	}
	md, err := adm.Metadata(adminCtx(t), "growing")
	if err != nil || len(md.Topics["growing"].Partitions) != 3 {
		t.Fatalf("metadata after growth: %v %+v", err, md.Topics["growing"])
	}
}

func TestCreatePartitionsAssignment(t *testing.T) {
	tb := testbroker.Start(t)
	createTopic(t, tb, "placed", 1)
	node := tb.Broker.Config().NodeID
	try := func(count int32, replicas ...[]int32) int16 {
		req := kmsg.NewPtrCreatePartitionsRequest()
		req.Version = 1 // non-flexible
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = "placed", count
		for _, r := range replicas {
			rt.Assignment = append(rt.Assignment, kmsg.CreatePartitionsRequestTopicAssignment{Replicas: r})
		}
		req.Topics = append(req.Topics, rt)
		return adminRaw(t, tb.Addr, req).(*kmsg.CreatePartitionsResponse).Topics[0].ErrorCode
	}
	if code := try(3, []int32{node}); code != kerr.InvalidReplicaAssignment.Code {
		t.Errorf("one assignment for two new partitions: %d", code)
	}
	if code := try(2, []int32{node + 4}); code != kerr.InvalidReplicaAssignment.Code {
		t.Errorf("assignment to an unknown broker: %d", code)
	}
	if code := try(3, []int32{node}, []int32{node}); code != 0 {
		t.Errorf("valid assignment: %d", code)
	}
	if n := len(tb.Broker.Topic("placed").Partitions()); n != 3 {
		t.Fatalf("%d partitions", n)
	}
}

func TestDescribeCluster(t *testing.T) {
	tb := testbroker.Start(t)
	for _, v := range []int16{0, 1} {
		req := kmsg.NewPtrDescribeClusterRequest()
		req.Version = v
		req.IncludeClusterAuthorizedOperations = true
		resp := adminRaw(t, tb.Addr, req).(*kmsg.DescribeClusterResponse)
		node := tb.Broker.Config().NodeID
		if resp.ErrorCode != 0 || resp.ClusterID != tb.Broker.ClusterID() || resp.ControllerID != node {
			t.Fatalf("v%d: %+v", v, resp)
		}
		if len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != node || resp.Brokers[0].Port == 0 {
			t.Fatalf("v%d brokers: %+v", v, resp.Brokers)
		}
		if resp.ClusterAuthorizedOperations <= 0 {
			t.Errorf("v%d authorized operations %d", v, resp.ClusterAuthorizedOperations)
		}
	}
	req := kmsg.NewPtrDescribeClusterRequest()
	req.Version = 1
	req.EndpointType = 2 // controllers
	if resp := adminRaw(t, tb.Addr, req).(*kmsg.DescribeClusterResponse); resp.ErrorCode != kerr.MismatchedEndpointType.Code {
		t.Fatalf("controllers endpoint: error %d", resp.ErrorCode)
	}
}

func TestDescribeAllLogDirs(t *testing.T) {
	tb := testbroker.Start(t)
	createTopic(t, tb, "sized", 2)
	createTopic(t, tb, "other", 1)
	cl := tb.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err := cl.ProduceSync(adminCtx(t), &kgo.Record{Topic: "sized", Partition: 0, Value: make([]byte, 1000)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	dirs, err := tb.Admin(t).DescribeAllLogDirs(adminCtx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	all := dirs.Sorted()
	if len(all) != 1 {
		t.Fatalf("%d log dirs", len(all))
	}
	d := all[0]
	abs, _ := filepath.Abs(tb.Config.DataDir)
	if d.Err != nil || d.Dir != abs || d.TotalBytes <= 0 || d.UsableBytes <= 0 || d.UsableBytes > d.TotalBytes {
		t.Fatalf("dir %+v", d)
	}
	if len(d.Topics["sized"]) != 2 || len(d.Topics["other"]) != 1 {
		t.Fatalf("topics %v", d.Topics)
	}
	if p0, p1 := d.Topics["sized"][0], d.Topics["sized"][1]; p0.Size < 1000 || p1.Size != 0 || p0.OffsetLag != 0 {
		t.Fatalf("sizes: partition 0 %d bytes (lag %d), partition 1 %d bytes", p0.Size, p0.OffsetLag, p1.Size)
	}
	one, err := tb.Admin(t).DescribeAllLogDirs(adminCtx(t), kadm.TopicsSet{"sized": {1: {}}})
	if err != nil {
		t.Fatal(err)
	}
	got := one.Sorted()[0].Topics
	if len(got) != 1 || len(got["sized"]) != 1 {
		t.Fatalf("filtered: %v", got)
	}
}
