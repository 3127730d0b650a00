package engine_test

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/engine"
	"github.com/sluice-broker/sluice/internal/testbroker"
)

// alterGroup sends one IncrementalAlterConfigs of a GROUP resource and
// returns its error code and message.
func alterGroup(t *testing.T, tb *testbroker.Broker, group string, validateOnly bool, ops ...kmsg.IncrementalAlterConfigsRequestResourceConfig) (int16, string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.ValidateOnly = validateOnly
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName, rr.Configs = kmsg.ConfigResourceTypeGroupConfig, group, ops
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(adminCtx(t), tb.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	r := resp.Resources[0]
	return r.ErrorCode, derefOr(r.ErrorMessage)
}

func groupOp(op kmsg.IncrementalAlterConfigOp, name, value string) kmsg.IncrementalAlterConfigsRequestResourceConfig {
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Op, c.Name = op, name
	if op != kmsg.IncrementalAlterConfigOpDelete {
		c.Value = &value
	}
	return c
}

// groupConfigs describes a GROUP resource with synonyms, keyed by name.
func groupConfigs(t *testing.T, tb *testbroker.Broker, group string) (map[string]kmsg.DescribeConfigsResponseResourceConfig, int16) {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.IncludeSynonyms, req.IncludeDocumentation = true, true
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(adminCtx(t), tb.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
	for _, c := range resp.Resources[0].Configs {
		out[c.Name] = c
	}
	return out, resp.Resources[0].ErrorCode
}

// TestGroupConfigs: a group's configs are described with their broker
// defaults, set within the broker's group.* bounds (a server.properties
// bound moves what is accepted), refused outside them or when unknown,
// replaced by the legacy AlterConfigs, and kept across a restart.
func TestGroupConfigs(t *testing.T) {
	tb := testbroker.Start(t, func(c *engine.Config) {
		if err := c.Set("group.consumer.max.session.timeout.ms", "120000"); err != nil {
			t.Fatal(err)
		}
	})
	cfgs, ec := groupConfigs(t, tb, "no-such-group-yet")
	if ec != 0 || len(cfgs) != 21 {
		t.Fatalf("describe: error %d, %d keys", ec, len(cfgs))
	}
	st := cfgs["consumer.session.timeout.ms"]
	if derefOr(st.Value) != "45000" || st.Source != kmsg.ConfigSourceDefaultConfig || st.ReadOnly ||
		st.ConfigSynonyms[0].Name != "group.consumer.session.timeout.ms" || st.Documentation == nil {
		t.Fatalf("consumer.session.timeout.ms: %+v", st)
	}
	if c := cfgs["share.isolation.level"]; derefOr(c.Value) != "read_uncommitted" || c.ConfigType != kmsg.ConfigTypeString {
		t.Fatalf("share.isolation.level: %+v", c)
	}

	set := kmsg.IncrementalAlterConfigOpSet
	for _, tc := range []struct {
		op   kmsg.IncrementalAlterConfigsRequestResourceConfig
		want *kerr.Error
	}{
		{groupOp(set, "consumer.session.timeout.ms", "100000"), nil}, // within the raised bound
		{groupOp(set, "consumer.session.timeout.ms", "130000"), kerr.InvalidConfig},
		{groupOp(set, "consumer.heartbeat.interval.ms", "4000"), kerr.InvalidConfig},
		{groupOp(set, "share.delivery.count.limit", "11"), kerr.InvalidConfig},
		{groupOp(set, "share.auto.offset.reset", "by_duration:P1DT2H"), nil},
		{groupOp(set, "share.auto.offset.reset", "by_duration:-PT1H"), kerr.InvalidConfig},
		{groupOp(set, "share.isolation.level", "read_committed"), nil},
		{groupOp(set, "streams.num.standby.replicas", "3"), kerr.InvalidConfig},
		{groupOp(set, "streams.assignor.name", "sticky"), nil},
		{groupOp(set, "streams.assignor.name", "greedy"), kerr.InvalidConfig},
		{groupOp(set, "errors.deadletterqueue.topic.name", "__dlq"), kerr.InvalidConfig},
		{groupOp(set, "consumer.session.timeout.ms", "abc"), kerr.InvalidConfig},
		{groupOp(set, "no.such.group.key", "1"), kerr.InvalidConfig},
	} {
		code, msg := alterGroup(t, tb, "g1", false, tc.op)
		want := int16(0)
		if tc.want != nil {
			want = tc.want.Code
		}
		if code != want {
			t.Errorf("%s=%s: %v %q, want %v", tc.op.Name, *tc.op.Value, kerr.ErrorForCode(code), msg, tc.want)
		}
	}
	if code, _ := alterGroup(t, tb, "", false, groupOp(set, "consumer.session.timeout.ms", "50000")); code != kerr.InvalidRequest.Code {
		t.Fatalf("empty group name: %v", kerr.ErrorForCode(code))
	}
	if code, _ := alterGroup(t, tb, "g1", true, groupOp(set, "share.heartbeat.interval.ms", "6000")); code != 0 {
		t.Fatalf("validate only: %v", kerr.ErrorForCode(code))
	}

	cfgs, _ = groupConfigs(t, tb, "g1")
	st = cfgs["consumer.session.timeout.ms"]
	if derefOr(st.Value) != "100000" || st.Source != kmsg.ConfigSourceGroupConfig || len(st.ConfigSynonyms) != 2 {
		t.Fatalf("after set: %+v", st)
	}
	if c := cfgs["share.heartbeat.interval.ms"]; c.Source != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("validate only stored share.heartbeat.interval.ms: %+v", c)
	}
	if got := tb.Broker.GroupConfigs("g1"); len(got) != 4 {
		t.Fatalf("stored group configs %v", got)
	}

	// The legacy AlterConfigs replaces the group's set.
	req := kmsg.NewPtrAlterConfigsRequest()
	rr := kmsg.NewAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "g1"
	c := kmsg.NewAlterConfigsRequestResourceConfig()
	c.Name, c.Value = "share.record.lock.duration.ms", kmsg.StringPtr("20000")
	rr.Configs = append(rr.Configs, c)
	req.Resources = append(req.Resources, rr)
	if resp, err := req.RequestWith(adminCtx(t), tb.Client(t)); err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("legacy alter: %v %+v", err, resp)
	}

	tb.Restart(t)
	if got := tb.Broker.GroupConfigs("g1"); len(got) != 1 || got["share.record.lock.duration.ms"] != "20000" {
		t.Fatalf("after restart: %v", got)
	}
	cfgs, _ = groupConfigs(t, tb, "g1")
	if c := cfgs["share.record.lock.duration.ms"]; derefOr(c.Value) != "20000" || c.Source != kmsg.ConfigSourceGroupConfig {
		t.Fatalf("after restart: %+v", c)
	}
	if _, ec := groupConfigs(t, tb, ""); ec != kerr.InvalidRequest.Code {
		t.Fatalf("describe of an empty group name: %v", kerr.ErrorForCode(ec))
	}
}

// TestGroupConfigLongNameRefused: a group id or value longer than the
// metadata log's string limit (Kafka's, 32767 bytes) is refused with
// INVALID_REQUEST / INVALID_CONFIG and never reaches the log, which
// would otherwise fail to read back at the next start.
func TestGroupConfigLongNameRefused(t *testing.T) {
	tb := testbroker.Start(t)
	long := strings.Repeat("g", 40000)
	if code, _ := alterGroup(t, tb, long, false, groupOp(kmsg.IncrementalAlterConfigOpSet, "consumer.session.timeout.ms", "50000")); code != kerr.InvalidRequest.Code {
		t.Fatalf("40000-byte group id: %v", kerr.ErrorForCode(code))
	}
	if code, _ := alterGroup(t, tb, "g", false, groupOp(kmsg.IncrementalAlterConfigOpSet, "errors.deadletterqueue.topic.name", long)); code != kerr.InvalidConfig.Code {
		t.Fatalf("40000-byte value: %v", kerr.ErrorForCode(code))
	}
	tb.Restart(t)
	if got := tb.Broker.GroupConfigs("g"); len(got) != 0 {
		t.Fatalf("stored %v", got)
	}
}
