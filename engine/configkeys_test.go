package engine

import (
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/storage"
)

// TestDefaultConfigUnchanged pins the defaults the table produces to the
// values `sluice serve` ran with before the table existed.
func TestDefaultConfigUnchanged(t *testing.T) {
	want := Config{
		NodeID: 1, Listen: "localhost:9092", DataDir: "./data",
		NumPartitions: 1, AutoCreateTopics: true, DeleteTopicEnable: true,
		MessageMaxBytes: 1048588, SocketRequestMaxBytes: 100 << 20, SocketSendBufferBytes: 102400, SocketReceiveBufferBytes: -1, ConnectionsMaxIdle: 10 * time.Minute,
		Log: storage.DefaultConfig(), CompressionType: "producer", CleanupPolicy: "delete", RetentionCheckInterval: 5 * time.Minute, LogCleanerBackoff: 15 * time.Second,
		GroupInitialRebalanceDelay: 3 * time.Second, GroupMinSessionTimeout: 6 * time.Second,
		GroupMaxSessionTimeout: 30 * time.Minute, GroupMaxSize: math.MaxInt32,
		OffsetsTopicPartitions: 50, OffsetsTopicSegmentBytes: 100 << 20, ShareStateTopicPartitions: 50, OffsetsRetention: 7 * 24 * time.Hour,
		MaxIncrementalFetchSessions: 1000, Net: "auto",
		// The cluster's keys, Kafka's defaults; without voters they change
		// nothing of a single node.
		LeaderImbalanceCheckSeconds: 300, LeaderImbalancePercent: 10,
		ProcessRoles: "broker,controller", ControllerListenerName: "CONTROLLER", InterBrokerListenerName: "PLAINTEXT",
		InterBroker:              InterBrokerSecurity{SASLMechanism: "GSSAPI", ControllerSASLMechanism: "GSSAPI"},
		DefaultReplicationFactor: 1, MinInsyncReplicas: 1, OffsetsTopicReplicationFactor: 1, AutoLeaderRebalance: true,
		BrokerHeartbeatInterval: 2 * time.Second, BrokerSessionTimeout: 9 * time.Second, ReplicaLagTimeMax: 30 * time.Second,
		LeaderReplicationThrottledRate: math.MaxInt64, FollowerReplicationThrottledRate: math.MaxInt64,
		// The transaction coordinator's keys, Kafka's defaults.
		TxnStatePartitions: 50, TxnStateReplicationFactor: 3, TxnStateSegmentBytes: 100 << 20, TxnStateMinISR: 2,
		TxnMaxTimeout: 15 * time.Minute, TxnIDExpiration: 7 * 24 * time.Hour, TxnAbortCheckInterval: 10 * time.Second,
		TxnExpireCheckInterval: time.Hour, TxnVersion: 2,
		// The listeners as listeners.go derives them.
		Listeners:    []Listener{{Name: "PLAINTEXT", Addr: "localhost:9092"}},
		ProtocolMap:  map[string]string{"PLAINTEXT": "PLAINTEXT", "SSL": "SSL", "SASL_PLAINTEXT": "SASL_PLAINTEXT", "SASL_SSL": "SASL_SSL"},
		listenersRaw: "PLAINTEXT://localhost:9092", protocolMapRaw: "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
		// Authorization, quotas and connection limits (configkeys_authz.go).
		Authz: AuthzConfig{MaxConnections: math.MaxInt32, MaxConnectionsPerIP: math.MaxInt32, MaxConnectionCreateRate: math.MaxInt32,
			QuotaWindowNum: 11, QuotaWindowSeconds: 1},
	}
	for i, s := range groupBrokerSpecs {
		want.GroupProtocolKeys[i] = atoi(s.def)
	}
	want.GroupConsumerAssignors = "uniform,range"
	want.GroupConsumerMigrationPolicy = "bidirectional"
	if got := DefaultConfig(); !reflect.DeepEqual(got, want) {
		t.Fatalf("DefaultConfig:\n got %+v\nwant %+v", got, want)
	}
}

