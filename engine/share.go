package engine

// Share groups (KIP-932) as the broker runs them (package engine/share
// holds the state machines):
//
//   - membership (share.Groups) lives with the group coordinator: the same
//     __consumer_offsets partitions, loaded and unloaded with them;
//   - share-partitions (share.Partition) live on the leader of each topic
//     partition, created on a group's first ShareFetch from the state the
//     share coordinator holds (or at share.auto.offset.reset), and
//     written back to it after every acknowledgement that changes it,
//     before the acknowledgement is answered;
//   - the share coordinator (share.States) serves __share_group_state,
//     created on first use, loaded with the leadership of its partitions.
//
// Not done: a share-partition whose state partition is led by another
// broker cannot be read or written (no broker-to-broker persister yet), so
// in a cluster share groups work where the state partition and the topic
// partition have the same leader; ShareFetch answers NOT_COORDINATOR
// otherwise.

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/engine/group"
	"github.com/sluice-broker/sluice/engine/share"
	"github.com/sluice-broker/sluice/metadata"
	"github.com/sluice-broker/sluice/record"
	"github.com/sluice-broker/sluice/storage"
)

// shareStateTopic is the share coordinator's internal topic.
const shareStateTopic = "__share_group_state"

// shareBroker is the broker's share-group machinery.
type shareBroker struct {
	b      *Broker
	groups *share.Groups
	states *share.States
	rpc    shareRPC // to other brokers' share coordinators (share_persister.go)
	// creating is set while a cluster creates __share_group_state.
	creating atomic.Bool

	mu struct {
		sync.Mutex
		// parts are the share-partitions led here, created on first use.
		parts map[share.SPKey]*sharePart
		// sessions are the open share sessions, by group and member.
		sessions map[shareSessionKey]*shareSession
		// stateLoaded is set once the state topic's partitions were loaded
		// (single node) or are being synced with leadership (cluster).
		stateLoaded bool
		// parked are the ShareFetches waiting on each partition, woken when
		// records there are released (new records wake them through the
		// fetch purgatory). Invariant: a waiter is listed until its answer
		// starts.
		parked map[*Partition][]*fetchWaiter
	}
}

// sharePart is one share-partition and the lock that orders its changes
// and their writes to the share coordinator.
type sharePart struct {
	mu    sync.Mutex
	key   share.SPKey
	sp    *share.Partition
	epoch int32 // the state epoch it was loaded at
	// leaderEpoch is the partition's leader epoch when it was loaded; a
	// share-partition is loaded again under a new one.
	leaderEpoch int32
	// persisted is the last state written (start offset and batches), so
	// only changes are written.
	persistedStart int64
	persisted      []share.StateBatch
}

func newShareBroker(b *Broker) *shareBroker {
	s := &shareBroker{b: b}
	s.mu.parts = map[share.SPKey]*sharePart{}
	s.mu.sessions = map[shareSessionKey]*shareSession{}
	s.mu.parked = map[*Partition][]*fetchWaiter{}
	s.groups = share.NewGroups(share.GroupsConfig{
		Partitions: b.offsetsPartitions(),
		Log:        b.log,
		Topic:      b.shareTopicInfo,
		TopicByID: func(id [16]byte) (share.TopicInfo, bool) {
			if t := b.TopicByID(id); t != nil {
				return share.TopicInfo{ID: id, Name: t.Name, Partitions: int32(len(t.Partitions()))}, true
			}
			return share.TopicInfo{}, false
		},
		Timing:     b.shareTiming,
		OtherGroup: func(g string) bool { return b.groups.Describe(g).State != "Dead" },
		MemberGone: s.memberGone,
	})
	s.states = share.NewStates(b.stateTopicPartitions(), func() int64 { return time.Now().UnixMilli() })
	return s
}

// offsetsPartitions is the partition count of __consumer_offsets (the
// topic's own once it exists: it was fixed at creation).
func (b *Broker) offsetsPartitions() int32 {
	if t := b.Topic(offsetsTopic); t != nil {
		return int32(len(t.Partitions()))
	}
	return b.cfg.OffsetsTopicPartitions
}

// stateTopicPartitions is the partition count of __share_group_state
// (the topic's own once it exists).
func (b *Broker) stateTopicPartitions() int32 {
	if ti := b.image().Topic(shareStateTopic); ti != nil {
		return int32(len(ti.Partitions))
	}
	return max(b.cfg.ShareStateTopicPartitions, 1)
}

