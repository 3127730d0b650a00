package share

// The share coordinator: the durable state of share-partitions, kept in
// __share_group_state (compacted) as Kafka's share coordinator keeps it.
// A share-partition (group, topic id, partition) lives in the partition
// of that topic its key "group:topicId:partition" hashes to (Java's
// String.hashCode, as for groups). The leader of a state partition loads
// it (LoadPartition replays the snapshots and updates, the last of a key
// winning) and answers Read and Write for its keys; anywhere else they
// are NOT_COORDINATOR.
//
// Sluice writes a whole ShareSnapshot on every write (the window is
// bounded by share.partition.max.record.locks), so one record of a key is
// the whole state and compaction keeps exactly it; ShareUpdate records
// (Kafka's deltas) are applied on load so that a log written by Kafka
// replays too.

import (
	"encoding/base64"
	"fmt"
	"sort"
	"strconv"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-broker/sluice/engine/group"
	"github.com/sluice-broker/sluice/record"
)

// SPKey names a share-partition.
type SPKey struct {
	Group     string
	TopicID   [16]byte
	Partition int32
}

// CoordinatorKey is Kafka's "group:topicId:partition", the topic id in
// its base64 URL form (Kafka's Uuid.toString).
func (k SPKey) CoordinatorKey() string {
	return k.Group + ":" + base64.RawURLEncoding.EncodeToString(k.TopicID[:]) + ":" + strconv.Itoa(int(k.Partition))
}

// States is the share coordinator over the state partitions loaded here.
type States struct {
	partitions int32 // share.coordinator.state.topic.num.partitions
	nowMs      func() int64
	mu         struct {
		sync.Mutex
		parts map[int32]*statePart
		// snaps are the states of the loaded partitions' keys.
		snaps map[SPKey]*SnapshotValue
		// deleted holds, for a key deleted since the load, the state
		// epoch it may be written at again: a leader still holding the
		// old state (an older epoch) is fenced rather than bringing it
		// back. Not persisted: a restart forgets it.
		deleted map[SPKey]int32
	}
}

type statePart struct {
	index int32
	log   group.PartitionLog
	// appendMu orders writes to the log like their updates of snaps.
	appendMu sync.Mutex
}

// NewStates returns a share coordinator for a state topic of n partitions.
func NewStates(n int32, nowMs func() int64) *States {
	s := &States{partitions: n, nowMs: nowMs}
	s.mu.parts = map[int32]*statePart{}
	s.mu.snaps = map[SPKey]*SnapshotValue{}
	s.mu.deleted = map[SPKey]int32{}
	return s
}

// PartitionFor is the state partition of a share-partition.
func (s *States) PartitionFor(k SPKey) int32 {
	return group.PartitionFor(k.CoordinatorKey(), s.partitions)
}

// Partitions is the state topic's partition count.
func (s *States) Partitions() int32 { return s.partitions }

// LoadPartition replays state partition p and serves its keys.
func (s *States) LoadPartition(p int32, log group.PartitionLog) (int, error) {
	loaded := map[SPKey]*SnapshotValue{}
	if err := log.Replay(func(k, v []byte) error { return loadState(loaded, k, v) }); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.parts[p] != nil {
		return 0, fmt.Errorf("state partition %d already loaded", p)
	}
	s.mu.parts[p] = &statePart{index: p, log: log}
	n := 0
	for k, v := range loaded {
		if s.PartitionFor(k) == p {
			s.mu.snaps[k] = v
			n++
		}
	}
	return n, nil
}

func loadState(loaded map[SPKey]*SnapshotValue, key, value []byte) error {
	k, err := ParseKey(key)
	if err != nil {
		return err
	}
	sk := SPKey{k.Group, k.TopicID, k.Partition}
	switch {
	case value == nil:
		delete(loaded, sk)
	case k.Type == TypeShareSnapshot:
		v := new(SnapshotValue)
		if err := v.ReadFrom(value); err != nil {
			return err
		}
		loaded[sk] = v
	case k.Type == TypeShareUpdate:
		var u UpdateValue
		if err := u.ReadFrom(value); err != nil {
			return err
		}
		if base := loaded[sk]; base != nil {
			applyUpdate(base, &u)
		}
	default:
		return fmt.Errorf("%w: type %d in the state topic", ErrBadRecord, k.Type)
	}
	return nil
}

// applyUpdate merges a delta into a snapshot: its batches override the
// states of the offsets they cover; batches below the start offset go.
func applyUpdate(base *SnapshotValue, u *UpdateValue) {
	if u.StartOffset >= 0 {
		base.StartOffset = u.StartOffset
	}
	base.LeaderEpoch = u.LeaderEpoch
	base.DeliveryCompleteCount = u.DeliveryCompleteCount
	bs := base.Batches
	for _, ub := range u.Batches {
		bs = overlay(bs, ub)
	}
	out := bs[:0]
	for _, b := range bs {
		if b.Last < base.StartOffset {
			continue
		}
		b.First = max(b.First, base.StartOffset)
		out = append(out, b)
	}
	base.Batches = out
}

