package engine_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/engine"
	"github.com/sluice-broker/sluice/internal/testbroker"
)

func startShareBroker(t *testing.T) *testbroker.Broker {
	return testbroker.Start(t, func(c *engine.Config) { c.ShareStateTopicPartitions = 2 })
}

// setGroupConfig sets GROUP configs with IncrementalAlterConfigs.
func setGroupConfig(t *testing.T, cl *kgo.Client, group string, kv map[string]string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	for k, v := range kv {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value = k, kmsg.StringPtr(v)
		res.Configs = append(res.Configs, c)
	}
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("alter group configs: %v %+v", err, resp)
	}
}

func produceN(t *testing.T, cl *kgo.Client, topic string, n int) {
	t.Helper()
	for i := range n {
		r := &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "v%d", i)}
		if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// shareTopic creates topic "q" (one partition) holding n records, with
// group "sg" reading it from the start; it returns a client and the
// topic's id.
func shareTopic(t *testing.T, tb *testbroker.Broker, n int) (*kgo.Client, [16]byte) {
	t.Helper()
	cl := tb.Client(t, kgo.DefaultProduceTopic("q"))
	if _, err := tb.Admin(t).CreateTopic(context.Background(), 1, 1, nil, "q"); err != nil {
		t.Fatal(err)
	}
	setGroupConfig(t, cl, "sg", map[string]string{"share.auto.offset.reset": "earliest"})
	produceN(t, cl, "q", n)
	return cl, tb.Broker.Topic("q").ID
}

// rawShareFetch sends one ShareFetch of partition 0 for group "sg".
func rawShareFetch(t *testing.T, cl *kgo.Client, id [16]byte, member string, epoch int32,
	acks ...kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch) *kmsg.ShareFetchResponse {
	t.Helper()
	req := kmsg.NewPtrShareFetchRequest()
	req.GroupID, req.MemberID, req.ShareSessionEpoch = kmsg.StringPtr("sg"), kmsg.StringPtr(member), epoch
	req.MaxRecords, req.MaxBytes = 100, 1<<20
	req.Topics = []kmsg.ShareFetchRequestTopic{{TopicID: id, Partitions: []kmsg.ShareFetchRequestTopicPartition{{Partition: 0, AcknowledgementBatches: acks}}}}
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

type seen struct {
	mu     sync.Mutex
	offset map[int64]int // deliveries per offset
}

func (s *seen) add(r *kgo.Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.offset[r.Offset]++
}

func (s *seen) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.offset)
}

// Two franz-go share consumers on one partition: every record is
// delivered, and none twice (each accepted on the next poll).
func TestShareGroupFranzGo(t *testing.T) {
	tb := startShareBroker(t)
	const n = 200
	cl, _ := shareTopic(t, tb, n)

	s := &seen{offset: map[int64]int{}}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for range 2 {
		c := tb.Client(t, kgo.ShareGroup("sg"), kgo.ConsumeTopics("q"), kgo.ShareMaxRecords(20))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil && s.count() < n {
				fs := c.PollFetches(ctx)
				fs.EachRecord(s.add)
				if s.count() >= n {
					cancel() // the other consumer is parked in its poll
				}
			}
			c.MarkAcks(kgo.AckAccept)
			c.FlushAcks(context.Background())
		}()
	}
	wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.offset) != n {
		t.Fatalf("saw %d distinct offsets of %d", len(s.offset), n)
	}
	for off, k := range s.offset {
		if k != 1 {
			t.Errorf("offset %d delivered %d times", off, k)
		}
	}
	desc := describeShare(t, cl, "sg")
	t.Logf("group after consuming: state %s epoch %d members %d", desc.GroupState, desc.GroupEpoch, len(desc.Members))
}

func describeShare(t *testing.T, cl *kgo.Client, group string) kmsg.ShareGroupDescribeResponseGroup {
	t.Helper()
	req := kmsg.NewPtrShareGroupDescribeRequest()
	req.GroupIDs = []string{group}
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Groups[0]
}

