package engine_test

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/internal/testbroker"
)

// TestSingleNodeElectLeadersAndQuorum: a single node is its own quorum
// and leads every partition: ElectLeaders answers ELECTION_NOT_NEEDED
// (UNKNOWN_TOPIC_OR_PARTITION for a partition that does not exist) and
// DescribeQuorum names the node as leader and only voter.
func TestSingleNodeElectLeadersAndQuorum(t *testing.T) {
	tb := testbroker.Start(t)
	adm := tb.Admin(t)
	if _, err := adm.CreateTopic(adminCtx(t), 2, 1, nil, "e"); err != nil {
		t.Fatal(err)
	}
	set := kadm.TopicsSet{}
	set.Add("e", 0, 5)
	res, err := adm.ElectLeaders(adminCtx(t), kadm.ElectPreferredReplica, set)
	if err != nil {
		t.Fatal(err)
	}
	if r := res["e"][0]; !errors.Is(r.Err, kerr.ElectionNotNeeded) {
		t.Errorf("partition 0: %v", r.Err)
	}
	if r := res["e"][5]; !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
		t.Errorf("partition 5: %v", r.Err)
	}
	req := kmsg.NewPtrDescribeQuorumRequest()
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = "__cluster_metadata"
	rt.Partitions = append(rt.Partitions, kmsg.NewDescribeQuorumRequestTopicPartition())
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(adminCtx(t), tb.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.LeaderID != tb.Config.NodeID || len(p.CurrentVoters) != 1 {
		t.Fatalf("describe quorum: %+v", p)
	}
}
