package engine

// CreateTopics (key 19), versions 2-7 (Kafka 4 dropped 0-1).
//
// Each topic is checked in Kafka's order: a valid, new name that does not
// collide with an existing one ('.' vs '_'); then its layout — NumPartitions
// and ReplicationFactor (-1 = num.partitions and default.replication.factor,
// which is 1 on a single node), or else a manual ReplicaAssignment, never
// both; then its configs. A replication factor above 1 is
// INVALID_REPLICATION_FACTOR (there is one broker); a manual assignment must
// number its partitions 0..n-1 and give each exactly this node. A name given
// twice answers INVALID_REQUEST once, and neither entry is created.
//
// In a cluster the replication factor and manual assignments are checked
// by the active controller against the registered brokers, which places
// the replicas; the broker forwards the topic (cluster_admin.go) and
// answers once its own image has it.
//
// ValidateOnly runs every check and creates nothing. From v5 a success
// carries the partition count, replication factor and every config of the
// topic (with its source); v7 adds the topic id, which stays zero for a
// validate-only request because no topic was made.
//
// TimeoutMillis is accepted and not needed: Kafka uses it to bound the wait
// for the controller, and a timeout <= 0 means "do not wait". Creation here
// is done before the response is written, so neither case changes the answer.

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.CreateTopics, 2, 7, (*Broker).handleCreateTopics) }

func (b *Broker) handleCreateTopics(r *Request) {
	req := r.Msg.(*kmsg.CreateTopicsRequest)
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	count := make(map[string]int, len(req.Topics))
	for i := range req.Topics {
		count[req.Topics[i].Topic]++
	}
	for i := range req.Topics {
		if rt := &req.Topics[i]; count[rt.Topic] == 1 {
			resp.Topics = append(resp.Topics, b.createTopic(rt, req.ValidateOnly, r.admitMutation))
		}
	}
	for _, name := range duplicates(count) {
		st := kmsg.NewCreateTopicsResponseTopic()
		st.Topic, st.ErrorCode = name, kerr.InvalidRequest.Code
		st.ErrorMessage = stringPtr("Duplicate topic name.")
		resp.Topics = append(resp.Topics, st)
	}
	r.Respond(resp)
}

