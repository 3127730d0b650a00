package group

import (
	"log/slog"
	"sync"
	"time"
	"unicode/utf16"

	"github.com/twmb/franz-go/pkg/kerr"
)

// DefaultRetentionCheckInterval is Kafka's
// offsets.retention.check.interval.ms default: how often expired offsets
// and dead groups are swept.
const DefaultRetentionCheckInterval = 10 * time.Minute

// Config is the coordinator's share of the broker's configuration.
type Config struct {
	Partitions             int32         // offsets.topic.num.partitions; > 0
	InitialRebalanceDelay  time.Duration // group.initial.rebalance.delay.ms
	MinSessionTimeout      time.Duration // group.min.session.timeout.ms
	MaxSessionTimeout      time.Duration // group.max.session.timeout.ms
	MaxSize                int32         // group.max.size
	OffsetsRetention       time.Duration // offsets.retention.minutes
	RetentionCheckInterval time.Duration // 0: DefaultRetentionCheckInterval
	Clock                  Clock         // nil: RealClock
	Log                    *slog.Logger  // nil: slog.Default()

	// Consumer configures consumer-protocol groups (consumer.go).
	Consumer ConsumerConfig
}

// Coordinator owns the groups of the __consumer_offsets partitions loaded
// on this broker.
type Coordinator struct {
	cfg   Config
	clock Clock
	log   *slog.Logger

	mu struct {
		sync.Mutex
		// parts are the loaded partitions, by index.
		parts map[int32]*partition
		// groups are the live groups of the loaded partitions. Invariant:
		// parts[PartitionFor(name)] != nil for every name in groups.
		groups map[string]*group
		closed bool
		sweep  Timer // the retention sweep; nil once closed
	}
	txn txnOffsets // offsets of open transactions (txn_offsets.go)
}

// partition is one loaded partition of __consumer_offsets.
type partition struct {
	index int32
	log   PartitionLog
	// appendMu serialises appends, so that the log's high watermark set
	// after one never moves backwards.
	appendMu sync.Mutex
}

