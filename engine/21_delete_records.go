package engine

// DeleteRecords (key 21), versions 0-2.
//
// Moves a partition's log start offset up to the requested offset (-1
// means the high watermark); whole segments below it are deleted, and
// reads below it get OFFSET_OUT_OF_RANGE. The answer is the new low
// watermark. As in Kafka: an offset beyond the high watermark (or below -1)
// is OFFSET_OUT_OF_RANGE; the internal __consumer_offsets refuses with
// INVALID_TOPIC_EXCEPTION; a topic whose cleanup.policy lacks "delete"
// (compact only) refuses with POLICY_VIOLATION. With one replica the low
// watermark is the leader's log start offset, so TimeoutMillis never comes
// into play.

import (
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.DeleteRecords, 0, 2, (*Broker).handleDeleteRecords) }

func (b *Broker) handleDeleteRecords(r *Request) {
	req := r.Msg.(*kmsg.DeleteRecordsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	for _, rt := range req.Topics {
		t := b.Topic(rt.Topic)
		out := kmsg.DeleteRecordsResponseTopic{Topic: rt.Topic}
		for _, rp := range rt.Partitions {
			op := kmsg.NewDeleteRecordsResponseTopicPartition()
			op.Partition = rp.Partition
			op.LowWatermark, op.ErrorCode = b.deleteRecords(r, t, rp.Partition, rp.Offset)
			out.Partitions = append(out.Partitions, op)
		}
		resp.Topics = append(resp.Topics, out)
	}
	r.Respond(resp)
}

func (b *Broker) deleteRecords(r *Request, t *Topic, partition int32, offset int64) (lowWatermark int64, code int16) {
	p, code := lookupPartition(t, partition)
	if code == 0 {
		code = p.checkLeader(-1)
	}
	switch {
	case code != 0:
		return -1, code
	case t.Internal:
		return -1, kerr.InvalidTopicException.Code
	case !b.cleanupDeletes(t):
		return -1, kerr.PolicyViolation.Code
	}
	low, err := p.deleteRecordsBefore(offset)
	if err != nil {
		r.logger().Debug("delete records failed", "topic", t.Name, "partition", partition, "offset", offset, "err", err)
		return -1, ErrorCode(err)
	}
	return low, 0
}

// cleanupDeletes reports whether t's cleanup.policy includes "delete".
func (b *Broker) cleanupDeletes(t *Topic) bool {
	v, ok := t.Overrides()["cleanup.policy"]
	if !ok {
		v, _ = b.currentConfig().DefaultTopicValue("cleanup.policy")
	}
	return strings.Contains(v, "delete")
}
