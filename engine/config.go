package engine

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-broker/sluice/storage"
)

// Config is the broker's static configuration. Zero values are not
// meaningful; start from DefaultConfig.
type Config struct {
	NodeID    int32
	Listen    string // host:port the listener binds
	Advertise string // host:port clients are told to connect to
	DataDir   string
	ClusterID string // generated and stored in meta.properties when empty

	NumPartitions         int32 // num.partitions for auto-created topics
	AutoCreateTopics      bool  // auto.create.topics.enable
	DeleteTopicEnable     bool  // delete.topic.enable
	MessageMaxBytes       int32 // message.max.bytes (broker default of max.message.bytes)
	SocketRequestMaxBytes int32 // socket.request.max.bytes
	ConnectionsMaxIdle    time.Duration

	// Log holds the broker-wide defaults of the topic-level log configs
	// (log.segment.bytes, log.retention.ms, …).
	Log storage.Config
	// CompressionType is the broker default of compression.type.
	CompressionType string
	// RetentionCheckInterval is log.retention.check.interval.ms.
	RetentionCheckInterval time.Duration

	GroupInitialRebalanceDelay time.Duration // group.initial.rebalance.delay.ms
	GroupMinSessionTimeout     time.Duration // group.min.session.timeout.ms
	GroupMaxSessionTimeout     time.Duration // group.max.session.timeout.ms
	GroupMaxSize               int32         // group.max.size
	OffsetsTopicPartitions     int32         // offsets.topic.num.partitions
	OffsetsTopicSegmentBytes   int64         // offsets.topic.segment.bytes
	OffsetsRetention           time.Duration // offsets.retention.minutes

	MaxIncrementalFetchSessions int // max.incremental.fetch.session.cache.slots
}

// DefaultConfig returns the embedded defaults that `sluice serve` runs with.
func DefaultConfig() Config {
	return Config{
		NodeID:                      1,
		Listen:                      "localhost:9092",
		DataDir:                     "./data",
		NumPartitions:               1,
		AutoCreateTopics:            true,
		DeleteTopicEnable:           true,
		MessageMaxBytes:             1048588,
		SocketRequestMaxBytes:       100 << 20,
		ConnectionsMaxIdle:          10 * time.Minute,
		Log:                         storage.DefaultConfig(),
		CompressionType:             "producer",
		RetentionCheckInterval:      5 * time.Minute,
		GroupInitialRebalanceDelay:  3 * time.Second,
		GroupMinSessionTimeout:      6 * time.Second,
		GroupMaxSessionTimeout:      30 * time.Minute,
		GroupMaxSize:                math.MaxInt32,
		OffsetsTopicPartitions:      50,
		OffsetsTopicSegmentBytes:    100 << 20,
		OffsetsRetention:            7 * 24 * time.Hour,
		MaxIncrementalFetchSessions: 1000,
	}
}

// AdvertisedHostPort splits the address clients are told to use.
func (c *Config) AdvertisedHostPort() (string, int32, error) {
	addr := c.Advertise
	if addr == "" {
		addr = c.Listen
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("advertised address %q: %w", addr, err)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return "", 0, fmt.Errorf("advertised address %q: bad port", addr)
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "localhost"
	}
	return host, int32(p), nil
}

// brokerKey is one server.properties key: how to apply its value.
type brokerKey struct {
	name  string
	apply func(c *Config, v string) error
}

// ApplyProperties reads a Kafka-style server.properties into c. Unknown keys
// are returned (for the caller to warn about); a bad value is an error that
// names its key and line.
func (c *Config) ApplyProperties(r io.Reader) (unknown []string, err error) {
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		key, val, ok := splitProperty(sc.Text())
		if !ok {
			continue
		}
		k := brokerKeys[key]
		if k == nil {
			unknown = append(unknown, key)
			continue
		}
		if err := k.apply(c, val); err != nil {
			return unknown, fmt.Errorf("config line %d: %s=%q: %w", line, key, val, err)
		}
	}
	return unknown, sc.Err()
}

// splitProperty parses "key=value" or "key: value", skipping comments.
func splitProperty(s string) (key, val string, ok bool) {
	s = strings.TrimSpace(s)
	if s == "" || s[0] == '#' || s[0] == '!' {
		return "", "", false
	}
	i := strings.IndexAny(s, "=:")
	if i < 0 {
		return s, "", true
	}
	return strings.TrimSpace(s[:i]), strings.TrimSpace(s[i+1:]), true
}