// Released records come back with a higher delivery count; after a
// broker restart the records still held (not acknowledged) are
// delivered again and the accepted ones never.
func TestShareGroupRestartWithInFlightRecords(t *testing.T) {
	tb := startShareBroker(t)
	shareTopic(t, tb, 10)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := tb.Client(t, kgo.ShareGroup("sg"), kgo.ConsumeTopics("q"), kgo.ShareMaxRecords(10))
	var got []*kgo.Record
	for len(got) < 10 && ctx.Err() == nil {
		c.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got = append(got, r) })
	}
	// Accept the first five, hold the others (in flight) across the restart.
	c.MarkAcks(kgo.AckAccept, got[:5]...)
	if err := c.FlushAcks(ctx); err != nil {
		t.Fatal(err)
	}
	tb.Restart(t)

	c3 := tb.Client(t, kgo.ShareGroup("sg"), kgo.ConsumeTopics("q"), kgo.ShareMaxRecords(10))
	again := map[int64]int32{}
	for len(again) < 5 && ctx.Err() == nil {
		c3.PollFetches(ctx).EachRecord(func(r *kgo.Record) { again[r.Offset] = r.DeliveryCount() })
	}
	for off, dc := range again {
		if off < 5 {
			t.Errorf("accepted offset %d delivered again", off)
		}
		if dc < 2 {
			t.Errorf("offset %d redelivered with delivery count %d", off, dc)
		}
	}
	if len(again) != 5 {
		t.Fatalf("redelivered %v, want offsets 5-9", again)
	}
}

// A share group's id is not a classic group's: JoinGroup is
// INCONSISTENT_GROUP_PROTOCOL, OffsetCommit GROUP_ID_NOT_FOUND, and a
// classic group's id is GROUP_ID_NOT_FOUND to ShareGroupHeartbeat.
func TestShareGroupIDConflicts(t *testing.T) {
	tb := startShareBroker(t)
	cl := tb.Client(t)
	ctx := context.Background()
	if _, err := tb.Admin(t).CreateTopic(ctx, 1, 1, nil, "q"); err != nil {
		t.Fatal(err)
	}
	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.GroupID, hb.MemberID, hb.SubscribedTopicNames = "sg", "m1", []string{"q"}
	if resp, err := hb.RequestWith(ctx, cl); err != nil || resp.ErrorCode != 0 || resp.MemberEpoch != 1 {
		t.Fatalf("join share group: %v %+v", err, resp)
	}
	join := kmsg.NewPtrJoinGroupRequest()
	join.Group, join.ProtocolType, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = "sg", "consumer", 10000, 10000
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{}}}
	if resp, err := join.RequestWith(ctx, cl); err != nil || resp.ErrorCode != kerr.InconsistentGroupProtocol.Code {
		t.Fatalf("JoinGroup of a share group id: %v %+v", err, resp)
	}
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Group, commit.Generation = "sg", -1
	commit.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "q", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1}}}}
	if resp, err := commit.RequestWith(ctx, cl); err != nil || resp.Topics[0].Partitions[0].ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("OffsetCommit to a share group id: %v %+v", err, resp)
	}
	commit.Group = "classic"
	if resp, err := commit.RequestWith(ctx, cl); err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("OffsetCommit to a new classic group: %v %+v", err, resp)
	}
	hb.GroupID = "classic"
	if resp, err := hb.RequestWith(ctx, cl); err != nil || resp.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("ShareGroupHeartbeat to a classic group id: %v %+v", err, resp)
	}
}

