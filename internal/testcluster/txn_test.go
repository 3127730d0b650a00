package testcluster

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestTransactionsInProcessCluster: a transactional producer over three
// partitions led by three brokers, so the coordinator writes most markers
// with WriteTxnMarkers to the other brokers, and each leader verifies the
// first batch of a transaction with the coordinator over the network
// (KIP-890). Committed transactions are read by read_committed consumers,
// aborted ones are not; the coordinator is then stopped (controlled
// shutdown) between transactions and the producer carries on with the new
// one, which loaded the id's state from the replicated
// __transaction_state.
func TestTransactionsInProcessCluster(t *testing.T) {
	c := StartInProcess(t, 3, "transaction.state.log.num.partitions=3", "transaction.state.log.replication.factor=3",
		"offsets.topic.replication.factor=3")
	adm := kadm.NewClient(c.Client())
	createTopic(t, adm, "tx", 3, 3)
	prod := c.Client(kgo.TransactionalID("cluster-tx"), kgo.DefaultProduceTopic("tx"),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.TransactionTimeout(30*time.Second))
	txn := func(commit bool, values ...string) { runTxn(t, prod, commit, values...) }
	txn(true, "a1", "a2", "a3")
	txn(false, "x1", "x2", "x3")
	// transaction.state.log.min.isr (Kafka's default 2): a Prepare record
	// is acknowledged once two replicas hold it.
	if got := topicConfigValue(t, adm, "__transaction_state", "min.insync.replicas"); got != "2" {
		t.Fatalf("__transaction_state min.insync.replicas %q, want 2", got)
	}

	coord := findTxnCoordinator(t, adm, "cluster-tx")
	t.Logf("stopping the transaction coordinator, node %d", coord)
	var stopped *InProcNode
	for _, nd := range c.Nodes {
		if nd.ID == coord {
			stopped = nd
		}
	}
	stopped.Stop(t)
	txn(true, "b1", "b2", "b3")
	txn(false, "y1", "y2", "y3")
	stopped.Start(t)
	txn(true, "END", "END", "END")

	got := readTxnTopic(t, c, "tx", kgo.ReadCommitted())
	if want := "[a1 a2 a3 b1 b2 b3]"; fmt.Sprint(got) != want {
		t.Fatalf("read_committed read %v, want %v", got, want)
	}
	if all := readTxnTopic(t, c, "tx", kgo.ReadUncommitted()); len(all) != 12 {
		t.Fatalf("read_uncommitted read %v", all)
	}
	if newCoord := findTxnCoordinator(t, adm, "cluster-tx"); newCoord == coord {
		t.Logf("the coordinator moved back to node %d", newCoord)
	}
}

// topicConfigValue is a topic's value of config key.
func topicConfigValue(t *testing.T, adm *kadm.Client, topic, key string) string {
	t.Helper()
	rcs, err := adm.DescribeTopicConfigs(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("describe %s: %v %v", topic, err, rc.Err)
	}
	for _, c := range rc.Configs {
		if c.Key == key && c.Value != nil {
			return *c.Value
		}
	}
	return ""
}

// runTxn produces values in one transaction and commits or aborts it.
func runTxn(t *testing.T, cl *kgo.Client, commit bool, values ...string) {
	t.Helper()
	ctx := ctxT(t, 30*time.Second)
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for _, v := range values {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
	}
	if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		t.Fatalf("end (commit %v): %v", commit, err)
	}
}

func findTxnCoordinator(t *testing.T, adm *kadm.Client, id string) int32 {
	t.Helper()
	ctx := ctxT(t, 10*time.Second)
	resp := adm.FindTxnCoordinators(ctx, id)[id]
	if resp.Err != nil {
		t.Fatal(resp.Err)
	}
	return resp.NodeID
}

// readTxnTopic reads every partition until its END record and returns the
// other values, sorted.
func readTxnTopic(t *testing.T, c *InProc, topic string, iso kgo.IsolationLevel) []string {
	t.Helper()
	cl := c.Client(kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(iso), kgo.FetchMaxWait(200*time.Millisecond),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ended := map[int32]bool{}
	var out []string
	for len(ended) < 3 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %v; %d partitions ended", out, len(ended))
		}
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Value) == "END" {
				ended[r.Partition] = true
			} else {
				out = append(out, string(r.Value))
			}
		})
	}
	sort.Strings(out)
	return out
}

// TestOpenTransactionAtSIGKILL: a broker killed with a transaction open
// comes back with it open (the coordinator's __transaction_state and the
// partition's producer state both recovered), aborts it when its timeout
// passes, and read_committed readers then get the transactions committed
// after it, never its records.
func TestOpenTransactionAtSIGKILL(t *testing.T) {
	c := Start(t, 1, Options{Extra: []string{"transaction.state.log.num.partitions=2",
		"transaction.abort.timed.out.transaction.cleanup.interval.ms=500"}})
	adm := kadm.NewClient(c.Client())
	createTopic(t, adm, "killed", 1, 1)
	newProducer := func(id string) *kgo.Client {
		return c.Client(kgo.TransactionalID(id), kgo.DefaultProduceTopic("killed"), kgo.TransactionTimeout(3*time.Second))
	}
	commit := func(cl *kgo.Client, values ...string) { runTxn(t, cl, true, values...) }
	a := newProducer("killed-a")
	commit(a, "c1")
	if err := a.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"open1", "open2"} {
		if err := a.ProduceSync(ctxT(t, 20*time.Second), &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	a.Close()
	c.Node(1).Kill()
	c.Node(1).Restart()
	c.WaitBrokers(1, 30*time.Second)

	commit(newProducer("killed-b"), "c2", "END")
	cl := c.Client(kgo.ConsumeTopics("killed"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(200*time.Millisecond), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []string
	ctx := ctxT(t, 40*time.Second)
	for len(got) == 0 || got[len(got)-1] != "END" {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read_committed read %v: the open transaction was not aborted", got)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if fmt.Sprint(got) != "[c1 c2 END]" {
		t.Fatalf("read_committed read %v, want [c1 c2 END]", got)
	}
	desc, err := adm.DescribeTransactions(ctxT(t, 10*time.Second), "killed-a")
	if err != nil || desc["killed-a"].State != "CompleteAbort" {
		t.Fatalf("the killed producer's transaction: %+v %v", desc["killed-a"], err)
	}
	commit(newProducer("killed-a"), "after") // the id is usable again
}
