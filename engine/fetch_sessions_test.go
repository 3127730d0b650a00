package engine_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/engine"
	"github.com/sluice-broker/sluice/internal/testbroker"
)

// sessionFetch is an incremental (or, with epoch 0, full) fetch in session
// id naming only the given partitions' new offsets.
func sessionFetch(id, epoch int32, offsets map[int32]int64, forget ...int32) *kmsg.FetchRequest {
	req := fetchReq("s", [16]byte{}, offsets)
	req.SessionID, req.SessionEpoch = id, epoch
	if len(offsets) == 0 {
		req.Topics = nil
	}
	if len(forget) > 0 {
		req.ForgottenTopics = []kmsg.FetchRequestForgottenTopic{{Topic: "s", Partitions: forget}}
	}
	return req
}

// answered lists the partitions in a fetch response, with their record
// byte counts.
func answered(resp *kmsg.FetchResponse) map[int32]int {
	out := map[int32]int{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out[p.Partition] = len(p.RecordBatches)
		}
	}
	return out
}

func TestFetchSessionIncremental(t *testing.T) {
	tb := testbroker.Start(t)
	makeTopic(t, tb, "s", 3, nil)
	rc := dialRaw(t, tb.Addr)
	produceRaw(rc, 12, 1, "s", 0, smallBatch(t, "a"))

	full := do[*kmsg.FetchResponse](rc, sessionFetch(0, 0, map[int32]int64{0: 0, 1: 0, 2: 0}), 12)
	id := full.SessionID
	if id == 0 || full.ErrorCode != 0 {
		t.Fatalf("full fetch: session %d error %d", id, full.ErrorCode)
	}
	if got := answered(full); len(got) != 3 || got[0] == 0 {
		t.Fatalf("full fetch answered %v", got)
	}

	// Only the moved fetch offset is sent; nothing changed, nothing comes back.
	resp := do[*kmsg.FetchResponse](rc, sessionFetch(id, 1, map[int32]int64{0: 1}), 12)
	if got := answered(resp); resp.SessionID != id || len(got) != 0 {
		t.Fatalf("idle incremental fetch answered %v (session %d)", got, resp.SessionID)
	}

	// New data on partition 2 is the only thing in the next answer.
	produceRaw(rc, 12, 1, "s", 2, smallBatch(t, "b"))
	resp = do[*kmsg.FetchResponse](rc, sessionFetch(id, 2, nil), 12)
	if got := answered(resp); len(got) != 1 || got[2] == 0 {
		t.Fatalf("incremental fetch answered %v, want partition 2 only", got)
	}

	resp = do[*kmsg.FetchResponse](rc, sessionFetch(id, 2, nil), 12)
	if resp.ErrorCode != kerr.InvalidFetchSessionEpoch.Code || len(resp.Topics) != 0 {
		t.Fatalf("replayed epoch: %v", kerr.ErrorForCode(resp.ErrorCode))
	}

	// Forgotten partitions are no longer fetched.
	resp = do[*kmsg.FetchResponse](rc, sessionFetch(id, 3, map[int32]int64{2: 1}, 1), 12)
	if got := answered(resp); len(got) != 0 {
		t.Fatalf("answered %v after forgetting partition 1", got)
	}
	produceRaw(rc, 12, 1, "s", 1, smallBatch(t, "c"))
	resp = do[*kmsg.FetchResponse](rc, sessionFetch(id, 4, nil), 12)
	if got := answered(resp); len(got) != 0 {
		t.Fatalf("forgotten partition still answered: %v", got)
	}

	// A session made with topic names cannot go on with topic ids.
	resp = do[*kmsg.FetchResponse](rc, sessionFetch(id, 5, nil), 13)
	if resp.ErrorCode != kerr.FetchSessionTopicIDError.Code {
		t.Fatalf("v13 in a v12 session: %v", kerr.ErrorForCode(resp.ErrorCode))
	}

	// Closing the session (epoch -1) is a sessionless fetch; the id is gone.
	resp = do[*kmsg.FetchResponse](rc, sessionFetch(id, -1, map[int32]int64{0: 0}), 12)
	if resp.SessionID != 0 || resp.ErrorCode != 0 || answered(resp)[0] == 0 {
		t.Fatalf("closing fetch: session %d error %d", resp.SessionID, resp.ErrorCode)
	}
	resp = do[*kmsg.FetchResponse](rc, sessionFetch(id, 5, nil), 12)
	if resp.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("closed session: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
}

// TestFetchSessionLongPoll: an incremental fetch parks like any other and
// is woken by a produce to one of its session's partitions.
func TestFetchSessionLongPoll(t *testing.T) {
	tb := testbroker.Start(t)
	makeTopic(t, tb, "s", 2, nil)
	rc := dialRaw(t, tb.Addr)
	id := do[*kmsg.FetchResponse](rc, sessionFetch(0, 0, map[int32]int64{0: 0, 1: 0}), 12).SessionID
	req := sessionFetch(id, 1, nil)
	req.MaxWaitMillis = 10_000
	req.SetVersion(12)
	start := time.Now()
	rc.send(req)
	time.Sleep(100 * time.Millisecond)
	produceRaw(dialRaw(t, tb.Addr), 12, 1, "s", 1, smallBatch(t, "late"))
	resp := kmsg.NewPtrFetchResponse()
	resp.SetVersion(12)
	rc.recv(resp)
	if got := answered(resp); len(got) != 1 || got[1] == 0 || time.Since(start) > 5*time.Second {
		t.Fatalf("woken incremental fetch answered %v after %v", got, time.Since(start))
	}
}

// TestFetchSessionEviction: with one slot, a second session of the same
// size goes without; a larger one takes the slot.
func TestFetchSessionEviction(t *testing.T) {
	tb := testbroker.Start(t, func(c *engine.Config) { c.MaxIncrementalFetchSessions = 1 })
	makeTopic(t, tb, "s", 3, nil)
	rc := dialRaw(t, tb.Addr)
	first := do[*kmsg.FetchResponse](rc, sessionFetch(0, 0, map[int32]int64{0: 0}), 12).SessionID
	same := do[*kmsg.FetchResponse](rc, sessionFetch(0, 0, map[int32]int64{1: 0}), 12).SessionID
	if first == 0 || same != 0 {
		t.Fatalf("sessions %d and %d; want the second refused", first, same)
	}
	bigger := do[*kmsg.FetchResponse](rc, sessionFetch(0, 0, map[int32]int64{0: 0, 1: 0, 2: 0}), 12).SessionID
	if bigger == 0 {
		t.Fatal("larger session did not evict the smaller one")
	}
	if resp := do[*kmsg.FetchResponse](rc, sessionFetch(first, 1, nil), 12); resp.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("evicted session: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
}

// TestFetchSessionTopicIDs runs a session with topic ids (v13+), the form
// current Java clients use.
func TestFetchSessionTopicIDs(t *testing.T) {
	tb := testbroker.Start(t)
	topic := makeTopic(t, tb, "s", 2, nil)
	rc := dialRaw(t, tb.Addr)
	req := fetchReq("", topic.ID, map[int32]int64{0: 0, 1: 0})
	req.SessionEpoch = 0
	full := do[*kmsg.FetchResponse](rc, req, 16)
	if full.SessionID == 0 || len(answered(full)) != 2 {
		t.Fatalf("full fetch: session %d, answered %v", full.SessionID, answered(full))
	}
	produceRaw(rc, 12, 1, "s", 0, smallBatch(t, "x"))
	inc := fetchReq("", topic.ID, nil)
	inc.Topics, inc.SessionID, inc.SessionEpoch = nil, full.SessionID, 1
	resp := do[*kmsg.FetchResponse](rc, inc, 16)
	if got := answered(resp); len(got) != 1 || got[0] == 0 || resp.Topics[0].TopicID != topic.ID {
		t.Fatalf("incremental answered %v", got)
	}
	inc.SessionEpoch = 2
	inc.ForgottenTopics = []kmsg.FetchRequestForgottenTopic{{TopicID: topic.ID, Partitions: []int32{0}}}
	produceRaw(rc, 12, 1, "s", 0, smallBatch(t, "y"))
	if got := answered(do[*kmsg.FetchResponse](rc, inc, 16)); len(got) != 0 {
		t.Fatalf("forgotten partition answered: %v", got)
	}
}
