package engine

// The configuration table: every key Sluice knows, defined once.
//
// Each row is a server.properties key with its Kafka type, default, bounds
// or valid values, documentation and Kafka's dynamic-update scope, and, when
// the key is the broker-level default of a topic-level key, that topic key's
// name (retention.ms ← log.retention.ms). Everything else derives from it:
// DefaultConfig (every row's default applied to a zero Config),
// ApplyProperties, DescribeConfigs for BROKER and TOPIC resources,
// ValidateTopicConfig and ResolveTopic. Adding a key is one row here, plus a
// Config field when Sluice uses the value.

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/replication"
)

// Kafka's config types, as DescribeConfigs v3+ reports them.
const (
	typeBool     = kmsg.ConfigTypeBoolean
	typeString   = kmsg.ConfigTypeString
	typeInt      = kmsg.ConfigTypeInt
	typeLong     = kmsg.ConfigTypeLong
	typeDouble   = kmsg.ConfigTypeDouble
	typeList     = kmsg.ConfigTypeList
	typePassword = kmsg.ConfigTypePassword
)

// scope is whether Kafka lets a broker key change at run time
// (DynamicBrokerConfig), and where. Sluice accepts the same dynamic
// alterations (dynconfig.go), but for the keys marked restartOnly.
type scope int8

const (
	static      scope = iota // read-only in Kafka: server.properties only, a restart changes it
	perBroker                // Kafka: dynamic, per broker
	clusterWide              // Kafka: dynamic, per broker or as a cluster-wide default
)

// use is what Sluice does with a key's value.
type use int8

const (
	// useConfig: the value is parsed into a Config field and obeyed.
	useConfig use = iota
	// useFixed: Sluice runs with the default only. DescribeConfigs reports
	// it and a topic override is checked and kept, but a server.properties
	// line is warned about as unknown.
	useFixed
	// useFixedAccepted: like useFixed, but a server.properties line is
	// accepted and ignored (stock Kafka files set these).
	useFixedAccepted
	// useIgnored: accepted and ignored in server.properties, not described:
	// a single-node Sluice has nothing to tune with it.
	useIgnored
)

// configKey is one row of the table.
type configKey struct {
	name string
	typ  kmsg.ConfigType
	// def is the default, written as in server.properties; "" is Kafka's
	// null (the Config field keeps its zero value).
	def string
	// min and max bound Int, Long and Double values, both inclusive. Both
	// zero means the type's own range (int32 for Int, int64 for Long);
	// otherwise max is set (a test checks max > min).
	min, max int64
	// oneOf lists the valid values of a String, or of each item of a List;
	// nil allows any.
	oneOf []string
	doc   string
	scope scope
	// topic is the topic-level key whose default this key provides; "" if
	// none.
	topic string
	// aliases are other spellings of this key, in precedence order after
	// name (Kafka's: log.retention.ms > minutes > hours).
	aliases []alias
	use     use
	// restartOnly marks a key Kafka changes at run time and Sluice does
	// not (it binds listeners once): a dynamic alteration is refused and
	// DescribeConfigs reports it read-only.
	restartOnly bool
	// topicOnly marks a topic key with no broker key (Kafka's
	// leader.replication.throttled.replicas): the row's name is the topic
	// key's, and it is neither a server.properties key, nor described for
	// brokers, nor a dynamic broker config.
	topicOnly bool
	// field binds a useConfig value to Config: a pointer to an int32,
	// int64, int, bool, string or float64 field, or a millis/minutes
	// duration. Rows whose value needs translation set get and set instead.
	field func(c *Config) any
	get   func(c *Config) string
	set   func(c *Config, v string) error // v already passed the generic checks
}

// alias is another spelling of a key.
type alias struct {
	name string
	// unit is how many of the key's units one of the alias's is
	// (log.retention.hours: 3,600,000 ms); 0 means the same unit.
	unit int64
	// same marks a second name of one setting (broker.id = node.id): both
	// set must agree, and DescribeConfigs reports it beside the key.
	same bool
}