func (b *Broker) shareTopicInfo(name string) (share.TopicInfo, bool) {
	ti := b.image().Topic(name)
	if ti == nil {
		return share.TopicInfo{}, false
	}
	return share.TopicInfo{ID: ti.ID, Name: name, Partitions: int32(len(ti.Partitions))}, true
}

// loadLocal loads every partition of __consumer_offsets into the share
// groups (a single node leads them all).
func (s *shareBroker) loadLocal() error {
	t := s.b.Topic(offsetsTopic)
	if t == nil {
		return nil
	}
	for _, p := range t.Partitions() {
		if _, err := s.groups.LoadPartition(p.Index, groupLog{p}); err != nil {
			return fmt.Errorf("load share groups of %s-%d: %w", offsetsTopic, p.Index, err)
		}
	}
	return nil
}

// ensureStates makes sure the state topic exists and, on a single node,
// that its partitions are loaded. In a cluster, creation goes through
// the controller and syncShare loads what this broker leads.
func (s *shareBroker) ensureStates() int16 {
	s.mu.Lock()
	loaded := s.mu.stateLoaded
	s.mu.Unlock()
	if loaded {
		return 0
	}
	b := s.b
	if b.cluster != nil {
		if b.image().Topic(shareStateTopic) == nil {
			if s.creating.CompareAndSwap(false, true) {
				go func() {
					defer s.creating.Store(false)
					if _, err := b.shareStateTopic(); err != nil {
						b.log.Warn("cannot create the share state topic", "err", err)
					}
				}()
			}
			return kerr.CoordinatorNotAvailable.Code
		}
		return 0
	}
	t, err := b.shareStateTopic()
	if err != nil {
		b.log.Warn("cannot create the share state topic", "err", err)
		return kerr.CoordinatorNotAvailable.Code
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.stateLoaded {
		return 0
	}
	for _, p := range t.Partitions() {
		p.advanceHighWatermark()
		if _, err := s.states.LoadPartition(p.Index, groupLog{p}); err != nil {
			b.log.Error("cannot load share state", "partition", p.Index, "err", err)
			return kerr.CoordinatorNotAvailable.Code
		}
	}
	s.mu.stateLoaded = true
	return 0
}

// shareStateTopic returns __share_group_state, creating it (compacted, as
// Kafka does) on first use.
func (b *Broker) shareStateTopic() (*Topic, error) {
	if t := b.Topic(shareStateTopic); t != nil {
		return t, nil
	}
	overrides := map[string]string{"cleanup.policy": "compact", "compression.type": "producer", "segment.bytes": itoa(100 << 20)}
	t, err := b.CreateTopic(shareStateTopic, b.cfg.ShareStateTopicPartitions, overrides, false)
	if err != nil && ErrorCode(err) != kerr.TopicAlreadyExists.Code {
		return nil, err
	}
	if t == nil {
		t = b.Topic(shareStateTopic)
	}
	return t, nil
}

// syncShare loads the partitions of __consumer_offsets and
// __share_group_state this broker leads in img and unloads the others.
func (b *Broker) syncShare(img metadata.Image) {
	s := b.share
	if s == nil {
		return
	}
	syncLoaded(b, img, offsetsTopic, s.groups.Loaded, s.groups.LoadPartition, s.groups.UnloadPartition)
	syncLoaded(b, img, shareStateTopic, s.states.Loaded, s.states.LoadPartition, s.states.UnloadPartition)
	if img.Topic(shareStateTopic) != nil {
		s.mu.Lock()
		s.mu.stateLoaded = true
		s.mu.Unlock()
	}
}

// syncLoaded loads and unloads a coordinator's partitions of one internal
// topic as leadership says.
func syncLoaded(b *Broker, img metadata.Image, topic string, loaded func(int32) bool,
	load func(int32, group.PartitionLog) (int, error), unload func(int32)) {
	ti, t := img.Topic(topic), b.Topic(topic)
	if ti == nil || t == nil {
		return
	}
	for i := range ti.Partitions {
		idx := int32(i)
		p := t.Partition(idx)
		leads := p != nil && ti.Partitions[i].Leader == b.cfg.NodeID
		switch on := loaded(idx); {
		case leads && !on:
			p.advanceHighWatermark()
			if _, err := load(idx, groupLog{p}); err != nil {
				b.log.Error("cannot load share coordinator partition", "topic", topic, "partition", idx, "err", err)
			}
		case !leads && on:
			unload(idx)
		}
	}
}

// ---- group configs ----

// shareGroupInt is a share group's Int config: its GROUP config if set,
// else the broker key that gives the default.
func (b *Broker) shareGroupInt(groupName, key string) int64 {
	if v, ok := b.GroupConfigs(groupName)[key]; ok {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			return n
		}
	}
	n, _ := b.cfg.groupBrokerInt(groupKeys[key].broker)
	return n
}

