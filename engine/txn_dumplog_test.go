package engine_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-broker/sluice/engine"
	"github.com/sluice-broker/sluice/internal/testbroker"
)

// TestKafkaDumpLogDecodesTransactionState: Kafka's own
// kafka-dump-log --transaction-log-decoder reads our __transaction_state
// records as Kafka's TransactionLogKey/TransactionLogValue, every state a
// committed and an aborted transaction pass through. Needs Kafka's jars:
//
//	SLUICE_KAFKA_CLASSPATH='/work/main/interop/java/target/deps/*' \
//	  go test -run TestKafkaDumpLogDecodesTransactionState ./engine/
func TestKafkaDumpLogDecodesTransactionState(t *testing.T) {
	cp := os.Getenv("SLUICE_KAFKA_CLASSPATH")
	if cp == "" {
		t.Skip("set SLUICE_KAFKA_CLASSPATH to Kafka's jars to run kafka-dump-log")
	}
	tb := testbroker.Start(t, func(c *engine.Config) { c.TxnStatePartitions = 1 })
	makeTopic(t, tb, "dumped", 1, nil)
	p := tb.Client(t, kgo.TransactionalID("dump-tx"), kgo.DefaultProduceTopic("dumped"))
	produceTxn(t, p, "dumped", true, "c")
	produceTxn(t, p, "dumped", false, "a")
	p.Close()
	tb.Stop(t)

	logs, _ := filepath.Glob(filepath.Join(tb.Config.DataDir, "__transaction_state-0", "*.log"))
	out, err := exec.Command("java", "-cp", cp, "org.apache.kafka.tools.DumpLogSegments", "--files", strings.Join(logs, ","),
		"--transaction-log-decoder", "--deep-iteration").CombinedOutput()
	if err != nil {
		t.Fatalf("kafka-dump-log: %v\n%s", err, out)
	}
	s := string(out)
	want := []string{`"transactionalId":"dump-tx"`, `"transactionPartitions":[{"topic":"dumped","partitionIds":[0]}]`}
	for _, st := range []string{"Empty", "Ongoing", "PrepareCommit", "CompleteCommit", "PrepareAbort", "CompleteAbort"} {
		want = append(want, `"transactionStatus":"`+st+`"`)
	}
	for _, want := range want {
		if !strings.Contains(s, want) {
			t.Errorf("kafka-dump-log output lacks %q", want)
		}
	}
	if strings.Contains(s, "Exception") || strings.Contains(s, "isvalid: false") || t.Failed() {
		t.Fatalf("kafka-dump-log --transaction-log-decoder:\n%s", s)
	}
}
