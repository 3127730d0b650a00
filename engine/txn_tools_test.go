package engine_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKafkaTransactionsFindsAndAbortsHanging runs Kafka's own
// kafka-transactions tool against a hanging transaction: a transactional
// batch no coordinator knows of holds the LSO. find-hanging lists it (from
// DescribeProducers' open transaction start), abort writes its marker
// (WriteTxnMarkers with the producer and coordinator epochs
// DescribeProducers reported), and read_committed readers then get every
// record but the hanging ones. It needs Java and Kafka's jars:
//
//	SLUICE_KAFKA_CLASSPATH="$(ls interop/java/target/deps/*.jar | tr '\n' :)" \
//	    go test -run KafkaTransactions ./engine/
func TestKafkaTransactionsFindsAndAbortsHanging(t *testing.T) {
	cp := os.Getenv("SLUICE_KAFKA_CLASSPATH")
	if cp == "" {
		t.Skip("set SLUICE_KAFKA_CLASSPATH to Kafka's jars to run kafka-transactions")
	}
	tb := txnBroker(t)
	makeTopic(t, tb, "hang", 1, nil)
	p := tb.Broker.Topic("hang").Partition(0)
	mustAppend(t, p, plainBatch(t, "p0"))
	mustAppend(t, p, txnBatch(t, 4242, 3, 0, "h1", "h2"))
	mustAppend(t, p, plainBatch(t, "p1"))
	if lso := p.LastStableOffset(); lso != 1 {
		t.Fatalf("LSO %d, want 1: the hanging transaction's start", lso)
	}
	tool := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("java", append([]string{"-cp", cp, "org.apache.kafka.tools.TransactionsCommand",
			"--bootstrap-server", tb.Addr}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kafka-transactions %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	out := tool("find-hanging", "--broker-id", "1", "--max-transaction-timeout", "0")
	if !strings.Contains(out, "4242") {
		t.Fatalf("find-hanging did not list producer 4242:\n%s", out)
	}
	tool("abort", "--topic", "hang", "--partition", "0", "--start-offset", "1")
	if lso, hw := p.LastStableOffset(), p.HighWatermark(); lso != hw || hw != 5 {
		t.Fatalf("after abort: LSO %d, HW %d; want both 5", lso, hw)
	}
	if got := readUntil(t, tb, "hang", 1, "p1", kgo.ReadCommitted()); len(got) != 1 || got[0] != "p0" {
		t.Fatalf("read_committed read %v before p1, want [p0]", got)
	}
}
