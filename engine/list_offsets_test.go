package engine_test

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/engine"
	"github.com/sluice-broker/sluice/internal/testbroker"
)

// listSetup writes three batches with known timestamps:
//
//	offsets 0,1  timestamps 1000, 1010
//	offsets 2,3  timestamps 2005, 2000  (zstd)
//	offset  4    timestamp  1500
func listSetup(t *testing.T) (*testbroker.Broker, *rawConn) {
	tb := testbroker.Start(t)
	makeTopic(t, tb, "l", 1, nil)
	rc := dialRaw(t, tb.Addr)
	for _, b := range [][]byte{
		engine.BuildTestBatch(t, engine.TestBatchOpts{FirstTimestamp: 1000, ProducerID: -1}, engine.TestRecord{Value: []byte("a")}, engine.TestRecord{Value: []byte("b"), TimestampDelta: 10}),
		engine.BuildTestBatch(t, engine.TestBatchOpts{Codec: 4, FirstTimestamp: 2000, ProducerID: -1}, engine.TestRecord{Value: []byte("c"), TimestampDelta: 5}, engine.TestRecord{Value: []byte("d")}),
		engine.BuildTestBatch(t, engine.TestBatchOpts{FirstTimestamp: 1500, ProducerID: -1}, engine.TestRecord{Value: []byte("e")}),
	} {
		if p := produceRaw(rc, 12, 1, "l", 0, b); p.ErrorCode != 0 {
			t.Fatal(kerr.ErrorForCode(p.ErrorCode))
		}
	}
	return tb, rc
}

func listOffsetsReq(topic string, currentEpoch int32, timestamps ...int64) *kmsg.ListOffsetsRequest {
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.ListOffsetsRequestTopic{Topic: topic}
	for _, ts := range timestamps {
		p := kmsg.NewListOffsetsRequestTopicPartition()
		p.Timestamp, p.CurrentLeaderEpoch = ts, currentEpoch
		rt.Partitions = append(rt.Partitions, p)
	}
	req.Topics = []kmsg.ListOffsetsRequestTopic{rt}
	return req
}

func TestListOffsets(t *testing.T) {
	_, rc := listSetup(t)
	for _, c := range []struct {
		name          string
		ts            int64
		minVersion    int16
		offset, found int64
		epoch         int32
	}{
		{"earliest", -2, 1, 0, -1, 0},
		{"latest", -1, 1, 5, -1, 0},
		{"inside the first batch", 1005, 1, 1, 1010, 0},
		{"exact record time", 1000, 1, 0, 1000, 0},
		{"compressed batch, first record matches", 2001, 1, 2, 2005, 0},
		{"out-of-order timestamps", 1500, 1, 2, 2005, 0},
		{"after every record", 3000, 1, -1, -1, -1},
		{"max timestamp", -3, 7, 2, 2005, 0},
		{"earliest local", -4, 8, 0, -1, 0},
		{"latest tiered", -5, 9, -1, -1, -1},
	} {
		for v := c.minVersion; v <= 10; v++ {
			resp := do[*kmsg.ListOffsetsResponse](rc, listOffsetsReq("l", -1, c.ts), v)
			p := resp.Topics[0].Partitions[0]
			wantEpoch := c.epoch
			if v < 4 {
				wantEpoch = -1 // not in the response before v4
			}
			if p.ErrorCode != 0 || p.Offset != c.offset || p.Timestamp != c.found || p.LeaderEpoch != wantEpoch {
				t.Errorf("%s v%d: offset %d timestamp %d epoch %d error %d, want %d %d %d", c.name, v, p.Offset, p.Timestamp, p.LeaderEpoch, p.ErrorCode, c.offset, c.found, wantEpoch)
			}
		}
	}
}

