package testcluster

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/sluice-broker/sluice/tools/chaos/check"
)

// TestCoordinatorKilledBetweenPrepareAndMarkers: the broker hosting a
// transaction coordinator is SIGKILLed after it wrote PrepareCommit to
// __transaction_state and some of the transaction's markers, but before
// all of them. The window is held open by a real fault rather than a hook:
// one partition of the transaction has a single replica, on a broker that
// is killed before EndTxn, so its marker cannot be written (the partition
// has no leader) while the coordinator's other markers — the RF=3 copy
// partition and the group's __consumer_offsets partition — are.
// DescribeTransactions shows PrepareCommit there, for as long as the test
// likes. Then the coordinator's broker is killed and the single replica's
// broker started again: the next leader of the __transaction_state
// partition loads the Prepare record and must finish the commit — every
// copied record visible at read_committed once, in order, the offsets
// committed in the transaction visible to the group, the LSO up to the HW
// on every partition (no hanging transaction). The same with an abort:
// PrepareAbort resumed, nothing visible, no offset committed.
func TestCoordinatorKilledBetweenPrepareAndMarkers(t *testing.T) {
	t.Run("commit", func(t *testing.T) { killBetweenPrepareAndMarkers(t, true) })
	t.Run("abort", func(t *testing.T) { killBetweenPrepareAndMarkers(t, false) })
}