// Share session epochs and acknowledgement errors, raw.
func TestShareSessionsAndAckErrors(t *testing.T) {
	tb := startShareBroker(t)
	ctx := context.Background()
	cl, id := shareTopic(t, tb, 5)
	fetch := func(member string, epoch int32, acks ...kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch) *kmsg.ShareFetchResponse {
		return rawShareFetch(t, cl, id, member, epoch, acks...)
	}
	if r := fetch("a", 3); r.ErrorCode != kerr.ShareSessionNotFound.Code {
		t.Fatalf("no session: %+v", r)
	}
	r := fetch("a", 0)
	if len(r.Topics) == 0 {
		t.Fatalf("a acquired nothing: %+v", r)
	}
	acq := r.Topics[0].Partitions[0].AcquiredRecords
	if len(acq) != 1 || acq[0].FirstOffset != 0 || acq[0].LastOffset != 4 || acq[0].DeliveryCount != 1 {
		t.Fatalf("a acquired %+v", acq)
	}
	if r := fetch("a", 5); r.ErrorCode != kerr.InvalidShareSessionEpoch.Code {
		t.Fatalf("wrong epoch: %+v", r)
	}
	// b gets nothing while a holds the locks (a short wait).
	if r := fetch("b", 0); len(r.Topics) != 0 && len(r.Topics[0].Partitions[0].AcquiredRecords) != 0 {
		t.Fatalf("b acquired records a holds: %+v", r.Topics[0].Partitions[0])
	}
	// b cannot acknowledge a's records.
	ack := kmsg.NewPtrShareAcknowledgeRequest()
	ack.GroupID, ack.MemberID, ack.ShareSessionEpoch = kmsg.StringPtr("sg"), kmsg.StringPtr("b"), 1
	ack.Topics = []kmsg.ShareAcknowledgeRequestTopic{{TopicID: id, Partitions: []kmsg.ShareAcknowledgeRequestTopicPartition{{Partition: 0,
		AcknowledgementBatches: []kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{{FirstOffset: 0, LastOffset: 4, AcknowledgeTypes: []int8{1}}}}}}}
	if resp, err := ack.RequestWith(ctx, cl); err != nil || resp.Topics[0].Partitions[0].ErrorCode != kerr.InvalidRecordState.Code {
		t.Fatalf("b acknowledging a's records: %v %+v", err, resp)
	}
	// a accepts 0-1 and releases 2-4 as it closes its session (no fetch).
	r = fetch("a", -1, kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{FirstOffset: 0, LastOffset: 4, AcknowledgeTypes: []int8{1, 1, 2, 2, 2}})
	if p := r.Topics[0].Partitions[0]; p.AcknowledgeErrorCode != 0 {
		t.Fatalf("a's acknowledgement: %+v", p)
	}
	// The released records come back to b, delivered twice.
	r = fetch("b", 2)
	acq = r.Topics[0].Partitions[0].AcquiredRecords
	if len(acq) != 1 || acq[0].FirstOffset != 2 || acq[0].LastOffset != 4 || acq[0].DeliveryCount != 2 {
		t.Fatalf("b acquired %+v, want 2-4 delivered twice", acq)
	}
}

