package main

import "time"

// scenario is one client's scripted run against the broker.
type scenario struct {
	id      string   // short name, also the -only key and log file name
	client  string   // what the matrix calls it
	version string   // pinned version, shown unless the run reports its own
	table   string   // which table of COMPATIBILITY.md it belongs to
	dir     string   // working directory, relative to the repository root
	argv    []string // the command; it prints result lines on stdout
	timeout time.Duration
	// caps are the capabilities the scenario must report; one it never
	// reports (a crash, a timeout) counts as failed.
	caps []string
	// liveArgv, when set on an afterStop scenario, runs while the broker is
	// up (to write what the later check reads).
	liveArgv  []string
	afterStop bool // runs after the broker has shut down cleanly
}

const (
	tableClients = "clients"
	tableTools   = "tools"
)

// capability is one column of the clients table, or one step of a tool.
type capability struct {
	id, title, meaning string
}

// clientCaps are the clients table's columns, in order.
var clientCaps = []capability{
	{"create-topic", "create topic", "creates topics with 3-4 partitions through the client's admin API (else the Kafka CLI) and sees them in metadata"},
	{"codec-none", "none", "produces 120 keyed records with headers and explicit timestamps, acks=all, no compression, and consumes them back exactly: count, order per partition, key, value, headers, timestamp, at the offsets the producer was told"},
	{"codec-gzip", "gzip", "the same with gzip"},
	{"codec-snappy", "snappy", "the same with snappy"},
	{"codec-lz4", "lz4", "the same with lz4"},
	{"codec-zstd", "zstd", "the same with zstd"},
	{"idempotence", "idempotent", "the same with the idempotent producer (InitProducerId, sequence numbers), acks=all"},
	{"group-eager", "group (eager)", "two members of one consumer group with an eager assignor (range; KafkaJS: its round-robin) split 4 partitions and consume 100 records, committing each before counting it; one member leaves; 50 more records; a new member joins; 50 more: exactly the 100 new records arrive, none twice, none of the first 100 again (the group resumed from its committed offsets)"},
	{"group-cooperative", "group (cooperative)", "the same with the cooperative-sticky assignor (incremental rebalancing)"},
	{"group-kip848", "group (KIP-848)", "the same with group.protocol=consumer, Kafka 4's consumer rebalance protocol (ConsumerGroupHeartbeat)"},
	{"transactions", "transactions", "a transactional producer commits one transaction and aborts another over 3 partitions; a read_committed consumer reads exactly the committed records (Java also copies a topic consume-transform-produce style with sendOffsetsToTransaction, and the group's committed offsets must cover the input)"},
	{"group-kip848-regex", "group (KIP-848, pattern)", "the same, the members subscribing with a regular expression the broker resolves (Java: SubscriptionPattern)"},
	{"list-offsets", "list offsets", "earliest, latest and by-timestamp offsets of every partition match what was produced"},
	{"describe-config", "describe config", "describes a topic's configs and finds retention.ms"},
	{"alter-config", "alter config", "sets the topic's retention.ms and reads the new value back"},
}

var codecCaps = []string{"codec-none", "codec-gzip", "codec-snappy", "codec-lz4", "codec-zstd"}

func caps(ids ...[]string) []string {
	var out []string
	for _, l := range ids {
		out = append(out, l...)
	}
	return out
}

const javaCP = "target/classes:target/deps/*"

func javaArgv(class string, args ...string) []string {
	return append([]string{"java", "-Xss1m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", javaCP, class}, args...)
}