// Duration fields, whose server.properties value counts in a unit.
type (
	millis  struct{ d *time.Duration }
	minutes struct{ d *time.Duration }
)

const (
	maxInt32 = math.MaxInt32
	maxLong  = math.MaxInt64
)

// configKeys is the table, broker keys in the order of Kafka's docs
// sections; lookups go through the indexes below.
var configKeys = append([]configKey{
	// Node identity and listeners.
	{name: "node.id", typ: typeInt, def: "1", min: 0, max: maxInt32, doc: "id of this node",
		aliases: []alias{{name: "broker.id", same: true}}, field: func(c *Config) any { return &c.NodeID }},
	{name: "listeners", typ: typeString, def: "PLAINTEXT://localhost:9092", scope: perBroker, restartOnly: true,
		doc: "listeners: NAME://host:port, each name a security protocol or mapped to one",
		get: listenersString, set: setListeners},
	{name: "advertised.listeners", typ: typeString, scope: perBroker, restartOnly: true, doc: "per listener name, the address clients are told; the listener's own when unset",
		get: advertisedString, set: setAdvertisedListeners},
	{name: "listener.security.protocol.map", typ: typeString, def: "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL", scope: perBroker, restartOnly: true,
		doc: "listener name to security protocol", get: func(c *Config) string { return c.protocolMapRaw }, set: setProtocolMap},
	{name: "log.dirs", typ: typeString, def: "./data", doc: "data directory (one)",
		aliases: []alias{{name: "log.dir"}}, get: func(c *Config) string { return c.DataDir }, set: setDir},

	// Topics.
	{name: "num.partitions", typ: typeInt, def: "1", min: 1, max: maxInt32, doc: "partitions of auto-created topics and of CreateTopics without a count",
		field: func(c *Config) any { return &c.NumPartitions }},
	{name: "default.replication.factor", typ: typeInt, def: "1", min: 1, max: maxInt32,
		doc: "replication factor of new topics; a single node keeps one replica", field: func(c *Config) any { return &c.DefaultReplicationFactor }},
	{name: "min.insync.replicas", typ: typeInt, def: "1", min: 1, max: maxInt32, scope: clusterWide, topic: "min.insync.replicas",
		doc: "replicas that must acknowledge an acks=all write", field: func(c *Config) any { return &c.MinInsyncReplicas }},
	{name: "auto.create.topics.enable", typ: typeBool, def: "true", doc: "create unknown topics asked for in Metadata",
		field: func(c *Config) any { return &c.AutoCreateTopics }},
	{name: "delete.topic.enable", typ: typeBool, def: "true", doc: "allow DeleteTopics",
		field: func(c *Config) any { return &c.DeleteTopicEnable }},
	{name: "unclean.leader.election.enable", typ: typeBool, def: "false", scope: clusterWide, topic: "unclean.leader.election.enable",
		doc: "allow out-of-sync replicas to lead", field: func(c *Config) any { return &c.UncleanLeaderElection }},
	// Topic-only keys of replication throttles (no broker default in
	// Kafka; a server.properties line sets nothing): the replica fetchers
	// and the leader read a topic's value from its overrides.
	throttledReplicasKey("leader.replication.throttled.replicas", "replicas (partition:broker, or *) whose followers' fetches a leader throttles"),
	throttledReplicasKey("follower.replication.throttled.replicas", "replicas (partition:broker, or *) a follower throttles its fetches of"),

	// Log segments, retention and flushing: broker defaults of topic keys.
	{name: "log.segment.bytes", typ: typeInt, def: "1073741824", min: 14, max: maxInt32, scope: clusterWide, topic: "segment.bytes",
		doc: "segment file size that triggers a roll", field: func(c *Config) any { return &c.Log.SegmentBytes }},
	{name: "log.roll.ms", typ: typeLong, def: "604800000", min: 1, max: maxLong, scope: clusterWide, topic: "segment.ms",
		doc: "age that triggers a segment roll", aliases: []alias{{name: "log.roll.hours", unit: 3_600_000}},
		field: func(c *Config) any { return &c.Log.SegmentMs }},
	{name: "log.roll.jitter.ms", typ: typeLong, def: "0", min: 0, max: maxLong, scope: clusterWide, topic: "segment.jitter.ms", use: useFixed,
		doc: "random jitter subtracted from segment.ms"},
	{name: "log.index.size.max.bytes", typ: typeInt, def: "10485760", min: 4, max: maxInt32, scope: clusterWide, topic: "segment.index.bytes",
		doc: "preallocated size of each index file", field: func(c *Config) any { return &c.Log.SegmentIndexBytes }},
	{name: "log.index.interval.bytes", typ: typeInt, def: "4096", min: 0, max: maxInt32, scope: clusterWide, topic: "index.interval.bytes",
		doc: "bytes of log between offset index entries", field: func(c *Config) any { return &c.Log.IndexIntervalBytes }},
	{name: "log.retention.ms", typ: typeLong, def: "604800000", min: -1, max: maxLong, scope: clusterWide, topic: "retention.ms",
		doc:     "age after which segments are deleted; -1 unlimited",
		aliases: []alias{{name: "log.retention.minutes", unit: 60_000}, {name: "log.retention.hours", unit: 3_600_000}},
		field:   func(c *Config) any { return &c.Log.RetentionMs }},
	{name: "log.retention.bytes", typ: typeLong, def: "-1", min: -1, max: maxLong, scope: clusterWide, topic: "retention.bytes",
		doc: "size a partition is trimmed to; -1 unlimited", field: func(c *Config) any { return &c.Log.RetentionBytes }},
	{name: "log.retention.check.interval.ms", typ: typeLong, def: "300000", min: 1, max: maxLong, doc: "how often retention runs",
		field: func(c *Config) any { return millis{&c.RetentionCheckInterval} }},
	{name: "log.flush.interval.messages", typ: typeLong, def: "9223372036854775807", min: 1, max: maxLong, scope: clusterWide, topic: "flush.messages",
		doc: "fsync after this many messages", field: func(c *Config) any { return &c.Log.FlushMessages }},
	{name: "log.flush.interval.ms", typ: typeLong, def: "9223372036854775807", min: 0, max: maxLong, scope: clusterWide, topic: "flush.ms",
		doc: "fsync at least this often", field: func(c *Config) any { return &c.Log.FlushMs }},
	{name: "log.segment.delete.delay.ms", typ: typeLong, def: "60000", min: 0, max: maxLong, scope: clusterWide, topic: "file.delete.delay.ms",
		doc: "delay before a deleted segment's file is removed", field: func(c *Config) any { return &c.Log.FileDeleteDelayMs }},
	{name: "log.preallocate", typ: typeBool, def: "false", scope: clusterWide, topic: "preallocate", use: useFixed,
		doc: "preallocate segment files"},

	// Log cleaning (compaction).
	{name: "log.cleanup.policy", typ: typeList, def: "delete", oneOf: []string{"delete", "compact"}, scope: clusterWide, topic: "cleanup.policy",
		doc: "delete and/or compact", get: func(c *Config) string { return c.CleanupPolicy }, set: setCleanupPolicy},
	{name: "log.cleaner.delete.retention.ms", typ: typeLong, def: "86400000", min: 0, max: maxLong, scope: clusterWide, topic: "delete.retention.ms",
		doc: "how long tombstones are kept in compacted topics", field: func(c *Config) any { return &c.Log.DeleteRetentionMs }},
	{name: "log.cleaner.min.cleanable.ratio", typ: typeDouble, def: "0.5", min: 0, max: 1, scope: clusterWide, topic: "min.cleanable.dirty.ratio",
		doc: "dirty ratio that triggers compaction", field: func(c *Config) any { return &c.Log.MinCleanableDirtyRatio }},
	{name: "log.cleaner.min.compaction.lag.ms", typ: typeLong, def: "0", min: 0, max: maxLong, scope: clusterWide, topic: "min.compaction.lag.ms",
		doc: "shortest time a message stays uncompacted", field: func(c *Config) any { return &c.Log.MinCompactionLagMs }},
	{name: "log.cleaner.backoff.ms", typ: typeLong, def: "15000", min: 0, max: maxLong, scope: clusterWide,
		doc: "how often the log cleaner looks for partitions to compact", field: func(c *Config) any { return millis{&c.LogCleanerBackoff} }},
	{name: "log.cleaner.max.compaction.lag.ms", typ: typeLong, def: "9223372036854775807", min: 1, max: maxLong, scope: clusterWide, topic: "max.compaction.lag.ms", use: useFixed,
		doc: "longest time a message stays uncompacted"},

	// Messages.
	{name: "message.max.bytes", typ: typeInt, def: "1048588", min: 0, max: maxInt32, scope: clusterWide, topic: "max.message.bytes",
		doc: "largest record batch accepted", get: func(c *Config) string { return itoa(int64(c.MessageMaxBytes)) }, set: setMessageMaxBytes},
	{name: "compression.type", typ: typeString, def: "producer", oneOf: compressionNames, scope: clusterWide, topic: "compression.type",
		doc: "codec batches are stored with; producer keeps what was sent", field: func(c *Config) any { return &c.CompressionType }},
	{name: "log.message.timestamp.type", typ: typeString, def: "CreateTime", oneOf: []string{"CreateTime", "LogAppendTime"}, scope: clusterWide,
		topic: "message.timestamp.type", doc: "CreateTime or LogAppendTime",
		get: func(c *Config) string { return timestampTypeString(c.Log.TimestampType) }, set: setTimestampType},
	{name: "log.message.timestamp.before.max.ms", typ: typeLong, def: "9223372036854775807", min: 0, max: maxLong, scope: clusterWide,
		topic: "message.timestamp.before.max.ms", use: useFixed, doc: "how far in the past a CreateTime may be"},
	{name: "log.message.timestamp.after.max.ms", typ: typeLong, def: "3600000", min: 0, max: maxLong, scope: clusterWide,
		topic: "message.timestamp.after.max.ms", use: useFixed, doc: "how far in the future a CreateTime may be"},

	// Connections and requests.
	{name: "socket.request.max.bytes", typ: typeInt, def: "104857600", min: 1, max: maxInt32, doc: "largest request accepted",
		field: func(c *Config) any { return &c.SocketRequestMaxBytes }},
	// Kafka's default, kept for what it measured here: with the kernel's
	// autotuned send buffer (up to 4 MiB) a catch-up fetch over loopback
	// moved 2,123–2,253 MB/s, with 100 KiB (the kernel doubles it)
	// 2,304–2,512 MB/s (BENCHMARKS.md, "Socket send buffer").
	{name: "socket.send.buffer.bytes", typ: typeInt, def: "102400", min: -1, max: maxInt32, doc: "SO_SNDBUF of client connections (-1: the OS default)",
		field: func(c *Config) any { return &c.SocketSendBufferBytes }},
	// Not Kafka's 102400 by default: with it, raw produce at 1 partition
	// (8 requests of 64 KiB in flight per connection) cost the broker 1.20
	// CPU-s/GB against 0.84 with the kernel's autotuning, at less than half
	// the throughput (BENCHMARKS.md, "Socket receive buffer"). A file that
	// sets it, as Kafka's stock server.properties does, gets what it asks.
	{name: "socket.receive.buffer.bytes", typ: typeInt, def: "-1", min: -1, max: maxInt32, doc: "SO_RCVBUF of client connections (-1: the OS default)",
		field: func(c *Config) any { return &c.SocketReceiveBufferBytes }},
	{name: "connections.max.idle.ms", typ: typeLong, def: "600000", min: 1, max: maxLong, doc: "idle connections are closed after this",
		field: func(c *Config) any { return millis{&c.ConnectionsMaxIdle} }},
	{name: "max.incremental.fetch.session.cache.slots", typ: typeInt, def: "1000", min: 0, max: maxInt32, doc: "most incremental fetch sessions kept",
		field: func(c *Config) any { return &c.MaxIncrementalFetchSessions }},

	// Group coordinator and __consumer_offsets.
	{name: "group.initial.rebalance.delay.ms", typ: typeInt, def: "3000", min: 0, max: maxInt32,
		doc: "wait for more members before the first rebalance of an empty group", field: func(c *Config) any { return millis{&c.GroupInitialRebalanceDelay} }},
	{name: "group.min.session.timeout.ms", typ: typeInt, def: "6000", min: 0, max: maxInt32,
		doc: "smallest session timeout a member may ask for", field: func(c *Config) any { return millis{&c.GroupMinSessionTimeout} }},
	{name: "group.max.session.timeout.ms", typ: typeInt, def: "1800000", min: 0, max: maxInt32,
		doc: "largest session timeout a member may ask for", field: func(c *Config) any { return millis{&c.GroupMaxSessionTimeout} }},
	{name: "group.max.size", typ: typeInt, def: "2147483647", min: 1, max: maxInt32, doc: "most members a group may have",
		field: func(c *Config) any { return &c.GroupMaxSize }},
	{name: "offsets.topic.num.partitions", typ: typeInt, def: "50", min: 1, max: 10000, doc: "partitions of __consumer_offsets",
		field: func(c *Config) any { return &c.OffsetsTopicPartitions }},
	{name: "offsets.topic.replication.factor", typ: typeInt, def: "1", min: 1, max: maxInt32,
		doc: "replication factor of __consumer_offsets (at most the brokers registered when it is created)", field: func(c *Config) any { return &c.OffsetsTopicReplicationFactor }},
	{name: "offsets.topic.segment.bytes", typ: typeInt, def: "104857600", min: 1, max: maxInt32, doc: "segment size of __consumer_offsets",
		field: func(c *Config) any { return &c.OffsetsTopicSegmentBytes }},
	{name: "offsets.retention.minutes", typ: typeInt, def: "10080", min: 1, max: maxInt32, doc: "how long committed offsets of empty groups are kept",
		field: func(c *Config) any { return minutes{&c.OffsetsRetention} }},

	// Transaction coordinator and __transaction_state (engine/txn).
	{name: "transaction.state.log.num.partitions", typ: typeInt, def: "50", min: 1, max: 10000, doc: "partitions of __transaction_state",
		field: func(c *Config) any { return &c.TxnStatePartitions }},
	{name: "transaction.state.log.replication.factor", typ: typeInt, def: "3", min: 1, max: maxInt32,
		doc: "replication factor of __transaction_state (at most the brokers registered when it is created: 1 on a single node)", field: func(c *Config) any { return &c.TxnStateReplicationFactor }},
	{name: "transaction.state.log.segment.bytes", typ: typeInt, def: "104857600", min: 1, max: maxInt32, doc: "segment size of __transaction_state",
		field: func(c *Config) any { return &c.TxnStateSegmentBytes }},
	{name: "transaction.state.log.min.isr", typ: typeInt, def: "2", min: 1, max: maxInt32,
		doc: "min.insync.replicas of __transaction_state when it is created (at most its replication factor: 1 on a single node)", field: func(c *Config) any { return &c.TxnStateMinISR }},
	{name: "transaction.max.timeout.ms", typ: typeInt, def: "900000", min: 1, max: maxInt32, doc: "largest transaction.timeout.ms a producer may ask for",
		field: func(c *Config) any { return millis{&c.TxnMaxTimeout} }},
	{name: "transactional.id.expiration.ms", typ: typeInt, def: "604800000", min: 1, max: maxInt32,
		doc: "a transactional id unused this long is removed", field: func(c *Config) any { return millis{&c.TxnIDExpiration} }},
	{name: "transaction.abort.timed.out.transaction.cleanup.interval.ms", typ: typeInt, def: "10000", min: 1, max: maxInt32,
		doc: "how often transactions past their timeout are aborted", field: func(c *Config) any { return millis{&c.TxnAbortCheckInterval} }},
	{name: "transaction.remove.expired.transaction.cleanup.interval.ms", typ: typeInt, def: "3600000", min: 1, max: maxInt32,
		doc: "how often expired transactional ids are removed", field: func(c *Config) any { return millis{&c.TxnExpireCheckInterval} }},
	{name: "sluice.transaction.version", typ: typeInt, def: "2", min: 1, max: 2,
		doc: "the transaction.version feature finalized for clients: 2 is KIP-890 part 2 (an epoch bump per transaction, partitions added by the brokers), Kafka 4's default; 1 the earlier protocol", field: func(c *Config) any { return &c.TxnVersion }},

	// The cluster (docs/cluster.md). With no controller.quorum.voters and no
	// controller.quorum.bootstrap.servers the node runs alone, as `sluice
	// serve` with no flags does: broker and a one-voter controller over a
	// local metadata file.
	{name: "process.roles", typ: typeList, def: "broker,controller", oneOf: []string{"broker", "controller"},
		doc: "broker, controller, or both", field: func(c *Config) any { return &c.ProcessRoles }},
	{name: "controller.quorum.voters", typ: typeList, doc: "the controller quorum: id@host:port of each voter's CONTROLLER listener",
		field: func(c *Config) any { return &c.QuorumVoters }},
	{name: "controller.quorum.bootstrap.servers", typ: typeList, doc: "host:port of controller listeners to reach when the voters are not listed",
		field: func(c *Config) any { return &c.QuorumBootstrapServers }},
	{name: "controller.listener.names", typ: typeString, def: "CONTROLLER", doc: "name of the controller listener in listeners",
		get: func(c *Config) string { return c.ControllerListenerName }, set: setControllerListenerNames},
	{name: "inter.broker.listener.name", typ: typeString, def: "PLAINTEXT", doc: "listener the broker registers under and other brokers reach it on (replica fetchers, transaction markers); any security protocol",
		get: func(c *Config) string { return c.InterBrokerListenerName }, set: setInterBrokerListener},
	{name: "broker.rack", typ: typeString, doc: "rack of this broker, for rack-aware replica placement",
		field: func(c *Config) any { return &c.BrokerRack }},
	{name: "replica.selector.class", typ: typeString, oneOf: []string{rackAwareSelector, leaderSelector},
		doc:   "where consumers that name their rack read: " + rackAwareSelector + " sends them to an in-sync replica in their rack (KIP-392); unset or " + leaderSelector + ": the leader",
		field: func(c *Config) any { return &c.ReplicaSelectorClass }},
	{name: "auto.leader.rebalance.enable", typ: typeBool, def: "true", doc: "move leadership back to preferred replicas",
		field: func(c *Config) any { return &c.AutoLeaderRebalance }},
	{name: "leader.imbalance.check.interval.seconds", typ: typeLong, def: "300", min: 1, max: maxLong,
		doc: "how often the active controller checks leader imbalance", field: func(c *Config) any { return &c.LeaderImbalanceCheckSeconds }},
	{name: "leader.imbalance.per.broker.percentage", typ: typeInt, def: "10", min: 0, max: 100,
		doc: "imbalance that triggers a preferred election", field: func(c *Config) any { return &c.LeaderImbalancePercent }},
	{name: "broker.heartbeat.interval.ms", typ: typeInt, def: "2000", min: 1, max: maxInt32, doc: "how often a broker heartbeats to the controller",
		field: func(c *Config) any { return millis{&c.BrokerHeartbeatInterval} }},
	{name: "broker.session.timeout.ms", typ: typeInt, def: "9000", min: 1, max: maxInt32, doc: "a broker silent this long is fenced",
		field: func(c *Config) any { return millis{&c.BrokerSessionTimeout} }},
	{name: "replica.lag.time.max.ms", typ: typeLong, def: "30000", min: 0, max: maxLong, doc: "a follower behind this long leaves the ISR",
		field: func(c *Config) any { return millis{&c.ReplicaLagTimeMax} }},
	// Replication throttles (Kafka's DynamicConfig.Broker): bytes/s of
	// throttled replicas' traffic; the replica fetcher reads them through
	// Broker.ReplicationThrottles.
	{name: "leader.replication.throttled.rate", typ: typeLong, def: "9223372036854775807", min: 0, max: maxLong, scope: clusterWide,
		doc: "bytes/s a leader sends to followers of throttled replicas", field: func(c *Config) any { return &c.LeaderReplicationThrottledRate }},
	{name: "follower.replication.throttled.rate", typ: typeLong, def: "9223372036854775807", min: 0, max: maxLong, scope: clusterWide,
		doc: "bytes/s a follower fetches for throttled replicas", field: func(c *Config) any { return &c.FollowerReplicationThrottledRate }},

	// Sluice's own: the network backend of `sluice serve` (flags --net and
	// --net-loops override; SLUICE_NET sets the default).
	{name: "sluice.net", typ: typeString, def: "auto", oneOf: []string{"auto", "uring", "epoll", "std"},
		doc: "network backend; auto picks the fastest this host supports", field: func(c *Config) any { return &c.Net }},
	{name: "sluice.net.loops", typ: typeInt, def: "0", min: 0, max: 1024, doc: "event loops of the uring and epoll backends; 0 is one per core",
		field: func(c *Config) any { return &c.NetLoops }},

	// Accepted for compatibility with stock Kafka files; single-node Sluice
	// has nothing to tune with them.
	ignored("num.network.threads", typeInt), ignored("num.io.threads", typeInt),
	ignored("num.recovery.threads.per.data.dir", typeInt),
	ignored("share.coordinator.state.topic.replication.factor", typeInt), ignored("share.coordinator.state.topic.min.isr", typeInt),
	{name: "share.coordinator.state.topic.num.partitions", typ: typeInt, def: "50", min: 1, max: 10000, doc: "partitions of __share_group_state",
		field: func(c *Config) any { return &c.ShareStateTopicPartitions }},
}, append(groupBrokerKeys(), authzKeys()...)...)