func TestListOffsetsErrors(t *testing.T) {
	tb, rc := listSetup(t)
	engine.BecomeLeader(tb.Broker.Topic("l").Partition(0), 1)
	check := func(name string, req *kmsg.ListOffsetsRequest, want ...*kerr.Error) {
		t.Helper()
		ps := do[*kmsg.ListOffsetsResponse](rc, req, 10).Topics[0].Partitions
		for i, p := range ps {
			if p.ErrorCode != want[i].Code || p.Offset != -1 {
				t.Errorf("%s [%d]: %v offset %d, want %v", name, i, kerr.ErrorForCode(p.ErrorCode), p.Offset, want[i])
			}
		}
	}
	check("unknown topic", listOffsetsReq("nope", -1, -1), kerr.UnknownTopicOrPartition)
	check("stale epoch", listOffsetsReq("l", 0, -1), kerr.FencedLeaderEpoch)
	check("future epoch", listOffsetsReq("l", 2, -1), kerr.UnknownLeaderEpoch)
	check("same partition twice", listOffsetsReq("l", -1, -1, -2), kerr.InvalidRequest, kerr.InvalidRequest)
}

// TestListOffsetsKadm cross-checks with franz-go's admin client, which is
// how tools ask.
func TestListOffsetsKadm(t *testing.T) {
	tb, _ := listSetup(t)
	adm := tb.Admin(t)
	ctx := context.Background()
	starts, err := adm.ListStartOffsets(ctx, "l")
	if err != nil {
		t.Fatal(err)
	}
	ends, err := adm.ListEndOffsets(ctx, "l")
	if err != nil {
		t.Fatal(err)
	}
	after, err := adm.ListOffsetsAfterMilli(ctx, 1005, "l")
	if err != nil {
		t.Fatal(err)
	}
	s, _ := starts.Lookup("l", 0)
	e, _ := ends.Lookup("l", 0)
	a, _ := after.Lookup("l", 0)
	if s.Offset != 0 || e.Offset != 5 || a.Offset != 1 || s.Err != nil || e.Err != nil || a.Err != nil {
		t.Fatalf("start %+v end %+v after %+v", s, e, a)
	}
}

func TestOffsetForLeaderEpoch(t *testing.T) {
	tb, rc := listSetup(t) // 5 records in epoch 0
	engine.BecomeLeader(tb.Broker.Topic("l").Partition(0), 3)
	produceRaw(rc, 12, 1, "l", 0, smallBatch(t, "f", "g")) // offsets 5, 6 in epoch 3
	ask := func(current, epoch int32) kmsg.OffsetForLeaderEpochResponseTopicPartition {
		req := kmsg.NewPtrOffsetForLeaderEpochRequest()
		p := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		p.CurrentLeaderEpoch, p.LeaderEpoch = current, epoch
		req.Topics = []kmsg.OffsetForLeaderEpochRequestTopic{{Topic: "l", Partitions: []kmsg.OffsetForLeaderEpochRequestTopicPartition{p}}}
		return do[*kmsg.OffsetForLeaderEpochResponse](rc, req, 4).Topics[0].Partitions[0]
	}
	for _, c := range []struct {
		current, epoch int32
		wantEpoch      int32
		wantEnd        int64
		wantErr        *kerr.Error
	}{
		{-1, 0, 0, 5, nil},
		{3, 2, 0, 5, nil}, // epochs 1 and 2 never led: the answer is epoch 0's end
		{3, 3, 3, 7, nil},
		{-1, 9, -1, -1, nil}, // newer than any epoch: undefined, as in Kafka
		{2, 3, -1, -1, kerr.FencedLeaderEpoch},
		{4, 3, -1, -1, kerr.UnknownLeaderEpoch},
	} {
		p := ask(c.current, c.epoch)
		wantCode := int16(0)
		if c.wantErr != nil {
			wantCode = c.wantErr.Code
		}
		if p.ErrorCode != wantCode || p.LeaderEpoch != c.wantEpoch || p.EndOffset != c.wantEnd {
			t.Errorf("current %d epoch %d: got epoch %d end %d error %d, want %d %d %d", c.current, c.epoch, p.LeaderEpoch, p.EndOffset, p.ErrorCode, c.wantEpoch, c.wantEnd, wantCode)
		}
	}
}
