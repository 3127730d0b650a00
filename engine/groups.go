package engine

// The group coordinator (package engine/group) as the broker runs it: the
// engine creates __consumer_offsets, loads every one of its partitions
// into the coordinator at start (a single node leads them all) and closes
// it at shutdown. The handlers (08, 09, 10-16, 42, 47) translate requests
// into the coordinator's calls and its results into responses.

import (
	"fmt"
	"net"
	"time"

	"github.com/sluice-broker/sluice/engine/group"
)

// offsetsTopic is Kafka's internal topic of committed offsets.
const offsetsTopic = "__consumer_offsets"

// groupCoordinator is the broker's group coordinator.
type groupCoordinator struct {
	*group.Coordinator
}

// groupConfig is the coordinator's configuration for an offsets topic of
// the given partition count.
func (b *Broker) groupConfig(partitions int32) group.Config {
	cfg := &b.cfg
	return group.Config{
		Partitions:            partitions,
		InitialRebalanceDelay: cfg.GroupInitialRebalanceDelay,
		MinSessionTimeout:     cfg.GroupMinSessionTimeout,
		MaxSessionTimeout:     cfg.GroupMaxSessionTimeout,
		MaxSize:               cfg.GroupMaxSize,
		OffsetsRetention:      cfg.OffsetsRetention,
		Log:                   b.log,
		Consumer:              b.consumerGroupConfig(),
	}
}

func newGroupCoordinator(b *Broker) (*groupCoordinator, error) {
	t, err := b.offsetsTopic()
	if err != nil {
		return nil, err
	}
	parts := t.Partitions()
	// The topic's own count: it was fixed when the topic was created.
	c := &groupCoordinator{group.New(b.groupConfig(int32(len(parts))))}
	start, groups := time.Now(), 0
	for _, p := range parts {
		// One replica: everything in the log is committed.
		p.advanceHighWatermark()
		n, err := c.LoadPartition(p.Index, c.offsetsLog(p))
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("load %s-%d: %w", offsetsTopic, p.Index, err)
		}
		groups += n
	}
	b.log.Info("loaded consumer groups", "groups", groups, "took", time.Since(start))
	return c, nil
}

// offsetsTopic returns __consumer_offsets, creating it on first start with
// the settings Kafka gives it: compacted, offsets.topic.segment.bytes.
func (b *Broker) offsetsTopic() (*Topic, error) {
	if t := b.Topic(offsetsTopic); t != nil {
		return t, nil
	}
	overrides := map[string]string{
		"cleanup.policy":   "compact",
		"compression.type": "producer",
		"segment.bytes":    itoa(b.cfg.OffsetsTopicSegmentBytes),
	}
	t, err := b.CreateTopic(offsetsTopic, b.cfg.OffsetsTopicPartitions, overrides, false)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", offsetsTopic, err)
	}
	return t, nil
}

func (c *groupCoordinator) close() { c.Close() }

// offsetsLog is the group coordinator's view of offsets partition p,
// giving back the offsets of transactions still open at a load.
func (c *groupCoordinator) offsetsLog(p *Partition) offsetsLog {
	return offsetsLog{groupLog{p}, func(pid int64, key, value []byte) error {
		return c.RestoreTxnOffset(p.Index, pid, key, value)
	}}
}

// topicDeleted drops every group's offsets of a deleted topic.
func (c *groupCoordinator) topicDeleted(topic string) { c.TopicDeleted(topic) }

// ReleaseGroupWaiters unloads the groups as a shutdown begins: JoinGroup
// and SyncGroup requests parked in a rebalance are answered at once
// (NOT_COORDINATOR) rather than have the drain of in-flight requests wait
// out a rebalance timeout, and later group requests are refused. What was
// committed is already in __consumer_offsets.
func (b *Broker) ReleaseGroupWaiters() { b.groups.Close() }

// ExpireGroupOffsets runs one offsets-retention sweep as if the time were
// now (tests and admin tools): offsets past offsets.retention.minutes are
// deleted and empty groups left without offsets are removed.
func (b *Broker) ExpireGroupOffsets(now time.Time) { b.groups.ExpireOffsets(now) }

// clientHost is the member's address as Kafka reports it: "/" + IP.
func clientHost(r *Request) string {
	if r.Session == nil || r.Session.Remote == "" {
		return ""
	}
	host, _, err := net.SplitHostPort(r.Session.Remote)
	if err != nil {
		host = r.Session.Remote
	}
	return "/" + host
}

func msDuration(ms int32) time.Duration { return time.Duration(ms) * time.Millisecond }
