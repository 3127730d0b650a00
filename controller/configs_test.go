package controller

import (
	"maps"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/metadata"
)

// TestConfigRecords: the controller's decision on a forwarded config
// change, per resource type: the resource must be able to have configs,
// only SET and DELETE are taken, the validator sees the configs the
// resource would have (old ones kept, deletions gone) and its refusal is
// answered with its code and message.
func TestConfigRecords(t *testing.T) {
	v := func(s string) *string { return &s }
	img, err := metadata.ApplyAll(metadata.Image{}, []metadata.Record{
		metadata.TopicRecord{Name: "t", TopicID: [16]byte{1}},
		metadata.PartitionRecord{TopicID: [16]byte{1}, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1},
		metadata.ConfigRecord{ResourceType: metadata.ResourceBroker, ResourceName: "", Name: "log.retention.ms", Value: v("1000")},
		metadata.ConfigRecord{ResourceType: metadata.ResourceBroker, ResourceName: "", Name: "log.segment.bytes", Value: v("4096")},
	})
	if err != nil {
		t.Fatal(err)
	}
	var seen map[string]string
	validate := func(res metadata.ConfigResource, kv map[string]string) (*kerr.Error, string) {
		seen = maps.Clone(kv)
		if kv["bad"] != "" {
			return kerr.InvalidRequest, "bad is bad"
		}
		return nil, ""
	}
	op := func(o kmsg.IncrementalAlterConfigOp, name string, value *string) kmsg.IncrementalAlterConfigsRequestResourceConfig {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Op, c.Name, c.Value = o, name, value
		return c
	}
	set, del := kmsg.IncrementalAlterConfigOpSet, kmsg.IncrementalAlterConfigOpDelete
	for _, tc := range []struct {
		what     string
		typ      kmsg.ConfigResourceType
		name     string
		ops      []kmsg.IncrementalAlterConfigsRequestResourceConfig
		wantErr  *kerr.Error
		wantMsg  string
		wantSeen map[string]string
		records  int
	}{
		{"cluster default", kmsg.ConfigResourceTypeBroker, "", []kmsg.IncrementalAlterConfigsRequestResourceConfig{
			op(set, "log.retention.ms", v("5000")), op(del, "log.segment.bytes", nil)},
			nil, "", map[string]string{"log.retention.ms": "5000"}, 2},
		{"one broker", kmsg.ConfigResourceTypeBroker, "2", []kmsg.IncrementalAlterConfigsRequestResourceConfig{
			op(set, "message.max.bytes", v("1000"))}, nil, "", map[string]string{"message.max.bytes": "1000"}, 1},
		{"broker name not an id", kmsg.ConfigResourceTypeBroker, "two", nil, kerr.InvalidRequest, "Node id must be an integer, but it is: two", nil, 0},
		{"group", kmsg.ConfigResourceTypeGroupConfig, "g", []kmsg.IncrementalAlterConfigsRequestResourceConfig{
			op(set, "consumer.session.timeout.ms", v("50000"))}, nil, "", map[string]string{"consumer.session.timeout.ms": "50000"}, 1},
		{"group without a name", kmsg.ConfigResourceTypeGroupConfig, "", nil, kerr.InvalidRequest, "Group name must not be empty", nil, 0},
		{"topic", kmsg.ConfigResourceTypeTopic, "t", []kmsg.IncrementalAlterConfigsRequestResourceConfig{
			op(set, "retention.ms", v("1"))}, nil, "", map[string]string{"retention.ms": "1"}, 1},
		{"unknown topic", kmsg.ConfigResourceTypeTopic, "nope", nil, kerr.UnknownTopicOrPartition, "Topic 'nope' does not exist.", nil, 0},
		{"broker logger", kmsg.ConfigResourceTypeBrokerLogger, "1", nil, kerr.InvalidRequest, "Unsupported resource type", nil, 0},
		{"append", kmsg.ConfigResourceTypeBroker, "", []kmsg.IncrementalAlterConfigsRequestResourceConfig{
			op(kmsg.IncrementalAlterConfigOpAppend, "log.cleanup.policy", v("compact"))}, kerr.InvalidRequest, "the controller takes SET with a value and DELETE only", nil, 0},
		{"validator refuses", kmsg.ConfigResourceTypeBroker, "", []kmsg.IncrementalAlterConfigsRequestResourceConfig{
			op(set, "bad", v("1"))}, kerr.InvalidRequest, "bad is bad", nil, 0},
		{"group id over the log's string limit", kmsg.ConfigResourceTypeGroupConfig, strings.Repeat("g", metadata.MaxStringLen+1), []kmsg.IncrementalAlterConfigsRequestResourceConfig{
			op(set, "consumer.session.timeout.ms", v("50000"))}, kerr.InvalidRequest,
			"record 0 of 1 (ConfigRecord): invalid metadata record: config of 32: a string longer than 32767 bytes", nil, 0},
	} {
		seen = nil
		res := kmsg.NewIncrementalAlterConfigsRequestResource()
		res.ResourceType, res.ResourceName, res.Configs = tc.typ, tc.name, tc.ops
		recs, err, msg := configRecords(img, &res, validate)
		if err != tc.wantErr || msg != tc.wantMsg || len(recs) != tc.records {
			t.Errorf("%s: %v %q, %d records; want %v %q, %d", tc.what, err, msg, len(recs), tc.wantErr, tc.wantMsg, tc.records)
			continue
		}
		if tc.wantSeen != nil && !maps.Equal(seen, tc.wantSeen) {
			t.Errorf("%s: validator saw %v, want %v", tc.what, seen, tc.wantSeen)
		}
		if _, err := metadata.ApplyAll(img, recs); err != nil {
			t.Errorf("%s: records do not apply: %v", tc.what, err)
		}
	}
}

// TestUncleanLeaderElectionLookup: KRaft's precedence for
// unclean.leader.election.enable — topic, this controller's node, the
// cluster-wide default, the static value.
func TestUncleanLeaderElectionLookup(t *testing.T) {
	v := func(s string) *string { return &s }
	topic := func(val string) metadata.Record {
		return metadata.ConfigRecord{ResourceType: metadata.ResourceTopic, ResourceName: "t", Name: UncleanLeaderElectionConfig, Value: v(val)}
	}
	broker := func(name, val string) metadata.Record {
		return metadata.ConfigRecord{ResourceType: metadata.ResourceBroker, ResourceName: name, Name: UncleanLeaderElectionConfig, Value: v(val)}
	}
	base := []metadata.Record{metadata.TopicRecord{Name: "t", TopicID: [16]byte{1}},
		metadata.PartitionRecord{TopicID: [16]byte{1}, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1}}
	for _, tc := range []struct {
		what   string
		static bool
		recs   []metadata.Record
		want   bool
	}{
		{"static off", false, nil, false},
		{"static on", true, nil, true},
		{"cluster default over static", false, []metadata.Record{broker("", "true")}, true},
		{"this node over the cluster default", false, []metadata.Record{broker("", "true"), broker("3", "false")}, false},
		{"another node's value does not count", false, []metadata.Record{broker("2", "true")}, false},
		{"topic over all", true, []metadata.Record{broker("", "true"), broker("3", "true"), topic("false")}, false},
	} {
		img, err := metadata.ApplyAll(metadata.Image{}, append(append([]metadata.Record{}, base...), tc.recs...))
		if err != nil {
			t.Fatal(err)
		}
		cfg := DefaultConfig("")
		cfg.NodeID, cfg.UncleanLeaderElection = 3, tc.static
		if got := New(cfg).uncleanAllowed(img, "t"); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.what, got, tc.want)
		}
	}
}