// throttledReplicasKey is a topic's list of throttled replicas, checked
// as Kafka's ThrottledReplicaListValidator does.
func throttledReplicasKey(name, doc string) configKey {
	return configKey{name: name, typ: typeList, topic: name, scope: clusterWide, topicOnly: true, doc: doc,
		get: func(*Config) string { return "" },
		set: func(_ *Config, v string) error {
			if !replication.ValidThrottledReplicas(v) {
				return errors.New("must be * or a list of partition:broker")
			}
			return nil
		}}
}

func ignored(name string, typ kmsg.ConfigType) configKey {
	return configKey{name: name, typ: typ, use: useIgnored, doc: "accepted and ignored"}
}

// keyRef is a server.properties name: its row, and the alias it spells (nil
// for the row's own name).
type keyRef struct {
	key   *configKey
	alias *alias
}

// brokerKeys indexes every broker key and alias by its name.
var brokerKeys = indexBrokerKeys()

func indexBrokerKeys() map[string]keyRef {
	byName := map[string]keyRef{}
	for i := range configKeys {
		k := &configKeys[i]
		if k.topicOnly {
			continue
		}
		byName[k.name] = keyRef{key: k}
		for j := range k.aliases {
			byName[k.aliases[j].name] = keyRef{key: k, alias: &k.aliases[j]}
		}
	}
	return byName
}