// matrix is every scenario, in the order they run.
func matrix() []scenario {
	common := []string{"create-topic"}
	admin := []string{"list-offsets", "describe-config", "alter-config"}
	return []scenario{
		{
			id: "java", client: "Apache Kafka Java client (kafka-clients)", version: "4.4.0",
			table: tableClients, dir: "interop/java",
			argv:    javaArgv("sluice.interop.ClientScenario"),
			timeout: 3 * time.Minute,
			caps:    caps(common, codecCaps, []string{"idempotence", "group-eager", "group-cooperative", "group-kip848", "group-kip848-regex", "transactions"}, admin),
		},
		{
			id: "confluent-kafka", client: "confluent-kafka (Python, librdkafka)", version: "2.16.1",
			table: tableClients, dir: "interop/python",
			argv:    []string{".venv/bin/python", "scenario.py"},
			timeout: 3 * time.Minute,
			caps:    caps(common, codecCaps, []string{"idempotence", "group-eager", "group-cooperative", "group-kip848", "transactions"}, admin),
		},
		{
			id: "kcat", client: "kcat (librdkafka)", version: "Debian kcat",
			table: tableClients, dir: "interop/kcat",
			argv:    []string{"python3", "scenario.py"},
			timeout: 3 * time.Minute,
			caps:    caps(common, codecCaps, []string{"idempotence", "group-eager", "group-cooperative"}, admin),
		},
		{
			id: "kafkajs", client: "KafkaJS", version: "2.2.4",
			table: tableClients, dir: "interop/node",
			argv:    []string{"node", "scenario.js"},
			timeout: 3 * time.Minute,
			caps:    caps(common, codecCaps, []string{"idempotence", "group-eager", "group-cooperative", "transactions"}, admin),
		},
		{
			id: "sarama", client: "IBM/sarama", version: "v1.61.1",
			table: tableClients, dir: "interop/go",
			argv:    []string{"go", "run", ".", "-client", "sarama"},
			timeout: 3 * time.Minute,
			caps:    caps(common, codecCaps, []string{"idempotence", "group-eager", "group-cooperative", "group-kip848", "transactions"}, admin),
		},
		{
			id: "kafka-go", client: "segmentio/kafka-go", version: "v0.4.51",
			table: tableClients, dir: "interop/go",
			argv:    []string{"go", "run", ".", "-client", "kafka-go"},
			timeout: 3 * time.Minute,
			caps:    caps(common, codecCaps, []string{"idempotence", "group-eager", "group-cooperative", "group-kip848", "transactions"}, admin),
		},
		{
			id: "franz-go", client: "twmb/franz-go", version: "v1.22.3",
			table: tableClients, dir: "interop/go",
			argv:    []string{"go", "run", ".", "-client", "franz-go"},
			timeout: 3 * time.Minute,
			caps:    caps(common, codecCaps, []string{"idempotence", "group-eager", "group-cooperative", "group-kip848", "transactions"}, admin),
		},
		{
			id: "kafka-cli", client: "Apache Kafka CLI tools (kafka-tools)", version: "4.4.0",
			table: tableTools, dir: "interop/java",
			argv:    javaArgv("sluice.interop.CliScenario"),
			timeout: 6 * time.Minute,
			caps: []string{"kafka-topics create", "kafka-topics describe", "kafka-topics list",
				"console-producer", "console-consumer", "consumer-groups describe",
				"consumer-groups reset-offsets", "consumer-groups describe (KIP-848)", "kafka-configs describe", "kafka-configs alter",
				"get-offset-shell", "verifiable-producer", "verifiable-consumer", "delete-records",
				"kafka-topics alter partitions", "consumer-groups delete", "log-dirs", "broker-api-versions",
				"cluster-id", "producer-perf-test", "consumer-perf-test", "kafka-transactions list", "kafka-transactions describe",
				"kafka-transactions describe-producers", "kafka-transactions find-hanging", "kafka-topics delete"},
		},
		{
			id: "java-share", client: "Apache Kafka Java share consumer (KafkaShareConsumer, kafka-share-groups)", version: "4.4.0",
			table: tableTools, dir: "interop/java",
			argv:    javaArgv("sluice.interop.ShareScenario"),
			timeout: 4 * time.Minute,
			caps:    []string{"share-implicit", "share-explicit", "share-groups tool"},
		},
		{
			id: "java-security", client: "Apache Kafka Java client and CLI over TLS and SASL", version: "4.4.0",
			table: tableTools, dir: "interop/java",
			argv:    javaArgv("sluice.interop.SecurityScenario"),
			timeout: 4 * time.Minute,
			caps: []string{"scram user (AlterUserScramCredentials)", "SASL_SSL SCRAM-SHA-512 produce/consume",
				"SASL_SSL wrong password", "kafka-topics over SASL_SSL (client properties file)",
				"mTLS produce/consume", "mTLS without a client certificate", "deleted SCRAM user"},
		},
		// The security table: each client against the secure listeners.
		{
			id: "confluent-kafka-security", client: "confluent-kafka (Python, librdkafka)", version: "2.16.1",
			table: tableSecurity, dir: "interop/python",
			argv:    []string{".venv/bin/python", "security.py"},
			timeout: 2 * time.Minute, caps: securityCapIDs,
		},
		{
			id: "kcat-security", client: "kcat (librdkafka)", version: "Debian kcat",
			table: tableSecurity, dir: "interop/kcat",
			argv:    []string{"python3", "security.py"},
			timeout: 3 * time.Minute, caps: securityCapIDs,
		},
		{
			id: "kafkajs-security", client: "KafkaJS", version: "2.2.4",
			table: tableSecurity, dir: "interop/node",
			argv:    []string{"node", "security.js"},
			timeout: 3 * time.Minute, caps: securityCapIDs,
		},
		{
			id: "sarama-security", client: "IBM/sarama", version: "v1.61.1",
			table: tableSecurity, dir: "interop/go",
			argv:    []string{"go", "run", ".", "-client", "sarama", "-security"},
			timeout: 2 * time.Minute, caps: securityCapIDs,
		},
		{
			id: "kafka-go-security", client: "segmentio/kafka-go", version: "v0.4.51",
			table: tableSecurity, dir: "interop/go",
			argv:    []string{"go", "run", ".", "-client", "kafka-go", "-security"},
			timeout: 2 * time.Minute, caps: securityCapIDs,
		},
		{
			id: "franz-go-security", client: "twmb/franz-go", version: "v1.22.3",
			table: tableSecurity, dir: "interop/go",
			argv:    []string{"go", "run", ".", "-client", "franz-go", "-security"},
			timeout: 3 * time.Minute, caps: securityCapIDs, // a refused franz-go client retries until its timeouts
		},
		{
			id: "dump-log", client: "kafka-dump-log (DumpLogSegments)", version: "4.4.0",
			table: tableTools, dir: "interop/java",
			liveArgv:  javaArgv("sluice.interop.DumpLogScenario", "produce"),
			argv:      javaArgv("sluice.interop.DumpLogScenario", "verify"),
			afterStop: true,
			timeout:   3 * time.Minute,
			caps:      []string{"produce fixture", "deep-iteration", "index", "timeindex", "index-sanity-check"},
		},
		{
			id: "kafka-streams", client: "Kafka Streams (kafka-streams)", version: "4.4.0",
			table: tableTools, dir: "interop/java",
			argv:    javaArgv("sluice.interop.StreamsScenario"),
			timeout: 4 * time.Minute,
			caps:    []string{"eos-v2 word count"},
		},
	}
}

