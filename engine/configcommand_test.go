package engine_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/sluice-broker/sluice/internal/testbroker"
)

// kafkaConfigs runs Kafka's own kafka-configs (Kafka 4's
// org.apache.kafka.tools.ConfigCommand) against tb and returns its
// standard output; the test fails if the tool does.
//
//	SLUICE_KAFKA_CLASSPATH='/work/main/interop/java/target/deps/*' \
//	  go test ./engine -run TestKafkaConfigCommand
func kafkaConfigs(t *testing.T, tb *testbroker.Broker, args ...string) string {
	t.Helper()
	cp := os.Getenv("SLUICE_KAFKA_CLASSPATH")
	cmd := exec.Command("java", append([]string{"-cp", cp, "org.apache.kafka.tools.ConfigCommand", "--bootstrap-server", tb.Addr}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kafka-configs %s: %v\n%s%s", strings.Join(args, " "), err, out, lastLines(stderr.String(), 5))
	}
	return string(out)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// TestKafkaConfigCommand: kafka-configs alters and describes the
// cluster-wide broker default, one broker and a group, and is refused a
// read-only key, against a real broker.
func TestKafkaConfigCommand(t *testing.T) {
	if os.Getenv("SLUICE_KAFKA_CLASSPATH") == "" {
		t.Skip("set SLUICE_KAFKA_CLASSPATH to Kafka's jars to run kafka-configs")
	}
	tb := testbroker.Start(t)
	kafkaConfigs(t, tb, "--entity-type", "brokers", "--entity-default", "--alter", "--add-config", "log.retention.ms=3600000")
	kafkaConfigs(t, tb, "--entity-type", "brokers", "--entity-name", "1", "--alter", "--add-config", "message.max.bytes=2000")
	for args, want := range map[string]string{
		"--entity-type brokers --entity-default --describe":      "log.retention.ms=3600000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=3600000}",
		"--entity-type brokers --entity-name 1 --describe":       "message.max.bytes=2000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:message.max.bytes=2000, DEFAULT_CONFIG:message.max.bytes=1048588}",
		"--entity-type brokers --entity-name 1 --describe --all": "log.retention.ms=3600000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=3600000, DEFAULT_CONFIG:log.retention.ms=604800000}",
	} {
		if out := kafkaConfigs(t, tb, strings.Fields(args)...); !strings.Contains(out, want) {
			t.Errorf("kafka-configs %s:\n%s\nwant a line %q", args, out, want)
		}
	}
	if got := tb.Broker.CurrentConfig(); got.Log.RetentionMs != 3_600_000 || got.MessageMaxBytes != 2000 {
		t.Fatalf("effective config: retention %d, message.max.bytes %d", got.Log.RetentionMs, got.MessageMaxBytes)
	}

	kafkaConfigs(t, tb, "--entity-type", "groups", "--entity-name", "g1", "--alter", "--add-config", "consumer.session.timeout.ms=50000")
	out := kafkaConfigs(t, tb, "--entity-type", "groups", "--entity-name", "g1", "--describe")
	if want := "consumer.session.timeout.ms=50000 sensitive=false synonyms={DYNAMIC_GROUP_CONFIG:consumer.session.timeout.ms=50000, DEFAULT_CONFIG:group.consumer.session.timeout.ms=45000}"; !strings.Contains(out, want) {
		t.Errorf("group describe:\n%s\nwant %q", out, want)
	}

	cmd := exec.Command("java", "-cp", os.Getenv("SLUICE_KAFKA_CLASSPATH"), "org.apache.kafka.tools.ConfigCommand", "--bootstrap-server", tb.Addr,
		"--entity-type", "brokers", "--entity-name", "1", "--alter", "--add-config", "num.partitions=3")
	out2, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out2), "InvalidRequestException: Cannot update these configs dynamically: Set(num.partitions)") {
		t.Fatalf("read-only key: %v\n%s", err, lastLines(string(out2), 5))
	}
}

// TestKafkaReassignThrottle: kafka-reassign-partitions --throttle sets
// this broker's leader/follower.replication.throttled.rate as dynamic
// configs (in force through Broker.ReplicationThrottles) and the topic's
// throttled-replica lists; --verify clears them again.
func TestKafkaReassignThrottle(t *testing.T) {
	cp := os.Getenv("SLUICE_KAFKA_CLASSPATH")
	if cp == "" {
		t.Skip("set SLUICE_KAFKA_CLASSPATH to Kafka's jars to run kafka-reassign-partitions")
	}
	tb := testbroker.Start(t)
	createTopic(t, tb, "throttled", 2)
	plan := t.TempDir() + "/plan.json"
	if err := os.WriteFile(plan, []byte(`{"version":1,"partitions":[{"topic":"throttled","partition":0,"replicas":[1]},{"topic":"throttled","partition":1,"replicas":[1]}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	reassign := func(args ...string) string {
		cmd := exec.Command("java", append([]string{"-cp", cp, "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
			"--bootstrap-server", tb.Addr, "--reassignment-json-file", plan}, args...)...)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("kafka-reassign-partitions %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	reassign("--execute", "--throttle", "1000000")
	if l, f := tb.Broker.ReplicationThrottles(); l != 1_000_000 || f != 1_000_000 {
		t.Fatalf("throttles after --execute --throttle: %d %d", l, f)
	}
	if got := tb.Broker.Topic("throttled").Overrides()["leader.replication.throttled.replicas"]; got != "0:1,1:1" {
		t.Fatalf("leader.replication.throttled.replicas %q", got)
	}
	if out := reassign("--verify"); !strings.Contains(out, "Clearing broker-level throttles on broker 1") {
		t.Fatalf("--verify:\n%s", out)
	}
	if l, f := tb.Broker.ReplicationThrottles(); l != 1<<63-1 || f != 1<<63-1 {
		t.Fatalf("throttles after --verify: %d %d", l, f)
	}
}
