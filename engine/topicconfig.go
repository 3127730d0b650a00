package engine

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/sluice-broker/sluice/storage"
)

// Config value types as DescribeConfigs v3+ reports them.
const (
	cfgBoolean int8 = 1
	cfgString  int8 = 2
	cfgInt     int8 = 3
	cfgLong    int8 = 5
	cfgDouble  int8 = 6
	cfgList    int8 = 7
)

// topicKey is one topic-level config: its Kafka name, the broker key that
// supplies its default, how to check a value and how it lands in the log's
// settings.
type topicKey struct {
	name       string
	brokerName string // synonym reported by DescribeConfigs; "" if none
	typ        int8
	def        func(c *Config) string
	check      func(v string) error
	apply      func(s *TopicSettings, v string) // v already checked
	doc        string
}

// TopicSettings is a topic's effective configuration: storage settings plus
// what the engine itself enforces on produce.
type TopicSettings struct {
	Log             storage.Config
	CompressionType string // producer, uncompressed, gzip, snappy, lz4, zstd
	MaxMessageBytes int32
}

var topicKeys = map[string]*topicKey{}

// topicKeyNames is sorted, so DescribeConfigs answers in a stable order.
var topicKeyNames []string

func init() {
	for _, k := range []topicKey{
		{"cleanup.policy", "log.cleanup.policy", cfgList, func(c *Config) string { return cleanupString(c.Log) }, checkCleanup,
			func(s *TopicSettings, v string) { s.Log.Compact = strings.Contains(v, "compact") }, "delete and/or compact"},
		{"compression.type", "compression.type", cfgString, func(c *Config) string { return c.CompressionType }, checkCompression,
			func(s *TopicSettings, v string) { s.CompressionType = v }, "codec batches are stored with; producer keeps what was sent"},
		{"delete.retention.ms", "log.cleaner.delete.retention.ms", cfgLong, func(c *Config) string { return itoa(c.Log.DeleteRetentionMs) }, checkLong(0, math.MaxInt64),
			func(s *TopicSettings, v string) { s.Log.DeleteRetentionMs = atoi(v) }, "how long tombstones are kept in compacted topics"},
		{"file.delete.delay.ms", "log.segment.delete.delay.ms", cfgLong, func(c *Config) string { return itoa(c.Log.FileDeleteDelayMs) }, checkLong(0, math.MaxInt64),
			func(s *TopicSettings, v string) { s.Log.FileDeleteDelayMs = atoi(v) }, "delay before a deleted segment's file is removed"},
		{"flush.messages", "log.flush.interval.messages", cfgLong, func(c *Config) string { return itoa(c.Log.FlushMessages) }, checkLong(1, math.MaxInt64),
			func(s *TopicSettings, v string) { s.Log.FlushMessages = atoi(v) }, "fsync after this many messages"},
		{"flush.ms", "log.flush.interval.ms", cfgLong, func(c *Config) string { return itoa(c.Log.FlushMs) }, checkLong(0, math.MaxInt64),
			func(s *TopicSettings, v string) { s.Log.FlushMs = atoi(v) }, "fsync at least this often"},
		{"index.interval.bytes", "log.index.interval.bytes", cfgInt, func(c *Config) string { return itoa(int64(c.Log.IndexIntervalBytes)) }, checkLong(0, math.MaxInt32),
			func(s *TopicSettings, v string) { s.Log.IndexIntervalBytes = int32(atoi(v)) }, "bytes of log between offset index entries"},
		{"max.compaction.lag.ms", "log.cleaner.max.compaction.lag.ms", cfgLong, constant(itoa(math.MaxInt64)), checkLong(1, math.MaxInt64), nil, "longest time a message stays uncompacted"},
		{"max.message.bytes", "message.max.bytes", cfgInt, func(c *Config) string { return itoa(int64(c.MessageMaxBytes)) }, checkLong(0, math.MaxInt32),
			func(s *TopicSettings, v string) {
				s.MaxMessageBytes = int32(atoi(v))
				s.Log.MaxMessageBytes = int32(atoi(v))
			}, "largest record batch accepted"},
		{"message.timestamp.type", "log.message.timestamp.type", cfgString, func(c *Config) string { return timestampTypeString(c.Log.TimestampType) }, checkTimestampType,
			func(s *TopicSettings, v string) { _ = setTimestampType(&s.Log, v) }, "CreateTime or LogAppendTime"},
		{"message.timestamp.before.max.ms", "log.message.timestamp.before.max.ms", cfgLong, constant(itoa(math.MaxInt64)), checkLong(0, math.MaxInt64), nil, "how far in the past a CreateTime may be"},
		{"message.timestamp.after.max.ms", "log.message.timestamp.after.max.ms", cfgLong, constant("3600000"), checkLong(0, math.MaxInt64), nil, "how far in the future a CreateTime may be"},
		{"min.cleanable.dirty.ratio", "log.cleaner.min.cleanable.ratio", cfgDouble, func(c *Config) string { return strconv.FormatFloat(c.Log.MinCleanableDirtyRatio, 'g', -1, 64) }, checkDouble,
			func(s *TopicSettings, v string) { s.Log.MinCleanableDirtyRatio, _ = strconv.ParseFloat(v, 64) }, "dirty ratio that triggers compaction"},
		{"min.compaction.lag.ms", "log.cleaner.min.compaction.lag.ms", cfgLong, func(c *Config) string { return itoa(c.Log.MinCompactionLagMs) }, checkLong(0, math.MaxInt64),
			func(s *TopicSettings, v string) { s.Log.MinCompactionLagMs = atoi(v) }, "shortest time a message stays uncompacted"},
		{"min.insync.replicas", "min.insync.replicas", cfgInt, constant("1"), checkLong(1, math.MaxInt32), nil, "replicas that must acknowledge an acks=all write"},
		{"preallocate", "log.preallocate", cfgBoolean, constant("false"), checkBool, nil, "preallocate segment files"},
		{"retention.bytes", "log.retention.bytes", cfgLong, func(c *Config) string { return itoa(c.Log.RetentionBytes) }, checkLong(-1, math.MaxInt64),
			func(s *TopicSettings, v string) { s.Log.RetentionBytes = atoi(v) }, "size a partition is trimmed to; -1 unlimited"},
		{"retention.ms", "log.retention.ms", cfgLong, func(c *Config) string { return itoa(c.Log.RetentionMs) }, checkLong(-1, math.MaxInt64),
			func(s *TopicSettings, v string) { s.Log.RetentionMs = atoi(v) }, "age after which segments are deleted; -1 unlimited"},
		{"segment.bytes", "log.segment.bytes", cfgInt, func(c *Config) string { return itoa(c.Log.SegmentBytes) }, checkLong(14, math.MaxInt32),
			func(s *TopicSettings, v string) { s.Log.SegmentBytes = atoi(v) }, "segment file size that triggers a roll"},
		{"segment.index.bytes", "log.index.size.max.bytes", cfgInt, func(c *Config) string { return itoa(int64(c.Log.SegmentIndexBytes)) }, checkLong(4, math.MaxInt32),
			func(s *TopicSettings, v string) { s.Log.SegmentIndexBytes = int32(atoi(v)) }, "preallocated size of each index file"},
		{"segment.jitter.ms", "log.roll.jitter.ms", cfgLong, constant("0"), checkLong(0, math.MaxInt64), nil, "random jitter subtracted from segment.ms"},
		{"segment.ms", "log.roll.ms", cfgLong, func(c *Config) string { return itoa(c.Log.SegmentMs) }, checkLong(1, math.MaxInt64),
			func(s *TopicSettings, v string) { s.Log.SegmentMs = atoi(v) }, "age that triggers a segment roll"},
		{"unclean.leader.election.enable", "unclean.leader.election.enable", cfgBoolean, constant("false"), checkBool, nil, "allow out-of-sync replicas to lead"},
	} {
		k := k
		topicKeys[k.name] = &k
		topicKeyNames = append(topicKeyNames, k.name)
	}
	sort.Strings(topicKeyNames)
}

