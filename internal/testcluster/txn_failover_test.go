package testcluster

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestOpenTransactionAcrossLeaderFailover: a partition's leader is stopped
// while a transaction is open in it. The new leader, a follower until
// then, knows the open transaction and the aborted one before it from the
// batches and markers it replicated: its LSO holds at the open
// transaction's start, and once the transaction commits, read_committed
// readers get exactly the committed records (the aborted ones hidden by
// the transaction index the follower built), read_uncommitted all.
func TestOpenTransactionAcrossLeaderFailover(t *testing.T) {
	c := StartInProcess(t, 3, "transaction.state.log.num.partitions=3", "transaction.state.log.replication.factor=3",
		"offsets.topic.replication.factor=3")
	adm := kadm.NewClient(c.Client())
	createTopic(t, adm, "tx", 3, 3)
	prod := c.Client(kgo.TransactionalID("failover-tx"), kgo.DefaultProduceTopic("tx"),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.TransactionTimeout(60*time.Second))
	begin := func(values ...string) {
		t.Helper()
		ctx := ctxT(t, 30*time.Second)
		if err := prod.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for _, v := range values {
			if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatalf("produce %s: %v", v, err)
			}
		}
	}
	end := func(commit bool) {
		t.Helper()
		if err := prod.EndTransaction(ctxT(t, 30*time.Second), kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("end (commit %v): %v", commit, err)
		}
	}
	begin("x1", "x2", "x3")
	end(false)
	begin("a1", "a2", "a3")
	end(true)
	begin("o1", "o2", "o3") // left open across the failover

	coord := findTxnCoordinator(t, adm, "failover-tx")
	leaders := partitionLeaders(t, adm, "tx")
	var stopped *InProcNode
	for _, nd := range c.Nodes {
		for _, l := range leaders {
			if nd.ID == l && nd.ID != coord && stopped == nil {
				stopped = nd
			}
		}
	}
	if stopped == nil {
		t.Skipf("every partition leader is the transaction coordinator (%d): %v", coord, leaders)
	}
	t.Logf("stopping node %d, leader of some of %v (coordinator %d)", stopped.ID, leaders, coord)
	stopped.Stop(t)
	c.WaitFor(30*time.Second, "new leaders", func() bool {
		for _, l := range partitionLeaders(t, adm, "tx") {
			if l == stopped.ID || l < 0 {
				return false
			}
		}
		return true
	})
	// Each partition: x (0), abort marker (1), a (2), commit marker (3),
	// o (4): the LSO holds at 4 on every leader, old or new.
	lso, err := adm.ListCommittedOffsets(ctxT(t, 10*time.Second), "tx")
	if err != nil {
		t.Fatal(err)
	}
	lso.Each(func(o kadm.ListedOffset) {
		if o.Err != nil || o.Offset != 4 {
			t.Errorf("partition %d: read_committed end %d (%v), want 4", o.Partition, o.Offset, o.Err)
		}
	})
	end(true)
	begin("END", "END", "END")
	end(true)
	got := readTxnTopic(t, c, "tx", kgo.ReadCommitted())
	if want := "[a1 a2 a3 o1 o2 o3]"; fmt.Sprint(got) != want {
		t.Fatalf("read_committed read %v, want %v", got, want)
	}
	if all := readTxnTopic(t, c, "tx", kgo.ReadUncommitted()); len(all) != 9 {
		t.Fatalf("read_uncommitted read %v", all)
	}
	stopped.Start(t)
}

func partitionLeaders(t *testing.T, adm *kadm.Client, topic string) []int32 {
	t.Helper()
	td, err := adm.ListTopics(ctxT(t, 10*time.Second), topic)
	if err != nil {
		t.Fatal(err)
	}
	var out []int32
	for _, p := range td[topic].Partitions.Sorted() {
		out = append(out, p.Leader)
	}
	return out
}
