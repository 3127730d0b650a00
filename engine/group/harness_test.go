package group

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The coordinator's tests drive it as a state machine: calls in, results
// out through the completion callbacks, time moved by a FakeClock. Nothing
// sleeps; a callback runs before the call (or the Advance) that completes
// it returns.

// memLog is a PartitionLog in memory; Replay decodes with kmsg's own
// RecordBatch and Record readers, independent of the writer.
type memLog struct {
	mu      sync.Mutex
	batches [][]byte
	fail    error // when set, Append fails with it
}

func (l *memLog) Append(batch []byte) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fail != nil {
		return -1, l.fail
	}
	l.batches = append(l.batches, bytes.Clone(batch))
	return int64(len(l.batches) - 1), nil
}

func (l *memLog) Replay(fn func(key, value []byte) error) error {
	l.mu.Lock()
	batches := l.batches
	l.mu.Unlock()
	for _, b := range batches {
		recs, err := decodeBatch(b)
		if err != nil {
			return err
		}
		for _, r := range recs {
			if err := fn(r.key, r.value); err != nil {
				return err
			}
		}
	}
	return nil
}

func decodeBatch(b []byte) ([]offsetsRecord, error) {
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(b); err != nil {
		return nil, err
	}
	var out []offsetsRecord
	rest := rb.Records
	for i := 0; i < int(rb.NumRecords); i++ {
		n, used := binary.Varint(rest)
		if used <= 0 || int(n) > len(rest)-used {
			return nil, errBadRecord
		}
		var r kmsg.Record
		if err := r.ReadFrom(rest[:used+int(n)]); err != nil {
			return nil, err
		}
		out = append(out, offsetsRecord{key: r.Key, value: r.Value})
		rest = rest[used+int(n):]
	}
	return out, nil
}

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type harness struct {
	t     testing.TB
	clock *FakeClock
	c     *Coordinator
	logs  []*memLog
}

const testPartitions = 4

