package engine

// Topic-level configs. Each is the topic column of a row of the config
// table (configkeys.go): the broker key of that row provides the topic's
// default, and its type, bounds and valid values check the topic's
// overrides. A topic's effective settings are the broker's Config with the
// overrides applied as if they were that broker key's values.

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/sluice-broker/sluice/metadata"
	"github.com/sluice-broker/sluice/storage"
)

// TopicSettings is a topic's effective configuration: storage settings plus
// what the engine itself enforces on produce.
type TopicSettings struct {
	Log             storage.Config
	CompressionType string // producer, uncompressed, gzip, snappy, lz4, zstd
	MaxMessageBytes int32
	// MinInsyncReplicas is min.insync.replicas: the ISR an acks=all
	// append needs.
	MinInsyncReplicas int32

	// base is the broker config the settings were resolved from, so that
	// a change of the dynamic broker configs resolves them again.
	base *Config
}

// resolvedFrom reports whether s was resolved from the broker config c.
func (s *TopicSettings) resolvedFrom(c *Config) bool { return s.base == c }

// topicKeys indexes the table's rows by their topic-level name;
// topicKeyNames is sorted, so DescribeConfigs answers in a stable order.
var topicKeys, topicKeyNames = indexTopicKeys()

func indexTopicKeys() (map[string]*configKey, []string) {
	byName := map[string]*configKey{}
	var names []string
	for i := range configKeys {
		if k := &configKeys[i]; k.topic != "" {
			byName[k.topic] = k
			names = append(names, k.topic)
		}
	}
	sort.Strings(names)
	return byName, names
}

// ValidateTopicConfig checks one topic-level key and value as CreateTopics
// and AlterConfigs must, returning an error that names the key.
func ValidateTopicConfig(name, value string) error {
	k := topicKeys[name]
	if k == nil {
		return fmt.Errorf("unknown topic config %q", name)
	}
	if len(value) > metadata.MaxStringLen {
		return fmt.Errorf("value of %s longer than %d bytes", name, metadata.MaxStringLen)
	}
	if err := k.check(value); err != nil {
		return fmt.Errorf("invalid value %q for %s: %w", value, name, err)
	}
	return nil
}

// ResolveTopic computes a topic's effective settings: the broker defaults
// overlaid with the topic's own overrides (already validated; one that is
// not is skipped). A new topic key whose Config field lives outside Log
// adds its TopicSettings field here.
func (c *Config) ResolveTopic(overrides map[string]string) TopicSettings {
	t := *c
	t.Log.MaxMessageBytes = t.MessageMaxBytes
	for name, v := range overrides {
		if k := topicKeys[name]; k != nil {
			_ = k.apply(&t, v)
		}
	}
	s := TopicSettings{Log: t.Log, CompressionType: t.CompressionType, MaxMessageBytes: t.MessageMaxBytes,
		MinInsyncReplicas: t.MinInsyncReplicas, base: c}
	// cleanup.policy=compact alone never deletes by age or size in Kafka
	// (__consumer_offsets relies on it), whether the topic or the broker
	// default says so; storage only knows retention.
	if !strings.Contains(t.CleanupPolicy, "delete") {
		s.Log.RetentionMs, s.Log.RetentionBytes = -1, -1
	}
	return s
}

// DefaultTopicValue is the value a topic gets for name when it has no
// override (the broker-level setting).
func (c *Config) DefaultTopicValue(name string) (string, bool) {
	k := topicKeys[name]
	if k == nil {
		return "", false
	}
	return k.value(c), true
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
func atoi(v string) int64 { n, _ := strconv.ParseInt(v, 10, 64); return n }

func setCleanupPolicy(c *Config, v string) error {
	c.CleanupPolicy, c.Log.Compact = v, strings.Contains(v, "compact")
	return nil
}

var compressionNames = []string{"producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"}

func setTimestampType(c *Config, v string) error {
	c.Log.TimestampType = storage.CreateTime
	if v == "LogAppendTime" {
		c.Log.TimestampType = storage.LogAppendTime
	}
	return nil
}

func timestampTypeString(t storage.TimestampType) string {
	if t == storage.LogAppendTime {
		return "LogAppendTime"
	}
	return "CreateTime"
}
