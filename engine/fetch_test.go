package engine_test

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/engine"
	"github.com/sluice-broker/sluice/internal/testbroker"
)

// fetchSetup starts a broker with topic "f" (partitions partitions) holding
// the given batches on partition 0, and returns the raw batches as stored.
func fetchSetup(t *testing.T, partitions int32, batches ...[]byte) (*testbroker.Broker, *engine.Topic, *rawConn, []byte) {
	t.Helper()
	tb := testbroker.Start(t)
	topic := makeTopic(t, tb, "f", partitions, nil)
	rc := dialRaw(t, tb.Addr)
	var stored []byte
	var off int64
	for _, b := range batches {
		p := produceRaw(rc, 12, 1, "f", 0, b)
		if p.ErrorCode != 0 || p.BaseOffset != off {
			t.Fatalf("produce: error %d offset %d", p.ErrorCode, p.BaseOffset)
		}
		stored = append(stored, asStored(b, off)...)
		off += int64(countRecords(t, b))
	}
	return tb, topic, rc, stored
}

// asStored is batch as the log holds it: the broker assigns the base
// offset and the partition leader epoch (0 here).
func asStored(batch []byte, base int64) []byte {
	b := bytes.Clone(batch)
	binary.BigEndian.PutUint64(b[0:], uint64(base))
	binary.BigEndian.PutUint32(b[12:], 0)
	return b
}

func countRecords(t *testing.T, b []byte) int32 {
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(b); err != nil {
		t.Fatal(err)
	}
	return rb.NumRecords
}

func smallBatch(t testing.TB, values ...string) []byte {
	recs := make([]engine.TestRecord, len(values))
	for i, v := range values {
		recs[i] = engine.TestRecord{Value: []byte(v)}
	}
	return engine.BuildTestBatch(t, engine.TestBatchOpts{ProducerID: -1, FirstTimestamp: 100}, recs...)
}

// TestFetchEveryVersion fetches the same data at each version served and
// checks every field the version carries.
func TestFetchEveryVersion(t *testing.T) {
	_, topic, rc, stored := fetchSetup(t, 2, smallBatch(t, "a", "b"), smallBatch(t, "c"))
	for v := int16(4); v <= 16; v++ {
		req := fetchReq("f", topic.ID, map[int32]int64{0: 0, 1: 0})
		req.IsolationLevel = int8(v % 2)
		resp := do[*kmsg.FetchResponse](rc, req, v)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 2 {
			t.Fatalf("v%d: shape %+v", v, resp)
		}
		if v >= 13 && resp.Topics[0].TopicID != topic.ID || v < 13 && resp.Topics[0].Topic != "f" {
			t.Fatalf("v%d: topic %q %x", v, resp.Topics[0].Topic, resp.Topics[0].TopicID)
		}
		p0, p1 := resp.Topics[0].Partitions[0], resp.Topics[0].Partitions[1]
		if p0.ErrorCode != 0 || p0.HighWatermark != 3 || p0.LastStableOffset != 3 || v >= 5 && p0.LogStartOffset != 0 {
			t.Fatalf("v%d: partition 0 %+v", v, p0)
		}
		if !bytes.Equal(p0.RecordBatches, stored) {
			t.Fatalf("v%d: records differ from what was produced", v)
		}
		if (p0.AbortedTransactions == nil) == (req.IsolationLevel == 1) {
			t.Fatalf("v%d isolation %d: aborted transactions %v", v, req.IsolationLevel, p0.AbortedTransactions)
		}
		if p1.ErrorCode != 0 || p1.HighWatermark != 0 || len(p1.RecordBatches) != 0 {
			t.Fatalf("v%d: empty partition %+v", v, p1)
		}
	}
}