// A closed connection closes its share sessions: what they held is
// delivered to another member at once, not after the lock expires.
func TestShareSessionClosedWithConnection(t *testing.T) {
	tb := startShareBroker(t)
	cl, id := shareTopic(t, tb, 3)
	fetch := func(c *kgo.Client, member string) []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord {
		if resp := rawShareFetch(t, c, id, member, 0); len(resp.Topics) > 0 {
			return resp.Topics[0].Partitions[0].AcquiredRecords
		}
		return nil
	}
	first, err := kgo.NewClient(kgo.SeedBrokers(tb.Addr))
	if err != nil {
		t.Fatal(err)
	}
	if got := fetch(first, "a"); len(got) != 1 || got[0].LastOffset != 2 {
		t.Fatalf("a acquired %+v", got)
	}
	first.Close()
	var got []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord
	for range 100 { // the close reaches the broker asynchronously
		if got = fetch(cl, "b"); len(got) > 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(got) != 1 || got[0].FirstOffset != 0 || got[0].LastOffset != 2 || got[0].DeliveryCount != 2 {
		t.Fatalf("after a's connection closed b acquired %+v", got)
	}
}

// A read_committed share group never delivers records of an aborted
// transaction, and delivers a committed one's once it commits.
func TestShareGroupReadCommitted(t *testing.T) {
	tb := startShareBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := tb.Client(t)
	if _, err := tb.Admin(t).CreateTopic(ctx, 1, 1, nil, "q"); err != nil {
		t.Fatal(err)
	}
	setGroupConfig(t, cl, "sg", map[string]string{"share.auto.offset.reset": "earliest", "share.isolation.level": "read_committed"})
	// Until the transaction coordinator serves producers, transactions
	// are written through the partition (as the txn read tests do):
	// pids 1 and 3 abort, 2 commits, 4 stays open while 5 commits after it.
	p := tb.Broker.Topic("q").Partition(0)
	mustAppend(t, p, txnBatch(t, 1, 0, 0, "aborted-1", "aborted-2"))
	mustAppend(t, p, txnBatch(t, 2, 0, 0, "committed-1", "committed-2"))
	mustMarker(t, p, 1, false)
	mustMarker(t, p, 2, true)
	mustAppend(t, p, txnBatch(t, 3, 0, 0, "aborted-3"))
	mustMarker(t, p, 3, false)
	mustAppend(t, p, plainBatch(t, "plain"))
	mustAppend(t, p, txnBatch(t, 4, 0, 0, "open"))

	c := tb.Client(t, kgo.ShareGroup("sg"), kgo.ConsumeTopics("q"))
	var got []string
	poll := func(n int) {
		for len(got) < n && ctx.Err() == nil {
			c.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
		}
	}
	poll(3)
	if want := []string{"committed-1", "committed-2", "plain"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("read_committed share group got %v, want %v", got, want)
	}
	mustMarker(t, p, 4, true) // the open transaction commits: it is delivered now
	poll(4)
	if want := []string{"committed-1", "committed-2", "plain", "open"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after the commit got %v, want %v", got, want)
	}
}

// AlterShareGroupOffsets on an empty group moves the start offset: the
// next fetch starts there, though the share-partition was in use; a
// member in the group refuses it, and DeleteShareGroupOffsets starts the
// topic over at share.auto.offset.reset.
func TestShareGroupOffsetAdmin(t *testing.T) {
	tb := startShareBroker(t)
	cl, id := shareTopic(t, tb, 5)
	ctx := context.Background()
	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.GroupID, hb.MemberID, hb.SubscribedTopicNames = "sg", "m", []string{"q"}
	if resp, err := hb.RequestWith(ctx, cl); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("join: %v %+v", err, resp)
	}
	all := kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{FirstOffset: 0, LastOffset: 4, AcknowledgeTypes: []int8{1}}
	if r := rawShareFetch(t, cl, id, "m", 0); len(r.Topics) != 1 {
		t.Fatalf("first fetch: %+v", r)
	}
	if r := rawShareFetch(t, cl, id, "m", -1, all); r.Topics[0].Partitions[0].AcknowledgeErrorCode != 0 {
		t.Fatalf("accept all: %+v", r)
	}
	alter := kmsg.NewPtrAlterShareGroupOffsetsRequest()
	alter.GroupID = "sg"
	alter.Topics = []kmsg.AlterShareGroupOffsetsRequestTopic{{Topic: "q", Partitions: []kmsg.AlterShareGroupOffsetsRequestTopicPartition{{Partition: 0, StartOffset: 2}}}}
	if resp, err := alter.RequestWith(ctx, cl); err != nil || resp.ErrorCode != kerr.NonEmptyGroup.Code {
		t.Fatalf("alter with a member: %v %+v", err, resp)
	}
	hb.MemberEpoch = -1
	if resp, err := hb.RequestWith(ctx, cl); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("leave: %v %+v", err, resp)
	}
	if resp, err := alter.RequestWith(ctx, cl); err != nil || resp.ErrorCode != 0 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("alter: %v %+v", err, resp)
	}
	describe := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	describe.Groups = []kmsg.DescribeShareGroupOffsetsRequestGroup{{GroupID: "sg"}}
	if resp, err := describe.RequestWith(ctx, cl); err != nil || resp.Groups[0].Topics[0].Partitions[0].StartOffset != 2 ||
		resp.Groups[0].Topics[0].Partitions[0].Lag != 3 {
		t.Fatalf("describe after alter: %v %+v", err, resp)
	}
	r := rawShareFetch(t, cl, id, "m2", 0)
	if acq := r.Topics[0].Partitions[0].AcquiredRecords; len(acq) != 1 || acq[0].FirstOffset != 2 || acq[0].LastOffset != 4 || acq[0].DeliveryCount != 1 {
		t.Fatalf("after the reset acquired %+v, want 2-4 as new", acq)
	}
	rawShareFetch(t, cl, id, "m2", -1, kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{FirstOffset: 2, LastOffset: 4, AcknowledgeTypes: []int8{1}})
	del := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
	del.GroupID = "sg"
	del.Topics = []kmsg.DeleteShareGroupOffsetsRequestTopic{{Topic: "q"}, {Topic: "nope"}}
	resp, err := del.RequestWith(ctx, cl)
	if err != nil || resp.ErrorCode != 0 || resp.Topics[0].ErrorCode != 0 || resp.Topics[1].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("delete offsets: %v %+v", err, resp)
	}
	r = rawShareFetch(t, cl, id, "m3", 0)
	if acq := r.Topics[0].Partitions[0].AcquiredRecords; len(acq) != 1 || acq[0].FirstOffset != 0 || acq[0].LastOffset != 4 {
		t.Fatalf("after deleting the offsets acquired %+v, want 0-4 (earliest)", acq)
	}
}

