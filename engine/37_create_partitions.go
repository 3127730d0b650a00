package engine

// CreatePartitions (key 37), versions 0-3.
//
// Grows a topic to Count partitions. A count that is not an increase is
// INVALID_PARTITIONS; an unknown topic UNKNOWN_TOPIC_OR_PARTITION; a topic
// named twice INVALID_REQUEST (once, and it is not grown). A manual
// Assignment must give one replica list per new partition, each exactly
// this node (the topic's replication factor is 1), else
// INVALID_REPLICA_ASSIGNMENT with Kafka's messages. ValidateOnly checks and
// changes nothing. The new partitions exist before the response is written,
// so TimeoutMillis is never reached. In a cluster the request goes to the
// active controller, which places the new partitions (or checks the manual
// assignment against the registered brokers), and is answered once this
// broker's image has them.
//
// Unlike Kafka, internal topics cannot grow (INVALID_REQUEST): the group
// coordinator places each group by hashing over the partition count of
// __consumer_offsets, so growing it would strand committed offsets in
// partitions their groups no longer map to.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.CreatePartitions, 0, 3, (*Broker).handleCreatePartitions) }

func (b *Broker) handleCreatePartitions(r *Request) {
	req := r.Msg.(*kmsg.CreatePartitionsRequest)
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	count := make(map[string]int, len(req.Topics))
	for i := range req.Topics {
		count[req.Topics[i].Topic]++
	}
	for i := range req.Topics {
		rt := &req.Topics[i]
		if count[rt.Topic] > 1 {
			continue
		}
		resp.Topics = append(resp.Topics, createPartitionsResult(rt.Topic, b.createPartitions(rt, req.ValidateOnly, r.admitMutation)))
	}
	for _, name := range duplicates(count) {
		resp.Topics = append(resp.Topics, createPartitionsResult(name, topicErr(kerr.InvalidRequest, "Duplicate topic in request.")))
	}
	r.Respond(resp)
}

// createPartitions adds one topic's partitions; admit counts them against
// the controller mutation quota once the increase is valid, or refuses
// them (quota.go).
func (b *Broker) createPartitions(rt *kmsg.CreatePartitionsRequestTopic, validateOnly bool, admit func(int32) error) error {
	t := b.Topic(rt.Topic)
	if t == nil {
		return topicErr(kerr.UnknownTopicOrPartition, "%s", kerr.UnknownTopicOrPartition.Description)
	}
	if t.Internal {
		return topicErr(kerr.InvalidRequest, "internal topic %s cannot be given more partitions: groups are placed by its partition count", rt.Topic)
	}
	have := int32(len(t.Partitions()))
	switch {
	case rt.Count == have:
		return topicErr(kerr.InvalidPartitions, "Topic already has %d partition(s).", have)
	case rt.Count < have:
		return topicErr(kerr.InvalidPartitions, "The topic %s currently has %d partition(s); %d would not be an increase.", rt.Topic, have, rt.Count)
	}
	if !validateOnly {
		if err := admit(rt.Count - have); err != nil {
			return err
		}
	}
	if b.cluster != nil {
		// The controller checks a manual assignment against the brokers.
		return b.cluster.forwardCreatePartitions(rt.Topic, rt.Count, rt.Assignment, validateOnly)
	}
	if rt.Assignment != nil {
		if err := b.checkNewAssignments(rt.Assignment, rt.Count-have); err != nil {
			return err
		}
	}
	return b.CreatePartitions(rt.Topic, rt.Count, validateOnly)
}

// checkNewAssignments checks the manual placement of added new partitions.
func (b *Broker) checkNewAssignments(as []kmsg.CreatePartitionsRequestTopicAssignment, added int32) error {
	if int32(len(as)) != added {
		return topicErr(kerr.InvalidReplicaAssignment, "Attempted to add %d additional partition(s), but only %d assignment(s) were specified.", added, len(as))
	}
	for _, a := range as {
		if err := b.checkReplicas(a.Replicas); err != nil {
			return err
		}
	}
	return nil
}

func createPartitionsResult(name string, err error) kmsg.CreatePartitionsResponseTopic {
	t := kmsg.NewCreatePartitionsResponseTopic()
	t.Topic = name
	if err != nil {
		t.ErrorCode = ErrorCode(err)
		t.ErrorMessage = stringPtr(err.Error())
	}
	return t
}