func TestFetchErrors(t *testing.T) {
	tb, topic, rc, _ := fetchSetup(t, 1, smallBatch(t, "a"))
	check := func(name string, v int16, req *kmsg.FetchRequest, want *kerr.Error) kmsg.FetchResponseTopicPartition {
		t.Helper()
		resp := do[*kmsg.FetchResponse](rc, req, v)
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != want.Code || p.HighWatermark != -1 || len(p.RecordBatches) != 0 {
			t.Fatalf("%s: error %v hw %d, want %v", name, kerr.ErrorForCode(p.ErrorCode), p.HighWatermark, want)
		}
		return p
	}
	check("offset past the end", 12, fetchReq("f", topic.ID, map[int32]int64{0: 5}), kerr.OffsetOutOfRange)
	check("negative offset", 12, fetchReq("f", topic.ID, map[int32]int64{0: -1}), kerr.OffsetOutOfRange)
	check("unknown topic", 12, fetchReq("nope", [16]byte{}, map[int32]int64{0: 0}), kerr.UnknownTopicOrPartition)
	check("unknown topic id", 13, fetchReq("", [16]byte{9}, map[int32]int64{0: 0}), kerr.UnknownTopicID)
	check("unknown partition", 12, fetchReq("f", topic.ID, map[int32]int64{3: 0}), kerr.UnknownTopicOrPartition)
	req := fetchReq("f", topic.ID, map[int32]int64{0: 0})
	req.Topics[0].Partitions[0].CurrentLeaderEpoch = 3
	check("future leader epoch", 12, req, kerr.UnknownLeaderEpoch)
	engine.BecomeLeader(tb.Broker.Topic("f").Partition(0), 2)
	req.Topics[0].Partitions[0].CurrentLeaderEpoch = 1
	check("stale leader epoch, v12", 12, req, kerr.FencedLeaderEpoch)
	resp := do[*kmsg.FetchResponse](rc, req, 16)
	if p := resp.Topics[0].Partitions[0]; p.CurrentLeader.LeaderID != tb.Config.NodeID || p.CurrentLeader.LeaderEpoch != 2 || len(resp.Brokers) != 1 {
		t.Fatalf("v16 fenced fetch names leader %+v, brokers %+v", p.CurrentLeader, resp.Brokers)
	}
	req = fetchReq("f", topic.ID, map[int32]int64{0: 0})
	req.ReplicaID = 5
	check("fetch from a replica", 12, req, kerr.NotLeaderForPartition)
}

// TestFetchDivergingEpoch: a client whose last fetched epoch ended before
// its fetch offset is told where that epoch ended (KIP-595).
func TestFetchDivergingEpoch(t *testing.T) {
	tb, topic, rc, _ := fetchSetup(t, 1, smallBatch(t, "a", "b"))
	p := tb.Broker.Topic("f").Partition(0)
	engine.BecomeLeader(p, 1)
	if r := produceRaw(rc, 12, 1, "f", 0, smallBatch(t, "c")); r.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(r.ErrorCode))
	}
	req := fetchReq("f", topic.ID, map[int32]int64{0: 3})
	req.Topics[0].Partitions[0].LastFetchedEpoch = 0 // epoch 0 ended at offset 2
	resp := do[*kmsg.FetchResponse](rc, req, 12)
	fp := resp.Topics[0].Partitions[0]
	if fp.ErrorCode != 0 || fp.DivergingEpoch.Epoch != 0 || fp.DivergingEpoch.EndOffset != 2 || len(fp.RecordBatches) != 0 {
		t.Fatalf("diverging epoch %+v error %d", fp.DivergingEpoch, fp.ErrorCode)
	}
	req.Topics[0].Partitions[0].FetchOffset = 2
	fp = do[*kmsg.FetchResponse](rc, req, 12).Topics[0].Partitions[0]
	if fp.DivergingEpoch.Epoch != -1 || len(fp.RecordBatches) == 0 {
		t.Fatalf("consistent fetch reported divergence %+v", fp.DivergingEpoch)
	}
}

// TestFetchMaxBytes checks KIP-74: the first batch comes whole even when
// larger than the limits; later partitions get nothing that would not fit.
func TestFetchMaxBytes(t *testing.T) {
	big := engine.BuildTestBatch(t, engine.TestBatchOpts{ProducerID: -1}, engine.TestRecord{Value: make([]byte, 3000)})
	_, topic, rc, stored := fetchSetup(t, 2, big, smallBatch(t, "tail"))
	if r := produceRaw(rc, 12, 1, "f", 1, smallBatch(t, "other")); r.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(r.ErrorCode))
	}
	req := fetchReq("f", topic.ID, map[int32]int64{0: 0, 1: 0})
	req.MaxBytes = 100
	req.Topics[0].Partitions[0].PartitionMaxBytes = 10
	resp := do[*kmsg.FetchResponse](rc, req, 16)
	p0, p1 := resp.Topics[0].Partitions[0], resp.Topics[0].Partitions[1]
	if !bytes.Equal(p0.RecordBatches, stored[:len(big)]) {
		t.Fatalf("first partition got %d bytes, want the first batch whole (%d)", len(p0.RecordBatches), len(big))
	}
	if len(p1.RecordBatches) != 0 || p1.HighWatermark != 1 {
		t.Fatalf("second partition got %d bytes past max bytes (hw %d)", len(p1.RecordBatches), p1.HighWatermark)
	}
	req.MaxBytes = 1 << 20
	resp = do[*kmsg.FetchResponse](rc, req, 16)
	if got := resp.Topics[0].Partitions[1].RecordBatches; len(got) == 0 {
		t.Fatal("second partition empty with room to spare")
	}
}

