package group

// LoadPartition and UnloadPartition: the coordinator takes and gives up
// the groups of one partition of __consumer_offsets (see the package doc
// for when each is called). A load replays the partition in log order; the
// last record of a key wins and a tombstone removes it. A group whose last
// metadata record has members comes back Stable with them and their
// assignments, each member's session starting now, so consumers that keep
// heartbeating across a failover do not rebalance (as after a Kafka
// coordinator failover). A group with only offsets comes back Empty.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// errBadRecord: a record of __consumer_offsets that cannot be decoded.
var errBadRecord = errors.New("malformed __consumer_offsets record")

// loadedGroup collects one group's records during replay.
type loadedGroup struct {
	meta    *kmsg.GroupMetadataValue // nil: none, or tombstoned
	offsets map[offsetTP]*committedOffset
	cons    *loadedConsumer // consumer-protocol records (consumer_load.go)
}

// LoadPartition replays partition p of __consumer_offsets from log and
// takes ownership of the groups that hash to it; from then on their
// requests are served here and their writes go to log. It returns the
// number of groups loaded. A record that cannot be decoded fails the load
// (skipping it could resurrect deleted offsets) and nothing is attached.
// Loading a partition already loaded, or after Close, is an error.
func (c *Coordinator) LoadPartition(p int32, log PartitionLog) (int, error) {
	if p < 0 || p >= c.cfg.Partitions {
		return 0, fmt.Errorf("partition %d of %d", p, c.cfg.Partitions)
	}
	c.txn.drop(p) // the replay restores the open transactions' offsets
	loaded := map[string]*loadedGroup{}
	if err := log.Replay(func(key, value []byte) error { return loadRecord(loaded, key, value) }); err != nil {
		return 0, err
	}
	part := &partition{index: p, log: log}
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.closed || c.mu.parts[p] != nil {
		return 0, fmt.Errorf("partition %d: already loaded, or coordinator closed", p)
	}
	c.mu.parts[p] = part
	n := 0
	for name, lg := range loaded {
		if c.PartitionFor(name) != p {
			continue // not ours to serve (a record in the wrong partition)
		}
		if g := lg.build(c, part, name, now); g != nil {
			c.mu.groups[name] = g
			n++
		}
	}
	return n, nil
}

// UnloadPartition gives up partition p: its groups are dropped, their
// timers stopped, and their parked JoinGroup and SyncGroup requests
// answered NOT_COORDINATOR. Later requests for them get NOT_COORDINATOR
// until p is loaded again. Unloading a partition not loaded does nothing.
func (c *Coordinator) UnloadPartition(p int32) {
	c.mu.Lock()
	part := c.mu.parts[p]
	if part == nil {
		c.mu.Unlock()
		return
	}
	delete(c.mu.parts, p)
	c.txn.drop(p)
	groups := c.takeGroups(func(g *group) bool { return g.part == part })
	c.mu.Unlock()
	unloadGroups(groups)
}

// Loaded reports whether partition p is loaded.
func (c *Coordinator) Loaded(p int32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.parts[p] != nil
}

// loadRecord applies one record of __consumer_offsets. Key versions 0 and
// 1 are offset commits, 2 group metadata, 3-8 consumer-protocol groups;
// other record types (share groups, streams groups) are skipped.
func loadRecord(loaded map[string]*loadedGroup, key, value []byte) error {
	get := func(name string) *loadedGroup {
		lg := loaded[name]
		if lg == nil {
			lg = &loadedGroup{offsets: map[offsetTP]*committedOffset{}}
			loaded[name] = lg
		}
		return lg
	}
	if len(key) < 2 {
		return errBadRecord
	}
	// The replay buffer is reused: decode from copies, since kmsg's byte
	// fields alias their input.
	key, value = bytes.Clone(key), cloneOrNil(value)
	switch binary.BigEndian.Uint16(key) {
	case 0, 1:
		var k kmsg.OffsetCommitKey
		if err := k.ReadFrom(key); err != nil {
			return err
		}
		return loadOffset(get(k.Group), offsetTP{k.Topic, k.Partition}, value)
	case 2:
		var k kmsg.GroupMetadataKey
		if err := k.ReadFrom(key); err != nil {
			return err
		}
		lg := get(k.Group)
		lg.meta = nil
		if value == nil {
			return nil
		}
		v := new(kmsg.GroupMetadataValue)
		if err := v.ReadFrom(value); err != nil {
			return err
		}
		lg.meta = v
	case keyCGMetadata, keyCGPartitionMetadata, keyCGMemberMetadata, keyCGTargetMetadata, keyCGTargetMember, keyCGCurrentAssignment:
		return loadConsumerRecord(loaded, key, value)
	}
	return nil
}

