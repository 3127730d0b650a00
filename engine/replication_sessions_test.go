package engine_test

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/engine"
)

// TestFetchSessionFollowerPrivileged: with one session slot on the
// leader, the follower's replica fetcher holds it; a flood of consumer
// sessions, each larger than the follower's (which would evict a
// consumer's session), goes without sessions, while the follower's
// session serves on (its incremental fetches keep replicating, and the
// leader's cache still holds one session). A follower's session may
// still evict a consumer's.
func TestFetchSessionFollowerPrivileged(t *testing.T) {
	c := startCluster(t, 2, func(cfg *engine.Config) { cfg.MaxIncrementalFetchSessions = 1 })
	c.createTopic("r", 1, []int32{1, 2}, nil)
	c.createTopic("c", 4, []int32{1}, nil)
	rc := dialRaw(t, c.brokers[1].Addr)
	if a := produceWithTimeout(rc, -1, 10_000, "r", smallBatch(t, "a")); a.ErrorCode != 0 {
		t.Fatalf("%+v", a)
	}
	for i := range 20 {
		req := fetchReq("c", [16]byte{}, map[int32]int64{0: 0, 1: 0, 2: 0, 3: 0})
		req.SessionID, req.SessionEpoch = 0, 0
		resp := do[*kmsg.FetchResponse](rc, req, 12)
		if resp.ErrorCode != 0 || resp.SessionID != 0 {
			t.Fatalf("consumer session %d: %v, session id %d; want no session (the slot is the follower's)", i, kerr.ErrorForCode(resp.ErrorCode), resp.SessionID)
		}
	}
	// The follower goes on in its session: acks=all needs its fetches.
	for i := range 5 {
		if a := produceWithTimeout(rc, -1, 10_000, "r", smallBatch(t, fmt.Sprint(i))); a.ErrorCode != 0 {
			t.Fatalf("acks=all after the flood: %+v", a)
		}
	}
	c.assertIdentical(t, "r", 1, []int32{1, 2})
	if n := engine.FetchSessions(c.brokers[1].Broker); n != 1 {
		t.Fatalf("%d sessions on the leader, want the follower's", n)
	}

	// The other way round: a consumer's session gives way to a follower.
	rc2 := dialRaw(t, c.brokers[2].Addr)
	c.createTopic("b", 1, []int32{2}, nil)
	req := fetchReq("b", [16]byte{}, map[int32]int64{0: 0})
	req.SessionEpoch = 0
	consumer := do[*kmsg.FetchResponse](rc2, req, 12).SessionID
	if consumer == 0 {
		t.Fatal("no session for the consumer on broker 2's free slot")
	}
	req = fetchReq("b", [16]byte{}, map[int32]int64{0: 0})
	req.SessionEpoch, req.ReplicaID = 0, 1
	if follower := do[*kmsg.FetchResponse](rc2, req, 12).SessionID; follower == 0 {
		t.Fatal("a follower's session did not take a consumer's slot")
	}
	if resp := do[*kmsg.FetchResponse](rc2, sessionFetchOf("b", consumer, 1), 12); resp.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("the consumer's session after the follower's came: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
}

// sessionFetchOf is an incremental fetch of nothing new in session id.
func sessionFetchOf(topic string, id, epoch int32) *kmsg.FetchRequest {
	req := fetchReq(topic, [16]byte{}, nil)
	req.Topics, req.SessionID, req.SessionEpoch = nil, id, epoch
	return req
}
