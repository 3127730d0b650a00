package engine

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-broker/sluice/metadata"
)

// TestConfigValidator: the controller's hook answers with the codes and
// messages the engine's checks give, per resource type.
func TestConfigValidator(t *testing.T) {
	validate := ConfigValidator(DefaultConfig())
	for _, tc := range []struct {
		res  metadata.ConfigResource
		kv   map[string]string
		want *kerr.Error
	}{
		{metadata.ConfigResource{Type: metadata.ResourceTopic, Name: "t"}, map[string]string{"retention.ms": "1000"}, nil},
		{metadata.ConfigResource{Type: metadata.ResourceTopic, Name: "t"}, map[string]string{"retention.ms": "soon"}, kerr.InvalidConfig},
		{metadata.ConfigResource{Type: metadata.ResourceBroker}, map[string]string{"log.retention.hours": "1"}, nil},
		{metadata.ConfigResource{Type: metadata.ResourceBroker}, map[string]string{"node.id": "2"}, kerr.InvalidRequest},
		{metadata.ConfigResource{Type: metadata.ResourceBroker, Name: "1"}, map[string]string{"broker.id": "2"}, kerr.InvalidRequest},
		{metadata.ConfigResource{Type: metadata.ResourceBroker}, map[string]string{"nope": "2"}, kerr.InvalidConfig},
		{metadata.ConfigResource{Type: metadata.ResourceGroup, Name: "g"}, map[string]string{"share.session.timeout.ms": "50000"}, nil},
		{metadata.ConfigResource{Type: metadata.ResourceGroup, Name: "g"}, map[string]string{"share.session.timeout.ms": "5"}, kerr.InvalidConfig},
	} {
		got, msg := validate(tc.res, tc.kv)
		if got != tc.want || (got != nil) != (msg != "") {
			t.Errorf("%+v %v: %v %q, want %v", tc.res, tc.kv, got, msg, tc.want)
		}
	}
}

// TestApplyDynamicSkipsReadOnly: whatever the image holds, a key that
// cannot change at run time keeps its static value; a value the table
// refuses keeps the one below and is reported; the most specific
// spelling of a level wins.
func TestApplyDynamicSkipsReadOnly(t *testing.T) {
	c := DefaultConfig()
	err := c.applyDynamic(map[string]string{"node.id": "7", "num.partitions": "9", "log.retention.hours": "2",
		"log.retention.minutes": "30", "message.max.bytes": "lots", "log.segment.bytes": "4096"})
	if err == nil || ErrorCode(err) != kerr.InvalidConfig.Code {
		t.Fatalf("a refused value is not reported: %v", err)
	}
	if c.NodeID != 1 || c.NumPartitions != 1 || c.Log.RetentionMs != 30*60_000 || c.MessageMaxBytes != 1048588 || c.Log.SegmentBytes != 4096 {
		t.Fatalf("node %d partitions %d retention %d max %d segment %d", c.NodeID, c.NumPartitions, c.Log.RetentionMs, c.MessageMaxBytes, c.Log.SegmentBytes)
	}
}