// overlay puts ub over the sorted, disjoint batches bs, cutting those it
// overlaps.
func overlay(bs []StateBatch, ub StateBatch) []StateBatch {
	var out []StateBatch
	for _, b := range bs {
		if b.Last < ub.First || b.First > ub.Last {
			out = append(out, b)
			continue
		}
		if b.First < ub.First {
			left := b
			left.Last = ub.First - 1
			out = append(out, left)
		}
		if b.Last > ub.Last {
			right := b
			right.First = ub.Last + 1
			out = append(out, right)
		}
	}
	out = append(out, ub)
	sort.Slice(out, func(i, j int) bool { return out[i].First < out[j].First })
	return out
}

// UnloadPartition drops state partition p's keys.
func (s *States) UnloadPartition(p int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.parts[p] == nil {
		return
	}
	delete(s.mu.parts, p)
	for k := range s.mu.snaps {
		if s.PartitionFor(k) == p {
			delete(s.mu.snaps, k)
		}
	}
	for k := range s.mu.deleted {
		if s.PartitionFor(k) == p {
			delete(s.mu.deleted, k)
		}
	}
}

// Loaded reports whether state partition p is loaded.
func (s *States) Loaded(p int32) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.parts[p] != nil
}

// Read returns a share-partition's state; found is false for one never
// initialized (or deleted), whose StateEpoch is then the epoch to
// initialize it at. code is NOT_COORDINATOR when its partition is not
// here.
func (s *States) Read(k SPKey) (v SnapshotValue, found bool, code int16) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.parts[s.PartitionFor(k)] == nil {
		return v, false, kerr.NotCoordinator.Code
	}
	if cur := s.mu.snaps[k]; cur != nil {
		return *cur, true, 0
	}
	v.StateEpoch = s.mu.deleted[k]
	return v, false, 0
}

// Write stores a share-partition's whole state, durably, before it
// returns. A write whose state epoch is older than the stored one is
// FENCED_STATE_EPOCH (an admin reset happened since).
func (s *States) Write(k SPKey, v SnapshotValue) int16 {
	part, code := s.partFor(k)
	if code != 0 {
		return code
	}
	part.appendMu.Lock()
	defer part.appendMu.Unlock()
	s.mu.Lock()
	cur, floor := s.mu.snaps[k], s.mu.deleted[k]
	s.mu.Unlock()
	if cur != nil {
		floor = cur.StateEpoch
	}
	if v.StateEpoch < floor {
		return kerr.FencedStateEpoch.Code
	}
	now := s.nowMs()
	v.WriteTimestamp = now
	v.CreateTimestamp = now
	if cur != nil {
		v.CreateTimestamp = cur.CreateTimestamp
		v.SnapshotEpoch = cur.SnapshotEpoch + 1
	}
	key := Key{Type: TypeShareSnapshot, Group: k.Group, TopicID: k.TopicID, Partition: k.Partition}
	if err := s.append(part, key.AppendTo(nil), v.AppendTo(nil)); err != nil {
		return kerr.UnknownServerError.Code
	}
	s.mu.Lock()
	s.mu.snaps[k] = &v
	s.mu.Unlock()
	return 0
}

// Delete removes a share-partition's state (a tombstone).
func (s *States) Delete(k SPKey) int16 {
	part, code := s.partFor(k)
	if code != 0 {
		return code
	}
	part.appendMu.Lock()
	defer part.appendMu.Unlock()
	key := Key{Type: TypeShareSnapshot, Group: k.Group, TopicID: k.TopicID, Partition: k.Partition}
	if err := s.append(part, key.AppendTo(nil), nil); err != nil {
		return kerr.UnknownServerError.Code
	}
	s.mu.Lock()
	if cur := s.mu.snaps[k]; cur != nil {
		s.mu.deleted[k] = cur.StateEpoch + 1
	}
	delete(s.mu.snaps, k)
	s.mu.Unlock()
	return 0
}

// Keys lists the loaded share-partitions of a group.
func (s *States) Keys(groupName string) []SPKey {
	return s.keysWhere(func(k SPKey) bool { return k.Group == groupName })
}

// KeysOfTopic lists the loaded share-partitions of a topic.
func (s *States) KeysOfTopic(id [16]byte) []SPKey {
	return s.keysWhere(func(k SPKey) bool { return k.TopicID == id })
}

func (s *States) keysWhere(match func(SPKey) bool) []SPKey {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []SPKey
	for k := range s.mu.snaps {
		if match(k) {
			out = append(out, k)
		}
	}
	return out
}

func (s *States) partFor(k SPKey) (*statePart, int16) {
	s.mu.Lock()
	defer s.mu.Unlock()
	part := s.mu.parts[s.PartitionFor(k)]
	if part == nil {
		return nil, kerr.NotCoordinator.Code
	}
	return part, 0
}

func (s *States) append(part *statePart, key, value []byte) error {
	h := record.NewHeader()
	h.FirstTimestamp = s.nowMs()
	var b record.Builder
	b.Reset(h)
	b.Add(&record.Record{Key: key, Value: value})
	batch, err := b.AppendTo(nil)
	if err != nil {
		return err
	}
	_, err = part.log.Append(batch)
	return err
}