func killBetweenPrepareAndMarkers(t *testing.T, commit bool) {
	const (
		id, group = "prepare-kill-tx", "prepare-kill-group"
		records   = 20
	)
	c := Start(t, 3, Options{Extra: []string{
		"transaction.state.log.num.partitions=1", "transaction.state.log.replication.factor=3",
		"offsets.topic.replication.factor=3", "min.insync.replicas=2",
	}})
	adm := kadm.NewClient(c.Client())
	createTopic(t, adm, "pk-src", 1, 3)
	createTopic(t, adm, "pk-copy", 1, 3)
	src := c.Client(kgo.DefaultProduceTopic("pk-src"), kgo.RequiredAcks(kgo.AllISRAcks()))
	for i := range records {
		if err := src.ProduceSync(ctxT(t, 20*time.Second), &kgo.Record{Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	// The session's InitProducerId creates __transaction_state; its
	// FindCoordinator then names the coordinator, and the group's.
	s, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(c.Bootstrap()...),
		kgo.TransactionalID(id), kgo.TransactionTimeout(60*time.Second),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics("pk-src"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.MetadataMinAge(100*time.Millisecond), kgo.RecordDeliveryTimeout(60*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var polled []*kgo.Record
	pctx := ctxT(t, 60*time.Second)
	for len(polled) < records {
		fs := s.PollFetches(pctx)
		if pctx.Err() != nil {
			t.Fatalf("polled %d of %d source records", len(polled), records)
		}
		polled = append(polled, fs.Records()...)
	}
	coord, gcoord := waitTxnCoordinator(t, adm, id), waitGroupCoordinator(t, adm, group)
	blocked := int32(-1) // a node that coordinates neither
	for _, nd := range c.Nodes {
		if nd.ID != coord && nd.ID != gcoord && blocked < 0 {
			blocked = nd.ID
		}
	}
	t.Logf("transaction coordinator %d, group coordinator %d, single-replica partition on %d", coord, gcoord, blocked)
	createSingleReplica(t, c.Client(), "pk-blocked", blocked)
	waitAssignedISR(t, c, "pk-blocked", 1, 1)

	if err := s.Begin(); err != nil {
		t.Fatal(err)
	}
	for _, r := range polled {
		for _, topic := range []string{"pk-copy", "pk-blocked"} {
			if err := s.ProduceSync(ctxT(t, 30*time.Second), &kgo.Record{Topic: topic, Value: r.Value}).FirstErr(); err != nil {
				t.Fatalf("produce to %s: %v", topic, err)
			}
		}
	}
	c.Node(blocked).Kill()
	survivor := c.Node(coord)
	c.WaitFor(30*time.Second, fmt.Sprintf("node %d out of every replicated ISR", blocked), func() bool {
		return outOfISRs(c, survivor, blocked)
	})

	// EndTxn answers once the Prepare record is in the log, the markers
	// it could write written (Sluice waits for them a bounded time).
	prepare, complete, try := "PrepareCommit", "CompleteCommit", kgo.TryCommit
	if !commit {
		prepare, complete, try = "PrepareAbort", "CompleteAbort", kgo.TryAbort
	}
	committed, err := s.End(ctxT(t, 60*time.Second), try)
	if err != nil || committed != commit {
		t.Fatalf("End: committed %v, %v", committed, err)
	}
	if st := txnState(t, c, id); st != prepare {
		t.Fatalf("after EndTxn with a partition leaderless: state %s, want %s", st, prepare)
	}
	lso, err := adm.ListCommittedOffsets(ctxT(t, 10*time.Second), "pk-copy")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := lso.Lookup("pk-copy", 0); o.Offset != records+1 {
		t.Fatalf("pk-copy's LSO %d (%v) in %s, want %d: its marker was not written", o.Offset, o.Err, prepare, records+1)
	}

	pd, _ := describeTxn(c, id)
	t.Logf("%+v with pk-blocked's marker pending; SIGKILL of the coordinator, node %d", pd, coord)
	c.Node(coord).Kill()
	c.Node(blocked).Restart()
	var next int32
	last := "no answer"
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		d, err := describeTxn(c, id)
		if err != nil {
			last = err.Error()
		} else if next, last = d.Coordinator, fmt.Sprintf("%+v", d); d.State == complete {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no new coordinator reached %s in 60s; last description: %s", complete, last)
		}
	}
	if next == coord {
		t.Fatalf("%s on node %d, which was killed", complete, next)
	}
	t.Logf("described at completion: %s", last)
	c.Node(coord).Restart()
	c.WaitBrokers(3, 60*time.Second)

	ctx := ctxT(t, 60*time.Second)
	seeds := c.Bootstrap()
	srcLogs, err := check.ReadCommitted(ctx, seeds, "pk-src", 1)
	if err != nil {
		t.Fatal(err)
	}
	offsets := groupOffsets(t, c, group, "pk-src")
	if want := int64(records); commit && offsets[0] != want {
		t.Errorf("the group's committed offset %d, want %d (the transaction's)", offsets[0], want)
	} else if !commit && offsets[0] > 0 {
		t.Errorf("the group's committed offset %d after the transaction aborted", offsets[0])
	}
	for _, topic := range []string{"pk-copy", "pk-blocked"} {
		dst, err := check.ReadCommitted(ctx, seeds, topic, 1) // fails on a hanging transaction
		if err != nil {
			t.Fatal(err)
		}
		reportAnomalies(t, check.CheckCopy(srcLogs, dst, offsets))
		t.Logf("%s: %d records at read_committed, LSO = HW = %d", topic, len(dst[0].Values), dst[0].HW)
	}
	if _, err := check.ReadCommitted(ctx, seeds, "__consumer_offsets", 3); err != nil {
		t.Errorf("__consumer_offsets: %v", err)
	}
	t.Logf("node %d completed the transaction (%s)", next, complete)
}

// createSingleReplica creates topic with one partition, its one replica
// on node, min.insync.replicas=1 (the cluster's 2 would refuse acks=all).
func createSingleReplica(t *testing.T, cl *kgo.Client, topic string, node int32) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 20000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
	a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	a.Partition, a.Replicas = 0, []int32{node}
	rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
	cfg := kmsg.NewCreateTopicsRequestTopicConfig()
	cfg.Name, cfg.Value = "min.insync.replicas", kmsg.StringPtr("1")
	rt.Configs = append(rt.Configs, cfg)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctxT(t, 30*time.Second), cl)
	if err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create %s: %v %+v", topic, err, resp)
	}
}

// waitTxnCoordinator waits until FindCoordinator names id's coordinator
// (the first asks create __transaction_state).
func waitTxnCoordinator(t *testing.T, adm *kadm.Client, id string) int32 {
	t.Helper()
	node := int32(-1)
	waitFor(t, 30*time.Second, "a transaction coordinator for "+id, func() bool {
		r := adm.FindTxnCoordinators(ctxT(t, 5*time.Second), id)[id]
		node = r.NodeID
		return r.Err == nil && node >= 0
	})
	return node
}

// waitGroupCoordinator waits until FindCoordinator names group's
// coordinator.
func waitGroupCoordinator(t *testing.T, adm *kadm.Client, group string) int32 {
	t.Helper()
	node := int32(-1)
	waitFor(t, 30*time.Second, "a group coordinator for "+group, func() bool {
		r := adm.FindGroupCoordinators(ctxT(t, 5*time.Second), group)[group]
		node = r.NodeID
		return r.Err == nil && node >= 0
	})
	return node
}

// outOfISRs reports whether node nd's Metadata shows dead in no ISR of a
// partition with more than one replica (a single replica's ISR keeps its
// last member, as Kafka's does).
func outOfISRs(c *Cluster, nd *Node, dead int32) bool {
	m, err := c.Metadata(nd)
	if err != nil {
		return false
	}
	for _, tp := range m.Topics {
		for _, p := range tp.Partitions {
			if len(p.Replicas) > 1 && containsID(p.ISR, dead) {
				return false
			}
		}
	}
	return true
}

// txnState is DescribeTransactions' state of id, asked again while the
// answer is an error.
func txnState(t *testing.T, c *Cluster, id string) string {
	t.Helper()
	var state string
	waitFor(t, 20*time.Second, "a description of "+id, func() bool {
		d, err := describeTxn(c, id)
		state = d.State
		return err == nil
	})
	return state
}

// describeTxn describes id with a new client of the running nodes: a
// client's cached coordinator would stay the killed one.
func describeTxn(c *Cluster, id string) (kadm.DescribedTransaction, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Bootstrap()...))
	if err != nil {
		return kadm.DescribedTransaction{}, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	d, err := kadm.NewClient(cl).DescribeTransactions(ctx, id)
	if err != nil {
		return kadm.DescribedTransaction{}, err
	}
	return d[id], d[id].Err
}

