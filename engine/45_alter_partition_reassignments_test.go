package engine_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/internal/testbroker"
	"github.com/sluice-broker/sluice/metadata"
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

// A reassignment as the brokers see it, with testController in the
// controller's place (replication_test.go): [1 2] gains replica 3, which
// opens the partition as a follower, is accepted by leader 1 at the same
// epoch, catches up and is proposed into the ISR; then the completed
// reassignment [2 3] moves leadership to 2 and broker 1 deletes its
// replica. The logs stay byte-identical and acks=all keeps working.
func TestReassignmentOnBrokers(t *testing.T) {
	c := startCluster(t, 3)
	id := c.createTopic("m", 1, []int32{1, 2}, nil)
	rc := dialRaw(t, c.brokers[1].Addr)
	for i := range 10 {
		if a := produceWithTimeout(rc, -1, 10_000, "m", smallBatch(t, "a", fmt.Sprint(i))); a.ErrorCode != 0 {
			t.Fatalf("produce %d: %v", i, kerr.ErrorForCode(a.ErrorCode))
		}
	}
	if c.brokers[3].Broker.Topic("m").Partition(0) != nil {
		t.Fatal("broker 3 hosts the partition before the reassignment")
	}

	c.commit(metadata.PartitionChangeRecord{TopicID: id, Leader: metadata.NoLeaderChange,
		Replicas: []int32{1, 2, 3}, AddingReplicas: []int32{3}, RemovingReplicas: []int32{}})
	lp := c.partition(1, "m")
	waitFor(t, "broker 3 to join the ISR", func() bool { return slices.Equal(lp.ISR(), []int32{1, 2, 3}) })
	if p := c.partition(3, "m"); p.LogEndOffset() < lp.HighWatermark() {
		t.Fatalf("broker 3 joined the ISR at %d, below the high watermark %d", p.LogEndOffset(), lp.HighWatermark())
	}
	c.assertIdentical(t, "m", 1, []int32{1, 2, 3})

	c.commit(metadata.PartitionChangeRecord{TopicID: id, Leader: 2, ISR: []int32{2, 3},
		Replicas: []int32{2, 3}, AddingReplicas: []int32{}, RemovingReplicas: []int32{}})
	waitFor(t, "broker 1 to drop its replica", func() bool {
		_, err := os.Stat(filepath.Join(c.brokers[1].Config.DataDir, "m-0"))
		return c.brokers[1].Broker.Topic("m").Partition(0) == nil && os.IsNotExist(err)
	})
	rc2 := dialRaw(t, c.brokers[2].Addr)
	if a := produceWithTimeout(rc2, -1, 10_000, "m", smallBatch(t, "after")); a.ErrorCode != 0 {
		t.Fatalf("acks=all on the new leader: %v", kerr.ErrorForCode(a.ErrorCode))
	}
	c.assertIdentical(t, "m", 2, []int32{2, 3})
}
