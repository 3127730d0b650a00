package engine_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/engine"
	"github.com/sluice-broker/sluice/internal/testbroker"
)

// staticSegmentBytes is set as if by server.properties, to check that
// DescribeConfigs reports it as a static broker config.
const staticSegmentBytes = 8 << 20

func startConfigBroker(t *testing.T) *testbroker.Broker {
	return testbroker.Start(t, func(c *engine.Config) { c.Log.SegmentBytes = staticSegmentBytes })
}

// topicConfigs describes one topic's configs, keyed by name.
func topicConfigs(t *testing.T, adm *kadm.Client, topic string) map[string]kadm.Config {
	t.Helper()
	rcs, err := adm.DescribeTopicConfigs(adminCtx(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("describe %s: %v %v", topic, err, rc.Err)
	}
	out := make(map[string]kadm.Config, len(rc.Configs))
	for _, c := range rc.Configs {
		out[c.Key] = c
	}
	return out
}

func TestDescribeTopicConfigs(t *testing.T) {
	tb := startConfigBroker(t)
	adm := tb.Admin(t)
	if _, err := adm.CreateTopic(adminCtx(t), 1, 1, map[string]*string{"retention.ms": kadm.StringPtr("1234")}, "described"); err != nil {
		t.Fatal(err)
	}
	cfgs := topicConfigs(t, adm, "described")
	ret := cfgs["retention.ms"]
	if ret.MaybeValue() != "1234" || ret.Source != kmsg.ConfigSourceDynamicTopicConfig || len(ret.Synonyms) != 2 ||
		ret.Synonyms[1].Key != "log.retention.ms" || ret.Synonyms[1].Source != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("retention.ms: %+v", ret)
	}
	seg := cfgs["segment.bytes"]
	if seg.MaybeValue() != strconv.Itoa(staticSegmentBytes) || seg.Source != kmsg.ConfigSourceStaticBrokerConfig || len(seg.Synonyms) != 2 {
		t.Errorf("segment.bytes: %+v", seg)
	}
	if c := cfgs["cleanup.policy"]; c.MaybeValue() != "delete" || c.Source != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("cleanup.policy: %+v", c)
	}
	rcs, err := adm.DescribeTopicConfigs(adminCtx(t), "missing")
	if err != nil {
		t.Fatal(err)
	}
	if rc, _ := rcs.On("missing", nil); !errors.Is(rc.Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("missing topic: %v", rc.Err)
	}
}

func TestDescribeBrokerConfigs(t *testing.T) {
	tb := startConfigBroker(t)
	adm := tb.Admin(t)
	node := tb.Broker.Config().NodeID
	rcs, err := adm.DescribeBrokerConfigs(adminCtx(t), node)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On(strconv.Itoa(int(node)), nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("describe broker: %v %v", err, rc.Err)
	}
	got := map[string]kadm.Config{}
	for _, c := range rc.Configs {
		got[c.Key] = c
	}
	if c := got["log.segment.bytes"]; c.MaybeValue() != strconv.Itoa(staticSegmentBytes) || c.Source != kmsg.ConfigSourceStaticBrokerConfig {
		t.Errorf("log.segment.bytes: %+v", c)
	}
	if c := got["num.partitions"]; c.MaybeValue() != "1" || c.Source != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("num.partitions: %+v", c)
	}
	if c := got["log.dirs"]; c.MaybeValue() != tb.Config.DataDir {
		t.Errorf("log.dirs: %+v", c)
	}
	// The cluster-wide default resource: nothing is set there yet.
	rcs, err = adm.DescribeBrokerConfigs(adminCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if rc, _ := rcs.On("", nil); rc.Err != nil || len(rc.Configs) != 0 {
		t.Fatalf("cluster default configs: %v, %d configs", rc.Err, len(rc.Configs))
	}
}