// ValidateTopicConfig checks one topic-level key and value as CreateTopics
// and AlterConfigs must, returning an error that names the key.
func ValidateTopicConfig(name, value string) error {
	k := topicKeys[name]
	if k == nil {
		return fmt.Errorf("unknown topic config %q", name)
	}
	if err := k.check(value); err != nil {
		return fmt.Errorf("invalid value %q for %s: %w", value, name, err)
	}
	return nil
}

// ResolveTopic computes a topic's effective settings: the broker defaults
// overlaid with the topic's own overrides (already validated).
func (c *Config) ResolveTopic(overrides map[string]string) TopicSettings {
	s := TopicSettings{Log: c.Log, CompressionType: c.CompressionType, MaxMessageBytes: c.MessageMaxBytes}
	s.Log.MaxMessageBytes = c.MessageMaxBytes
	for name, v := range overrides {
		if k := topicKeys[name]; k != nil && k.apply != nil && k.check(v) == nil {
			k.apply(&s, v)
		}
	}
	// cleanup.policy=compact alone never deletes by age or size in Kafka
	// (__consumer_offsets relies on it); storage only knows retention.
	if p, ok := overrides["cleanup.policy"]; ok && !strings.Contains(p, "delete") {
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
	return k.def(c), true
}

func constant(v string) func(*Config) string { return func(*Config) string { return v } }
func itoa(v int64) string                    { return strconv.FormatInt(v, 10) }
func atoi(v string) int64                    { n, _ := strconv.ParseInt(v, 10, 64); return n }

func checkLong(min, max int64) func(string) error {
	return func(v string) error {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return fmt.Errorf("not an integer")
		}
		if n < min || n > max {
			return fmt.Errorf("out of range [%d, %d]", min, max)
		}
		return nil
	}
}

