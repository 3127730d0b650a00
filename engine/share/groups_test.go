package share

import (
	"bytes"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/engine/group"
)

// memLog is a group.PartitionLog in memory; Replay decodes with kmsg.
type memLog struct {
	mu      sync.Mutex
	batches [][]byte
}

func (l *memLog) Append(batch []byte) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.batches = append(l.batches, bytes.Clone(batch))
	return int64(len(l.batches) - 1), nil
}

func (l *memLog) Replay(fn func(key, value []byte) error) error {
	l.mu.Lock()
	batches := slices.Clone(l.batches)
	l.mu.Unlock()
	for _, b := range batches {
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(b); err != nil {
			return err
		}
		recs := make([]kmsg.Record, rb.NumRecords)
		rest := rb.Records
		for i := range recs {
			var err error
			if rest, err = readRecord(&recs[i], rest); err != nil {
				return err
			}
			if err := fn(recs[i].Key, recs[i].Value); err != nil {
				return err
			}
		}
	}
	return nil
}

func readRecord(r *kmsg.Record, b []byte) ([]byte, error) {
	n, used := varint(b)
	end := used + int(n)
	if err := r.ReadFrom(b[:end]); err != nil {
		return nil, err
	}
	return b[end:], nil
}

func varint(b []byte) (int64, int) {
	var u uint64
	for i, c := range b {
		u |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			return int64(u>>1) ^ -int64(u&1), i + 1
		}
	}
	return 0, 0
}

type groupsHarness struct {
	clock  *group.FakeClock
	gs     *Groups
	log    *memLog
	topics map[string]TopicInfo
	gone   []string
	other  map[string]bool
}

func newGroupsHarness(t *testing.T) *groupsHarness {
	h := &groupsHarness{clock: group.NewFakeClock(t0), log: &memLog{},
		topics: map[string]TopicInfo{"t": {ID: [16]byte{1}, Name: "t", Partitions: 2}}, other: map[string]bool{}}
	h.gs = h.newGroups()
	if _, err := h.gs.LoadPartition(0, h.log); err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *groupsHarness) newGroups() *Groups {
	return NewGroups(GroupsConfig{Partitions: 1, Clock: h.clock,
		Topic: func(n string) (TopicInfo, bool) { ti, ok := h.topics[n]; return ti, ok },
		TopicByID: func(id [16]byte) (TopicInfo, bool) {
			for _, ti := range h.topics {
				if ti.ID == id {
					return ti, true
				}
			}
			return TopicInfo{}, false
		},
		Timing:     func(string) Timing { return Timing{Session: 45 * time.Second, Heartbeat: 5 * time.Second} },
		OtherGroup: func(g string) bool { return h.other[g] },
		MemberGone: func(g, m string) { h.gone = append(h.gone, g+"/"+m) },
	})
}

func (h *groupsHarness) hb(member string, epoch int32, topics ...string) HeartbeatResult {
	req := HeartbeatRequest{Group: "g", Member: member, Epoch: epoch, ClientID: "c", ClientHost: "/127.0.0.1"}
	if topics != nil {
		req.Subscribed = topics
	}
	return h.gs.Heartbeat(req)
}

func partitionsOf(tps []TopicPartitions) []int32 {
	var out []int32
	for _, tp := range tps {
		out = append(out, tp.Partitions...)
	}
	slices.Sort(out)
	return out
}