// TestDescribeConfigsV1 speaks the oldest served (non-flexible) version,
// with a key filter, and an unsupported resource type.
func TestDescribeConfigsV1(t *testing.T) {
	tb := startConfigBroker(t)
	createTopic(t, tb, "v1-topic", 1)
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.Version = 1
	req.IncludeSynonyms = true
	topic := kmsg.NewDescribeConfigsRequestResource()
	topic.ResourceType, topic.ResourceName, topic.ConfigNames = kmsg.ConfigResourceTypeTopic, "v1-topic", []string{"segment.bytes", "no.such.key"}
	logger := kmsg.NewDescribeConfigsRequestResource()
	logger.ResourceType, logger.ResourceName = kmsg.ConfigResourceTypeBrokerLogger, "1"
	req.Resources = []kmsg.DescribeConfigsRequestResource{topic, logger}
	resp := adminRaw(t, tb.Addr, req).(*kmsg.DescribeConfigsResponse)
	if len(resp.Resources) != 2 {
		t.Fatalf("%d resources", len(resp.Resources))
	}
	r := resp.Resources[0]
	if r.ErrorCode != 0 || len(r.Configs) != 1 || r.Configs[0].Name != "segment.bytes" || len(r.Configs[0].ConfigSynonyms) != 2 {
		t.Fatalf("filtered topic configs: %+v", r)
	}
	if resp.Resources[1].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("broker logger: error %d", resp.Resources[1].ErrorCode)
	}
	// v3+ carries types and, on request, documentation.
	req.Version, req.IncludeDocumentation = 3, true
	req.Resources = req.Resources[:1]
	c := adminRaw(t, tb.Addr, req).(*kmsg.DescribeConfigsResponse).Resources[0].Configs[0]
	if c.ConfigType != kmsg.ConfigTypeInt || c.Documentation == nil || *c.Documentation == "" {
		t.Fatalf("v3 type %v doc %v", c.ConfigType, c.Documentation)
	}
}

func TestAlterTopicConfigsIncremental(t *testing.T) {
	tb := startConfigBroker(t)
	adm := tb.Admin(t)
	createTopic(t, tb, "tuned", 1)
	alter := func(ops ...kadm.AlterConfig) error {
		t.Helper()
		resp, err := adm.AlterTopicConfigs(adminCtx(t), ops, "tuned")
		if err != nil {
			t.Fatal(err)
		}
		return resp[0].Err
	}
	if err := alter(kadm.AlterConfig{Op: kadm.SetConfig, Name: "retention.ms", Value: kadm.StringPtr("60000")},
		kadm.AlterConfig{Op: kadm.AppendConfig, Name: "cleanup.policy", Value: kadm.StringPtr("compact")}); err != nil {
		t.Fatal(err)
	}
	cfgs := topicConfigs(t, adm, "tuned")
	ret, cleanup := cfgs["retention.ms"], cfgs["cleanup.policy"]
	if ret.MaybeValue() != "60000" || cleanup.MaybeValue() != "delete,compact" {
		t.Fatalf("after set+append: retention %q cleanup %q", ret.MaybeValue(), cleanup.MaybeValue())
	}
	s := tb.Broker.Topic("tuned").Settings()
	if s.Log.RetentionMs != 60000 || !s.Log.Compact {
		t.Fatalf("settings not applied: %+v", s.Log)
	}
	if err := alter(kadm.AlterConfig{Op: kadm.SubtractConfig, Name: "cleanup.policy", Value: kadm.StringPtr("delete")},
		kadm.AlterConfig{Op: kadm.DeleteConfig, Name: "retention.ms"}); err != nil {
		t.Fatal(err)
	}
	cfgs = topicConfigs(t, adm, "tuned")
	if cleanup = cfgs["cleanup.policy"]; cleanup.MaybeValue() != "compact" || cfgs["retention.ms"].Source != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("after subtract+delete: %+v %+v", cfgs["cleanup.policy"], cfgs["retention.ms"])
	}
	// A bad operation fails the resource and changes nothing.
	for _, op := range []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "retention.ms", Value: kadm.StringPtr("later")},
		{Op: kadm.AppendConfig, Name: "retention.ms", Value: kadm.StringPtr("1")},
		{Op: kadm.SetConfig, Name: "no.such.key", Value: kadm.StringPtr("1")},
	} {
		err := alter(kadm.AlterConfig{Op: kadm.SetConfig, Name: "flush.ms", Value: kadm.StringPtr("1000")}, op)
		if !errors.Is(err, kerr.InvalidConfig) {
			t.Errorf("%v %s: %v, want INVALID_CONFIG", op.Op, op.Name, err)
		}
	}
	if _, ok := tb.Broker.Topic("tuned").Overrides()["flush.ms"]; ok {
		t.Fatal("a failed alteration was partly applied")
	}
	resp, err := adm.ValidateAlterTopicConfigs(adminCtx(t), []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "flush.ms", Value: kadm.StringPtr("1000")}}, "tuned")
	if err != nil || resp[0].Err != nil {
		t.Fatalf("validate-only: %v %v", err, resp[0].Err)
	}
	if _, ok := tb.Broker.Topic("tuned").Overrides()["flush.ms"]; ok {
		t.Fatal("validate-only applied the change")
	}
}

