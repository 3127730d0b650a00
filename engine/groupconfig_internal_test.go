package engine

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestGroupKeyTable: every group key's broker key and bounds are rows of
// the config table (Int rows of the group protocols for the bounds), and
// every default passes its own checks against the default broker config.
func TestGroupKeyTable(t *testing.T) {
	def := DefaultConfig()
	for name, k := range groupKeys {
		for _, b := range []string{k.broker, k.lo, k.hi} {
			if _, ok := brokerKeys[b]; b != "" && !ok {
				t.Errorf("%s: broker key %s is not in the table", name, b)
			}
		}
		for _, b := range []string{k.lo, k.hi} {
			if b != "" {
				def.groupBrokerInt(b) // panics for a key that is not an Int slot
			}
		}
		v := k.def
		if k.broker != "" {
			v = brokerKeys[k.broker].key.value(&def)
		}
		if name == "streams.assignor.name" {
			continue // no default: the broker's first assignor
		}
		if err := def.validateGroupConfig(name, v); err != nil {
			t.Errorf("%s: default %q refused: %v", name, v, err)
		}
	}
}

// TestGroupConfigValues: values Kafka 4.4's GroupConfig.validate accepts
// and refuses (checked against it with the broker defaults).
func TestGroupConfigValues(t *testing.T) {
	def := DefaultConfig()
	for _, tc := range []struct {
		name, value string
		ok          bool
	}{
		{"consumer.session.timeout.ms", "44999", false},
		{"consumer.session.timeout.ms", "60001", false},
		{"consumer.session.timeout.ms", " 50000", true},
		{"consumer.heartbeat.interval.ms", "15001", false},
		{"consumer.assignment.interval.ms", "15001", false},
		{"share.record.lock.duration.ms", "14999", false},
		{"share.delivery.count.limit", "11", false},
		{"share.partition.max.record.locks", "99", false},
		{"streams.num.standby.replicas", "3", false},
		{"streams.task.offset.interval.ms", "100", false},
		{"streams.num.warmup.replicas", "21", false},
		{"consumer.assignor.offload.enable", "false", true},
		{"share.auto.offset.reset", "LATEST", false},
		{"share.auto.offset.reset", "by_duration:pt1h", true},
		{"share.auto.offset.reset", "BY_DURATION:PT1H", false},
		{"share.auto.offset.reset", "by_duration:PT-1H", false},
		{"share.auto.offset.reset", "by_duration:P1W", false},
		{"share.auto.offset.reset", "by_duration:PT1.5S", true},
		{"share.auto.offset.reset", "by_duration:P1DT", false},
		{"share.auto.offset.reset", "by_duration:PT0S", true},
		{"share.isolation.level", "READ_COMMITTED", false},
		{"share.renew.acknowledge.enable", "TRUE", true},
		{"streams.rack.aware.assignment.tags", "a,b", true},
		{"streams.assignor.name", "STICKY", false},
		{"errors.deadletterqueue.topic.name", "__x", false},
		{"unknown.key", "1", false},
	} {
		err := def.validateGroupConfig(tc.name, tc.value)
		if (err == nil) != tc.ok {
			t.Errorf("%s=%q: %v, want ok=%v", tc.name, tc.value, err, tc.ok)
		}
		if err != nil && ErrorCode(err) != kerr.InvalidConfig.Code {
			t.Errorf("%s=%q: code %d, want INVALID_CONFIG", tc.name, tc.value, ErrorCode(err))
		}
	}
}