func (b *Broker) shareTiming(groupName string) share.Timing {
	return share.Timing{
		Session:   time.Duration(b.shareGroupInt(groupName, "share.session.timeout.ms")) * time.Millisecond,
		Heartbeat: time.Duration(b.shareGroupInt(groupName, "share.heartbeat.interval.ms")) * time.Millisecond,
	}
}

func (b *Broker) sharePartitionConfig(groupName string) share.PartitionConfig {
	return share.PartitionConfig{
		LockDuration:   time.Duration(b.shareGroupInt(groupName, "share.record.lock.duration.ms")) * time.Millisecond,
		DeliveryLimit:  int16(b.shareGroupInt(groupName, "share.delivery.count.limit")),
		MaxRecordLocks: int(b.shareGroupInt(groupName, "share.partition.max.record.locks")),
	}
}

func (b *Broker) shareRenewEnabled(groupName string) bool {
	v, ok := b.GroupConfigs(groupName)["share.renew.acknowledge.enable"]
	return !ok || strings.EqualFold(v, "true")
}

// ---- share-partitions ----

// part returns the share-partition of key on p (led here), loading its
// state from the share coordinator or initializing it at
// share.auto.offset.reset.
func (s *shareBroker) part(key share.SPKey, p *Partition) (*sharePart, int16) {
	epoch := p.LeaderEpoch()
	s.mu.Lock()
	sp := s.mu.parts[key]
	if sp != nil && sp.leaderEpoch != epoch {
		// Leadership went away and came back: what is cached here may be
		// older than what another leader wrote meanwhile.
		delete(s.mu.parts, key)
		sp = nil
	}
	s.mu.Unlock()
	if sp != nil {
		return sp, 0
	}
	if code := s.ensureStates(); code != 0 {
		return nil, code
	}
	cfg := s.b.sharePartitionConfig(key.Group)
	snap, found, code := s.readState(key)
	if code != 0 {
		return nil, code
	}
	sp = &sharePart{key: key, leaderEpoch: epoch}
	if found {
		sp.sp = share.RestorePartition(cfg, snap.StartOffset, snap.Batches)
		sp.epoch = snap.StateEpoch
	} else {
		sp.epoch = snap.StateEpoch // past a deletion's, if any
		sp.sp = share.NewPartition(cfg, s.b.shareResetOffset(key.Group, p))
		if code := sp.persist(s); code != 0 {
			return nil, code
		}
	}
	sp.persistedStart, sp.persisted = sp.sp.Snapshot(nil)
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur := s.mu.parts[key]; cur != nil {
		return cur, 0
	}
	s.mu.parts[key] = sp
	return sp, 0
}

// shareResetOffset is where a new share-partition starts:
// share.auto.offset.reset (latest by default).
func (b *Broker) shareResetOffset(groupName string, p *Partition) int64 {
	v := b.GroupConfigs(groupName)["share.auto.offset.reset"]
	switch {
	case v == "earliest":
		return p.LogStartOffset()
	case strings.HasPrefix(v, "by_duration:"):
		d, ok := parseISODuration(strings.TrimPrefix(v, "by_duration:"))
		if ok {
			if off, _, found := p.offsetForTimestamp(time.Now().Add(-d).UnixMilli()); found {
				return off
			}
		}
	}
	return p.HighWatermark()
}