func TestAlterTopicConfigsReplacesAll(t *testing.T) {
	tb := startConfigBroker(t)
	adm := tb.Admin(t)
	if _, err := adm.CreateTopic(adminCtx(t), 1, 1, map[string]*string{"segment.ms": kadm.StringPtr("100000")}, "replaced"); err != nil {
		t.Fatal(err)
	}
	resp, err := adm.AlterTopicConfigsState(adminCtx(t), []kadm.AlterConfig{{Name: "retention.ms", Value: kadm.StringPtr("5000")}}, "replaced")
	if err != nil || resp[0].Err != nil {
		t.Fatalf("alter: %v %v", err, resp[0].Err)
	}
	got := tb.Broker.Topic("replaced").Overrides()
	if len(got) != 1 || got["retention.ms"] != "5000" {
		t.Fatalf("overrides after a non-incremental alter: %v", got)
	}
	resp, _ = adm.AlterTopicConfigsState(adminCtx(t), []kadm.AlterConfig{{Name: "retention.ms", Value: kadm.StringPtr("-7")}}, "replaced")
	if !errors.Is(resp[0].Err, kerr.InvalidConfig) || tb.Broker.Topic("replaced").Overrides()["retention.ms"] != "5000" {
		t.Fatalf("bad value: %v, overrides %v", resp[0].Err, tb.Broker.Topic("replaced").Overrides())
	}
}

func TestTopicConfigsSurviveRestart(t *testing.T) {
	tb := startConfigBroker(t)
	adm := tb.Admin(t)
	createTopic(t, tb, "durable", 2)
	resp, err := adm.AlterTopicConfigs(adminCtx(t), []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "retention.bytes", Value: kadm.StringPtr("1048576")},
		{Op: kadm.SetConfig, Name: "message.timestamp.type", Value: kadm.StringPtr("LogAppendTime")},
	}, "durable")
	if err != nil || resp[0].Err != nil {
		t.Fatalf("alter: %v %v", err, resp[0].Err)
	}
	tb.Restart(t)
	cfgs := topicConfigs(t, tb.Admin(t), "durable")
	rb, tt := cfgs["retention.bytes"], cfgs["message.timestamp.type"]
	if rb.MaybeValue() != "1048576" || tt.MaybeValue() != "LogAppendTime" || rb.Source != kmsg.ConfigSourceDynamicTopicConfig {
		t.Fatalf("after restart: retention.bytes %+v, timestamp type %+v", rb, tt)
	}
	tp := tb.Broker.Topic("durable")
	if s := tp.Settings(); s.Log.RetentionBytes != 1048576 || len(tp.Partitions()) != 2 {
		t.Fatalf("after restart: settings %+v, %d partitions", s.Log, len(tp.Partitions()))
	}
}

// describeAll asks for every key of one resource with DescribeConfigs v4,
// with synonyms and documentation.
func describeAll(t *testing.T, tb *testbroker.Broker, typ kmsg.ConfigResourceType, name string) []kmsg.DescribeConfigsResponseResourceConfig {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.Version, req.IncludeSynonyms, req.IncludeDocumentation = 4, true, true
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = typ, name
	req.Resources = append(req.Resources, rr)
	r := adminRaw(t, tb.Addr, req).(*kmsg.DescribeConfigsResponse).Resources[0]
	if r.ErrorCode != 0 {
		t.Fatalf("describe %v %s: error %d", typ, name, r.ErrorCode)
	}
	return r.Configs
}

