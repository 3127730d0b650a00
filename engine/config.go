package engine

import (
	"fmt"
	"io"
	"math"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-broker/sluice/internal/properties"
	"github.com/sluice-broker/sluice/storage"
)

// Config is the broker's static configuration. Zero values are not
// meaningful; start from DefaultConfig. The keys that set each field, their
// defaults and bounds are the table in configkeys.go.
type Config struct {
	NodeID    int32
	Listen    string // host:port the primary listener binds (listeners.go)
	Advertise string // host:port clients are told to connect to
	// Listeners are the broker listeners; ProtocolMap is
	// listener.security.protocol.map; Security holds the ssl.*, sasl.*
	// and per-listener security keys as given (listeners.go).
	Listeners      []Listener
	ProtocolMap    map[string]string
	Security       map[string]string
	listenersRaw   string
	advertisedRaw  string
	protocolMapRaw string
	DataDir        string
	ClusterID      string // generated and stored in meta.properties when empty

	NumPartitions         int32 // num.partitions for auto-created topics
	AutoCreateTopics      bool  // auto.create.topics.enable
	DeleteTopicEnable     bool  // delete.topic.enable
	MessageMaxBytes       int32 // message.max.bytes (broker default of max.message.bytes)
	SocketRequestMaxBytes int32 // socket.request.max.bytes
	// SocketSendBufferBytes is SO_SNDBUF of client connections
	// (socket.send.buffer.bytes; -1: the OS's autotuning).
	SocketSendBufferBytes int32
	// SocketReceiveBufferBytes is SO_RCVBUF of client connections
	// (socket.receive.buffer.bytes; -1, the default: the OS's autotuning).
	SocketReceiveBufferBytes int32
	ConnectionsMaxIdle       time.Duration

	// Log holds the broker-wide defaults of the topic-level log configs
	// (log.segment.bytes, log.retention.ms, …).
	Log storage.Config
	// CompressionType is the broker default of compression.type.
	CompressionType string
	// CleanupPolicy is log.cleanup.policy as given (delete, compact or
	// both); Log.Compact follows it.
	CleanupPolicy string
	// RetentionCheckInterval is log.retention.check.interval.ms.
	RetentionCheckInterval time.Duration
	// LogCleanerBackoff is log.cleaner.backoff.ms: how often the cleaner
	// looks for work (read at run time: it is dynamic).
	LogCleanerBackoff time.Duration

	GroupInitialRebalanceDelay time.Duration // group.initial.rebalance.delay.ms
	GroupMinSessionTimeout     time.Duration // group.min.session.timeout.ms
	GroupMaxSessionTimeout     time.Duration // group.max.session.timeout.ms
	GroupMaxSize               int32         // group.max.size
	OffsetsTopicPartitions     int32         // offsets.topic.num.partitions
	OffsetsTopicSegmentBytes   int64         // offsets.topic.segment.bytes
	ShareStateTopicPartitions  int32         // share.coordinator.state.topic.num.partitions
	OffsetsRetention           time.Duration // offsets.retention.minutes

	MaxIncrementalFetchSessions int // max.incremental.fetch.session.cache.slots

	TxnStatePartitions        int32         // transaction.state.log.num.partitions
	TxnStateReplicationFactor int32         // transaction.state.log.replication.factor
	TxnStateSegmentBytes      int64         // transaction.state.log.segment.bytes
	TxnStateMinISR            int32         // transaction.state.log.min.isr
	TxnMaxTimeout             time.Duration // transaction.max.timeout.ms
	TxnIDExpiration           time.Duration // transactional.id.expiration.ms
	TxnAbortCheckInterval     time.Duration // transaction.abort.timed.out.transaction.cleanup.interval.ms
	TxnExpireCheckInterval    time.Duration // transaction.remove.expired.transaction.cleanup.interval.ms
	TxnVersion                int32         // sluice.transaction.version: the transaction.version feature level (1 or 2)

	// The cluster (cluster.go). ClusterMode reports whether it is one.
	ProcessRoles                  string              // process.roles: broker, controller or both
	QuorumVoters                  string              // controller.quorum.voters: id@host:port,...
	QuorumBootstrapServers        string              // controller.quorum.bootstrap.servers
	ControllerListenerName        string              // controller.listener.names
	ControllerListen              string              // host:port of the controller listener in listeners
	InterBrokerListenerName       string              // inter.broker.listener.name
	InterBroker                   InterBrokerSecurity // how nodes reach each other (listeners.go)
	BrokerRack                    string              // broker.rack; "" when unset
	ReplicaSelectorClass          string              // replica.selector.class: Kafka's RackAwareReplicaSelector turns on KIP-392 follower fetching
	DefaultReplicationFactor      int32               // default.replication.factor
	MinInsyncReplicas             int32               // min.insync.replicas
	OffsetsTopicReplicationFactor int32               // offsets.topic.replication.factor
	UncleanLeaderElection         bool                // unclean.leader.election.enable
	AutoLeaderRebalance           bool                // auto.leader.rebalance.enable
	LeaderImbalanceCheckSeconds   int64               // leader.imbalance.check.interval.seconds
	LeaderImbalancePercent        int32               // leader.imbalance.per.broker.percentage
	BrokerHeartbeatInterval       time.Duration       // broker.heartbeat.interval.ms
	BrokerSessionTimeout          time.Duration       // broker.session.timeout.ms
	ReplicaLagTimeMax             time.Duration       // replica.lag.time.max.ms

	// LeaderReplicationThrottledRate and FollowerReplicationThrottledRate
	// are leader.replication.throttled.rate and
	// follower.replication.throttled.rate, bytes/s (math.MaxInt64: no
	// throttle). Usually set dynamically; read them through
	// Broker.ReplicationThrottles.
	LeaderReplicationThrottledRate   int64
	FollowerReplicationThrottledRate int64

	// GroupProtocolKeys holds the broker keys of Kafka 4's group protocols
	// (group.consumer.*, group.share.*, group.streams.*: defaults and
	// bounds of GROUP resource configs), in the order of groupBrokerSpecs.
	GroupProtocolKeys [numGroupBrokerInts]int64
	// GroupConsumerAssignors is group.consumer.assignors: the server-side
	// assignors consumer groups may use, the first the default.
	GroupConsumerAssignors string
	// GroupConsumerMigrationPolicy is group.consumer.migration.policy:
	// online conversions between classic and consumer groups.
	GroupConsumerMigrationPolicy string

	// Net and NetLoops choose the network backend (sluice.net: auto, uring,
	// epoll or std) and its event loops (sluice.net.loops, 0 for one per
	// core). cmd/sluice reads them; the engine never touches a socket.
	Net      string
	NetLoops int

	// Authz is authorization, client quotas and connection limits
	// (authz.go, configkeys_authz.go).
	Authz AuthzConfig
}