// bounds is the accepted range of an Int, Long or Double key.
func (k *configKey) bounds() (min, max int64) {
	switch {
	case k.min != 0 || k.max != 0:
		return k.min, k.max
	case k.typ == typeInt:
		return math.MinInt32, math.MaxInt32
	}
	return math.MinInt64, math.MaxInt64
}

// described says whether DescribeConfigs reports the key.
func (k *configKey) described() bool { return k.use != useIgnored && !k.topicOnly }

// readOnly is DescribeConfigs' read_only of the broker-level key: whether
// Sluice refuses to change it at run time.
func (k *configKey) readOnly() bool {
	return k.scope == static || k.restartOnly || k.use == useIgnored || k.topicOnly
}

// sensitive keys are described without their value.
func (k *configKey) sensitive() bool { return k.typ == typePassword }

// value is the key's value in c, formatted as in server.properties.
func (k *configKey) value(c *Config) string {
	switch {
	case k.get != nil:
		return k.get(c)
	case k.field != nil:
		return formatField(k.field(c))
	}
	return k.def
}

// apply checks v and, when it passes, stores it in c (c may be nil to
// check only). Keys Sluice does not use are checked and not stored.
func (k *configKey) apply(c *Config, v string) error {
	p, err := k.parse(v)
	if err != nil || c == nil || k.use != useConfig {
		return err
	}
	if k.set != nil {
		return k.set(c, p.s)
	}
	storeField(k.field(c), p)
	return nil
}