// checkDescribed checks that configs answer every key of want exactly
// once, typed and flagged as the config table says, each with
// documentation, its source the one in sources (DEFAULT_CONFIG otherwise)
// and that source first among its synonyms.
func checkDescribed(t *testing.T, configs []kmsg.DescribeConfigsResponseResourceConfig, want map[string]engine.DescribedKey, sources map[string]kmsg.ConfigSource) {
	t.Helper()
	seen := map[string]bool{}
	for _, c := range configs {
		w, ok := want[c.Name]
		switch {
		case !ok:
			t.Errorf("%s: not a key of this resource", c.Name)
			continue
		case seen[c.Name]:
			t.Errorf("%s: answered twice", c.Name)
		}
		seen[c.Name] = true
		source, ok := sources[c.Name]
		if !ok {
			source = kmsg.ConfigSourceDefaultConfig
		}
		if c.ConfigType != w.Type || c.ReadOnly != w.ReadOnly || c.IsSensitive != w.Sensitive || c.Source != source ||
			c.Documentation == nil || *c.Documentation == "" ||
			len(c.ConfigSynonyms) == 0 || c.ConfigSynonyms[0].Source != source {
			t.Errorf("%s: %+v, want %+v from %v", c.Name, c, w, source)
		}
	}
	for name := range want {
		if !seen[name] {
			t.Errorf("%s: not answered", name)
		}
	}
}

// TestDescribeConfigsAnswersEveryKeyOnce: BROKER and TOPIC resources answer
// every key of the config table once, with its type, read-only flag and
// source.
func TestDescribeConfigsAnswersEveryKeyOnce(t *testing.T) {
	tb := startConfigBroker(t)
	adm := tb.Admin(t)
	node := strconv.Itoa(int(tb.Broker.Config().NodeID))
	brokerKeys := engine.DescribedBrokerKeys()
	// Read-only unless Sluice changes the key at run time (dynconfig.go).
	for name, want := range map[string]engine.DescribedKey{"node.id": {Type: kmsg.ConfigTypeInt, ReadOnly: true},
		"broker.id": {Type: kmsg.ConfigTypeInt, ReadOnly: true}, "log.retention.ms": {Type: kmsg.ConfigTypeLong},
		"log.cleanup.policy": {Type: kmsg.ConfigTypeList}, "sluice.net": {Type: kmsg.ConfigTypeString, ReadOnly: true},
		"auto.create.topics.enable":       {Type: kmsg.ConfigTypeBoolean, ReadOnly: true},
		"log.cleaner.min.cleanable.ratio": {Type: kmsg.ConfigTypeDouble}, "listeners": {Type: kmsg.ConfigTypeString, ReadOnly: true}} {
		if k, ok := brokerKeys[name]; !ok || k != want {
			t.Errorf("broker key %s: %+v, want %+v", name, k, want)
		}
	}
	// testbroker sets these as server.properties would.
	static := map[string]kmsg.ConfigSource{}
	for _, name := range []string{"log.segment.bytes", "listeners", "advertised.listeners", "log.dirs", "group.initial.rebalance.delay.ms", "offsets.topic.num.partitions"} {
		static[name] = kmsg.ConfigSourceStaticBrokerConfig
	}
	checkDescribed(t, describeAll(t, tb, kmsg.ConfigResourceTypeBroker, node), brokerKeys, static)

	if _, err := adm.CreateTopic(adminCtx(t), 1, 1, map[string]*string{"retention.ms": kadm.StringPtr("1234")}, "every-key"); err != nil {
		t.Fatal(err)
	}
	sources := map[string]kmsg.ConfigSource{
		"retention.ms":  kmsg.ConfigSourceDynamicTopicConfig,
		"segment.bytes": kmsg.ConfigSourceStaticBrokerConfig,
	}
	checkDescribed(t, describeAll(t, tb, kmsg.ConfigResourceTypeTopic, "every-key"), engine.DescribedTopicKeys(), sources)
}

// TestTopicConfigTooLongRefused: a list value of valid items longer than
// the metadata log's string limit is INVALID_CONFIG; it used to be
// committed, and the log could not be read back at the next start.
func TestTopicConfigTooLongRefused(t *testing.T) {
	tb := testbroker.Start(t)
	createTopic(t, tb, "listed", 1)
	long := strings.Repeat("delete,", 6000) + "delete"
	resp, err := tb.Admin(t).AlterTopicConfigs(adminCtx(t), []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "cleanup.policy", Value: &long}}, "listed")
	if err != nil || !errors.Is(resp[0].Err, kerr.InvalidConfig) {
		t.Fatalf("%d-byte cleanup.policy: %v %v", len(long), err, resp)
	}
	tb.Restart(t)
	if tb.Broker.Topic("listed") == nil {
		t.Fatal("topic gone after restart")
	}
}