func TestShareGroupJoinAssignLeave(t *testing.T) {
	h := newGroupsHarness(t)
	a := h.hb("a", 0, "t")
	if a.Code != 0 || a.Epoch != 1 || !slices.Equal(partitionsOf(a.Assignment), []int32{0, 1}) {
		t.Fatalf("a joins: %+v", a)
	}
	b := h.hb("b", 0, "t")
	if b.Code != 0 || b.Epoch != 2 || !slices.Equal(partitionsOf(b.Assignment), []int32{1}) {
		t.Fatalf("b joins: %+v", b)
	}
	// a, still at epoch 1, moves to the new assignment at once.
	a = h.hb("a", 1)
	if a.Code != 0 || a.Epoch != 2 || !slices.Equal(partitionsOf(a.Assignment), []int32{0}) {
		t.Fatalf("a after b joined: %+v", a)
	}
	// A third member shares a partition: 3 members, 2 partitions.
	c := h.hb("c", 0, "t")
	if len(partitionsOf(c.Assignment)) != 1 {
		t.Fatalf("c joins: %+v", c)
	}
	if r := h.hb("a", 7); r.Code != kerr.FencedMemberEpoch.Code {
		t.Fatalf("stale epoch: %+v", r)
	}
	if r := h.hb("zz", 3); r.Code != kerr.UnknownMemberID.Code {
		t.Fatalf("unknown member: %+v", r)
	}
	if r := h.hb("c", -1); r.Code != 0 || r.Epoch != -1 {
		t.Fatalf("c leaves: %+v", r)
	}
	if !slices.Equal(h.gone, []string{"g/c"}) {
		t.Fatalf("gone %v", h.gone)
	}
	d := h.gs.Describe("g")
	if d.State != "Stable" || len(d.Members) != 2 || d.Epoch != 4 {
		t.Fatalf("describe: %+v", d)
	}
}

func TestShareGroupSessionExpiry(t *testing.T) {
	h := newGroupsHarness(t)
	h.hb("a", 0, "t")
	h.hb("b", 0, "t")
	h.clock.Advance(30 * time.Second)
	h.hb("b", 2)
	h.clock.Advance(20 * time.Second) // a's 45 s passed, b's not
	if !slices.Equal(h.gone, []string{"g/a"}) {
		t.Fatalf("gone %v, want g/a", h.gone)
	}
	b := h.hb("b", 2)
	if b.Epoch != 3 || !slices.Equal(partitionsOf(b.Assignment), []int32{0, 1}) {
		t.Fatalf("b after a expired: %+v", b)
	}
	if r := h.hb("a", 2); r.Code != kerr.UnknownMemberID.Code {
		t.Fatalf("expired member heartbeats: %+v", r)
	}
}

func TestShareGroupTopicGrowsReassigns(t *testing.T) {
	h := newGroupsHarness(t)
	h.hb("a", 0, "t", "later")
	h.topics["later"] = TopicInfo{ID: [16]byte{2}, Name: "later", Partitions: 1}
	a := h.hb("a", 1)
	if a.Epoch != 2 || len(a.Assignment) != 2 {
		t.Fatalf("after topic creation: %+v", a)
	}
}

func TestShareGroupIDOfOtherType(t *testing.T) {
	h := newGroupsHarness(t)
	h.other["g"] = true
	if r := h.hb("a", 0, "t"); r.Code != kerr.GroupIDNotFound.Code {
		t.Fatalf("classic group id: %+v", r)
	}
}

func TestShareGroupReloaded(t *testing.T) {
	h := newGroupsHarness(t)
	h.hb("a", 0, "t")
	h.hb("b", 0, "t")
	h.hb("b", -1)
	h.gs.Close()
	gs := h.newGroups()
	if n, err := gs.LoadPartition(0, h.log); n != 1 || err != nil {
		t.Fatalf("load: %d %v", n, err)
	}
	h.gs = gs
	d := gs.Describe("g")
	if len(d.Members) != 1 || d.Members[0].ID != "a" || d.Epoch != 3 {
		t.Fatalf("reloaded: %+v", d)
	}
	// a keeps heartbeating with the epoch it had across the move.
	if a := h.hb("a", 1); a.Code != 0 || a.Epoch != 3 || !slices.Equal(partitionsOf(a.Assignment), []int32{0, 1}) {
		t.Fatalf("a after reload: %+v", a)
	}
	if code := gs.Delete("g"); code != kerr.NonEmptyGroup.Code {
		t.Fatalf("delete non-empty: %d", code)
	}
	h.hb("a", -1)
	if code := gs.Delete("g"); code != 0 {
		t.Fatalf("delete: %d", code)
	}
	gs2 := h.newGroups()
	if n, _ := gs2.LoadPartition(0, h.log); n != 0 {
		t.Fatalf("deleted group reloaded: %d", n)
	}
}
