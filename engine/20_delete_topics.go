package engine

// DeleteTopics (key 20), versions 1-6 (Kafka 4 dropped 0).
//
// v1-5 name topics; v6 names them or gives their ids (never both). Unknown
// names answer UNKNOWN_TOPIC_OR_PARTITION, unknown ids UNKNOWN_TOPIC_ID; a
// name or id given twice answers INVALID_REQUEST once. Internal topics are
// refused (TOPIC_AUTHORIZATION_FAILED, from DeleteTopic), since the
// coordinators' state lives in them. With delete.topic.enable=false every
// topic answers TOPIC_DELETION_DISABLED (INVALID_REQUEST before v3, which
// lacks that code), as in Kafka.
//
// Deletion is synchronous: the topic is gone from metadata and its files
// removed before the response. Committed offsets of the topic's partitions
// are left alone, as Kafka leaves them, to expire with their group.
// TimeoutMillis is accepted and, as in CreateTopics, never reached.
//
// In a cluster the deletion is forwarded to the active controller and
// answered once this broker's image no longer has the topic.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.DeleteTopics, 1, 6, (*Broker).handleDeleteTopics) }

// deleteRef is one topic named by a DeleteTopics request.
type deleteRef struct {
	name *string
	id   [16]byte
}

func (b *Broker) handleDeleteTopics(r *Request) {
	req := r.Msg.(*kmsg.DeleteTopicsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	refs := deleteRefs(req)
	if !b.cfg.DeleteTopicEnable {
		code := kerr.TopicDeletionDisabled.Code
		if r.Version < 3 {
			code = kerr.InvalidRequest.Code
		}
		for _, ref := range refs {
			resp.Topics = append(resp.Topics, deleteResult(ref.name, ref.id, code, "Topic deletion is disabled."))
		}
		r.Respond(resp)
		return
	}
	names, ids := map[string]int{}, map[[16]byte]int{}
	for _, ref := range refs {
		if ref.name != nil {
			names[*ref.name]++
		} else {
			ids[ref.id]++
		}
	}
	for _, ref := range refs {
		if ref.name != nil && names[*ref.name] > 1 || ref.name == nil && ids[ref.id] > 1 {
			continue
		}
		resp.Topics = append(resp.Topics, b.deleteTopic(ref, r.admitMutation))
	}
	resp.Topics = appendDuplicateDeletes(resp.Topics, names, ids)
	r.Respond(resp)
}

// deleteRefs lists the topics of a request in either version's form.
func deleteRefs(req *kmsg.DeleteTopicsRequest) []deleteRef {
	if req.Version < 6 {
		refs := make([]deleteRef, len(req.TopicNames))
		for i := range req.TopicNames {
			refs[i].name = &req.TopicNames[i]
		}
		return refs
	}
	refs := make([]deleteRef, len(req.Topics))
	for i, t := range req.Topics {
		refs[i] = deleteRef{name: t.Topic, id: t.TopicID}
	}
	return refs
}

func appendDuplicateDeletes(out []kmsg.DeleteTopicsResponseTopic, names map[string]int, ids map[[16]byte]int) []kmsg.DeleteTopicsResponseTopic {
	for _, name := range duplicates(names) {
		out = append(out, deleteResult(stringPtr(name), [16]byte{}, kerr.InvalidRequest.Code, "Duplicate topic name."))
	}
	for id, n := range ids {
		if n > 1 {
			out = append(out, deleteResult(nil, id, kerr.InvalidRequest.Code, "Duplicate topic id."))
		}
	}
	return out
}

// deleteTopic deletes one topic of a request; admit counts its partitions
// against the controller mutation quota, or refuses it (quota.go).
func (b *Broker) deleteTopic(ref deleteRef, admit func(int32) error) kmsg.DeleteTopicsResponseTopic {
	zero := [16]byte{}
	switch {
	case ref.name != nil && ref.id != zero:
		return deleteResult(ref.name, ref.id, kerr.InvalidRequest.Code, "You may not specify both topic name and topic id.")
	case ref.name == nil && ref.id == zero:
		return deleteResult(nil, zero, kerr.InvalidRequest.Code, "Neither topic name nor id were specified.")
	}
	t := b.lookupDeleteRef(ref)
	if t == nil && ref.name == nil {
		return deleteResult(nil, ref.id, kerr.UnknownTopicID.Code, kerr.UnknownTopicID.Description)
	}
	if t == nil {
		return deleteResult(ref.name, zero, kerr.UnknownTopicOrPartition.Code, kerr.UnknownTopicOrPartition.Description)
	}
	if err := admit(int32(len(t.Partitions()))); err != nil {
		return deleteResult(&t.Name, t.ID, ErrorCode(err), err.Error())
	}
	if err := b.DeleteTopic(t.Name); err != nil {
		return deleteResult(&t.Name, t.ID, ErrorCode(err), err.Error())
	}
	return deleteResult(&t.Name, t.ID, 0, "")
}

func (b *Broker) lookupDeleteRef(ref deleteRef) *Topic {
	if ref.name != nil {
		return b.Topic(*ref.name)
	}
	return b.TopicByID(ref.id)
}

func deleteResult(name *string, id [16]byte, code int16, msg string) kmsg.DeleteTopicsResponseTopic {
	t := kmsg.NewDeleteTopicsResponseTopic()
	t.Topic, t.TopicID, t.ErrorCode = name, id, code
	if code != 0 {
		t.ErrorMessage = stringPtr(msg)
	}
	return t
}