// parseISODuration reads the PnDTnHnMn.nS form checkShareAutoOffsetReset
// accepts.
func parseISODuration(s string) (time.Duration, bool) {
	m := isoDuration.FindStringSubmatch(s)
	if m == nil {
		return 0, false
	}
	var d time.Duration
	for _, part := range []struct {
		s    string
		unit time.Duration
	}{{m[1], 24 * time.Hour}, {m[3], time.Hour}, {m[4], time.Minute}, {m[5], time.Second}} {
		if part.s == "" {
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimRight(strings.ToUpper(part.s), "DHMS"), 64)
		if err != nil {
			return 0, false
		}
		d += time.Duration(f * float64(part.unit))
	}
	return d, true
}

// persist writes the share-partition's state to the share coordinator if
// it changed since the last write; sp.mu is held (or sp unpublished).
func (sp *sharePart) persist(s *shareBroker) int16 {
	start, batches := sp.sp.Snapshot(nil)
	if start == sp.persistedStart && equalBatches(batches, sp.persisted) && sp.persisted != nil {
		return 0
	}
	_, settled := sp.sp.InFlight()
	v := share.SnapshotValue{StateEpoch: sp.epoch, LeaderEpoch: sp.leaderEpoch, StartOffset: start,
		DeliveryCompleteCount: int32(settled), Batches: batches}
	if code := s.writeState(sp.key, v); code != 0 {
		if code == kerr.FencedStateEpoch.Code {
			// An admin reset or delete happened since this state was
			// loaded: forget it; the next use loads the new one.
			s.dropParts(func(k share.SPKey) bool { return k == sp.key })
		}
		return code
	}
	sp.persistedStart, sp.persisted = start, batches
	if sp.persisted == nil {
		sp.persisted = []share.StateBatch{}
	}
	return 0
}

// equalBatches compares persisted states, ignoring delivery counts of
// Available records (an acquisition is not written, as in Kafka).
func equalBatches(a, b []share.StateBatch) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.First != y.First || x.Last != y.Last || x.State != y.State || (x.State != share.Available && x.Count != y.Count) {
			return false
		}
	}
	return true
}

// memberGone releases what a member that left holds in every
// share-partition of its group, and drops its share session.
func (s *shareBroker) memberGone(groupName, member string) {
	s.mu.Lock()
	delete(s.mu.sessions, shareSessionKey{groupName, member})
	var parts []*sharePart
	for k, sp := range s.mu.parts {
		if k.Group == groupName {
			parts = append(parts, sp)
		}
	}
	s.mu.Unlock()
	for _, sp := range parts {
		s.releaseMember(sp, member)
	}
}

// releaseMember releases what member holds in sp and wakes the fetches
// parked on its partition.
func (s *shareBroker) releaseMember(sp *sharePart, member string) {
	sp.mu.Lock()
	n := sp.sp.ReleaseMember(member)
	if n > 0 {
		sp.persist(s)
	}
	sp.mu.Unlock()
	if n == 0 {
		return
	}
	if p, code := s.b.sharePartitionLed(shareTP{sp.key.TopicID, sp.key.Partition}); code == 0 {
		s.wakeParked(p)
	}
}

// dropParts forgets share-partitions (their leadership moved, the group
// or its offsets were deleted, an admin reset).
func (s *shareBroker) dropParts(match func(share.SPKey) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.mu.parts {
		if match(k) {
			delete(s.mu.parts, k)
		}
	}
}

// ---- reading records to acquire ----

// acquire reads p from the share-partition's next fetch offset and
// acquires what the read covers for member: the batches (trimmed to the
// acquired offsets) and the ranges. A read_committed group
// (share.isolation.level) reads to the last stable offset, and the
// records of aborted transactions it acquired are archived at once, never
// delivered.
//
// The records are read into *buf (grown as needed), which the caller
// gives back once the answer is encoded.
func (s *shareBroker) acquire(sp *sharePart, p *Partition, member string, maxBytes int32, maxRecords int, buf *[]byte) ([]byte, []share.Range, int16) {
	iso := s.b.shareIsolation(sp.key.Group)
	sp.mu.Lock()
	defer sp.mu.Unlock()
	now := time.Now()
	sp.sp.AdvanceStart(p.LogStartOffset())
	from, ok := sp.sp.NextFetchOffset(now)
	if !ok || from >= p.fetchableOffset(iso) {
		sp.persist(s) // expired locks may have archived records
		return nil, nil, 0
	}
	reg, err := p.read(from, maxBytes, iso)
	if err != nil || reg.Len == 0 {
		return nil, nil, ErrorCode(err)
	}
	if int64(cap(*buf)) < reg.Len {
		*buf = make([]byte, reg.Len)
	}
	b := (*buf)[:reg.Len]
	if n, err := reg.File.ReadAt(b, reg.Pos); n < len(b) {
		s.b.log.Warn("share fetch read", "err", err)
		return nil, nil, kerr.UnknownServerError.Code
	}
	lo, hi := batchSpan(b)
	ranges := sp.sp.Acquire(nil, member, now, max(lo, from), hi, maxRecords)
	if iso == fetchTxnCommitted && len(ranges) > 0 {
		ranges = s.archiveAborted(sp, p, member, b, ranges, now)
	}
	if len(ranges) == 0 {
		return nil, nil, 0
	}
	return trimBatches(b, ranges[0].First, ranges[len(ranges)-1].Last), ranges, 0
}