func cloneOrNil(b []byte) []byte {
	if b == nil {
		return nil
	}
	return bytes.Clone(b)
}

func loadOffset(lg *loadedGroup, tp offsetTP, value []byte) error {
	if value == nil {
		delete(lg.offsets, tp)
		return nil
	}
	var v kmsg.OffsetCommitValue
	if err := v.ReadFrom(value); err != nil {
		return err
	}
	o := &committedOffset{offset: v.Offset, leaderEpoch: -1, metadata: v.Metadata, commitMs: v.CommitTimestamp, expireMs: -1}
	if v.Version >= 3 {
		o.leaderEpoch = v.LeaderEpoch
	}
	if v.Version == 1 {
		o.expireMs = v.ExpireTimestamp
	}
	lg.offsets[tp] = o
	return nil
}

// build makes the group the records describe; nil if nothing is left of it.
func (lg *loadedGroup) build(c *Coordinator, p *partition, name string, now time.Time) *group {
	hasCons := lg.cons != nil && lg.cons.exists
	if lg.meta == nil && len(lg.offsets) == 0 && !hasCons {
		return nil
	}
	g := newGroup(c, p, name, now)
	g.offsets = lg.offsets
	if lg.meta != nil {
		g.restore(lg.meta)
	}
	if hasCons && len(g.members) == 0 {
		g.restoreConsumer(lg.cons, now)
	}
	return g
}

// restore applies a group metadata record.
func (g *group) restore(v *kmsg.GroupMetadataValue) {
	g.protocolType = v.ProtocolType
	g.generation = v.Generation
	if v.Protocol != nil {
		g.protocol = *v.Protocol
	}
	// Records before v2 carry no state time: expiry then falls back to
	// commit times (as in Kafka).
	g.stateSince = time.Time{}
	if v.CurrentStateTimestamp >= 0 {
		g.stateSince = time.UnixMilli(v.CurrentStateTimestamp)
	}
	for _, vm := range v.Members {
		m := &groupMember{
			id: vm.MemberID, clientID: vm.ClientID, clientHost: vm.ClientHost,
			session:    msDuration(vm.SessionTimeoutMillis),
			rebalance:  msDuration(vm.RebalanceTimeoutMillis),
			protocols:  []Protocol{{Name: g.protocol, Metadata: vm.Subscription}},
			assignment: vm.Assignment,
		}
		if vm.RebalanceTimeoutMillis < 0 {
			m.rebalance = m.session
		}
		if vm.InstanceID != nil && *vm.InstanceID != "" {
			m.instanceID = *vm.InstanceID
			g.static[m.instanceID] = m.id
		}
		g.members[m.id] = m
		g.touch(m, m.session)
	}
	if len(g.members) == 0 {
		g.protocol = ""
		return
	}
	g.leader = g.sortedMembers()[0].id
	if v.Leader != nil && g.members[*v.Leader] != nil {
		g.leader = *v.Leader
	}
	g.state = groupStable
	g.subscribed = g.computeSubscribed()
}

func msDuration(ms int32) time.Duration { return time.Duration(ms) * time.Millisecond }
