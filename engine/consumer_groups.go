package engine

// Consumer-protocol groups (KIP-848) as the broker wires them: the
// coordinator reads topics from the metadata image (so in a cluster it
// sees every topic, not only those hosted here), its broker keys from the
// config, and a group's own consumer.session.timeout.ms and
// consumer.heartbeat.interval.ms from its GROUP configs at every
// heartbeat, so IncrementalAlterConfigs applies at once.

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-broker/sluice/engine/group"
	"github.com/sluice-broker/sluice/metadata"
)

// consumerGroupConfig is the coordinator's consumer-protocol configuration.
func (b *Broker) consumerGroupConfig() group.ConsumerConfig {
	return group.ConsumerConfig{
		SessionTimeout:    b.groupBrokerMillis("group.consumer.session.timeout.ms"),
		HeartbeatInterval: b.groupBrokerMillis("group.consumer.heartbeat.interval.ms"),
		Assignors:         consumerAssignors(b.cfg.GroupConsumerAssignors),
		MigrationPolicy:   strings.ToLower(b.cfg.GroupConsumerMigrationPolicy),
		PerGroup:          b.consumerGroupIntervals,
		Topics:            imageTopics{b},
	}
}

func (b *Broker) groupBrokerMillis(name string) time.Duration {
	ms, _ := b.cfg.groupBrokerInt(name)
	return time.Duration(ms) * time.Millisecond
}

// consumerAssignors maps group.consumer.assignors to assignor names
// (Kafka's class names or its short names).
func consumerAssignors(list string) []string {
	var out []string
	for _, item := range strings.Split(list, ",") {
		switch name := strings.TrimSpace(item); name {
		case group.AssignorUniform, consumerUniformClass:
			out = append(out, group.AssignorUniform)
		case group.AssignorRange, consumerRangeClass:
			out = append(out, group.AssignorRange)
		}
	}
	return out
}

// Kafka's class names of its server-side assignors.
const (
	consumerUniformClass = "org.apache.kafka.coordinator.group.assignor.UniformAssignor"
	consumerRangeClass   = "org.apache.kafka.coordinator.group.assignor.RangeAssignor"
)

// consumerGroupIntervals is a group's own session timeout and heartbeat
// interval (0 where it sets none).
func (b *Broker) consumerGroupIntervals(name string) (session, heartbeat time.Duration) {
	set := b.GroupConfigs(name)
	ms := func(key string) time.Duration {
		n, err := strconv.ParseInt(set[key], 10, 32)
		if err != nil || n <= 0 {
			return 0
		}
		return time.Duration(n) * time.Millisecond
	}
	return ms("consumer.session.timeout.ms"), ms("consumer.heartbeat.interval.ms")
}

// imageTopics is the coordinator's view of topics: the metadata image.
type imageTopics struct{ b *Broker }

func (t imageTopics) ByName(name string) (group.TopicMeta, bool) {
	img := t.b.image()
	ti := img.Topic(name)
	if ti == nil {
		return group.TopicMeta{}, false
	}
	return topicMeta(img, ti), true
}

func (t imageTopics) ByID(id [16]byte) (group.TopicMeta, bool) {
	img := t.b.image()
	ti := img.TopicByID(id)
	if ti == nil {
		return group.TopicMeta{}, false
	}
	return topicMeta(img, ti), true
}

// Names lists the topics a subscription regex may match: internal topics
// are left out, as Kafka does.
func (t imageTopics) Names() []string {
	img := t.b.image()
	out := make([]string, 0, img.TopicCount())
	for ti := range img.AllTopics() {
		if !internalTopicNames[ti.Name] {
			out = append(out, ti.Name)
		}
	}
	slices.Sort(out)
	return out
}

// topicMeta describes a topic with the racks of each partition's replicas
// (nil when no broker has a rack).
func topicMeta(img metadata.Image, ti *metadata.TopicImage) group.TopicMeta {
	m := group.TopicMeta{Name: ti.Name, ID: ti.ID, Partitions: int32(len(ti.Partitions))}
	any := false
	racks := make([][]string, len(ti.Partitions))
	for i := range ti.Partitions {
		for _, r := range ti.Partitions[i].Replicas {
			if br, ok := img.Broker(r); ok && br.Rack != nil {
				racks[i] = append(racks[i], *br.Rack)
				any = true
			}
		}
	}
	if any {
		m.Racks = racks
	}
	return m
}