// shareReadBufs are the buffers ShareFetch reads records into; one
// larger than maxPooledShareRead is not kept.
var shareReadBufs = sync.Pool{New: func() any { return new([]byte) }}

const maxPooledShareRead = 1 << 20

// shareIsolation is how far a group's share-partitions read.
func (b *Broker) shareIsolation(group string) fetchIsolation {
	if b.GroupConfigs(group)["share.isolation.level"] == "read_committed" {
		return fetchTxnCommitted
	}
	return fetchHighWatermark
}

// archiveAborted archives the acquired records of aborted transactions
// in buf (member holds them: it rejects them in its place) and returns
// the ranges without them.
func (s *shareBroker) archiveAborted(sp *sharePart, p *Partition, member string, buf []byte, ranges []share.Range, now time.Time) []share.Range {
	aborted := p.abortedTxns(nil, ranges[0].First, ranges[len(ranges)-1].Last+1)
	if len(aborted) == 0 {
		return ranges
	}
	for b := buf; len(b) >= record.HeaderLen; {
		h, err := record.ParseHeader(b)
		if err != nil || h.Size() > int64(len(b)) || h.Size() < record.HeaderLen {
			break
		}
		b = b[h.Size():]
		if !h.IsTransactional() || h.IsControl() || !inAborted(aborted, h.ProducerID, h.BaseOffset) {
			continue
		}
		for _, r := range ranges {
			first, last := max(r.First, h.BaseOffset), min(r.Last, h.LastOffset())
			if first <= last {
				sp.sp.Acknowledge(member, first, last, []int8{share.AckReject}, false, now)
			}
		}
	}
	return heldRanges(sp.sp, ranges)
}

func inAborted(aborted []storage.AbortedTxn, pid, offset int64) bool {
	for _, t := range aborted {
		if t.ProducerID == pid && offset >= t.FirstOffset && offset < t.LastOffset {
			return true
		}
	}
	return false
}

// heldRanges keeps the offsets of ranges still Acquired.
func heldRanges(sp *share.Partition, ranges []share.Range) []share.Range {
	var out []share.Range
	for _, r := range ranges {
		for off := r.First; off <= r.Last; off++ {
			if st, _ := sp.State(off); st != share.Acquired {
				continue
			}
			if n := len(out); n > 0 && out[n-1].Last == off-1 && out[n-1].Count == r.Count {
				out[n-1].Last = off
				continue
			}
			out = append(out, share.Range{First: off, Last: off, Count: r.Count})
		}
	}
	return out
}

// batchSpan is the offsets the whole batches in b cover: the first base
// offset and the offset after the last batch.
func batchSpan(b []byte) (lo, hi int64) {
	lo, hi = -1, -1
	for len(b) >= record.HeaderLen {
		h, err := record.ParseHeader(b)
		if err != nil || h.Size() > int64(len(b)) || h.Size() < record.HeaderLen {
			break
		}
		if lo < 0 {
			lo = h.BaseOffset
		}
		hi = h.NextOffset()
		b = b[h.Size():]
	}
	return lo, hi
}

// trimBatches keeps the batches of b that hold offsets in [first, last].
func trimBatches(b []byte, first, last int64) []byte {
	start, end := -1, 0
	pos := 0
	for pos+record.HeaderLen <= len(b) {
		h, err := record.ParseHeader(b[pos:])
		if err != nil || h.Size() > int64(len(b)-pos) || h.Size() < record.HeaderLen {
			break
		}
		size := int(h.Size())
		if h.NextOffset() > first && h.BaseOffset <= last {
			if start < 0 {
				start = pos
			}
			end = pos + size
		}
		pos += size
	}
	if start < 0 {
		return nil
	}
	return b[start:end]
}