// TestEveryKeyParsesItsDefault: each row's default passes its own checks,
// reads back as itself, and a file setting every used key to its default
// yields DefaultConfig.
func TestEveryKeyParsesItsDefault(t *testing.T) {
	def := DefaultConfig()
	var file strings.Builder
	names := map[string]bool{}
	for i := range configKeys {
		k := &configKeys[i]
		if names[k.name] {
			t.Errorf("%s: two rows", k.name)
		}
		names[k.name] = true
		if k.use == useIgnored {
			continue
		}
		if k.doc == "" {
			t.Errorf("%s: no doc", k.name)
		}
		if k.def != "" {
			if err := k.check(k.def); err != nil {
				t.Errorf("%s: default %q: %v", k.name, k.def, err)
			}
		}
		if got := k.value(&def); got != k.def {
			t.Errorf("%s: DefaultConfig holds %q, default is %q", k.name, got, k.def)
		}
		if k.use == useConfig && k.def != "" {
			file.WriteString(k.name + "=" + k.def + "\n")
		}
	}
	var c Config
	unknown, err := c.ApplyProperties(strings.NewReader(file.String()))
	if err != nil || len(unknown) != 0 || !reflect.DeepEqual(c, def) {
		t.Fatalf("defaults through a file: %v, unknown %v\n got %+v\nwant %+v", err, unknown, c, def)
	}
}

// TestBoundsEnforced: for every numeric key the bounds are accepted and
// one past them is refused with the key and line named; for every key with
// valid values, another one is refused.
func TestBoundsEnforced(t *testing.T) {
	for i := range configKeys {
		k := &configKeys[i]
		if k.use != useConfig && k.topic == "" {
			continue
		}
		min, max := k.bounds()
		good, bad := []string{}, []string{"x"}
		switch k.typ {
		case typeInt, typeLong:
			good = append(good, itoa(min), itoa(max))
			if min > math.MinInt64 {
				bad = append(bad, itoa(min-1))
			}
			if max < math.MaxInt64 {
				bad = append(bad, itoa(max+1))
			}
		case typeDouble:
			good = append(good, itoa(min), itoa(max))
			bad = append(bad, strconv.FormatFloat(float64(min)-0.1, 'g', -1, 64), strconv.FormatFloat(float64(max)+0.1, 'g', -1, 64), "NaN")
		case typeBool:
			good = append(good, "true", "FALSE")
		case typeString, typeList:
			if k.oneOf == nil {
				continue
			}
			good, bad = k.oneOf, []string{"bogus", ""}
		}
		for _, v := range good {
			if err := k.check(v); err != nil {
				t.Errorf("%s=%s refused: %v", k.name, v, err)
			}
		}
		for _, v := range bad {
			if k.check(v) == nil {
				t.Errorf("%s=%s accepted", k.name, v)
			}
			if k.use != useConfig {
				continue
			}
			var c Config
			_, err := c.ApplyProperties(strings.NewReader("# first\n" + k.name + "=" + v + "\n"))
			if err == nil || !strings.Contains(err.Error(), "line 2: "+k.name+"=") {
				t.Errorf("%s=%s from a file: %v", k.name, v, err)
			}
		}
	}
}