var brokerKeys = map[string]*brokerKey{}

func init() {
	for _, k := range []brokerKey{
		{"node.id", intKey(func(c *Config, v int64) { c.NodeID = int32(v) }, 0, math.MaxInt32)},
		{"broker.id", intKey(func(c *Config, v int64) { c.NodeID = int32(v) }, 0, math.MaxInt32)},
		{"listeners", func(c *Config, v string) error { return setListener(&c.Listen, v) }},
		{"advertised.listeners", func(c *Config, v string) error { return setListener(&c.Advertise, v) }},
		{"log.dirs", func(c *Config, v string) error { return setDir(c, v) }},
		{"log.dir", func(c *Config, v string) error { return setDir(c, v) }},
		{"num.partitions", intKey(func(c *Config, v int64) { c.NumPartitions = int32(v) }, 1, math.MaxInt32)},
		{"auto.create.topics.enable", boolKey(func(c *Config, v bool) { c.AutoCreateTopics = v })},
		{"delete.topic.enable", boolKey(func(c *Config, v bool) { c.DeleteTopicEnable = v })},
		{"log.segment.bytes", intKey(func(c *Config, v int64) { c.Log.SegmentBytes = v }, 14, math.MaxInt32)},
		{"log.roll.ms", intKey(func(c *Config, v int64) { c.Log.SegmentMs = v }, 1, math.MaxInt64)},
		{"log.roll.hours", intKey(func(c *Config, v int64) { c.Log.SegmentMs = v * 3600_000 }, 1, math.MaxInt32)},
		{"log.index.size.max.bytes", intKey(func(c *Config, v int64) { c.Log.SegmentIndexBytes = int32(v) }, 4, math.MaxInt32)},
		{"log.index.interval.bytes", intKey(func(c *Config, v int64) { c.Log.IndexIntervalBytes = int32(v) }, 0, math.MaxInt32)},
		{"log.retention.ms", intKey(func(c *Config, v int64) { c.Log.RetentionMs = v }, -1, math.MaxInt64)},
		{"log.retention.minutes", intKey(func(c *Config, v int64) { c.Log.RetentionMs = v * 60_000 }, -1, math.MaxInt32)},
		{"log.retention.hours", intKey(func(c *Config, v int64) { c.Log.RetentionMs = v * 3600_000 }, -1, math.MaxInt32)},
		{"log.retention.bytes", intKey(func(c *Config, v int64) { c.Log.RetentionBytes = v }, -1, math.MaxInt64)},
		{"log.retention.check.interval.ms", intKey(func(c *Config, v int64) { c.RetentionCheckInterval = time.Duration(v) * time.Millisecond }, 1, math.MaxInt64)},
		{"log.flush.interval.messages", intKey(func(c *Config, v int64) { c.Log.FlushMessages = v }, 1, math.MaxInt64)},
		{"log.flush.interval.ms", intKey(func(c *Config, v int64) { c.Log.FlushMs = v }, 0, math.MaxInt64)},
		{"log.segment.delete.delay.ms", intKey(func(c *Config, v int64) { c.Log.FileDeleteDelayMs = v }, 0, math.MaxInt64)},
		{"log.message.timestamp.type", func(c *Config, v string) error { return setTimestampType(&c.Log, v) }},
		{"log.cleanup.policy", func(c *Config, v string) error { return setCleanupPolicy(&c.Log, v) }},
		{"compression.type", func(c *Config, v string) error { return setCompression(&c.CompressionType, v) }},
		{"message.max.bytes", intKey(func(c *Config, v int64) { c.MessageMaxBytes = int32(v); c.Log.MaxMessageBytes = int32(v) }, 0, math.MaxInt32)},
		{"socket.request.max.bytes", intKey(func(c *Config, v int64) { c.SocketRequestMaxBytes = int32(v) }, 1, math.MaxInt32)},
		{"connections.max.idle.ms", intKey(func(c *Config, v int64) { c.ConnectionsMaxIdle = time.Duration(v) * time.Millisecond }, 1, math.MaxInt64)},
		{"group.initial.rebalance.delay.ms", intKey(func(c *Config, v int64) { c.GroupInitialRebalanceDelay = time.Duration(v) * time.Millisecond }, 0, math.MaxInt32)},
		{"group.min.session.timeout.ms", intKey(func(c *Config, v int64) { c.GroupMinSessionTimeout = time.Duration(v) * time.Millisecond }, 0, math.MaxInt32)},
		{"group.max.session.timeout.ms", intKey(func(c *Config, v int64) { c.GroupMaxSessionTimeout = time.Duration(v) * time.Millisecond }, 0, math.MaxInt32)},
		{"group.max.size", intKey(func(c *Config, v int64) { c.GroupMaxSize = int32(v) }, 1, math.MaxInt32)},
		{"offsets.topic.num.partitions", intKey(func(c *Config, v int64) { c.OffsetsTopicPartitions = int32(v) }, 1, 10000)},
		{"offsets.topic.segment.bytes", intKey(func(c *Config, v int64) { c.OffsetsTopicSegmentBytes = v }, 1, math.MaxInt32)},
		{"offsets.retention.minutes", intKey(func(c *Config, v int64) { c.OffsetsRetention = time.Duration(v) * time.Minute }, 1, math.MaxInt32)},
		{"max.incremental.fetch.session.cache.slots", intKey(func(c *Config, v int64) { c.MaxIncrementalFetchSessions = int(v) }, 0, math.MaxInt32)},
		// Accepted for compatibility with stock Kafka files; single-node
		// Sluice has nothing to tune with them.
		{"process.roles", ignoreKey}, {"controller.quorum.voters", ignoreKey},
		{"controller.quorum.bootstrap.servers", ignoreKey}, {"controller.listener.names", ignoreKey},
		{"inter.broker.listener.name", ignoreKey}, {"listener.security.protocol.map", ignoreKey},
		{"num.network.threads", ignoreKey}, {"num.io.threads", ignoreKey},
		{"socket.send.buffer.bytes", ignoreKey}, {"socket.receive.buffer.bytes", ignoreKey},
		{"num.recovery.threads.per.data.dir", ignoreKey},
		{"offsets.topic.replication.factor", ignoreKey}, {"transaction.state.log.replication.factor", ignoreKey},
		{"transaction.state.log.min.isr", ignoreKey}, {"default.replication.factor", ignoreKey},
		{"min.insync.replicas", ignoreKey}, {"share.coordinator.state.topic.replication.factor", ignoreKey},
		{"share.coordinator.state.topic.min.isr", ignoreKey},
	} {
		k := k
		brokerKeys[k.name] = &k
	}
}

