package controller

import (
	"maps"
	"slices"

	"github.com/sluice-broker/sluice/metadata"
	"github.com/twmb/franz-go/pkg/kerr"
)

// CreateTopic is one topic of a CreateTopics request (key 19).
type CreateTopic struct {
	Name string
	// ID is the new topic's id, drawn at random by the caller; never zero.
	ID [16]byte
	// NumPartitions and ReplicationFactor are -1 for the defaults, and
	// must be -1 when Assignments is set.
	NumPartitions     int32
	ReplicationFactor int16
	// Assignments, when set, places partition i on Assignments[i]
	// (first replica preferred leader) instead of the placement algorithm.
	Assignments [][]int32
	// Configs are the topic's overrides, already validated by the caller.
	Configs map[string]string
}

// TopicResult is one topic's answer; Err is nil when it is created.
type TopicResult struct {
	Name string
	Err  *kerr.Error
}

// CreateTopicsResult is the records a CreateTopics proposes and the
// per-topic answers to send once they commit.
type CreateTopicsResult struct {
	Result
	Topics []TopicResult
}

// CreateTopics creates topics: a TopicRecord, a PartitionRecord per
// partition (replicas placed over the unfenced brokers, ISR = the replicas
// that are eligible, leader = the first of them) and its ConfigRecords.
func (c *Controller) CreateTopics(img metadata.Image, topics []CreateTopic) CreateTopicsResult {
	b := newBatch(img)
	var out CreateTopicsResult
	for _, t := range topics {
		recs, err := c.createTopic(b.image(), t)
		if err == nil {
			for _, r := range recs {
				b.add(r)
			}
		}
		out.Topics = append(out.Topics, TopicResult{Name: t.Name, Err: err})
	}
	out.Records = b.records()
	return out
}

func (c *Controller) createTopic(img metadata.Image, t CreateTopic) ([]metadata.Record, *kerr.Error) {
	switch {
	case metadata.ValidTopicName(t.Name) != nil:
		return nil, kerr.InvalidTopicException
	case img.Topic(t.Name) != nil:
		return nil, kerr.TopicAlreadyExists
	case t.ID == [16]byte{} || img.TopicByID(t.ID) != nil:
		return nil, kerr.InvalidRequest
	}
	assignments, err := c.topicAssignments(img, t)
	if err != nil {
		return nil, err
	}
	recs := []metadata.Record{metadata.TopicRecord{Name: t.Name, TopicID: t.ID}}
	for i, replicas := range assignments {
		isr := eligibleOf(img, replicas)
		if len(isr) == 0 {
			return nil, kerr.InvalidReplicaAssignment
		}
		recs = append(recs, metadata.PartitionRecord{TopicID: t.ID, Partition: int32(i), Replicas: replicas,
			ISR: isr, Leader: isr[0]})
	}
	for _, k := range slices.Sorted(maps.Keys(t.Configs)) {
		v := t.Configs[k]
		recs = append(recs, metadata.ConfigRecord{ResourceType: metadata.ResourceTopic, ResourceName: t.Name, Name: k, Value: &v})
	}
	return recs, nil
}

// topicAssignments returns the replicas of each partition of a new topic.
func (c *Controller) topicAssignments(img metadata.Image, t CreateTopic) ([][]int32, *kerr.Error) {
	if t.Assignments != nil {
		if t.NumPartitions != -1 || t.ReplicationFactor != -1 {
			return nil, kerr.InvalidRequest
		}
		if len(t.Assignments) == 0 {
			return nil, kerr.InvalidPartitions
		}
		return t.Assignments, validAssignments(img, t.Assignments, len(t.Assignments[0]))
	}
	n, rf := t.NumPartitions, int(t.ReplicationFactor)
	if n == -1 {
		n = c.cfg.DefaultPartitions
	}
	if rf == -1 {
		rf = int(c.cfg.DefaultReplicationFactor)
	}
	if n <= 0 {
		return nil, kerr.InvalidPartitions
	}
	live := liveBrokers(img)
	if rf <= 0 || rf > len(live) {
		return nil, kerr.InvalidReplicationFactor
	}
	start, shift := topicSeed(t.Name, len(live))
	return newPlacement(live, start, shift).assign(0, n, rf), nil
}

// validAssignments checks explicit replica lists: each of rf distinct
// registered brokers, and at least one of them eligible to lead.
func validAssignments(img metadata.Image, as [][]int32, rf int) *kerr.Error {
	for _, replicas := range as {
		if len(replicas) == 0 || len(replicas) != rf {
			return kerr.InvalidReplicaAssignment
		}
		for i, r := range replicas {
			if _, ok := img.Broker(r); !ok || slices.Contains(replicas[:i], r) {
				return kerr.InvalidReplicaAssignment
			}
		}
		if len(eligibleOf(img, replicas)) == 0 {
			return kerr.InvalidReplicaAssignment
		}
	}
	return nil
}

func eligibleOf(img metadata.Image, replicas []int32) []int32 {
	var out []int32
	for _, r := range replicas {
		if img.BrokerEligible(r) {
			out = append(out, r)
		}
	}
	return out
}

// CreatePartitionsResult is the records a CreatePartitions proposes and
// the answer.
type CreatePartitionsResult struct {
	Result
	Err *kerr.Error
}

// CreatePartitions grows topic to count partitions (key 37). The new
// partitions keep the topic's replication factor and are placed as Kafka
// places them (the placement continues from partition 0's first replica),
// or on assignments, one replica list per new partition.
func (c *Controller) CreatePartitions(img metadata.Image, topic string, count int32, assignments [][]int32) CreatePartitionsResult {
	t := img.Topic(topic)
	if t == nil {
		return CreatePartitionsResult{Err: kerr.UnknownTopicOrPartition}
	}
	have := int32(len(t.Partitions))
	if count <= have {
		return CreatePartitionsResult{Err: kerr.InvalidPartitions}
	}
	// The replication factor is partition 0's target: while it is being
	// reassigned its replica list also holds the replicas leaving it.
	p0 := &t.Partitions[0]
	rf := len(p0.Replicas) - len(p0.RemovingReplicas)
	if assignments != nil {
		if int32(len(assignments)) != count-have {
			return CreatePartitionsResult{Err: kerr.InvalidReplicaAssignment}
		}
		if err := validAssignments(img, assignments, rf); err != nil {
			return CreatePartitionsResult{Err: err}
		}
	} else {
		live := liveBrokers(img)
		if rf > len(live) {
			return CreatePartitionsResult{Err: kerr.InvalidReplicationFactor}
		}
		// Kafka: start at the first broker whose id is not below partition
		// 0's first replica, and shift by as much.
		first := t.Partitions[0].Replicas[0]
		start := max(0, slices.IndexFunc(live, func(br metadata.BrokerImage) bool { return br.ID >= first }))
		assignments = newPlacement(live, start, start).assign(have, count-have, rf)
	}
	b := newBatch(img)
	for i, replicas := range assignments {
		isr := eligibleOf(img, replicas)
		b.add(metadata.PartitionRecord{TopicID: t.ID, Partition: have + int32(i), Replicas: replicas, ISR: isr, Leader: isr[0]})
	}
	return CreatePartitionsResult{Result: Result{b.records()}}
}