// DefaultConfig returns the embedded defaults that `sluice serve` runs
// with: every row of the config table (configkeys.go) applied to a zero
// Config.
func DefaultConfig() Config {
	var c Config
	for i := range configKeys {
		k := &configKeys[i]
		if k.def == "" || k.use != useConfig {
			continue
		}
		if err := k.apply(&c, k.def); err != nil {
			panic(fmt.Sprintf("engine: default of %s: %v", k.name, err))
		}
	}
	return c
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

// ApplyProperties reads a Kafka-style server.properties into c, the one
// reader of that file. Unknown keys are returned in file order (for the
// caller to warn about); a bad value is an error that names its key and
// line, after which c is not to be used.
//
// Every line is checked before any is applied, so that of a key's spellings
// the most specific wins wherever it stands, as in Kafka
// (log.retention.ms > log.retention.minutes > log.retention.hours). A key
// given twice takes its last value. Keys the table marks ignored are
// accepted whatever their value.
func (c *Config) ApplyProperties(r io.Reader) (unknown []string, err error) {
	props, err := readProperties(r)
	if err != nil {
		return nil, err
	}
	given := map[string]property{}
	for _, p := range props {
		if IsSecurityKey(p.key) {
			c.setSecurity(p.key, p.val)
			continue
		}
		ref, ok := brokerKeys[p.key]
		if !ok || ref.key.use == useFixed {
			unknown = append(unknown, p.key)
			continue
		}
		if ref.key.use != useConfig {
			continue
		}
		if _, err := ref.inKeyUnits(p.val); err != nil {
			return unknown, p.errorf("%w", err)
		}
		given[p.key] = p
	}
	for i := range configKeys {
		if err := configKeys[i].applyGiven(c, given); err != nil {
			return unknown, err
		}
	}
	return unknown, nil
}

// Set applies one key (or alias) and its value to c, as a server.properties
// line would; `sluice serve` layers its flags and environment through it.
func (c *Config) Set(name, value string) error {
	if IsSecurityKey(name) {
		c.setSecurity(name, value)
		return nil
	}
	ref, ok := brokerKeys[name]
	if !ok || ref.key.use != useConfig {
		return fmt.Errorf("%s: not a key Sluice sets", name)
	}
	v, err := ref.inKeyUnits(value)
	if err == nil {
		err = ref.key.apply(c, v)
	}
	if err != nil {
		return fmt.Errorf("%s=%q: %w", name, value, err)
	}
	return nil
}

// applyGiven applies the most specific of k's spellings found in given.
// Spellings marked same must agree (Kafka refuses node.id != broker.id).
func (k *configKey) applyGiven(c *Config, given map[string]property) error {
	p, found := given[k.name]
	for _, a := range k.aliases {
		ap, ok := given[a.name]
		switch {
		case !ok:
		case !found:
			p, found = ap, true
		case a.same && ap.val != p.val:
			return ap.errorf("must equal %s=%q", p.key, p.val)
		}
	}
	if !found {
		return nil
	}
	v, err := brokerKeys[p.key].inKeyUnits(p.val)
	if err == nil {
		err = k.apply(c, v)
	}
	if err != nil {
		return p.errorf("%w", err)
	}
	return nil
}

// inKeyUnits checks a value given under this spelling and converts it to
// the key's units (log.retention.hours=1 is log.retention.ms=3600000; a
// negative count is -1, Kafka's "unlimited").
func (r keyRef) inKeyUnits(v string) (string, error) {
	if r.alias == nil || r.alias.unit <= 1 {
		return v, r.key.check(v)
	}
	min, _ := r.key.bounds()
	n, err := parseInt(strings.TrimSpace(v), min, math.MaxInt32) // Kafka's aliases are INTs
	switch {
	case err != nil:
		return "", err
	case n < 0:
		return "-1", nil
	}
	return itoa(n * r.alias.unit), nil
}

// property is one "key=value" line of a .properties file.
type property struct {
	key, val string
	line     int
}

func (p property) errorf(format string, args ...any) error {
	return fmt.Errorf("config line %d: %s=%q: %w", p.line, p.key, p.val, fmt.Errorf(format, args...))
}

// readProperties reads a .properties file's keys in file order.
func readProperties(r io.Reader) ([]property, error) {
	lines, err := properties.Read(r)
	out := make([]property, len(lines))
	for i, l := range lines {
		out[i] = property{l.Key, l.Value, l.Number}
	}
	return out, err
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

func setMessageMaxBytes(c *Config, v string) error {
	n := int32(atoi(v))
	c.MessageMaxBytes, c.Log.MaxMessageBytes = n, n
	return nil
}
