package group

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Retention as KIP-211 applies it, driven by the coordinator's own sweep
// timer on the fake clock.
func TestOffsetsRetention(t *testing.T) {
	const retention = time.Hour
	const check = time.Minute
	h := newHarness(t, func(c *Config) {
		c.OffsetsRetention = retention
		c.RetentionCheckInterval = check
		c.MaxSessionTimeout = 10 * time.Hour
	})

	// A simple group: each offset expires an hour after its commit, and
	// the group goes with its last offset.
	h.commit("simple", -1, "", map[string]int64{"sub": 1})
	h.clock.Advance(30 * time.Minute)
	h.commit("simple", -1, "", map[string]int64{"later": 2})
	h.clock.Advance(30 * time.Minute)
	if h.fetched("simple", "sub") != -1 || h.fetched("simple", "later") != 2 {
		t.Fatalf("simple group after an hour: sub %d later %d", h.fetched("simple", "sub"), h.fetched("simple", "later"))
	}
	h.clock.Advance(30 * time.Minute)
	if l := h.c.List(); len(l) != 0 {
		t.Fatalf("a simple group without offsets was kept: %+v", l)
	}

	// A Stable consumer group: only offsets of topics nobody subscribes to
	// expire; once it is Empty, all of them, an hour after it emptied.
	m := h.stable("stable", joinOpts{session: 10 * time.Hour, rebalance: time.Second, topics: []string{"sub"}})
	h.commit("stable", m.Generation, m.MemberID, map[string]int64{"sub": 4, "other": 4})
	h.clock.Advance(retention)
	if h.fetched("stable", "sub") != 4 || h.fetched("stable", "other") != -1 {
		t.Fatalf("stable group after expiry: sub %d other %d", h.fetched("stable", "sub"), h.fetched("stable", "other"))
	}
	wantCode(t, "leave", h.c.Leave("stable", []Leaving{{MemberID: m.MemberID}})[0], nil)
	h.clock.Advance(retention - check)
	if h.fetched("stable", "sub") != 4 {
		t.Fatal("offsets of a just-emptied group expired")
	}
	h.clock.Advance(check)
	if h.fetched("stable", "sub") != -1 {
		t.Fatal("offsets of a group empty for an hour kept")
	}

	// The expiry is in the log: a reload finds nothing.
	for p := int32(0); p < testPartitions; p++ {
		h.c.UnloadPartition(p)
		h.load(p)
	}
	if l := h.c.List(); len(l) != 0 {
		t.Fatalf("expired groups back after reload: %+v", l)
	}
}

// An offset committed with an explicit retention time (OffsetCommit v2-4)
// expires then, whatever offsets.retention.minutes says.
func TestOffsetsExplicitRetention(t *testing.T) {
	h := newHarness(t)
	req := &CommitRequest{Group: "short", Generation: -1, Now: h.clock.Now(), RetentionMs: 1000,
		Offsets: []CommitOffset{{Topic: "sub", Offset: 8, LeaderEpoch: -1}}}
	h.c.Commit(req)
	wantCode(t, "commit with retention", req.Offsets[0].ErrorCode, nil)
	h.c.ExpireOffsets(h.clock.Now().Add(999 * time.Millisecond))
	if h.fetched("short", "sub") != 8 {
		t.Fatal("expired before its retention time")
	}
	h.c.ExpireOffsets(h.clock.Now().Add(time.Second))
	if h.fetched("short", "sub") != -1 {
		t.Fatal("offset with a 1s retention time survived it")
	}
}

