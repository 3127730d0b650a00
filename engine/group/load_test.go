package group

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Groups and their committed offsets survive an unload and a load of
// their partition: the members come back with their generation and
// assignments, and keep heartbeating without a rebalance.
func TestUnloadLoadKeepsGroups(t *testing.T) {
	h := newHarness(t)
	const group = "hello" // partition 2; "restart-group" is in 3
	p := h.c.PartitionFor(group)
	ms := h.stableN(group, joinOpts{topics: []string{"t"}}, joinOpts{topics: []string{"t"}})
	h.commit(group, ms[0].Generation, ms[0].MemberID, map[string]int64{"t": 42})
	h.commit("restart-group", -1, "", map[string]int64{"t": 7})
	other := h.c.PartitionFor("restart-group")
	if other == p {
		t.Fatal("pick group names in different partitions")
	}

	h.c.UnloadPartition(p)
	if h.c.Owns(group) || h.c.Loaded(p) || !h.c.Owns("restart-group") {
		t.Fatal("ownership after unload")
	}
	wantCode(t, "heartbeat while unloaded", h.c.Heartbeat(group, ms[0].MemberID, "", ms[0].Generation), kerr.NotCoordinator)
	if _, code := h.c.FetchOffsets(group, nil); code != kerr.NotCoordinator.Code {
		t.Fatalf("fetch while unloaded: %v", kerr.ErrorForCode(code))
	}
	if d := h.c.Describe(group); d.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("describe while unloaded: %+v", d)
	}
	j := h.join(group, joinOpts{})
	wantCode(t, "join while unloaded", j.res.ErrorCode, kerr.NotCoordinator)
	req := &CommitRequest{Group: group, Generation: -1, RetentionMs: -1, Offsets: []CommitOffset{{Topic: "t"}}}
	h.c.Commit(req)
	wantCode(t, "commit while unloaded", req.Offsets[0].ErrorCode, kerr.NotCoordinator)
	if h.fetched("restart-group", "t") != 7 {
		t.Fatal("a group of another partition lost its offset")
	}
	if h.c.Owns(group) || len(h.c.List()) != 1 {
		t.Fatalf("listed while unloaded: %+v", h.c.List())
	}

	h.clock.Advance(time.Second)
	if n := h.load(p); n != 1 {
		t.Fatalf("loaded %d groups, want 1", n)
	}
	h.wantState(group, "Stable", 2)
	if h.fetched(group, "t") != 42 {
		t.Fatal("committed offset lost across unload and load")
	}
	for _, m := range ms {
		wantCode(t, "heartbeat after load", h.c.Heartbeat(group, m.MemberID, "", m.Generation), nil)
	}
	if a := h.synced(h.sync(group, ms[1], nil), "sync after load"); string(a.Assignment) != "" {
		t.Fatalf("assignment %q", a.Assignment)
	}
	if d := h.c.Describe(group); d.Members[0].ClientHost != "/127.0.0.1" || d.Protocol != "range" {
		t.Fatalf("described after load: %+v", d)
	}
}

// Unloading answers parked requests NOT_COORDINATOR at once, stops the
// group's timers, and a later load starts from what the log holds.
func TestUnloadAnswersParkedJoin(t *testing.T) {
	h := newHarness(t)
	const group = "parked"
	o := joinOpts{session: 30 * time.Second, rebalance: 30 * time.Second}
	a := h.stable(group, o)
	b := h.join(group, o) // waits for A to rejoin, up to 30s
	h.wantState(group, "PreparingRebalance", 2)
	timers := h.clock.Pending()

	h.c.UnloadPartition(h.c.PartitionFor(group))
	if b.res == nil || b.res.ErrorCode != kerr.NotCoordinator.Code || b.runs != 1 {
		t.Fatalf("parked join after unload: %+v", b.res)
	}
	if left := h.clock.Pending(); left >= timers {
		t.Fatalf("%d timers armed after unload, %d before", left, timers)
	}
	h.clock.Advance(time.Minute) // timers stopped: nothing answers twice
	if b.runs != 1 {
		t.Fatalf("parked join answered %d times", b.runs)
	}

	h.load(h.c.PartitionFor(group))
	h.wantState(group, "Stable", 1) // B never joined a generation
	wantCode(t, "A after load", h.c.Heartbeat(group, a.MemberID, "", a.Generation), nil)
}

// A parked SyncGroup is answered NOT_COORDINATOR too, and Close unloads
// everything.
func TestCloseAnswersParkedSync(t *testing.T) {
	h := newHarness(t)
	const group = "closing"
	ja, jb := h.join(group, joinOpts{}), h.join(group, joinOpts{})
	h.clock.Advance(0)
	a, b := h.joined(ja, "A"), h.joined(jb, "B")
	follower := a
	if a.MemberID == a.Leader {
		follower = b
	}
	s := h.sync(group, follower, nil)
	h.c.Close()
	if s.res == nil || s.res.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("parked sync after close: %+v", s.res)
	}
	if h.c.Owns(group) || h.c.Loaded(0) {
		t.Fatal("a closed coordinator owns partitions")
	}
	if _, err := h.c.LoadPartition(0, &memLog{}); err == nil {
		t.Fatal("load after close")
	}
	j := h.join(group, joinOpts{})
	wantCode(t, "join after close", j.res.ErrorCode, kerr.CoordinatorNotAvailable)
}