// TestBoundsAsBefore pins every numeric key's range to the one Sluice
// checked before the table (server.properties keys, then topic keys), so
// the table cannot widen or narrow one by accident.
func TestBoundsAsBefore(t *testing.T) {
	const i32, i64 = math.MaxInt32, math.MaxInt64
	want := map[string][2]int64{
		"node.id": {0, i32}, "num.partitions": {1, i32}, "log.segment.bytes": {14, i32}, "log.roll.ms": {1, i64},
		"log.index.size.max.bytes": {4, i32}, "log.index.interval.bytes": {0, i32}, "log.retention.ms": {-1, i64},
		"log.retention.bytes": {-1, i64}, "log.retention.check.interval.ms": {1, i64}, "log.flush.interval.messages": {1, i64},
		"log.flush.interval.ms": {0, i64}, "log.segment.delete.delay.ms": {0, i64}, "message.max.bytes": {0, i32},
		"socket.request.max.bytes": {1, i32}, "socket.send.buffer.bytes": {-1, i32}, "socket.receive.buffer.bytes": {-1, i32}, "connections.max.idle.ms": {1, i64}, "group.initial.rebalance.delay.ms": {0, i32},
		"group.min.session.timeout.ms": {0, i32}, "group.max.session.timeout.ms": {0, i32}, "group.max.size": {1, i32},
		"offsets.topic.num.partitions": {1, 10000}, "offsets.topic.segment.bytes": {1, i32}, "offsets.retention.minutes": {1, i32},
		"max.incremental.fetch.session.cache.slots": {0, i32}, "sluice.net.loops": {0, 1024},
		// Topic keys' broker synonyms, with the topic keys' ranges.
		"log.cleaner.delete.retention.ms": {0, i64}, "log.cleaner.max.compaction.lag.ms": {1, i64}, "log.cleaner.backoff.ms": {0, i64},
		"log.message.timestamp.before.max.ms": {0, i64}, "log.message.timestamp.after.max.ms": {0, i64},
		"log.cleaner.min.cleanable.ratio": {0, 1}, "log.cleaner.min.compaction.lag.ms": {0, i64},
		"min.insync.replicas": {1, i32}, "log.roll.jitter.ms": {0, i64},
		// Described, not read: no range was checked before.
		"default.replication.factor": {1, i32}, "offsets.topic.replication.factor": {1, i32},
		// The cluster's keys (new with the cluster).
		"broker.heartbeat.interval.ms": {1, i32}, "broker.session.timeout.ms": {1, i32}, "replica.lag.time.max.ms": {0, i64},
		"leader.imbalance.check.interval.seconds": {1, i64}, "leader.imbalance.per.broker.percentage": {0, 100},
		// Dynamic-only in Kafka: the replication throttles.
		"leader.replication.throttled.rate": {0, i64}, "follower.replication.throttled.rate": {0, i64},
		// The transaction coordinator's (new with transactions).
		"transaction.state.log.num.partitions": {1, 10000}, "transaction.state.log.replication.factor": {1, i32},
		"transaction.state.log.segment.bytes": {1, i32}, "transaction.state.log.min.isr": {1, i32}, "transaction.max.timeout.ms": {1, i32},
		"transactional.id.expiration.ms": {1, i32}, "transaction.abort.timed.out.transaction.cleanup.interval.ms": {1, i32},
		"transaction.remove.expired.transaction.cleanup.interval.ms": {1, i32}, "sluice.transaction.version": {1, 2},
		// Connection limits and quota windows (configkeys_authz.go), Kafka's ranges.
		"max.connections": {0, i32}, "max.connections.per.ip": {0, i32}, "max.connection.creation.rate": {0, i32},
		"quota.window.num": {1, i32}, "quota.window.size.seconds": {1, i32},
		// Share groups' coordinator (Kafka's range).
		"share.coordinator.state.topic.num.partitions": {1, 10000},
	}
	// The group protocols' broker keys, Kafka 4.4's ranges (groupconfig.go).
	for _, s := range groupBrokerSpecs {
		want[s.name] = [2]int64{s.min, s.max}
	}
	for i := range configKeys {
		k := &configKeys[i]
		if k.use == useIgnored || (k.typ != typeInt && k.typ != typeLong && k.typ != typeDouble) {
			continue
		}
		if k.max <= k.min {
			t.Errorf("%s: bounds [%d, %d] not set", k.name, k.min, k.max)
		}
		w, ok := want[k.name]
		if min, max := k.bounds(); !ok || min != w[0] || max != w[1] {
			t.Errorf("%s: bounds [%d, %d], want %v", k.name, min, max, w)
		}
		delete(want, k.name)
	}
	if len(want) != 0 {
		t.Errorf("keys gone: %v", want)
	}
}

