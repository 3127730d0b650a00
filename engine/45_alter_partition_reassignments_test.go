package engine_test

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/internal/testbroker"
)

// On a single node every partition lives on the node itself: a target of
// exactly that node is a no-op, any other is refused, nothing is ever in
// progress (keys 45 and 46 through kadm and raw kmsg).
func TestReassignmentsSingleNode(t *testing.T) {
	tb := testbroker.Start(t)
	adm := tb.Admin(t)
	if _, err := adm.CreateTopic(adminCtx(t), 1, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	md, err := adm.BrokerMetadata(adminCtx(t))
	if err != nil || len(md.Brokers) != 1 {
		t.Fatalf("metadata: %+v %v", md, err)
	}
	self := md.Brokers[0].NodeID
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign("orders", 0, []int32{self})
	req.Assign("orders", 1, []int32{self})
	req.Assign("nope", 0, []int32{self})
	resp, err := adm.AlterPartitionAssignments(adminCtx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[int32]error{"orders": {0: nil, 1: kerr.UnknownTopicOrPartition}, "nope": {0: kerr.UnknownTopicOrPartition}}
	for topic, ps := range want {
		for p, w := range ps {
			if got := resp[topic][p].Err; !errors.Is(got, w) && got != w {
				t.Errorf("%s-%d: %v, want %v", topic, p, got, w)
			}
		}
	}
	for _, tc := range []struct {
		replicas []int32
		want     error
	}{{[]int32{self + 1}, kerr.InvalidReplicaAssignment}, {[]int32{self, self + 1}, kerr.InvalidReplicaAssignment}, {nil, kerr.NoReassignmentInProgress}} {
		var req kadm.AlterPartitionAssignmentsReq
		req.Assign("orders", 0, tc.replicas)
		resp, err := adm.AlterPartitionAssignments(adminCtx(t), req)
		if err != nil {
			t.Fatal(err)
		}
		if got := resp["orders"][0].Err; !errors.Is(got, tc.want) {
			t.Errorf("reassign to %v: %v, want %v", tc.replicas, got, tc.want)
		}
	}

	list := kmsg.NewPtrListPartitionReassignmentsRequest() // null topics: every partition
	lr, err := list.RequestWith(adminCtx(t), tb.Client(t))
	if err != nil || lr.ErrorCode != 0 || len(lr.Topics) != 0 {
		t.Errorf("list: %+v %v", lr, err)
	}
}