// ---- ListGroups and DeleteGroups ----

const shareGroupType = "share"

// listShareGroups adds the share groups ListGroups asks for (type
// "share", protocol type "share" as Kafka lists them).
func (b *Broker) listShareGroups(req *kmsg.ListGroupsRequest, resp *kmsg.ListGroupsResponse) {
	if b.share == nil || !matchesFilter(req.TypesFilter, shareGroupType) {
		return
	}
	for _, g := range b.share.groups.List() {
		if matchesFilter(req.StatesFilter, g.State) {
			resp.Groups = append(resp.Groups, kmsg.ListGroupsResponseGroup{Group: g.Name, ProtocolType: shareGroupType, GroupState: g.State, GroupType: shareGroupType})
		}
	}
}

// deleteShareGroup deletes an empty share group and the state of its
// share-partitions; handled is false when no share group has the name
// (the classic coordinator answers then).
func (b *Broker) deleteShareGroup(name string) (code int16, handled bool) {
	if b.share == nil || !b.share.groups.Exists(name) {
		return 0, false
	}
	if exists, empty := b.share.groups.IsEmpty(name); exists && !empty {
		return kerr.NonEmptyGroup.Code, true
	}
	if code := b.share.deleteStates(name, nil); code != 0 {
		return code, true
	}
	return b.share.groups.Delete(name), true
}

// deleteStates deletes the durable state of a group's share-partitions
// (of the topics given, or all) and forgets them here.
func (s *shareBroker) deleteStates(groupName string, topics map[[16]byte]bool) int16 {
	if code := s.ensureStates(); code != 0 {
		return code
	}
	match := func(k share.SPKey) bool { return k.Group == groupName && (topics == nil || topics[k.TopicID]) }
	s.dropParts(match)
	for _, k := range s.states.Keys(groupName) {
		if match(k) {
			if code := s.deleteState(k); code != 0 {
				return code
			}
		}
	}
	return 0
}

// isShareGroup reports whether a share group holds the id: classic
// JoinGroup and OffsetCommit refuse it, as Kafka's one group namespace
// does.
func (b *Broker) isShareGroup(name string) bool {
	return b.share != nil && b.share.groups.Exists(name)
}

// close unloads the share groups and closes the persister's client.
func (s *shareBroker) close() {
	s.groups.Close()
	s.rpc.close()
}

// topicDeleted forgets a deleted topic's share-partitions here and, in
// the background (the caller holds the metadata lock, and a tombstone
// waits for the ISR), deletes the state this broker coordinates for it,
// as Kafka's group coordinator does.
func (s *shareBroker) topicDeleted(id [16]byte) {
	if s == nil {
		return
	}
	s.dropParts(func(k share.SPKey) bool { return k.TopicID == id })
	keys := s.states.KeysOfTopic(id)
	if len(keys) == 0 {
		return
	}
	go func() {
		for _, k := range keys {
			if code := s.states.Delete(k); code != 0 {
				s.b.log.Warn("cannot delete the share state of a deleted topic", "group", k.Group, "partition", k.Partition, "code", code)
			}
		}
	}()
}

// parkAlso lists a parked ShareFetch under its partitions.
func (s *shareBroker) parkAlso(parts []*Partition, w *fetchWaiter) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range parts {
		s.mu.parked[p] = append(s.mu.parked[p], w)
	}
}

// unpark removes a waiter whose answer is starting.
func (s *shareBroker) unpark(parts []*Partition, w *fetchWaiter) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range parts {
		ws := slices.DeleteFunc(s.mu.parked[p], func(o *fetchWaiter) bool { return o == w })
		if len(ws) == 0 {
			delete(s.mu.parked, p)
			continue
		}
		s.mu.parked[p] = ws
	}
}

// wakeParked answers the ShareFetches parked on p: records there were
// released and may be acquired again.
func (s *shareBroker) wakeParked(p *Partition) {
	s.mu.Lock()
	ws := slices.Clone(s.mu.parked[p])
	s.mu.Unlock()
	for _, w := range ws {
		w.complete()
	}
}
