package group

// Replay of consumer-group records (key versions 3-8) as LoadPartition
// meets them. A group comes back with its epochs, members, target and
// current assignments; each member's session starts at the load, so
// members that keep heartbeating across a coordinator move carry on
// without a rebalance. A member without its metadata record is dropped
// (its records were being tombstoned).

import "time"

// loadedConsumer collects one consumer group's records during replay.
type loadedConsumer struct {
	exists      bool // a ConsumerGroupMetadata record is live
	epoch       int32
	targetEpoch int32
	subscribed  map[string]topicSnapshot
	members     map[string]*cgMember
	targets     map[string]assignment
	currents    map[string]*currentAssignment
}

func newLoadedConsumer() *loadedConsumer {
	return &loadedConsumer{subscribed: map[string]topicSnapshot{}, members: map[string]*cgMember{},
		targets: map[string]assignment{}, currents: map[string]*currentAssignment{}}
}

// loadConsumerRecord applies one consumer-group record to loaded.
func loadConsumerRecord(loaded map[string]*loadedGroup, key, value []byte) error {
	k, err := decodeCGKey(key)
	if err != nil {
		return err
	}
	lg := loaded[k.group]
	if lg == nil {
		lg = &loadedGroup{offsets: map[offsetTP]*committedOffset{}}
		loaded[k.group] = lg
	}
	if lg.cons == nil {
		lg.cons = newLoadedConsumer()
	}
	return lg.cons.apply(k, value)
}

func (lc *loadedConsumer) apply(k cgRecordKey, value []byte) error {
	var err error
	switch k.version {
	case keyCGMetadata:
		if value == nil {
			*lc = *newLoadedConsumer()
			return nil
		}
		lc.exists = true
		lc.epoch, err = readInt32Value(value)
	case keyCGPartitionMetadata:
		lc.subscribed = map[string]topicSnapshot{}
		if value != nil {
			lc.subscribed, err = readSubscribed(value)
		}
	case keyCGTargetMetadata:
		lc.targetEpoch = 0
		if value != nil {
			lc.targetEpoch, err = readInt32Value(value)
		}
	case keyCGMemberMetadata:
		delete(lc.members, k.member)
		if value != nil {
			lc.members[k.member], err = readMember(k.member, value)
		}
	case keyCGTargetMember:
		delete(lc.targets, k.member)
		if value != nil {
			lc.targets[k.member], err = readTarget(value)
		}
	case keyCGCurrentAssignment:
		delete(lc.currents, k.member)
		if value != nil {
			lc.currents[k.member], err = readCurrent(value)
		}
	}
	return err
}

// restoreConsumer makes g the consumer group lc describes.
func (g *group) restoreConsumer(lc *loadedConsumer, now time.Time) {
	st := newCGState()
	st.epoch, st.targetEpoch, st.subscribed = lc.epoch, lc.targetEpoch, lc.subscribed
	for id, m := range lc.members {
		if cur := lc.currents[id]; cur != nil {
			m.epoch, m.prevEpoch, m.state = cur.epoch, cur.prevEpoch, cur.state
			m.assigned, m.pending = cur.assigned, cur.pending
		} else {
			m.assigned, m.pending = assignment{}, assignment{}
		}
		if m.state == memberUnrevoked {
			m.revokeBy = now.Add(m.rebalance)
		}
		m.deadline = now.Add(g.sessionOf(m))
		st.add(m)
		if m.instanceID != "" {
			st.static[m.instanceID] = id
		}
		if t, ok := lc.targets[id]; ok {
			st.target[id] = t
		}
	}
	g.cons = &consumerGroup{st: st, timers: map[string]*memberTimer{}}
	g.afterConsumerChange()
}
