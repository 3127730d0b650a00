package engine

import (
	"errors"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestAlterPartitionRequestBatch: a batch of ISR changes over two topics
// becomes one AlterPartition v3 with a topic entry per topic, and the
// answer's per-partition codes map back to the changes in order; a
// partition the answer leaves out counts as refused.
func TestAlterPartitionRequestBatch(t *testing.T) {
	a, b := [16]byte{1}, [16]byte{2}
	changes := []ISRChange{
		{TopicID: a, Partition: 0, LeaderEpoch: 1, PartitionEpoch: 4, ISR: []int32{1, 2}},
		{TopicID: b, Partition: 3, LeaderEpoch: 2, PartitionEpoch: 7, ISR: []int32{1, 3}},
		{TopicID: a, Partition: 1, LeaderEpoch: 1, PartitionEpoch: 5, ISR: []int32{1}},
		{TopicID: b, Partition: 4, LeaderEpoch: 2, PartitionEpoch: 1, ISR: []int32{1, 2, 3}},
	}
	req := alterPartitionRequest(changes)
	if req.Version != 3 || len(req.Topics) != 2 || req.Topics[0].TopicID != a || len(req.Topics[0].Partitions) != 2 || len(req.Topics[1].Partitions) != 2 {
		t.Fatalf("request %+v", req)
	}
	rp := req.Topics[1].Partitions[0]
	var isr []int32
	for _, e := range rp.NewEpochISR {
		isr = append(isr, e.BrokerID)
	}
	if rp.Partition != 3 || rp.LeaderEpoch != 2 || rp.PartitionEpoch != 7 || !slices.Equal(isr, []int32{1, 3}) {
		t.Fatalf("partition %+v", rp)
	}
	resp := kmsg.NewPtrAlterPartitionResponse()
	resp.Topics = []kmsg.AlterPartitionResponseTopic{
		{TopidID: b, Partitions: []kmsg.AlterPartitionResponseTopicPartition{{Partition: 3, ErrorCode: kerr.InvalidUpdateVersion.Code}}},
		{TopidID: a, Partitions: []kmsg.AlterPartitionResponseTopicPartition{{Partition: 1}, {Partition: 0}}},
	}
	errs := alterPartitionErrors(changes, resp)
	if errs[0] != nil || !errors.Is(errs[1], kerr.InvalidUpdateVersion) || errs[2] != nil || !errors.Is(errs[3], errNoAnswer) {
		t.Fatalf("errors %v", errs)
	}
}