// New returns a coordinator with no partition loaded; the retention sweep
// starts at once.
func New(cfg Config) *Coordinator {
	if cfg.Clock == nil {
		cfg.Clock = RealClock{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.RetentionCheckInterval <= 0 {
		cfg.RetentionCheckInterval = DefaultRetentionCheckInterval
	}
	c := &Coordinator{cfg: cfg, clock: cfg.Clock, log: cfg.Log}
	c.mu.parts = map[int32]*partition{}
	c.mu.groups = map[string]*group{}
	c.mu.sweep = c.clock.AfterFunc(cfg.RetentionCheckInterval, c.sweep)
	return c
}

// sweep is one periodic retention pass, re-armed until Close.
func (c *Coordinator) sweep() {
	c.ExpireOffsets(c.clock.Now())
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.sweep != nil {
		c.mu.sweep.Reset(c.cfg.RetentionCheckInterval)
	}
}

// Close unloads every partition as a shutdown begins: parked JoinGroup and
// SyncGroup requests are answered NOT_COORDINATOR at once rather than have
// the drain of in-flight requests wait out a rebalance timeout, and later
// requests are refused (as from a coordinator that is going away).
func (c *Coordinator) Close() {
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		return
	}
	c.mu.closed = true
	c.mu.sweep.Stop()
	c.mu.sweep = nil
	groups := c.takeGroups(func(*group) bool { return true })
	c.mu.parts = map[int32]*partition{}
	c.mu.Unlock()
	unloadGroups(groups)
}

// takeGroups removes and returns the groups that match; c.mu is held.
func (c *Coordinator) takeGroups(match func(*group) bool) []*group {
	var out []*group
	for name, g := range c.mu.groups {
		if match(g) {
			out = append(out, g)
			delete(c.mu.groups, name)
		}
	}
	return out
}

func unloadGroups(groups []*group) {
	for _, g := range groups {
		g.mu.Lock()
		g.unload()
		g.unlock()
	}
}

// PartitionFor is the __consumer_offsets partition holding a group's
// records: Kafka's abs(groupId.hashCode()) % partitions, so Kafka's own
// tools look for a group in the same place.
func (c *Coordinator) PartitionFor(group string) int32 {
	return PartitionFor(group, c.cfg.Partitions)
}

// PartitionFor is Kafka's partitionFor over n partitions.
func PartitionFor(group string, n int32) int32 {
	h := javaStringHash(group)
	if h == -1<<31 {
		h = 0 // Kafka's Utils.abs maps Integer.MIN_VALUE to 0
	} else if h < 0 {
		h = -h
	}
	return h % n
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

// Owns reports whether the group's partition is loaded here: this broker
// is its coordinator.
func (c *Coordinator) Owns(group string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.mu.closed && c.mu.parts[c.PartitionFor(group)] != nil
}

// miss says why lockGroup found no group.
type miss int8

const (
	found     miss = iota
	noGroup        // no such group, and create was not set
	notLoaded      // the group's partition is not loaded here
	closed         // the coordinator is closed (shutting down)
)

// code is the error a call answers for a miss: NOT_COORDINATOR when the
// partition is not loaded here, else the call's own codes for a group
// that does not exist and for a coordinator shutting down.
func (m miss) code(noGroupCode, closedCode int16) int16 {
	switch m {
	case notLoaded:
		return kerr.NotCoordinator.Code
	case closed:
		return closedCode
	default:
		return noGroupCode
	}
}

// lockGroup returns the named group, locked and not Dead, creating it when
// create is set; without a group, why not.
func (c *Coordinator) lockGroup(name string, create bool) (*group, miss) {
	for {
		c.mu.Lock()
		if c.mu.closed {
			c.mu.Unlock()
			return nil, closed
		}
		p := c.mu.parts[c.PartitionFor(name)]
		if p == nil {
			c.mu.Unlock()
			return nil, notLoaded
		}
		g := c.mu.groups[name]
		if g == nil {
			if !create {
				c.mu.Unlock()
				return nil, noGroup
			}
			g = newGroup(c, p, name, c.clock.Now())
			c.mu.groups[name] = g
		}
		c.mu.Unlock()
		g.mu.Lock()
		if g.state != groupDead {
			return g, found
		}
		// A Dead group has already left the map (markDead removes it under
		// the group's lock), so the next lookup finds its successor or none.
		g.mu.Unlock()
	}
}

// forget removes g from the map; g's lock is held and g is Dead.
func (c *Coordinator) forget(g *group) {
	c.mu.Lock()
	if c.mu.groups[g.name] == g {
		delete(c.mu.groups, g.name)
	}
	c.mu.Unlock()
}

// allGroups snapshots the groups (unlocked).
func (c *Coordinator) allGroups() []*group {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*group, 0, len(c.mu.groups))
	for _, g := range c.mu.groups {
		out = append(out, g)
	}
	return out
}

// eachGroup runs fn on every live group, locked.
func (c *Coordinator) eachGroup(fn func(*group)) {
	for _, g := range c.allGroups() {
		g.mu.Lock()
		if g.state != groupDead {
			fn(g)
		}
		g.unlock()
	}
}

// TopicDeleted drops every group's offsets of a deleted topic, as Kafka
// does, so that a topic created again under the name starts without them.
func (c *Coordinator) TopicDeleted(topic string) {
	c.eachGroup(func(g *group) { g.dropTopicOffsets(topic) })
}

// ExpireOffsets runs one offsets-retention sweep as if the time were now:
// offsets past offsets.retention.minutes are deleted and empty groups left
// without offsets are removed.
func (c *Coordinator) ExpireOffsets(now time.Time) {
	c.eachGroup(func(g *group) { g.expire(now) })
}