// groupOffsets is group's committed offsets of topic (OffsetFetch), asked
// with a new client of the running nodes until one answers.
func groupOffsets(t *testing.T, c *Cluster, group, topic string) map[int32]int64 {
	t.Helper()
	out := map[int32]int64{}
	var last error
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if last = fetchGroupOffsets(c, group, topic, out); last == nil {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("offsets of %s: %v", group, last)
		}
	}
}

func fetchGroupOffsets(c *Cluster, group, topic string, out map[int32]int64) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Bootstrap()...))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(cl).FetchOffsets(ctx, group)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		return err
	}
	for p, o := range resp[topic] {
		out[p] = o.At
	}
	return nil
}

// TestCoordinatorKilledBeforeOffsetsMarker: the marker held back is the
// one on __consumer_offsets. The group's offsets partition has a single
// replica (offsets.topic.replication.factor=1), on the group coordinator's
// node, which is not the transaction coordinator's. The transaction
// copies 20 records and commits the group's offset (AddOffsetsToTxn and
// TxnOffsetCommit, pending in the group until the marker); then the group
// coordinator's node is SIGKILLed, EndTxn writes PrepareCommit and the
// copy's marker, and the transaction coordinator's node is SIGKILLed too.
// The group coordinator's node comes back: it reloads the pending offsets
// from its log, and the next transaction coordinator's marker must make
// them the group's committed offset — with the copy visible once and no
// transaction left open on any partition, __consumer_offsets included.
func TestCoordinatorKilledBeforeOffsetsMarker(t *testing.T) {
	const (
		id      = "offsets-kill-tx"
		records = 20
	)
	c := Start(t, 3, Options{Extra: []string{
		"transaction.state.log.num.partitions=1", "transaction.state.log.replication.factor=3",
		"offsets.topic.replication.factor=1",
	}})
	adm := kadm.NewClient(c.Client())
	for _, topic := range []string{"ok-src", "ok-copy"} {
		resp, err := adm.CreateTopic(ctxT(t, 20*time.Second), 1, 3, map[string]*string{"min.insync.replicas": kmsg.StringPtr("2")}, topic)
		if err != nil || resp.Err != nil {
			t.Fatalf("create %s: %v %v", topic, err, resp.Err)
		}
	}
	src := c.Client(kgo.DefaultProduceTopic("ok-src"), kgo.RequiredAcks(kgo.AllISRAcks()))
	for i := range records {
		if err := src.ProduceSync(ctxT(t, 20*time.Second), &kgo.Record{Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// Transactions version 1 throughout, deterministically (franz-go opts
	// into version 2 only once it has seen the feature, which may be after
	// its first transaction; TestCoordinatorKilledBetweenPrepareAndMarkers
	// runs version 2, TestTxnV1EndAfterV2OffsetCommit the two mixed).
	v1 := kversion.Stable()
	v1.SetMaxKeyVersion(int16(kmsg.EndTxn), 4)
	v1.SetMaxKeyVersion(int16(kmsg.TxnOffsetCommit), 4)
	prod := c.Client(kgo.MaxVersions(v1), kgo.TransactionalID(id), kgo.DefaultProduceTopic("ok-copy"),
		kgo.TransactionTimeout(60*time.Second), kgo.MetadataMinAge(100*time.Millisecond))
	if _, _, err := prod.ProducerID(ctxT(t, 30*time.Second)); err != nil { // InitProducerId: creates __transaction_state
		t.Fatal(err)
	}
	coord := waitTxnCoordinator(t, adm, id)
	group, gcoord := "", coord
	for i := 0; gcoord == coord; i++ { // a group coordinated elsewhere
		group = fmt.Sprintf("offsets-kill-group-%d", i)
		gcoord = waitGroupCoordinator(t, adm, group)
	}
	t.Logf("transaction coordinator %d; group %s coordinated by %d, its offsets partition's only replica", coord, group, gcoord)

	if err := prod.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := range records {
		if err := prod.ProduceSync(ctxT(t, 30*time.Second), &kgo.Record{Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	pid, epoch := txnCommitOffset(t, prod, prod, id, group, "ok-src", records)
	leaders, _ := topicLeaders(t, c, c.Node(coord), "ok-copy")
	t.Logf("the transaction's producer id %d, epoch %d; ok-copy-0 led by %d", pid, epoch, leaders[0])

	c.Node(gcoord).Kill()
	c.WaitFor(30*time.Second, fmt.Sprintf("node %d out of every replicated ISR", gcoord), func() bool {
		return outOfISRs(c, c.Node(coord), gcoord)
	})
	if err := prod.EndTransaction(ctxT(t, 60*time.Second), kgo.TryCommit); err != nil {
		t.Fatalf("EndTxn: %v", err)
	}
	d, err := describeTxn(c, id)
	if err != nil || d.State != "PrepareCommit" {
		t.Fatalf("after EndTxn with the offsets partition leaderless: %+v, %v; want PrepareCommit", d, err)
	}
	t.Logf("%+v; SIGKILL of the transaction coordinator, node %d", d, coord)
	c.Node(coord).Kill()
	c.Node(gcoord).Restart()
	var next int32
	last := "no answer"
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		d, err := describeTxn(c, id)
		if err != nil {
			last = err.Error()
		} else if next, last = d.Coordinator, fmt.Sprintf("%+v", d); d.State == "CompleteCommit" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no new coordinator completed the commit in 60s; last description: %s", last)
		}
	}
	t.Logf("described at completion: %s", last)
	c.Node(coord).Restart()
	c.WaitBrokers(3, 60*time.Second)

	ctx := ctxT(t, 60*time.Second)
	seeds := c.Bootstrap()
	srcLogs, err := check.ReadCommitted(ctx, seeds, "ok-src", 1)
	if err != nil {
		t.Fatal(err)
	}
	offsets := groupOffsets(t, c, group, "ok-src")
	if offsets[0] != records {
		t.Errorf("the group's committed offset %d, want %d (the transaction's)", offsets[0], records)
	}
	dst, err := check.ReadCommitted(ctx, seeds, "ok-copy", 1)
	if err != nil {
		logProducers(t, c, "ok-copy")
		t.Fatal(err)
	}
	reportAnomalies(t, check.CheckCopy(srcLogs, dst, offsets))
	if _, err := check.ReadCommitted(ctx, seeds, "__consumer_offsets", 3); err != nil {
		t.Errorf("__consumer_offsets: %v", err)
	}
	t.Logf("node %d completed the commit: offset %d, %d records in the copy", next, offsets[0], len(dst[0].Values))
}

// logProducers logs DescribeProducers of topic's partition 0: which
// producer's transaction is open there, when a read finds one hanging.
func logProducers(t *testing.T, c *Cluster, topic string) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Bootstrap()...))
	if err != nil {
		return
	}
	defer cl.Close()
	d, err := kadm.NewClient(cl).DescribeProducers(ctxT(t, 10*time.Second), kadm.TopicsSet{topic: {0: {}}})
	if err != nil {
		t.Logf("describe producers of %s: %v", topic, err)
		return
	}
	d.EachProducer(func(p kadm.DescribedProducer) { t.Logf("%s producer: %+v", topic, p) })
}

// txnCommitOffset adds group's offset of topic's partition 0 to prod's open
// transaction (AddOffsetsToTxn, TxnOffsetCommit with no generation, as a
// producer outside the group may), sending the requests with cl at the
// versions cl picks, and returns the producer id and epoch.
func txnCommitOffset(t *testing.T, prod, cl *kgo.Client, id, group, topic string, offset int64) (int64, int16) {
	t.Helper()
	pid, epoch, err := prod.ProducerID(ctxT(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = id, pid, epoch, group
	ares, err := add.RequestWith(ctxT(t, 10*time.Second), cl)
	if err != nil || ares.ErrorCode != 0 {
		t.Fatalf("AddOffsetsToTxn: %v %+v", err, ares)
	}
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch, req.Generation = id, group, pid, epoch, -1
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset, rp.LeaderEpoch = 0, offset, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctxT(t, 10*time.Second), cl)
	if err != nil || len(resp.Topics) != 1 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("TxnOffsetCommit: %v %+v", err, resp)
	}
	return pid, epoch
}