func TestCommitErrors(t *testing.T) {
	h := newHarness(t)
	m := h.stable("g", joinOpts{})
	commit := func(gen int32, member string, v9 bool, offsets ...CommitOffset) *CommitRequest {
		req := &CommitRequest{Group: "g", Generation: gen, MemberID: member, Now: h.clock.Now(), RetentionMs: -1, GroupIDNotFound: v9, Offsets: offsets}
		h.c.Commit(req)
		return req
	}
	big := string(make([]byte, MaxOffsetMetadata+1))
	r := commit(m.Generation, m.MemberID, false,
		CommitOffset{Topic: "t", Offset: 1, LeaderEpoch: -1},
		CommitOffset{Topic: "t", Partition: 1, Offset: 1, LeaderEpoch: -1, Metadata: big},
		CommitOffset{Topic: "gone", Offset: 1, LeaderEpoch: -1, ErrorCode: kerr.UnknownTopicOrPartition.Code})
	wantCode(t, "member commit", r.Offsets[0].ErrorCode, nil)
	wantCode(t, "metadata too large", r.Offsets[1].ErrorCode, kerr.OffsetMetadataTooLarge)
	wantCode(t, "unknown topic", r.Offsets[2].ErrorCode, kerr.UnknownTopicOrPartition)
	wantCode(t, "stale generation", commit(m.Generation-1, m.MemberID, false, CommitOffset{Topic: "t"}).Offsets[0].ErrorCode, kerr.IllegalGeneration)
	wantCode(t, "admin commit to an active group", commit(-1, "", false, CommitOffset{Topic: "t"}).Offsets[0].ErrorCode, kerr.UnknownMemberID)
	req := &CommitRequest{Group: "nope", Generation: 3, MemberID: "x", RetentionMs: -1, Offsets: []CommitOffset{{Topic: "t"}}}
	h.c.Commit(req)
	wantCode(t, "generation to an unknown group", req.Offsets[0].ErrorCode, kerr.IllegalGeneration)
	req.Offsets[0].ErrorCode, req.GroupIDNotFound = 0, true
	h.c.Commit(req)
	wantCode(t, "v9 generation to an unknown group", req.Offsets[0].ErrorCode, kerr.GroupIDNotFound)

	// A failed write answers NOT_COORDINATOR, or INVALID_COMMIT_OFFSET_SIZE
	// when the batch is too large; nothing becomes visible.
	log := h.logFor("g")
	log.fail = errBadRecord
	wantCode(t, "broken log", commit(m.Generation, m.MemberID, false, CommitOffset{Topic: "t", Offset: 9}).Offsets[0].ErrorCode, kerr.NotCoordinator)
	log.fail = ErrTooLarge
	wantCode(t, "batch too large", commit(m.Generation, m.MemberID, false, CommitOffset{Topic: "t", Offset: 9}).Offsets[0].ErrorCode, kerr.InvalidCommitOffsetSize)
	if h.fetched("g", "t") != 1 {
		t.Fatal("a failed commit became visible")
	}
}

func TestDeleteOffsetsAndGroups(t *testing.T) {
	h := newHarness(t)
	m := h.stable("live", joinOpts{topics: []string{"sub"}})
	h.commit("live", m.Generation, m.MemberID, map[string]int64{"sub": 1, "other": 2})
	del := []OffsetToDelete{{Topic: "sub"}, {Topic: "other"}}
	wantCode(t, "delete offsets", h.c.DeleteOffsets("live", del), nil)
	wantCode(t, "subscribed topic", del[0].ErrorCode, kerr.GroupSubscribedToTopic)
	wantCode(t, "unsubscribed topic", del[1].ErrorCode, nil)
	if h.fetched("live", "sub") != 1 || h.fetched("live", "other") != -1 {
		t.Fatal("wrong offsets deleted")
	}
	wantCode(t, "delete a group with members", h.c.DeleteGroup("live"), kerr.NonEmptyGroup)
	h.c.Leave("live", []Leaving{{MemberID: m.MemberID}})
	wantCode(t, "delete the emptied group", h.c.DeleteGroup("live"), nil)
	wantCode(t, "delete it again", h.c.DeleteGroup("live"), kerr.GroupIDNotFound)
	wantCode(t, "delete offsets of no group", h.c.DeleteOffsets("live", nil), kerr.GroupIDNotFound)
	wantCode(t, "delete offsets without a group id", h.c.DeleteOffsets("", nil), kerr.InvalidGroupID)

	h.commit("simple", -1, "", map[string]int64{"t": 1, "u": 2})
	h.c.TopicDeleted("t")
	if h.fetched("simple", "t") != -1 || h.fetched("simple", "u") != 2 {
		t.Fatal("a deleted topic's offsets were kept, or another's dropped")
	}
}
