package engine

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// call sends one request of a non-flexible version and decodes its answer,
// which must come at once.
func call(t *testing.T, b *Broker, req kmsg.Request, v int16) kmsg.Response {
	t.Helper()
	answers := make(chan *Response, 1)
	b.Handle(&Session{}, frame(req, v), func(r *Response) { answers <- r })
	r := answered(answers)
	if r == nil {
		t.Fatalf("%s v%d not answered at once", kmsg.NameForKey(req.Key()), v)
	}
	resp := req.ResponseKind()
	resp.SetVersion(v)
	if err := resp.ReadFrom(body(t, r)); err != nil {
		t.Fatal(err)
	}
	return resp
}

// A __consumer_offsets partition unloaded from the coordinator and loaded
// again through the engine's adapter: meanwhile its groups are another
// coordinator's (FindCoordinator does not name this broker, requests get
// NOT_COORDINATOR), other partitions' groups are untouched, and the
// reload brings the committed offsets back from the log.
func TestGroupPartitionUnloadAndLoad(t *testing.T) {
	b := benchBroker(t)
	const moving, staying = "hello", "restart-group"
	p := b.groups.PartitionFor(moving)
	if b.groups.PartitionFor(staying) == p {
		t.Fatal("pick groups of different partitions")
	}
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Group, commit.Generation = moving, -1
	commit.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "bench", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 42}}}}
	if code := call(t, b, commit, 7).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("commit: %v", kerr.ErrorForCode(code))
	}
	find := func(group string) int16 {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKey = group
		resp := call(t, b, req, 2).(*kmsg.FindCoordinatorResponse)
		if resp.ErrorCode == 0 && resp.NodeID != b.cfg.NodeID {
			t.Fatalf("coordinator of %s: node %d", group, resp.NodeID)
		}
		return resp.ErrorCode
	}
	fetch := func(group string) *kmsg.OffsetFetchResponse {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Group = group
		req.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "bench", Partitions: []int32{0}}}
		return call(t, b, req, 5).(*kmsg.OffsetFetchResponse)
	}

	b.groups.UnloadPartition(p)
	if code := find(moving); code != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("coordinator of a group of an unloaded partition: %v", kerr.ErrorForCode(code))
	}
	if code := find(staying); code != 0 {
		t.Fatalf("coordinator of a group of a loaded partition: %v", kerr.ErrorForCode(code))
	}
	if code := fetch(moving).ErrorCode; code != kerr.NotCoordinator.Code {
		t.Fatalf("offset fetch while unloaded: %v", kerr.ErrorForCode(code))
	}
	join := kmsg.NewPtrJoinGroupRequest()
	join.Group, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis, join.ProtocolType = moving, 10_000, 10_000, "consumer"
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{}}}
	if code := call(t, b, join, 5).(*kmsg.JoinGroupResponse).ErrorCode; code != kerr.NotCoordinator.Code {
		t.Fatalf("join while unloaded: %v", kerr.ErrorForCode(code))
	}

	if n, err := b.groups.LoadPartition(p, b.groups.offsetsLog(b.Topic(offsetsTopic).Partition(p))); err != nil || n != 1 {
		t.Fatalf("reload: %d groups, %v", n, err)
	}
	if code := find(moving); code != 0 {
		t.Fatalf("coordinator after reload: %v", kerr.ErrorForCode(code))
	}
	if got := fetch(moving).Topics[0].Partitions[0].Offset; got != 42 {
		t.Fatalf("offset after reload: %d, want 42", got)
	}
}
