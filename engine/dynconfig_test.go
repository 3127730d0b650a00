package engine_test

import (
	"errors"
	"strconv"
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

// alterBroker runs one incremental alteration of a BROKER resource (no
// ids: the cluster-wide default) and returns its error.
func alterBroker(t *testing.T, tb *testbroker.Broker, ops []kadm.AlterConfig, ids ...int32) error {
	t.Helper()
	resp, err := tb.Admin(t).AlterBrokerConfigs(adminCtx(t), ops, ids...)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp) != 1 {
		t.Fatalf("%d resources answered", len(resp))
	}
	return resp[0].Err
}

func set(name, value string) kadm.AlterConfig {
	return kadm.AlterConfig{Op: kadm.SetConfig, Name: name, Value: kadm.StringPtr(value)}
}

func del(name string) kadm.AlterConfig { return kadm.AlterConfig{Op: kadm.DeleteConfig, Name: name} }

// brokerConfigs describes a BROKER resource ("" for the cluster default)
// with synonyms, keyed by name.
func brokerConfigs(t *testing.T, tb *testbroker.Broker, name string) map[string]kmsg.DescribeConfigsResponseResourceConfig {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.IncludeSynonyms = true
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, name
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(adminCtx(t), tb.Client(t))
	if err != nil || len(resp.Resources) != 1 || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("describe broker %q: %v %+v", name, err, resp)
	}
	out := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
	for _, c := range resp.Resources[0].Configs {
		out[c.Name] = c
	}
	return out
}

// sources lists a described config's synonyms as name=value@source.
func sources(c kmsg.DescribeConfigsResponseResourceConfig) string {
	var s []string
	for _, syn := range c.ConfigSynonyms {
		s = append(s, syn.Name+"="+derefOr(syn.Value)+"@"+syn.Source.String())
	}
	return strings.Join(s, " ")
}

func derefOr(p *string) string {
	if p == nil {
		return "null"
	}
	return *p
}

// TestDynamicBrokerConfigPrecedence: a key set in server.properties, then
// as a cluster-wide dynamic default, then for this broker: each level wins
// over the one below, DescribeConfigs reports each level's source and the
// synonyms below it, the cluster-default resource lists what is set
// there, and the hosted topic's settings follow the effective value.
func TestDynamicBrokerConfigPrecedence(t *testing.T) {
	tb := startConfigBroker(t) // log.segment.bytes static 8 MiB
	createTopic(t, tb, "follows", 1)
	node := tb.Broker.Config().NodeID
	self := strconv.Itoa(int(node))
	segment := func() int64 { return tb.Broker.Topic("follows").Settings().Log.SegmentBytes }

	if err := alterBroker(t, tb, []kadm.AlterConfig{set("log.segment.bytes", "4194304")}); err != nil {
		t.Fatalf("cluster default: %v", err)
	}
	c := brokerConfigs(t, tb, self)["log.segment.bytes"]
	if derefOr(c.Value) != "4194304" || c.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig || c.ReadOnly ||
		sources(c) != "log.segment.bytes=4194304@DYNAMIC_DEFAULT_BROKER_CONFIG log.segment.bytes=8388608@STATIC_BROKER_CONFIG log.segment.bytes=1073741824@DEFAULT_CONFIG" {
		t.Fatalf("after cluster default: %v = %s (%v): %s", c.Name, derefOr(c.Value), c.Source, sources(c))
	}
	if segment() != 4<<20 {
		t.Fatalf("topic segment.bytes %d, want the cluster default", segment())
	}

	if err := alterBroker(t, tb, []kadm.AlterConfig{set("log.segment.bytes", "2097152")}, node); err != nil {
		t.Fatalf("per broker: %v", err)
	}
	c = brokerConfigs(t, tb, self)["log.segment.bytes"]
	if derefOr(c.Value) != "2097152" || c.Source != kmsg.ConfigSourceDynamicBrokerConfig || len(c.ConfigSynonyms) != 4 {
		t.Fatalf("after per broker: %s (%v): %s", derefOr(c.Value), c.Source, sources(c))
	}
	topic := topicConfigs(t, tb.Admin(t), "follows")["segment.bytes"]
	if topic.MaybeValue() != "2097152" || topic.Source != kmsg.ConfigSourceDynamicBrokerConfig {
		t.Fatalf("topic describes segment.bytes %s from %v", topic.MaybeValue(), topic.Source)
	}
	if segment() != 2<<20 {
		t.Fatalf("topic segment.bytes %d, want the broker's own", segment())
	}
	// The cluster-default resource answers only what is set there.
	def := brokerConfigs(t, tb, "")
	if len(def) != 1 || derefOr(def["log.segment.bytes"].Value) != "4194304" || def["log.segment.bytes"].Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
		t.Fatalf("cluster default resource: %+v", def)
	}

	// Deleting each level uncovers the one below.
	if err := alterBroker(t, tb, []kadm.AlterConfig{del("log.segment.bytes")}, node); err != nil {
		t.Fatal(err)
	}
	if segment() != 4<<20 {
		t.Fatalf("after deleting the broker's own: %d", segment())
	}
	if err := alterBroker(t, tb, []kadm.AlterConfig{del("log.segment.bytes")}); err != nil {
		t.Fatal(err)
	}
	if c := brokerConfigs(t, tb, self)["log.segment.bytes"]; c.Source != kmsg.ConfigSourceStaticBrokerConfig || segment() != staticSegmentBytes {
		t.Fatalf("after deleting both: %v, topic %d", c.Source, segment())
	}
}

