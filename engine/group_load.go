package engine

// Rebuilding groups at start from __consumer_offsets. Every partition is
// replayed in log order; the last record of a key wins and a tombstone
// removes it. A group whose last metadata record has members comes back
// Stable with them and their assignments, each member's session starting
// now, so consumers that keep heartbeating across a broker restart do not
// rebalance (as after a Kafka coordinator failover). A group with only
// offsets comes back Empty.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// loadedGroup collects one group's records during replay.
type loadedGroup struct {
	meta    *kmsg.GroupMetadataValue // nil: none, or tombstoned
	offsets map[offsetTP]*committedOffset
}

func (c *groupCoordinator) load() error {
	start := time.Now()
	loaded := map[string]*loadedGroup{}
	get := func(name string) *loadedGroup {
		lg := loaded[name]
		if lg == nil {
			lg = &loadedGroup{offsets: map[offsetTP]*committedOffset{}}
			loaded[name] = lg
		}
		return lg
	}
	for _, p := range c.parts {
		err := replay(p, func(key, value []byte) error { return loadRecord(get, key, value) })
		if err != nil {
			return fmt.Errorf("load %s-%d: %w", offsetsTopic, p.Index, err)
		}
		// One replica: everything in the log is committed.
		p.advanceHighWatermark()
	}
	now := time.Now()
	for name, lg := range loaded {
		if g := lg.build(c, name, now); g != nil {
			c.mu.groups[name] = g
		}
	}
	c.b.log.Info("loaded consumer groups", "groups", len(c.mu.groups), "took", time.Since(start))
	return nil
}

// loadRecord applies one record of __consumer_offsets. Key versions 0 and
// 1 are offset commits, 2 group metadata; newer coordinators' record types
// (KIP-848 groups, share groups) are not Sluice's and are skipped.
func loadRecord(get func(string) *loadedGroup, key, value []byte) error {
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
func (lg *loadedGroup) build(c *groupCoordinator, name string, now time.Time) *group {
	if lg.meta == nil && len(lg.offsets) == 0 {
		return nil
	}
	g := newGroup(c, name, now)
	g.offsets = lg.offsets
	if lg.meta != nil {
		g.restore(lg.meta)
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
			protocols:  []kmsg.JoinGroupRequestProtocol{{Name: g.protocol, Metadata: vm.Subscription}},
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