// tableSecurity is the clients against the single broker's SASL_SSL and
// mutual-TLS listeners (security.go): one row per client, one column per
// securityCaps entry.
const tableSecurity = "security-clients"

// securityCaps are the security table's columns, in order.
var securityCaps = []capability{
	{"scram-user", "SCRAM user", "on the PLAINTEXT listener, makes a SCRAM-SHA-512 credential for a user of its own with the client's AlterUserScramCredentials (KafkaJS and kcat have none: Kafka's kafka-configs --add-config) and sees it described"},
	{"sasl-ssl", "SASL_SSL SCRAM-SHA-512", "over the SASL_SSL listener (the broker's certificate verified against the run's CA, SCRAM-SHA-512 as that user): creates a topic, produces 50 keyed records with acks=all and consumes them in a consumer group, exactly (count, order, key, value)"},
	{"wrong-password", "wrong password", "the same user with a wrong password: the producer and a consumer of the topic above are refused with the client's SASL authentication error, and the consumer gets no record"},
	{"mtls", "mutual TLS", "over the SSL listener that requires client certificates, presenting the run's client certificate: creates a topic, produces 50 records with acks=all and consumes them in a group, exactly"},
	{"mtls-no-cert", "TLS, no certificate", "on that listener without a client certificate: refused (the TLS handshake fails), no record"},
	{"deleted-user", "deleted user", "after the credential is deleted (DeleteUserScramCredentials, or kafka-configs --delete-config), the right password is refused with the SASL authentication error and no record"},
}

var securityCapIDs = []string{"scram-user", "sasl-ssl", "wrong-password", "mtls", "mtls-no-cert", "deleted-user"}

// The cluster half of the matrix (cluster.go): every client runs its
// cluster scenario against three brokers.
const (
	tableClusterClients = "cluster-clients"
	tableClusterTools   = "cluster-tools"
)

// clusterCaps are the cluster clients table's columns, in order.
var clusterCaps = []capability{
	{"rf3-topic", "RF=3 topic", "creates a 3-partition topic with replication factor 3 and min.insync.replicas=2 through the client's admin API (kcat: kafka-topics) and sees three replicas, all in the ISR, for every partition in metadata"},
	{"acks-all", "acks=all", "one member of a consumer group subscribes; 100 keyed records are produced with acks=all (idempotent where the client has it) and the member consumes them, committing each"},
	{"broker-down", "broker down", "the driver stops the group's coordinator broker with SIGTERM (controlled shutdown: its leaderships and the group move first); 100 more records with acks=all, none failed, and the same member consumes them"},
	{"broker-back", "broker back", "the broker is started again and back in every ISR; 100 more records; the member consumes them: all 300 arrived exactly once, in produce order within each partition"},
	{"restart", "restart", "(the driver) the stopped broker exited 0 on SIGTERM, restarted, and rejoined every ISR"},
}