// TestDynamicRetentionDeletesOldSegments: records two hours old sit in
// closed segments of a topic without a retention override; lowering the
// cluster-wide log.retention.ms (spelled log.retention.minutes) makes the
// next retention pass delete them.
func TestDynamicRetentionDeletesOldSegments(t *testing.T) {
	tb := testbroker.Start(t)
	adm := tb.Admin(t)
	if _, err := adm.CreateTopic(adminCtx(t), 1, 1, map[string]*string{"segment.bytes": kadm.StringPtr("1024")}, "aging"); err != nil {
		t.Fatal(err)
	}
	cl := tb.Client(t, kgo.DefaultProduceTopic("aging"), kgo.ProducerLinger(0))
	old := time.Now().Add(-2 * time.Hour)
	for i := range 20 {
		r := &kgo.Record{Value: []byte(strings.Repeat("x", 200) + strconv.Itoa(i)), Timestamp: old}
		if err := cl.ProduceSync(adminCtx(t), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	start := func() int64 {
		offs, err := adm.ListStartOffsets(adminCtx(t), "aging")
		if err != nil {
			t.Fatal(err)
		}
		o, _ := offs.Lookup("aging", 0)
		return o.Offset
	}
	tb.Broker.EnforceRetentionNow()
	if s := start(); s != 0 {
		t.Fatalf("log start %d before the change: the 7-day default deleted records", s)
	}
	if err := alterBroker(t, tb, []kadm.AlterConfig{set("log.retention.minutes", "60")}); err != nil {
		t.Fatal(err)
	}
	if got := tb.Broker.Topic("aging").Settings().Log.RetentionMs; got != 3_600_000 {
		t.Fatalf("topic retention %d ms, want 3600000", got)
	}
	c := topicConfigs(t, adm, "aging")["retention.ms"]
	if c.MaybeValue() != "3600000" || c.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig || c.Synonyms[0].Key != "log.retention.minutes" {
		t.Fatalf("topic retention.ms described as %s from %v (%+v)", c.MaybeValue(), c.Source, c.Synonyms)
	}
	tb.Broker.EnforceRetentionNow()
	if s := start(); s == 0 {
		t.Fatal("no segment deleted after log.retention.minutes=60")
	} else {
		t.Logf("log start offset %d after the change", s)
	}
}

// TestDynamicMessageMaxBytes: lowering this broker's message.max.bytes
// refuses larger batches with MESSAGE_TOO_LARGE at once; deleting it
// accepts them again.
func TestDynamicMessageMaxBytes(t *testing.T) {
	tb := testbroker.Start(t)
	createTopic(t, tb, "bounded", 1)
	node := tb.Broker.Config().NodeID
	cl := tb.Client(t, kgo.DefaultProduceTopic("bounded"), kgo.RecordRetries(0), kgo.ProducerBatchCompression(kgo.NoCompression()))
	big := &kgo.Record{Value: make([]byte, 4000)}
	if err := cl.ProduceSync(adminCtx(t), big).FirstErr(); err != nil {
		t.Fatalf("before: %v", err)
	}
	if err := alterBroker(t, tb, []kadm.AlterConfig{set("message.max.bytes", "1000")}, node); err != nil {
		t.Fatal(err)
	}
	big = &kgo.Record{Value: make([]byte, 4000)}
	if err := cl.ProduceSync(adminCtx(t), big).FirstErr(); !errors.Is(err, kerr.MessageTooLarge) {
		t.Fatalf("after lowering message.max.bytes: %v, want MESSAGE_TOO_LARGE", err)
	}
	if err := alterBroker(t, tb, []kadm.AlterConfig{del("message.max.bytes")}, node); err != nil {
		t.Fatal(err)
	}
	big = &kgo.Record{Value: make([]byte, 4000)}
	if err := cl.ProduceSync(adminCtx(t), big).FirstErr(); err != nil {
		t.Fatalf("after deleting it: %v", err)
	}
}

// TestDynamicMinInsyncReplicas: a cluster-wide min.insync.replicas of 2
// on a single node refuses acks=all produce with NOT_ENOUGH_REPLICAS.
func TestDynamicMinInsyncReplicas(t *testing.T) {
	tb := testbroker.Start(t)
	createTopic(t, tb, "durable-ish", 1)
	if err := alterBroker(t, tb, []kadm.AlterConfig{set("min.insync.replicas", "2")}); err != nil {
		t.Fatal(err)
	}
	cl := tb.Client(t, kgo.DefaultProduceTopic("durable-ish"), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordRetries(0),
		kgo.DisableIdempotentWrite())
	if err := cl.ProduceSync(adminCtx(t), kgo.StringRecord("x")).FirstErr(); !errors.Is(err, kerr.NotEnoughReplicas) {
		t.Fatalf("acks=all with min.insync.replicas=2 on one node: %v", err)
	}
}

// TestDynamicBrokerConfigErrors: Kafka's answers for what cannot change.
func TestDynamicBrokerConfigErrors(t *testing.T) {
	tb := testbroker.Start(t)
	node := tb.Broker.Config().NodeID
	for _, tc := range []struct {
		what string
		ops  []kadm.AlterConfig
		ids  []int32
		want *kerr.Error
		msg  string // a part of the message
	}{
		{"unknown key", []kadm.AlterConfig{set("no.such.key", "1")}, nil, kerr.InvalidConfig, "Unknown broker config: no.such.key"},
		{"topic key on a broker", []kadm.AlterConfig{set("retention.ms", "1")}, nil, kerr.InvalidConfig, "Unknown"},
		{"topic-only key on a broker", []kadm.AlterConfig{set("leader.replication.throttled.replicas", "*")}, nil, kerr.InvalidConfig, "Unknown"},
		{"read-only key", []kadm.AlterConfig{set("num.partitions", "3")}, []int32{node}, kerr.InvalidRequest, "Cannot update these configs dynamically: Set(num.partitions)"},
		{"restart-only key", []kadm.AlterConfig{set("listeners", "PLAINTEXT://127.0.0.1:1")}, []int32{node}, kerr.InvalidRequest, "restart only"},
		{"per-broker key at the cluster level", []kadm.AlterConfig{set("advertised.listeners", "PLAINTEXT://h:1")}, nil, kerr.InvalidRequest, "broker id must be specified"},
		{"bad value", []kadm.AlterConfig{set("log.retention.ms", "soon")}, nil, kerr.InvalidRequest, "Invalid value soon for configuration log.retention.ms"},
		{"out of range", []kadm.AlterConfig{set("log.segment.bytes", "10")}, []int32{node}, kerr.InvalidRequest, "out of range"},
		{"another broker", []kadm.AlterConfig{set("log.retention.ms", "1000")}, []int32{node + 1}, kerr.InvalidRequest, "Unexpected broker id"},
		{"append to a non-list", []kadm.AlterConfig{{Op: kadm.AppendConfig, Name: "log.retention.ms", Value: kadm.StringPtr("1")}}, nil, kerr.InvalidConfig, "not LIST"},
	} {
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		rr := kmsg.NewIncrementalAlterConfigsRequestResource()
		rr.ResourceType = kmsg.ConfigResourceTypeBroker
		if tc.ids != nil {
			rr.ResourceName = strconv.Itoa(int(tc.ids[0]))
		}
		for _, op := range tc.ops {
			c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			c.Name, c.Value, c.Op = op.Name, op.Value, kmsg.IncrementalAlterConfigOp(op.Op)
			rr.Configs = append(rr.Configs, c)
		}
		req.Resources = append(req.Resources, rr)
		resp := adminRaw(t, tb.Addr, req).(*kmsg.IncrementalAlterConfigsResponse)
		if got, msg := resp.Resources[0].ErrorCode, derefOr(resp.Resources[0].ErrorMessage); got != tc.want.Code || !strings.Contains(msg, tc.msg) {
			t.Errorf("%s: error %v (%s), want %v", tc.what, kerr.ErrorForCode(got), derefOr(resp.Resources[0].ErrorMessage), tc.want)
		}
	}
	if set := tb.Broker.CurrentConfig(); set.Log.RetentionMs != engine.DefaultConfig().Log.RetentionMs || set.NumPartitions != 1 {
		t.Fatalf("a refused alteration changed the config: %+v", set.Log)
	}
	// validate_only checks and changes nothing.
	resp, err := tb.Admin(t).ValidateAlterBrokerConfigs(adminCtx(t), []kadm.AlterConfig{set("log.retention.ms", "1000")})
	if err != nil || resp[0].Err != nil {
		t.Fatalf("validate only: %v %v", err, resp[0].Err)
	}
	if len(brokerConfigs(t, tb, "")) != 0 {
		t.Fatal("validate only stored a config")
	}
}

// TestAlterBrokerConfigsLegacyReplaces: the legacy AlterConfigs replaces
// the resource's whole set, and compression.type and the replication
// throttles take effect from it.
func TestAlterBrokerConfigsLegacyReplaces(t *testing.T) {
	tb := testbroker.Start(t)
	createTopic(t, tb, "codec", 1)
	node := tb.Broker.Config().NodeID
	if err := alterBroker(t, tb, []kadm.AlterConfig{set("compression.type", "zstd"), set("leader.replication.throttled.rate", "1000000")}, node); err != nil {
		t.Fatal(err)
	}
	if got := tb.Broker.Topic("codec").Settings().CompressionType; got != "zstd" {
		t.Fatalf("topic compression %q", got)
	}
	if l, f := tb.Broker.ReplicationThrottles(); l != 1_000_000 || f != 1<<63-1 {
		t.Fatalf("throttles %d %d", l, f)
	}
	resp, err := tb.Admin(t).AlterBrokerConfigsState(adminCtx(t), []kadm.AlterConfig{{Name: "follower.replication.throttled.rate", Value: kadm.StringPtr("5000")}}, node)
	if err != nil || resp[0].Err != nil {
		t.Fatalf("legacy alter: %v %v", err, resp[0].Err)
	}
	if l, f := tb.Broker.ReplicationThrottles(); l != 1<<63-1 || f != 5000 {
		t.Fatalf("throttles after replacing the set: %d %d", l, f)
	}
	if got := tb.Broker.Topic("codec").Settings().CompressionType; got != "producer" {
		t.Fatalf("topic compression %q after compression.type left the set", got)
	}
}

// TestDynamicBrokerConfigsSurviveRestart: both levels are in the metadata
// log and apply again at start, before the topics open.
func TestDynamicBrokerConfigsSurviveRestart(t *testing.T) {
	tb := testbroker.Start(t)
	createTopic(t, tb, "kept", 1)
	node := tb.Broker.Config().NodeID
	if err := alterBroker(t, tb, []kadm.AlterConfig{set("log.retention.bytes", "123456789")}); err != nil {
		t.Fatal(err)
	}
	if err := alterBroker(t, tb, []kadm.AlterConfig{set("log.flush.interval.messages", "1000")}, node); err != nil {
		t.Fatal(err)
	}
	tb.Restart(t)
	s := tb.Broker.Topic("kept").Settings().Log
	if s.RetentionBytes != 123456789 || s.FlushMessages != 1000 {
		t.Fatalf("after restart: retention.bytes %d, flush.messages %d", s.RetentionBytes, s.FlushMessages)
	}
	c := brokerConfigs(t, tb, strconv.Itoa(int(node)))
	if c["log.retention.bytes"].Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig || c["log.flush.interval.messages"].Source != kmsg.ConfigSourceDynamicBrokerConfig {
		t.Fatalf("after restart: %v, %v", c["log.retention.bytes"].Source, c["log.flush.interval.messages"].Source)
	}
}

// TestDynamicLogCleanerBackoff: the cleaner's round interval is read at
// run time. A compacted topic full of superseded keys, written just after
// start (the default 15 s round is far off), is compacted by the cleaner
// loop itself once a cluster-wide log.cleaner.backoff.ms of 100 is set.
func TestDynamicLogCleanerBackoff(t *testing.T) {
	tb := testbroker.Start(t)
	adm := tb.Admin(t)
	if _, err := adm.CreateTopic(adminCtx(t), 1, 1, map[string]*string{
		"cleanup.policy": kadm.StringPtr("compact"), "segment.bytes": kadm.StringPtr("2048"),
		"min.cleanable.dirty.ratio": kadm.StringPtr("0.01"),
	}, "superseded"); err != nil {
		t.Fatal(err)
	}
	cl := tb.Client(t, kgo.DefaultProduceTopic("superseded"), kgo.ProducerLinger(0))
	for i := range 200 {
		r := &kgo.Record{Key: []byte{byte(i % 4)}, Value: []byte(strings.Repeat("v", 100))}
		if err := cl.ProduceSync(adminCtx(t), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	log := engine.PartitionLog(tb.Broker.Topic("superseded").Partition(0))
	if err := log.Flush(); err != nil { // the cleaner works below the recovery point
		t.Fatal(err)
	}
	before := log.Size()
	if err := alterBroker(t, tb, []kadm.AlterConfig{set("log.cleaner.backoff.ms", "100")}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for log.Size() > before/2 {
		if time.Now().After(deadline) {
			t.Fatalf("not compacted 10 s after log.cleaner.backoff.ms=100: %d bytes (was %d)", log.Size(), before)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("compacted by the cleaner loop: %d bytes → %d", before, log.Size())
}

// TestDynamicBrokerListAppend: APPEND and SUBTRACT on a broker list key
// start from the built-in default (Kafka's), and the topic defaults
// follow: compaction with the default's compact, no retention without its
// delete.
func TestDynamicBrokerListAppend(t *testing.T) {
	tb := testbroker.Start(t)
	createTopic(t, tb, "policy", 1)
	appendOp := kadm.AlterConfig{Op: kadm.AppendConfig, Name: "log.cleanup.policy", Value: kadm.StringPtr("compact")}
	if err := alterBroker(t, tb, []kadm.AlterConfig{appendOp}); err != nil {
		t.Fatal(err)
	}
	if c := brokerConfigs(t, tb, "")["log.cleanup.policy"]; derefOr(c.Value) != "delete,compact" {
		t.Fatalf("after APPEND: %q", derefOr(c.Value))
	}
	if !tb.Broker.Topic("policy").Settings().Log.Compact {
		t.Fatal("the topic does not compact after the default gained compact")
	}
	subtract := kadm.AlterConfig{Op: kadm.SubtractConfig, Name: "log.cleanup.policy", Value: kadm.StringPtr("delete")}
	if err := alterBroker(t, tb, []kadm.AlterConfig{subtract}); err != nil {
		t.Fatal(err)
	}
	if c := brokerConfigs(t, tb, "")["log.cleanup.policy"]; derefOr(c.Value) != "compact" {
		t.Fatalf("after SUBTRACT: %q", derefOr(c.Value))
	}
	// Regression: a compact-only broker default still deleted by age and
	// size; in Kafka such topics keep every key's last value.
	if s := tb.Broker.Topic("policy").Settings().Log; s.RetentionMs != -1 || s.RetentionBytes != -1 {
		t.Fatalf("compact-only default: retention %d ms, %d bytes; want none", s.RetentionMs, s.RetentionBytes)
	}
}