// check checks v without storing it. Translated values (set) are checked
// against a scratch Config.
func (k *configKey) check(v string) error {
	if k.set != nil && k.use == useConfig {
		var scratch Config
		return k.apply(&scratch, v)
	}
	return k.apply(nil, v)
}

func formatField(p any) string {
	switch p := p.(type) {
	case *int32:
		return itoa(int64(*p))
	case *int64:
		return itoa(*p)
	case *int:
		return itoa(int64(*p))
	case *bool:
		return strconv.FormatBool(*p)
	case *string:
		return *p
	case *float64:
		return strconv.FormatFloat(*p, 'g', -1, 64)
	case millis:
		return itoa(p.d.Milliseconds())
	case minutes:
		return itoa(int64(*p.d / time.Minute))
	}
	panic("engine: config field of unknown type")
}

// storeField stores a parsed value in the field p points to.
func storeField(p any, v parsed) {
	switch p := p.(type) {
	case *int32:
		*p = int32(v.n)
	case *int64:
		*p = v.n
	case *int:
		*p = int(v.n)
	case *bool:
		*p = v.n == 1
	case *string:
		*p = v.s
	case *float64:
		*p = v.f
	case millis:
		*p.d = durationOf(v.n, time.Millisecond)
	case minutes:
		*p.d = durationOf(v.n, time.Minute)
	default:
		panic("engine: config field of unknown type")
	}
}

