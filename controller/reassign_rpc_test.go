package controller

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Regression: a forwarded AlterPartitionReassignments or
// ListPartitionReassignments that reached a controller which is not
// active came back NOT_CONTROLLER to the client (the Client did not know
// these responses' error field, so it did not try the next controller);
// TestReassignmentOffStoppedBroker failed so whenever the stopped node had
// been the active controller. The requests are answered by the active
// controller whichever one the Client tries first, with the per-partition
// answers grouped by topic.
func TestReassignmentRPCsFindTheActiveController(t *testing.T) {
	svcs, addrs := startServices(t, 3)
	active := -1
	for deadline := time.Now().Add(10 * time.Second); active < 0; time.Sleep(10 * time.Millisecond) {
		for i, s := range svcs {
			if s.IsActive() {
				active = i
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no active controller")
		}
	}
	first := (active + 1) % len(addrs) // not active
	c := NewClient(append(addrs[first:first+1], addrs...))
	defer c.Close()

	alter := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	alter.Version = 1
	for _, name := range []string{"a", "b"} {
		rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
		rt.Topic = name
		for p := range int32(2) {
			rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
			rp.Partition, rp.Replicas = p, []int32{1}
			rt.Partitions = append(rt.Partitions, rp)
		}
		alter.Topics = append(alter.Topics, rt)
	}
	ar := call[*kmsg.AlterPartitionAssignmentsResponse](t, c, LineAdmin, alter)
	if ar.ErrorCode != 0 || len(ar.Topics) != 2 || !ar.AllowReplicationFactorChange {
		t.Fatalf("alter: %+v", ar)
	}
	for _, rt := range ar.Topics {
		if len(rt.Partitions) != 2 {
			t.Fatalf("topic %s: %d partitions answered", rt.Topic, len(rt.Partitions))
		}
		for _, rp := range rt.Partitions {
			if rp.ErrorCode != kerr.UnknownTopicOrPartition.Code {
				t.Errorf("%s-%d: code %d", rt.Topic, rp.Partition, rp.ErrorCode)
			}
		}
	}

	list := kmsg.NewPtrListPartitionReassignmentsRequest()
	if lr := call[*kmsg.ListPartitionReassignmentsResponse](t, c, LineAdmin, list); lr.ErrorCode != 0 || len(lr.Topics) != 0 {
		t.Fatalf("list: %+v", lr)
	}
}
