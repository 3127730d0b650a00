package testcluster

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestCoordinatorShutdownKeepsNewGroup: a group that forms and commits
// right after __consumer_offsets is created (RF=3), its coordinator then
// stopped with SIGTERM, keeps its offsets on the new coordinator. The
// coordinator used to answer after its own append only; the followers had
// not fetched the records yet when leadership moved, so the group was gone
// and the member's next commit was answered GROUP_ID_NOT_FOUND (found by
// the interop matrix's cluster run).
func TestCoordinatorShutdownKeepsNewGroup(t *testing.T) {
	c := Start(t, 3, Options{Extra: []string{"offsets.topic.replication.factor=3"}})
	adm := kadm.NewClient(c.Client())
	createTopic(t, adm, "kept", 3, 3)
	prod := c.Client(kgo.RequiredAcks(kgo.AllISRAcks()))
	produce := func(n int) {
		for i := range n {
			if err := prod.ProduceSync(ctxT(t, 20*time.Second), &kgo.Record{Topic: "kept", Value: []byte{byte(i)}}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	cons := c.Client(kgo.ConsumerGroup("kept-group"), kgo.ConsumeTopics("kept"), kgo.DisableAutoCommit(),
		kgo.FetchMaxWait(200*time.Millisecond), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	consumeAndCommit := func(n int) {
		got := 0
		ctx := ctxT(t, 30*time.Second)
		for got < n {
			fs := cons.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("consumed %d of %d", got, n)
			}
			got += fs.NumRecords()
		}
		if err := cons.CommitUncommittedOffsets(ctxT(t, 20*time.Second)); err != nil {
			t.Fatalf("commit: %v", err)
		}
	}
	produce(10)
	consumeAndCommit(10)

	coord := adm.FindGroupCoordinators(ctxT(t, 10*time.Second), "kept-group")["kept-group"]
	if coord.Err != nil {
		t.Fatal(coord.Err)
	}
	if err := c.Node(coord.NodeID).Stop(); err != nil {
		t.Fatalf("node %d: SIGTERM: %v", coord.NodeID, err)
	}
	// committed sums the group's offsets; the admin client may first try
	// the stopped node it knew as coordinator.
	committed := func() int64 {
		var offs kadm.OffsetResponses
		var err error
		c.WaitFor(20*time.Second, "OffsetFetch from the new coordinator", func() bool {
			offs, err = adm.FetchOffsets(ctxT(t, 5*time.Second), "kept-group")
			return err == nil
		})
		var sum int64
		offs.Each(func(o kadm.OffsetResponse) { sum += o.At })
		return sum
	}
	if n := committed(); n != 10 {
		t.Fatalf("after the coordinator (node %d) stopped, the group's committed offsets add up to %d, want 10", coord.NodeID, n)
	}
	produce(5)
	consumeAndCommit(5)
	if n := committed(); n != 15 {
		t.Fatalf("committed offsets add up to %d, want 15", n)
	}
}