func TestLoadPartitionErrors(t *testing.T) {
	h := newHarness(t)
	if _, err := h.c.LoadPartition(0, &memLog{}); err == nil {
		t.Fatal("loaded a partition twice")
	}
	if _, err := h.c.LoadPartition(testPartitions, &memLog{}); err == nil {
		t.Fatal("loaded a partition out of range")
	}
	h.c.UnloadPartition(1)
	batch, err := appendRecordBatch(nil, 1, []offsetsRecord{{key: []byte{0}}})
	if err != nil {
		t.Fatal(err)
	}
	bad := &memLog{batches: [][]byte{batch}}
	if _, err := h.c.LoadPartition(1, bad); err == nil {
		t.Fatal("loaded a malformed record")
	}
	if h.c.Loaded(1) {
		t.Fatal("a failed load attached the partition")
	}
}

// Kafka's partitionFor, with expected partitions computed independently
// (Java's String.hashCode over UTF-16).
func TestPartitionFor(t *testing.T) {
	for _, c := range []struct {
		group string
		want  int32
	}{
		{"hello", 2},              // hashCode 99162322
		{"polygenelubricants", 0}, // hashCode Integer.MIN_VALUE
		{"restart-group", 3},      // negative hashCode
		{"grüße-🚀", 1},            // non-ASCII, a surrogate pair
	} {
		if got := PartitionFor(c.group, 4); got != c.want {
			t.Errorf("%q: partition %d, want %d", c.group, got, c.want)
		}
	}
}

// The records the coordinator writes decode back, through kmsg's own
// RecordBatch and Record decoders (an independent reader), to the same keys
// and values, tombstones included.
func TestOffsetsRecordBatchRoundTrip(t *testing.T) {
	recs := []offsetsRecord{
		offsetCommitRecord("g", offsetTP{"t", 3}, &committedOffset{offset: 42, leaderEpoch: 7, metadata: "m", commitMs: 1000, expireMs: -1}),
		offsetCommitRecord("g", offsetTP{"t", 4}, nil),
		{key: groupMetadataKey("g")},
	}
	batch, err := appendRecordBatch(nil, 1234, recs)
	if err != nil {
		t.Fatal(err)
	}

	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(batch); err != nil {
		t.Fatal(err)
	}
	if rb.Magic != 2 || rb.NumRecords != 3 || rb.LastOffsetDelta != 2 || rb.FirstTimestamp != 1234 || rb.ProducerID != -1 || int(rb.Length) != len(batch)-12 {
		t.Fatalf("header: %+v", rb)
	}
	if rb.MaxTimestamp != 1234 || rb.Attributes != 0 || rb.PartitionLeaderEpoch != -1 || rb.ProducerEpoch != -1 || rb.FirstSequence != -1 {
		t.Fatalf("header: %+v", rb)
	}
	if crc := crc32.Checksum(batch[21:], crc32.MakeTable(crc32.Castagnoli)); uint32(rb.CRC) != crc {
		t.Fatalf("crc %x, want %x", uint32(rb.CRC), crc)
	}
	b := rb.Records
	for i, want := range recs {
		var r kmsg.Record
		n, used := binary.Varint(b)
		if err := r.ReadFrom(b[:used+int(n)]); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		b = b[used+int(n):]
		if r.OffsetDelta != int32(i) || !bytes.Equal(r.Key, want.key) || !bytes.Equal(r.Value, want.value) || (want.value == nil) != (r.Value == nil) {
			t.Fatalf("record %d: %+v", i, r)
		}
	}
}

// pairLog replays fuzz input as a list of records, each a 1-byte key
// length, the key, a 1-byte value length (255: tombstone) and the value.
type pairLog []byte

func (l pairLog) Append([]byte) (int64, error) { return 0, nil }

func (l pairLog) Replay(fn func(key, value []byte) error) error {
	b := []byte(l)
	take := func() ([]byte, bool) {
		if len(b) < 1 {
			return nil, false
		}
		n := int(b[0])
		b = b[1:]
		if n == 255 {
			return nil, true
		}
		if n > len(b) {
			n = len(b)
		}
		v := b[:n]
		b = b[n:]
		return v, true
	}
	for len(b) > 0 {
		k, _ := take()
		v, _ := take()
		if err := fn(k, v); err != nil {
			return err
		}
	}
	return nil
}

// Whatever records __consumer_offsets holds, loading them returns an error
// or groups a coordinator can serve; it never panics.
func FuzzLoadRecords(f *testing.F) {
	pair := func(k, v []byte) []byte {
		out := append([]byte{byte(len(k))}, k...)
		if v == nil {
			return append(out, 255)
		}
		return append(append(out, byte(len(v))), v...)
	}
	commit := offsetCommitRecord("g", offsetTP{"t", 0}, &committedOffset{offset: 1, leaderEpoch: -1, expireMs: 5})
	f.Add(pair(commit.key, commit.value))
	f.Add(append(pair(commit.key, commit.value), pair(commit.key, nil)...))
	meta := kmsg.NewGroupMetadataValue()
	meta.Version, meta.ProtocolType, meta.Protocol = 3, "consumer", kmsg.StringPtr("range")
	meta.Members = []kmsg.GroupMetadataValueMember{{MemberID: "m", SessionTimeoutMillis: 1000, RebalanceTimeoutMillis: -1}}
	f.Add(pair(groupMetadataKey("g"), meta.AppendTo(nil)))
	f.Add(pair([]byte{0, 9, 1}, nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		c := New(Config{Partitions: 1, MinSessionTimeout: 0, MaxSessionTimeout: time.Hour, MaxSize: 10, Clock: NewFakeClock(epoch),
			Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
		defer c.Close()
		if _, err := c.LoadPartition(0, pairLog(b)); err != nil {
			return
		}
		for _, l := range c.List() {
			c.Describe(l.Group)
			c.FetchOffsets(l.Group, nil)
			c.ExpireOffsets(epoch.Add(time.Hour))
		}
	})
}