// TestFetchLongPoll: a fetch with nothing to read waits for a produce and
// answers at once when it lands; without one it answers after max.wait.
func TestFetchLongPoll(t *testing.T) {
	tb, topic, rc, _ := fetchSetup(t, 1)
	req := fetchReq("f", topic.ID, map[int32]int64{0: 0})
	req.MaxWaitMillis = 10_000
	req.SetVersion(16)
	start := time.Now()
	rc.send(req)
	time.Sleep(200 * time.Millisecond)
	producer := dialRaw(t, tb.Addr)
	if r := produceRaw(producer, 12, 1, "f", 0, smallBatch(t, "wake")); r.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(r.ErrorCode))
	}
	resp := kmsg.NewPtrFetchResponse()
	resp.SetVersion(16)
	rc.recv(resp)
	if took := time.Since(start); took > 5*time.Second || took < 200*time.Millisecond {
		t.Fatalf("long poll answered after %v", took)
	}
	if p := resp.Topics[0].Partitions[0]; len(p.RecordBatches) == 0 || p.HighWatermark != 1 {
		t.Fatalf("woken fetch carries %d bytes, hw %d", len(p.RecordBatches), p.HighWatermark)
	}

	req = fetchReq("f", topic.ID, map[int32]int64{0: 1})
	req.MaxWaitMillis = 300
	start = time.Now()
	resp = do[*kmsg.FetchResponse](rc, req, 16)
	if took := time.Since(start); took < 250*time.Millisecond || took > 3*time.Second {
		t.Fatalf("empty long poll answered after %v, want about 300ms", took)
	}
	if p := resp.Topics[0].Partitions[0]; len(p.RecordBatches) != 0 || p.ErrorCode != 0 {
		t.Fatalf("empty long poll: %+v", p)
	}
}

// TestFetchLongPollMinBytes: a fetch wanting more bytes than one produce
// brings keeps waiting until enough have arrived.
func TestFetchLongPollMinBytes(t *testing.T) {
	tb, topic, rc, _ := fetchSetup(t, 1)
	one := smallBatch(t, "x")
	req := fetchReq("f", topic.ID, map[int32]int64{0: 0})
	req.MaxWaitMillis, req.MinBytes = 10_000, int32(len(one)*3)
	req.SetVersion(16)
	start := time.Now()
	rc.send(req)
	producer := dialRaw(t, tb.Addr)
	for i := 0; i < 3; i++ {
		time.Sleep(100 * time.Millisecond)
		produceRaw(producer, 12, 1, "f", 0, smallBatch(t, "x"))
	}
	resp := kmsg.NewPtrFetchResponse()
	resp.SetVersion(16)
	rc.recv(resp)
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("answered after %v", took)
	}
	if got := len(resp.Topics[0].Partitions[0].RecordBatches); got != 3*len(one) {
		t.Fatalf("woken with %d bytes, want all three batches (%d)", got, 3*len(one))
	}
}

// TestFetchLongPollShutdown: stopping the broker answers parked fetches.
func TestFetchLongPollShutdown(t *testing.T) {
	tb, topic, rc, _ := fetchSetup(t, 1)
	req := fetchReq("f", topic.ID, map[int32]int64{0: 0})
	req.MaxWaitMillis = 30_000
	req.SetVersion(16)
	rc.send(req)
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	tb.Stop(t)
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("shutdown waited %v for a parked fetch", took)
	}
	resp := kmsg.NewPtrFetchResponse()
	resp.SetVersion(16)
	rc.recv(resp)
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 {
		t.Fatalf("parked fetch answered with %v", kerr.ErrorForCode(p.ErrorCode))
	}
}