// duplicates returns the names counted more than once, sorted.
func duplicates(count map[string]int) []string {
	var out []string
	for name, n := range count {
		if n > 1 {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// createTopic creates one topic of a request; admit counts its
// partitions against the controller mutation quota once it has passed its
// checks, or refuses it (quota.go).
func (b *Broker) createTopic(rt *kmsg.CreateTopicsRequestTopic, validateOnly bool, admit func(int32) error) kmsg.CreateTopicsResponseTopic {
	st := kmsg.NewCreateTopicsResponseTopic()
	st.Topic = rt.Topic
	partitions, overrides, err := b.checkNewTopic(rt)
	if err == nil && !validateOnly {
		err = admit(partitions)
	}
	var t *Topic
	switch {
	case err == nil && b.cluster != nil:
		// The controller places the replicas (cluster_admin.go).
		t, err = b.cluster.forwardCreateTopic(*rt, overrides, validateOnly)
	case err == nil:
		t, err = b.CreateTopic(rt.Topic, partitions, overrides, validateOnly)
	}
	if err != nil {
		st.ErrorCode = ErrorCode(err)
		st.ErrorMessage = stringPtr(err.Error())
		return st
	}
	if t != nil {
		st.TopicID = t.ID
	}
	st.NumPartitions, st.ReplicationFactor = partitions, 1
	if ti := b.image().Topic(rt.Topic); b.cluster != nil && ti != nil {
		st.NumPartitions, st.ReplicationFactor = int32(len(ti.Partitions)), int16(len(ti.Partitions[0].Replicas))
	}
	for _, e := range b.topicConfigEntries(overrides, nil) {
		st.Configs = append(st.Configs, kmsg.CreateTopicsResponseTopicConfig{
			Name: e.name, Value: nullIfEmpty(e.value), Source: int8(e.source),
		})
	}
	return st
}

// checkNewTopic runs the checks Kafka makes before creating a topic and
// returns its partition count and overrides.
func (b *Broker) checkNewTopic(rt *kmsg.CreateTopicsRequestTopic) (int32, map[string]string, error) {
	if err := ValidTopicName(rt.Topic); err != nil {
		return 0, nil, topicErr(kerr.InvalidTopicException, "%v", err)
	}
	if b.Topic(rt.Topic) != nil {
		return 0, nil, topicErr(kerr.TopicAlreadyExists, "Topic '%s' already exists.", rt.Topic)
	}
	if err := b.checkTopicCollision(rt.Topic); err != nil {
		return 0, nil, err
	}
	partitions, err := b.newTopicPartitions(rt)
	if err != nil {
		return 0, nil, err
	}
	overrides, err := newTopicConfigs(rt.Configs)
	return partitions, overrides, err
}

// newTopicPartitions checks the requested layout and returns the number of
// partitions to create.
func (b *Broker) newTopicPartitions(rt *kmsg.CreateTopicsRequestTopic) (int32, error) {
	if len(rt.ReplicaAssignment) > 0 {
		if rt.NumPartitions != -1 || rt.ReplicationFactor != -1 {
			return 0, topicErr(kerr.InvalidRequest, "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used at the same time.")
		}
		if b.cluster != nil {
			return int32(len(rt.ReplicaAssignment)), nil // the controller checks it against the brokers
		}
		return b.checkReplicaAssignment(rt.ReplicaAssignment)
	}
	if rt.NumPartitions == 0 || rt.NumPartitions < -1 {
		return 0, topicErr(kerr.InvalidPartitions, "Number of partitions was set to an invalid non-positive value.")
	}
	if rt.ReplicationFactor == 0 || rt.ReplicationFactor < -1 {
		return 0, topicErr(kerr.InvalidReplicationFactor, "Replication factor must be larger than 0, or -1 to use the default value.")
	}
	if rt.ReplicationFactor > 1 && b.cluster == nil {
		return 0, topicErr(kerr.InvalidReplicationFactor, "Unable to replicate the partition %d time(s): The target replication factor of %d cannot be reached because only 1 broker(s) are registered.", rt.ReplicationFactor, rt.ReplicationFactor)
	}
	if rt.NumPartitions == -1 {
		return b.cfg.NumPartitions, nil
	}
	return rt.NumPartitions, nil
}

// checkReplicaAssignment checks a manual assignment: partitions numbered
// 0..n-1, each placed on this node alone. It returns n.
func (b *Broker) checkReplicaAssignment(as []kmsg.CreateTopicsRequestTopicReplicaAssignment) (int32, error) {
	seen := make(map[int32]bool, len(as))
	for _, a := range as {
		if seen[a.Partition] {
			return 0, topicErr(kerr.InvalidReplicaAssignment, "Found multiple manual partition assignments for partition %d", a.Partition)
		}
		seen[a.Partition] = true
		if err := b.checkReplicas(a.Replicas); err != nil {
			return 0, err
		}
	}
	for i := range int32(len(as)) {
		if !seen[i] {
			return 0, topicErr(kerr.InvalidReplicaAssignment, "partitions should be a consecutive 0-based integer sequence")
		}
	}
	return int32(len(as)), nil
}

// checkReplicas checks one partition's manual replica list against the
// cluster of one node, with Kafka's messages.
func (b *Broker) checkReplicas(replicas []int32) error {
	if len(replicas) == 0 {
		return topicErr(kerr.InvalidReplicaAssignment, "The manual partition assignment includes an empty replica list.")
	}
	for i, id := range replicas {
		if id != b.cfg.NodeID {
			return topicErr(kerr.InvalidReplicaAssignment, "The manual partition assignment includes broker %d, but no such broker is registered.", id)
		}
		if i > 0 {
			return topicErr(kerr.InvalidReplicaAssignment, "The manual partition assignment includes the broker %d more than once.", id)
		}
	}
	return nil
}

// newTopicConfigs collects and validates a new topic's configs; a key given
// twice keeps its last value.
func newTopicConfigs(cfgs []kmsg.CreateTopicsRequestTopicConfig) (map[string]string, error) {
	overrides := make(map[string]string, len(cfgs))
	for _, c := range cfgs {
		if c.Value == nil {
			return nil, configErr("Null value not supported for topic configs: %s", c.Name)
		}
		if err := ValidateTopicConfig(c.Name, *c.Value); err != nil {
			return nil, configErr("%v", err)
		}
		overrides[c.Name] = *c.Value
	}
	return overrides, nil
}