// Deleting a topic deletes its share state: a topic created again under
// the name starts at share.auto.offset.reset.
func TestShareStateGoesWithTopic(t *testing.T) {
	tb := startShareBroker(t)
	cl, id := shareTopic(t, tb, 3)
	rawShareFetch(t, cl, id, "m", 0)
	rawShareFetch(t, cl, id, "m", -1, kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{FirstOffset: 0, LastOffset: 2, AcknowledgeTypes: []int8{1}})
	adm := tb.Admin(t)
	if _, err := adm.DeleteTopic(context.Background(), "q"); err != nil {
		t.Fatal(err)
	}
	var keys int
	for range 200 { // the tombstones are written in the background
		if keys = len(engine.ShareStateKeysForTest(tb.Broker, id)); keys == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if keys != 0 {
		t.Fatalf("%d share states of the deleted topic left", keys)
	}
}

// A ShareFetch parked for want of records is answered when another
// member releases records, not only when new ones are produced (it would
// otherwise wait out its 30 s and the test's 15 s deadline).
func TestShareFetchWokenByRelease(t *testing.T) {
	tb := startShareBroker(t)
	cl, id := shareTopic(t, tb, 3)
	if r := rawShareFetch(t, cl, id, "a", 0); len(r.Topics) != 1 {
		t.Fatalf("a acquired nothing: %+v", r)
	}
	other, err := kgo.NewClient(kgo.SeedBrokers(tb.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	got := make(chan *kmsg.ShareFetchResponse, 1)
	go func() {
		req := kmsg.NewPtrShareFetchRequest()
		req.GroupID, req.MemberID = kmsg.StringPtr("sg"), kmsg.StringPtr("b")
		req.MaxRecords, req.MaxBytes, req.MaxWaitMillis = 100, 1<<20, 30_000
		req.Topics = []kmsg.ShareFetchRequestTopic{{TopicID: id, Partitions: []kmsg.ShareFetchRequestTopicPartition{{Partition: 0}}}}
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		resp, err := req.RequestWith(ctx, other)
		if err != nil {
			t.Errorf("b's parked fetch: %v", err)
		}
		got <- resp
	}()
	// a releases what it holds once b is (very likely) parked; if b is
	// not parked yet it acquires the released records at once: the same
	// answer.
	time.Sleep(100 * time.Millisecond)
	ack := kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{FirstOffset: 0, LastOffset: 2, AcknowledgeTypes: []int8{2}}
	if r := rawShareFetch(t, cl, id, "a", -1, ack); r.Topics[0].Partitions[0].AcknowledgeErrorCode != 0 {
		t.Fatalf("a's release: %+v", r)
	}
	resp := <-got
	if resp == nil || len(resp.Topics) != 1 {
		t.Fatalf("b's answer: %+v", resp)
	}
	if acq := resp.Topics[0].Partitions[0].AcquiredRecords; len(acq) != 1 || acq[0].LastOffset != 2 || acq[0].DeliveryCount != 2 {
		t.Fatalf("b acquired %+v, want 0-2 delivered twice", acq)
	}
}

// A share group's membership is in __consumer_offsets: after a restart
// the group is there with its epoch and member, and the member goes on
// heartbeating with the epoch it had.
func TestShareGroupMembershipSurvivesRestart(t *testing.T) {
	tb := startShareBroker(t)
	cl, _ := shareTopic(t, tb, 1)
	ctx := context.Background()
	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.GroupID, hb.MemberID, hb.SubscribedTopicNames = "sg", "m", []string{"q"}
	resp, err := hb.RequestWith(ctx, cl)
	if err != nil || resp.ErrorCode != 0 {
		t.Fatalf("join: %v %+v", err, resp)
	}
	tb.Restart(t)
	cl2 := tb.Client(t)
	d := describeShare(t, cl2, "sg")
	if d.ErrorCode != 0 || d.GroupEpoch != 1 || len(d.Members) != 1 || d.Members[0].MemberID != "m" ||
		len(d.Members[0].Assignment.TopicPartitions) != 1 || d.Members[0].Assignment.TopicPartitions[0].Topic != "q" {
		t.Fatalf("after restart: %+v", d)
	}
	hb.MemberEpoch, hb.SubscribedTopicNames = resp.MemberEpoch, nil
	if resp, err := hb.RequestWith(ctx, cl2); err != nil || resp.ErrorCode != 0 || resp.MemberEpoch != 1 {
		t.Fatalf("heartbeat after restart: %v %+v", err, resp)
	}
}
