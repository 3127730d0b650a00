package engine

// The group coordinator: classic consumer groups (JoinGroup / SyncGroup /
// Heartbeat / LeaveGroup) and committed offsets.
//
// Every group lives in memory, guarded by its own mutex; what must survive a
// restart (committed offsets and each generation's membership) is written to
// the internal compacted topic __consumer_offsets in Kafka's own record
// schemas, to the partition Kafka would pick for the group, and replayed
// when the broker starts. Files:
//
//	groups.go         the coordinator: group lookup, the offsets topic, retention
//	group_state.go    one group's state machine (join, sync, heartbeat, leave, timers)
//	group_offsets.go  offset commit, fetch, delete and expiry
//	group_log.go      records of __consumer_offsets: encoding, appending, replay
//
// Requests that must wait (a JoinGroup until the rebalance completes, a
// SyncGroup until the leader's assignment arrives) never block their
// goroutine: the request is parked on its member and answered by whichever
// goroutine or timer completes the phase. Responses are queued while the
// group's lock is held and sent once it is released.

import (
	"fmt"
	"sync"
	"time"
	"unicode/utf16"
)

// offsetsTopic is Kafka's internal topic of committed offsets.
const offsetsTopic = "__consumer_offsets"

// offsetsRetentionCheckInterval is Kafka's offsets.retention.check.interval.ms
// default: how often expired offsets and dead groups are swept.
const offsetsRetentionCheckInterval = 10 * time.Minute

// groupCoordinator owns every consumer group of this broker.
type groupCoordinator struct {
	b     *Broker
	cfg   *Config
	parts []*Partition // __consumer_offsets partitions, fixed for the broker's life
	// appendMu serialises appends to each offsets partition, so that the
	// high watermark set after an append never moves backwards.
	appendMu []sync.Mutex

	mu struct {
		sync.Mutex
		groups map[string]*group
		closed bool
	}
	stop chan struct{} // closed by close: ends the retention loop
	done chan struct{} // closed when the retention loop has returned; nil before it starts
}

func newGroupCoordinator(b *Broker) (*groupCoordinator, error) {
	c := &groupCoordinator{b: b, cfg: &b.cfg, stop: make(chan struct{})}
	c.mu.groups = map[string]*group{}
	t, err := c.offsetsTopic()
	if err != nil {
		return nil, err
	}
	c.parts = t.Partitions()
	c.appendMu = make([]sync.Mutex, len(c.parts))
	if err := c.load(); err != nil {
		c.close()
		return nil, err
	}
	c.done = make(chan struct{})
	go c.retentionLoop()
	return c, nil
}

// offsetsTopic returns __consumer_offsets, creating it on first start with
// the settings Kafka gives it: compacted, offsets.topic.segment.bytes.
func (c *groupCoordinator) offsetsTopic() (*Topic, error) {
	if t := c.b.Topic(offsetsTopic); t != nil {
		return t, nil
	}
	overrides := map[string]string{
		"cleanup.policy":   "compact",
		"compression.type": "producer",
		"segment.bytes":    itoa(c.cfg.OffsetsTopicSegmentBytes),
	}
	t, err := c.b.CreateTopic(offsetsTopic, c.cfg.OffsetsTopicPartitions, overrides, false)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", offsetsTopic, err)
	}
	return t, nil
}

// ReleaseGroupWaiters unloads the groups as a shutdown begins: JoinGroup
// and SyncGroup requests parked in a rebalance are answered at once
// (NOT_COORDINATOR) rather than have the drain of in-flight requests wait
// out a rebalance timeout, and later group requests are refused. What was
// committed is already in __consumer_offsets.
func (b *Broker) ReleaseGroupWaiters() { b.groups.close() }

// close stops the timers of every group and answers the requests still
// parked in them with NOT_COORDINATOR (Kafka's answer when a coordinator
// unloads its groups), so that clients look for the coordinator again.
func (c *groupCoordinator) close() {
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		return
	}
	c.mu.closed = true
	groups := make([]*group, 0, len(c.mu.groups))
	for _, g := range c.mu.groups {
		groups = append(groups, g)
	}
	c.mu.groups = map[string]*group{}
	c.mu.Unlock()
	close(c.stop)
	if c.done != nil {
		<-c.done
	}
	for _, g := range groups {
		g.mu.Lock()
		g.unload()
		g.unlock()
	}
}

// lockGroup returns the named group, locked and not Dead, creating it when
// create is set; nil if it does not exist (or the coordinator is closed).
func (c *groupCoordinator) lockGroup(name string, create bool) *group {
	for {
		c.mu.Lock()
		if c.mu.closed {
			c.mu.Unlock()
			return nil
		}
		g := c.mu.groups[name]
		if g == nil {
			if !create {
				c.mu.Unlock()
				return nil
			}
			g = newGroup(c, name, time.Now())
			c.mu.groups[name] = g
		}
		c.mu.Unlock()
		g.mu.Lock()
		if g.state != groupDead {
			return g
		}
		// A Dead group has already left the map (markDead removes it under
		// the group's lock), so the next lookup finds its successor or none.
		g.mu.Unlock()
	}
}

// forget removes g from the map; g's lock is held and g is Dead.
func (c *groupCoordinator) forget(g *group) {
	c.mu.Lock()
	if c.mu.groups[g.name] == g {
		delete(c.mu.groups, g.name)
	}
	c.mu.Unlock()
}

// topicDeleted drops every group's offsets of a deleted topic, as Kafka
// does, so that a topic created again under the name starts without them.
func (c *groupCoordinator) topicDeleted(topic string) {
	for _, g := range c.allGroups() {
		g.mu.Lock()
		if g.state != groupDead {
			g.dropTopicOffsets(topic)
		}
		g.unlock()
	}
}

// allGroups snapshots the groups (unlocked).
func (c *groupCoordinator) allGroups() []*group {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*group, 0, len(c.mu.groups))
	for _, g := range c.mu.groups {
		out = append(out, g)
	}
	return out
}

// partitionFor is the __consumer_offsets partition holding a group's
// records: Kafka's abs(groupId.hashCode()) % partitions, so Kafka's own
// tools look for a group in the same place.
func (c *groupCoordinator) partitionFor(group string) *Partition {
	h := javaStringHash(group)
	if h == -1<<31 {
		h = 0 // Kafka's Utils.abs maps Integer.MIN_VALUE to 0
	} else if h < 0 {
		h = -h
	}
	return c.parts[int(h)%len(c.parts)]
}

// javaStringHash is Java's String.hashCode: s[0]*31^(n-1) + … over UTF-16
// code units, in wrapping 32-bit arithmetic.
func javaStringHash(s string) int32 {
	var h int32
	for _, u := range utf16.Encode([]rune(s)) {
		h = 31*h + int32(u)
	}
	return h
}

// retentionLoop sweeps expired offsets and dead groups periodically, as
// Kafka's offsets.retention.check.interval.ms task does.
func (c *groupCoordinator) retentionLoop() {
	defer close(c.done)
	tick := time.NewTicker(offsetsRetentionCheckInterval)
	defer tick.Stop()
	for {
		select {
		case <-c.stop:
			return
		case now := <-tick.C:
			c.expireOffsets(now)
		}
	}
}

// ExpireGroupOffsets runs one offsets-retention sweep as if the time were
// now (tests and admin tools): offsets past offsets.retention.minutes are
// deleted and empty groups left without offsets are removed.
func (b *Broker) ExpireGroupOffsets(now time.Time) { b.groups.expireOffsets(now) }