func checkBool(v string) error {
	if v != "true" && v != "false" {
		return fmt.Errorf("not a boolean")
	}
	return nil
}

func checkDouble(v string) error {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 0 || f > 1 {
		return fmt.Errorf("not a number in [0, 1]")
	}
	return nil
}

func checkCleanup(v string) error {
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "delete" && p != "compact" {
			return fmt.Errorf("must be delete, compact or both")
		}
	}
	return nil
}

func cleanupString(l storage.Config) string {
	if l.Compact {
		return "compact"
	}
	return "delete"
}

func setCleanupPolicy(l *storage.Config, v string) error {
	if err := checkCleanup(v); err != nil {
		return err
	}
	l.Compact = strings.Contains(v, "compact")
	return nil
}

var compressionNames = []string{"producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"}

func checkCompression(v string) error {
	for _, n := range compressionNames {
		if v == n {
			return nil
		}
	}
	return fmt.Errorf("must be one of %s", strings.Join(compressionNames, ", "))
}

func setCompression(dst *string, v string) error {
	if err := checkCompression(v); err != nil {
		return err
	}
	*dst = v
	return nil
}

func checkTimestampType(v string) error {
	if v != "CreateTime" && v != "LogAppendTime" {
		return fmt.Errorf("must be CreateTime or LogAppendTime")
	}
	return nil
}

func setTimestampType(l *storage.Config, v string) error {
	if err := checkTimestampType(v); err != nil {
		return err
	}
	l.TimestampType = storage.CreateTime
	if v == "LogAppendTime" {
		l.TimestampType = storage.LogAppendTime
	}
	return nil
}

func timestampTypeString(t storage.TimestampType) string {
	if t == storage.LogAppendTime {
		return "LogAppendTime"
	}
	return "CreateTime"
}