// durationOf is n units, saturating where time.Duration ends (Kafka's
// Long.MAX_VALUE millis is "forever").
func durationOf(n int64, unit time.Duration) time.Duration {
	if n > int64(math.MaxInt64/unit) {
		return math.MaxInt64
	}
	return time.Duration(n) * unit
}

// parsed is a value that passed its key's checks.
type parsed struct {
	s string  // the value, trimmed
	n int64   // Int and Long values; Bool as 1 (true) or 0
	f float64 // Double values
}

// parse checks v against the key's type, bounds and valid values.
func (k *configKey) parse(v string) (parsed, error) {
	p := parsed{s: strings.TrimSpace(v)}
	var err error
	switch k.typ {
	case typeInt, typeLong:
		min, max := k.bounds()
		p.n, err = parseInt(p.s, min, max)
	case typeBool:
		p.n, err = parseBool(p.s)
	case typeDouble:
		p.f, err = parseDouble(p.s, k)
	case typeString:
		err = oneOf(p.s, k.oneOf)
	case typeList:
		for _, item := range strings.Split(p.s, ",") {
			if err = oneOf(strings.TrimSpace(item), k.oneOf); err != nil {
				return p, fmt.Errorf("each item %s", err)
			}
		}
	}
	return p, err
}

func parseInt(v string, min, max int64) (int64, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, errors.New("not an integer")
	}
	if n < min || n > max {
		return 0, fmt.Errorf("out of range [%d, %d]", min, max)
	}
	return n, nil
}

// parseBool accepts true and false in any case, as Kafka does.
func parseBool(v string) (int64, error) {
	switch strings.ToLower(v) {
	case "true":
		return 1, nil
	case "false":
		return 0, nil
	}
	return 0, errors.New("not a boolean (true or false)")
}

func parseDouble(v string, k *configKey) (float64, error) {
	f, err := strconv.ParseFloat(v, 64)
	if min, max := k.bounds(); err != nil || math.IsNaN(f) || f < float64(min) || f > float64(max) {
		return 0, fmt.Errorf("not a number in [%d, %d]", min, max)
	}
	return f, nil
}

func oneOf(v string, valid []string) error {
	if valid == nil || slices.Contains(valid, v) {
		return nil
	}
	return fmt.Errorf("must be one of %s", strings.Join(valid, ", "))
}