func ignoreKey(*Config, string) error { return nil }

func intKey(set func(*Config, int64), min, max int64) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("not an integer")
		}
		if n < min || n > max {
			return fmt.Errorf("out of range [%d, %d]", min, max)
		}
		set(c, n)
		return nil
	}
}

func boolKey(set func(*Config, bool)) func(*Config, string) error {
	return func(c *Config, v string) error {
		switch strings.ToLower(v) {
		case "true":
			set(c, true)
		case "false":
			set(c, false)
		default:
			return fmt.Errorf("not a boolean (true or false)")
		}
		return nil
	}
}

// setListener takes the first PLAINTEXT listener of a Kafka listener list
// ("PLAINTEXT://host:port,CONTROLLER://…"); a bare host:port is accepted.
func setListener(dst *string, v string) error {
	for _, l := range strings.Split(v, ",") {
		l = strings.TrimSpace(l)
		name, addr, found := strings.Cut(l, "://")
		if !found {
			addr, name = l, "PLAINTEXT"
		}
		if name != "PLAINTEXT" {
			continue
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return fmt.Errorf("bad listener address: %w", err)
		}
		*dst = addr
		return nil
	}
	return fmt.Errorf("no PLAINTEXT listener (only plaintext is served)")
}

func setDir(c *Config, v string) error {
	dirs := strings.Split(v, ",")
	if len(dirs) > 1 {
		return fmt.Errorf("one log dir is supported, got %d", len(dirs))
	}
	if strings.TrimSpace(dirs[0]) == "" {
		return fmt.Errorf("empty")
	}
	c.DataDir = strings.TrimSpace(dirs[0])
	return nil
}