var clusterClientCaps = []string{"rf3-topic", "acks-all", "broker-down", "broker-back", "restart"}

// clusterMatrix is every cluster scenario, in the order they run.
func clusterMatrix() []scenario {
	return []scenario{
		{
			id: "cluster-java", client: "Apache Kafka Java client (kafka-clients)", version: "4.4.0",
			table: tableClusterClients, dir: "interop/java",
			argv:    javaArgv("sluice.interop.ClusterClientScenario"),
			timeout: 2 * time.Minute, caps: clusterClientCaps,
		},
		{
			id: "cluster-confluent-kafka", client: "confluent-kafka (Python, librdkafka)", version: "2.16.1",
			table: tableClusterClients, dir: "interop/python",
			argv:    []string{".venv/bin/python", "scenario.py", "cluster"},
			timeout: 2 * time.Minute, caps: clusterClientCaps,
		},
		{
			id: "cluster-kcat", client: "kcat (librdkafka)", version: "Debian kcat",
			table: tableClusterClients, dir: "interop/kcat",
			argv:    []string{"python3", "scenario.py", "cluster"},
			timeout: 2 * time.Minute, caps: clusterClientCaps,
		},
		{
			id: "cluster-kafkajs", client: "KafkaJS", version: "2.2.4",
			table: tableClusterClients, dir: "interop/node",
			argv:    []string{"node", "scenario.js", "cluster"},
			timeout: 3 * time.Minute, caps: clusterClientCaps, // its consumer restarts itself (~1 min)
		},
		{
			id: "cluster-sarama", client: "IBM/sarama", version: "v1.61.1",
			table: tableClusterClients, dir: "interop/go",
			argv:    []string{"go", "run", ".", "-client", "sarama", "-cluster"},
			timeout: 2 * time.Minute, caps: clusterClientCaps,
		},
		{
			id: "cluster-kafka-go", client: "segmentio/kafka-go", version: "v0.4.51",
			table: tableClusterClients, dir: "interop/go",
			argv:    []string{"go", "run", ".", "-client", "kafka-go", "-cluster"},
			timeout: 2 * time.Minute, caps: clusterClientCaps,
		},
		{
			id: "cluster-franz-go", client: "twmb/franz-go", version: "v1.22.3",
			table: tableClusterClients, dir: "interop/go",
			argv:    []string{"go", "run", ".", "-client", "franz-go", "-cluster"},
			timeout: 2 * time.Minute, caps: clusterClientCaps,
		},
		{
			id: "cluster-kafka-cli", client: "Apache Kafka CLI tools (kafka-tools)", version: "4.4.0",
			table: tableClusterTools, dir: "interop/java",
			argv:    javaArgv("sluice.interop.ClusterCliScenario"),
			timeout: 3 * time.Minute,
			caps: []string{"kafka-topics describe", "broker-api-versions", "cluster-id",
				"metadata-quorum status", "metadata-quorum replication", "leader-election preferred", "restart",
				"reassign-partitions generate", "reassign-partitions execute", "reassign-partitions verify",
				"reassign-partitions clear throttles"},
		},
		{
			id: "cluster-java-txn", client: "Apache Kafka Java client (kafka-clients)", version: "4.4.0",
			table: tableClusterTools, dir: "interop/java",
			argv:    javaArgv("sluice.interop.ClusterTxnScenario"),
			timeout: 3 * time.Minute,
			caps:    []string{"transactions, coordinator stopped", "restart"},
		},
		{
			id: "cluster-kafka-streams", client: "Kafka Streams (kafka-streams)", version: "4.4.0",
			table: tableClusterTools, dir: "interop/java",
			argv:    javaArgv("sluice.interop.ClusterStreamsScenario"),
			timeout: 5 * time.Minute,
			caps:    []string{"eos-v2 word count, broker SIGKILLed", "restart"},
		},
		{
			id: "cluster-dump-log", client: "kafka-dump-log (DumpLogSegments)", version: "4.4.0",
			table: tableClusterTools, dir: "interop/java",
			argv:      javaArgv("sluice.interop.ClusterDumpLog"),
			afterStop: true,
			timeout:   3 * time.Minute,
			caps:      []string{"deep-iteration", "replicas identical", "verify-index-only", "index-sanity-check"},
		},
	}
}