func applyFile(t *testing.T, lines ...string) (Config, []string, error) {
	t.Helper()
	c := DefaultConfig()
	unknown, err := c.ApplyProperties(strings.NewReader(strings.Join(lines, "\n")))
	return c, unknown, err
}

// TestAliases: of a key's spellings the most specific wins wherever it
// stands in the file, as in Kafka; units convert.
func TestAliases(t *testing.T) {
	for _, tc := range []struct {
		lines []string
		want  int64
	}{
		{[]string{"log.retention.hours=2"}, 2 * 3_600_000},
		{[]string{"log.retention.minutes=3"}, 3 * 60_000},
		{[]string{"log.retention.ms=5", "log.retention.minutes=3", "log.retention.hours=2"}, 5},
		{[]string{"log.retention.hours=2", "log.retention.minutes=3"}, 3 * 60_000},
		{[]string{"log.retention.hours=-1"}, -1},
		{[]string{"log.retention.minutes=-1", "log.retention.hours=1"}, -1},
		{[]string{"log.retention.ms=1", "log.retention.ms=9"}, 9},
	} {
		c, _, err := applyFile(t, tc.lines...)
		if err != nil || c.Log.RetentionMs != tc.want {
			t.Errorf("%v: retention %d (%v), want %d", tc.lines, c.Log.RetentionMs, err, tc.want)
		}
	}
	c, _, err := applyFile(t, "log.roll.hours=2", "log.dir=/a", "broker.id=7")
	if err != nil || c.Log.SegmentMs != 2*3_600_000 || c.DataDir != "/a" || c.NodeID != 7 {
		t.Fatalf("aliases: %v %+v", err, c)
	}
	c, _, err = applyFile(t, "log.roll.ms=5", "log.roll.hours=2", "log.dirs=/b", "log.dir=/a", "node.id=7", "broker.id=7")
	if err != nil || c.Log.SegmentMs != 5 || c.DataDir != "/b" || c.NodeID != 7 {
		t.Fatalf("keys over aliases: %v %+v", err, c)
	}
	for _, bad := range [][]string{
		{"node.id=1", "broker.id=2"},                    // Kafka refuses differing ids
		{"log.roll.hours=0"},                            // below log.roll.ms's minimum
		{"log.retention.hours=-2"},                      // below -1
		{"log.retention.ms=1", "log.retention.hours=x"}, // a shadowed spelling is still checked
	} {
		if _, _, err := applyFile(t, bad...); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

// TestIgnoredAndUnknownKeys: stock Kafka keys Sluice has no use for are
// accepted whatever their value; unknown keys, and fixed keys Sluice cannot
// take from a file, are returned in file order.
func TestIgnoredAndUnknownKeys(t *testing.T) {
	c, unknown, err := applyFile(t, "process.roles=broker,controller", "num.io.threads=lots", "x.y=1",
		"offsets.topic.replication.factor=3", "log.preallocate=true", "num.partitions=4")
	if err != nil || strings.Join(unknown, " ") != "x.y log.preallocate" || c.NumPartitions != 4 {
		t.Fatalf("err %v, unknown %v, partitions %d", err, unknown, c.NumPartitions)
	}
}

func TestSet(t *testing.T) {
	c := DefaultConfig()
	if err := c.Set("sluice.net", "std"); err != nil || c.Net != "std" {
		t.Fatalf("sluice.net: %v %q", err, c.Net)
	}
	if err := c.Set("log.retention.hours", "1"); err != nil || c.Log.RetentionMs != 3_600_000 {
		t.Fatalf("alias: %v %d", err, c.Log.RetentionMs)
	}
	for _, kv := range [][2]string{{"sluice.net", "fast"}, {"sluice.net.loops", "1025"}, {"no.such.key", "1"}, {"num.io.threads", "8"}} {
		if err := c.Set(kv[0], kv[1]); err == nil || !strings.Contains(err.Error(), kv[0]) {
			t.Errorf("%s=%s: %v", kv[0], kv[1], err)
		}
	}
}

// TestTopicKeys: every topic key validates its broker default, refuses
// garbage naming itself, and unknown topic keys are refused.
func TestTopicKeys(t *testing.T) {
	c := DefaultConfig()
	if len(topicKeyNames) != len(topicKeys) {
		t.Fatalf("%d topic names for %d keys", len(topicKeyNames), len(topicKeys))
	}
	for _, name := range topicKeyNames {
		v, ok := c.DefaultTopicValue(name)
		if err := ValidateTopicConfig(name, v); !ok || err != nil {
			t.Errorf("%s=%q: %v", name, v, err)
		}
		if err := ValidateTopicConfig(name, "garbage"); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s=garbage: %v", name, err)
		}
	}
	if ValidateTopicConfig("log.retention.ms", "1") == nil {
		t.Error("a broker key accepted as a topic key")
	}
}

func TestResolveTopic(t *testing.T) {
	c := DefaultConfig()
	c.Log.SegmentBytes = 1 << 20
	s := c.ResolveTopic(map[string]string{"retention.ms": "1000", "max.message.bytes": "2048", "compression.type": "zstd",
		"message.timestamp.type": "LogAppendTime", "min.insync.replicas": "2", "flush.ms": " 7 "})
	if s.Log.RetentionMs != 1000 || s.MaxMessageBytes != 2048 || s.Log.MaxMessageBytes != 2048 || s.CompressionType != "zstd" ||
		s.Log.TimestampType != storage.LogAppendTime || s.Log.SegmentBytes != 1<<20 || s.Log.FlushMs != 7 {
		t.Fatalf("resolved: %+v", s)
	}
	s = c.ResolveTopic(map[string]string{"cleanup.policy": "compact"})
	if !s.Log.Compact || s.Log.RetentionMs != -1 || s.Log.RetentionBytes != -1 {
		t.Fatalf("compact only: %+v", s.Log)
	}
	s = c.ResolveTopic(map[string]string{"cleanup.policy": "compact,delete"})
	if !s.Log.Compact || s.Log.RetentionMs != c.Log.RetentionMs {
		t.Fatalf("compact,delete: %+v", s.Log)
	}
}

// TestSensitiveValuesWithheld: a password-typed entry is described without
// its value, in the entry and its synonyms.
func TestSensitiveValuesWithheld(t *testing.T) {
	e := configEntry{name: "ssl.key.password", value: "secret", typ: typePassword, sensitive: true,
		source:   kmsg.ConfigSourceStaticBrokerConfig,
		synonyms: []configSynonym{{"ssl.key.password", "secret", kmsg.ConfigSourceStaticBrokerConfig}}}
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.IncludeSynonyms = true
	c := describedConfig(&e, req)
	if c.Value != nil || !c.IsSensitive || c.ConfigSynonyms[0].Value != nil || c.ConfigType != kmsg.ConfigTypePassword {
		t.Fatalf("%+v", c)
	}
}

// stockKafkaProperties is Kafka 4.0's config/server.properties without its
// comments: a combined broker and controller.
const stockKafkaProperties = `process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=localhost:9093
listeners=PLAINTEXT://:9092,CONTROLLER://:9093
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
log.dirs=/tmp/kraft-combined-logs
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
log.retention.hours=168
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
`

// TestStockKafkaFile: Kafka's own server.properties starts Sluice without
// a warning, on Kafka's defaults where the two agree.
func TestStockKafkaFile(t *testing.T) {
	c := DefaultConfig()
	unknown, err := c.ApplyProperties(strings.NewReader(stockKafkaProperties))
	if err != nil || len(unknown) != 0 {
		t.Fatalf("err %v, unknown %v", err, unknown)
	}
	if c.Listen != ":9092" || c.Advertise != "localhost:9092" || c.DataDir != "/tmp/kraft-combined-logs" ||
		c.Log.RetentionMs != 168*3_600_000 || c.NodeID != 1 {
		t.Fatalf("%+v", c)
	}
}