func newHarness(t testing.TB, mutate ...func(*Config)) *harness {
	t.Helper()
	h := &harness{t: t, clock: NewFakeClock(epoch)}
	cfg := Config{
		Partitions:        testPartitions,
		MinSessionTimeout: 100 * time.Millisecond,
		MaxSessionTimeout: time.Minute,
		MaxSize:           1000,
		OffsetsRetention:  7 * 24 * time.Hour,
		Clock:             h.clock,
		Log:               slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	for _, m := range mutate {
		m(&cfg)
	}
	h.c = New(cfg)
	t.Cleanup(h.c.Close)
	for p := int32(0); p < testPartitions; p++ {
		h.logs = append(h.logs, &memLog{})
		h.load(p)
	}
	return h
}

func (h *harness) load(p int32) int {
	h.t.Helper()
	n, err := h.c.LoadPartition(p, h.logs[p])
	if err != nil {
		h.t.Fatalf("load %d: %v", p, err)
	}
	return n
}

// logFor is the log of the group's partition.
func (h *harness) logFor(group string) *memLog { return h.logs[h.c.PartitionFor(group)] }

// joinCall is a JoinGroup in flight; res is set once it is answered.
type joinCall struct {
	res  *JoinResult
	runs int
}

func (j *joinCall) done(r JoinResult) {
	j.runs++
	j.res = &r
}

type joinOpts struct {
	member, instance   string
	session, rebalance time.Duration
	protocols          []string
	topics             []string
	requireMemberID    bool
}

func (h *harness) join(group string, o joinOpts) *joinCall {
	if o.session == 0 {
		o.session = 10 * time.Second
	}
	if o.rebalance == 0 {
		o.rebalance = 5 * time.Second
	}
	if o.protocols == nil {
		o.protocols = []string{"range"}
	}
	req := &JoinRequest{
		Group: group, MemberID: o.member, InstanceID: o.instance, ClientID: "test", ClientHost: "/127.0.0.1",
		SessionTimeout: o.session, RebalanceTimeout: o.rebalance, ProtocolType: "consumer",
		RequireMemberID: o.requireMemberID,
	}
	meta := kmsg.ConsumerMemberMetadata{Topics: o.topics}
	for _, name := range o.protocols {
		req.Protocols = append(req.Protocols, Protocol{Name: name, Metadata: meta.AppendTo(nil)})
	}
	j := &joinCall{}
	h.c.Join(req, j.done)
	return j
}

// joined asserts j was answered without error and returns the answer.
func (h *harness) joined(j *joinCall, what string) JoinResult {
	h.t.Helper()
	if j.res == nil {
		h.t.Fatalf("%s: join not answered", what)
	}
	if j.runs != 1 {
		h.t.Fatalf("%s: join answered %d times", what, j.runs)
	}
	if j.res.ErrorCode != 0 {
		h.t.Fatalf("%s: join error %v", what, kerr.ErrorForCode(j.res.ErrorCode))
	}
	return *j.res
}

func (h *harness) waiting(j *joinCall, what string) {
	h.t.Helper()
	if j.res != nil {
		h.t.Fatalf("%s: join answered too soon: %+v", what, *j.res)
	}
}

// syncCall is a SyncGroup in flight.
type syncCall struct {
	res  *SyncResult
	runs int
}

func (s *syncCall) done(r SyncResult) {
	s.runs++
	s.res = &r
}

func (h *harness) sync(group string, j JoinResult, assign map[string]string) *syncCall {
	req := &SyncRequest{Group: group, MemberID: j.MemberID, Generation: j.Generation}
	for id, a := range assign {
		req.Assignments = append(req.Assignments, Assignment{MemberID: id, Assignment: []byte(a)})
	}
	s := &syncCall{}
	h.c.Sync(req, s.done)
	return s
}

func (h *harness) synced(s *syncCall, what string) SyncResult {
	h.t.Helper()
	if s.res == nil || s.runs != 1 {
		h.t.Fatalf("%s: sync answered %d times", what, s.runs)
	}
	if s.res.ErrorCode != 0 {
		h.t.Fatalf("%s: sync error %v", what, kerr.ErrorForCode(s.res.ErrorCode))
	}
	return *s.res
}

// stable joins one member into an Empty group and syncs it (no initial
// delay configured, so the join phase ends at the next Advance).
func (h *harness) stable(group string, o joinOpts) JoinResult {
	h.t.Helper()
	j := h.join(group, o)
	h.clock.Advance(0)
	res := h.joined(j, "join "+group)
	h.synced(h.sync(group, res, map[string]string{res.MemberID: "a"}), "sync "+group)
	h.wantState(group, "Stable", 1)
	return res
}

func (h *harness) wantState(group, state string, members int) {
	h.t.Helper()
	d := h.c.Describe(group)
	if d.State != state || len(d.Members) != members {
		h.t.Fatalf("group %s: %s with %d members, want %s with %d", group, d.State, len(d.Members), state, members)
	}
}

func wantCode(t testing.TB, what string, got int16, want *kerr.Error) {
	t.Helper()
	var w int16
	if want != nil {
		w = want.Code
	}
	if got != w {
		t.Fatalf("%s: error %v, want %v", what, kerr.ErrorForCode(got), kerr.ErrorForCode(w))
	}
}

func (h *harness) commit(group string, gen int32, member string, offsets map[string]int64) {
	h.t.Helper()
	req := &CommitRequest{Group: group, Generation: gen, MemberID: member, Now: h.clock.Now(), RetentionMs: -1}
	for topic, o := range offsets {
		req.Offsets = append(req.Offsets, CommitOffset{Topic: topic, Partition: 0, Offset: o, LeaderEpoch: -1})
	}
	h.c.Commit(req)
	for _, o := range req.Offsets {
		wantCode(h.t, "commit "+o.Topic, o.ErrorCode, nil)
	}
}

// fetched is the group's committed offset of partition 0 of topic, -1 if none.
func (h *harness) fetched(group, topic string) int64 {
	h.t.Helper()
	ts, code := h.c.FetchOffsets(group, []FetchedTopic{{Topic: topic, Partitions: []FetchedOffset{{Partition: 0}}}})
	wantCode(h.t, "fetch", code, nil)
	return ts[0].Partitions[0].Offset
}

// stableN joins members into an Empty group in one join phase (one per
// option set) and syncs them all; the leader comes first in the result.
func (h *harness) stableN(group string, os ...joinOpts) []JoinResult {
	h.t.Helper()
	calls := make([]*joinCall, len(os))
	for i, o := range os {
		calls[i] = h.join(group, o)
	}
	h.clock.Advance(0)
	var out []JoinResult
	for i, j := range calls {
		r := h.joined(j, fmt.Sprint("join ", i))
		if r.MemberID == r.Leader {
			out = append([]JoinResult{r}, out...)
		} else {
			out = append(out, r)
		}
	}
	var follows []*syncCall
	for _, r := range out[1:] {
		follows = append(follows, h.sync(group, r, nil))
	}
	h.synced(h.sync(group, out[0], nil), "leader sync")
	for _, s := range follows {
		h.synced(s, "follower sync")
	}
	h.wantState(group, "Stable", len(os))
	return out
}
