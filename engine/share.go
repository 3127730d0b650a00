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
// share_partitions.go keeps the share-partitions, share_sessions.go the
// share sessions, share_persister.go the leaders' link to the share
// coordinator.

import (
	"fmt"
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
		parked map[*Partition][]*parkedFetch
	}
}

func newShareBroker(b *Broker) *shareBroker {
	s := &shareBroker{b: b}
	s.mu.parts = map[share.SPKey]*sharePart{}
	s.mu.sessions = map[shareSessionKey]*shareSession{}
	s.mu.parked = map[*Partition][]*parkedFetch{}
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
