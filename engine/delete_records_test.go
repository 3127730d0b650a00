package engine_test

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/internal/testbroker"
)

func deleteRecordsReq(topic string, partition int32, offset int64) *kmsg.DeleteRecordsRequest {
	req := kmsg.NewPtrDeleteRecordsRequest()
	req.TimeoutMillis = 5000
	req.Topics = []kmsg.DeleteRecordsRequestTopic{{Topic: topic, Partitions: []kmsg.DeleteRecordsRequestTopicPartition{{Partition: partition, Offset: offset}}}}
	return req
}

func TestDeleteRecords(t *testing.T) {
	tb := testbroker.Start(t)
	topic := makeTopic(t, tb, "d", 1, nil)
	rc := dialRaw(t, tb.Addr)
	for i := 0; i < 3; i++ {
		produceRaw(rc, 12, 1, "d", 0, smallBatch(t, "a", "b")) // offsets 0-5
	}
	del := func(offset int64, v int16) kmsg.DeleteRecordsResponseTopicPartition {
		return do[*kmsg.DeleteRecordsResponse](rc, deleteRecordsReq("d", 0, offset), v).Topics[0].Partitions[0]
	}
	if p := del(3, 0); p.ErrorCode != 0 || p.LowWatermark != 3 {
		t.Fatalf("delete before 3: low watermark %d error %d", p.LowWatermark, p.ErrorCode)
	}
	if p := do[*kmsg.FetchResponse](rc, fetchReq("d", topic.ID, map[int32]int64{0: 1}), 16).Topics[0].Partitions[0]; p.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Fatalf("fetch below the new log start: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	if p := do[*kmsg.FetchResponse](rc, fetchReq("d", topic.ID, map[int32]int64{0: 3}), 16).Topics[0].Partitions[0]; p.ErrorCode != 0 || p.LogStartOffset != 3 {
		t.Fatalf("fetch at the new log start: %v, log start %d", kerr.ErrorForCode(p.ErrorCode), p.LogStartOffset)
	}
	if p := del(2, 1); p.ErrorCode != 0 || p.LowWatermark != 3 {
		t.Fatalf("deleting below the log start moved it: %d (error %d)", p.LowWatermark, p.ErrorCode)
	}
	if p := del(7, 2); p.ErrorCode != kerr.OffsetOutOfRange.Code || p.LowWatermark != -1 {
		t.Fatalf("delete beyond the high watermark: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	if p := del(-1, 2); p.ErrorCode != 0 || p.LowWatermark != 6 {
		t.Fatalf("delete up to the high watermark (-1): low watermark %d error %d", p.LowWatermark, p.ErrorCode)
	}
	starts, err := tb.Admin(t).ListStartOffsets(context.Background(), "d")
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := starts.Lookup("d", 0); s.Offset != 6 {
		t.Fatalf("earliest offset %d after deleting everything", s.Offset)
	}
}

func TestDeleteRecordsRefusals(t *testing.T) {
	tb := testbroker.Start(t)
	makeTopic(t, tb, "compacted", 1, map[string]string{"cleanup.policy": "compact"})
	makeTopic(t, tb, "both", 1, map[string]string{"cleanup.policy": "compact,delete"})
	if tb.Broker.Topic("__consumer_offsets") == nil {
		makeTopic(t, tb, "__consumer_offsets", 1, nil)
	}
	rc := dialRaw(t, tb.Addr)
	for _, c := range []struct {
		topic     string
		partition int32
		want      *kerr.Error
	}{
		{"nope", 0, kerr.UnknownTopicOrPartition},
		{"both", 4, kerr.UnknownTopicOrPartition},
		{"compacted", 0, kerr.PolicyViolation},
		{"__consumer_offsets", 0, kerr.InvalidTopicException},
	} {
		p := do[*kmsg.DeleteRecordsResponse](rc, deleteRecordsReq(c.topic, c.partition, 0), 2).Topics[0].Partitions[0]
		if p.ErrorCode != c.want.Code || p.LowWatermark != -1 {
			t.Errorf("%s/%d: %v, want %v", c.topic, c.partition, kerr.ErrorForCode(p.ErrorCode), c.want)
		}
	}
	if p := do[*kmsg.DeleteRecordsResponse](rc, deleteRecordsReq("both", 0, 0), 2).Topics[0].Partitions[0]; p.ErrorCode != 0 {
		t.Errorf("compact,delete topic refused: %v", kerr.ErrorForCode(p.ErrorCode))
	}
}

// TestDeleteRecordsKadm goes through franz-go's admin client.
func TestDeleteRecordsKadm(t *testing.T) {
	tb := testbroker.Start(t)
	makeTopic(t, tb, "k", 2, nil)
	rc := dialRaw(t, tb.Addr)
	produceRaw(rc, 12, 1, "k", 1, smallBatch(t, "a", "b", "c"))
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "k", Partition: 1, At: 2})
	res, err := tb.Admin(t).DeleteRecords(context.Background(), offs)
	if err != nil {
		t.Fatal(err)
	}
	r, ok := res.Lookup("k", 1)
	if !ok || r.Err != nil || r.LowWatermark != 2 {
		t.Fatalf("kadm delete records: %+v", r)
	}
}
