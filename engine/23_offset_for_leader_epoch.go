package engine

// OffsetForLeaderEpoch (key 23), versions 2-4.
//
// For each partition: the largest leader epoch <= the one asked and the
// offset where it ended (the log end offset for the current epoch), from
// the log's leader-epoch file. Consumers use it after a leader change to
// detect a truncated log (KIP-320), followers to find where to truncate.
// An epoch older than any the log knows answers epoch -1, offset -1, with
// no error, as Kafka does. CurrentLeaderEpoch fences stale clients
// (FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH). Only the leader answers
// (NOT_LEADER_OR_FOLLOWER elsewhere), replicas and consumers alike, as
// Kafka does: a follower (v3+ ReplicaID >= 0) asks with its current leader
// epoch for the latest epoch of its own log, and truncates to the answer
// (replica_fetcher.go); for the leader's latest epoch the end is its log
// end offset, which a follower never passes.

import "github.com/twmb/franz-go/pkg/kmsg"

func init() { register(kmsg.OffsetForLeaderEpoch, 2, 4, (*Broker).handleOffsetForLeaderEpoch) }

func (b *Broker) handleOffsetForLeaderEpoch(r *Request) {
	req := r.Msg.(*kmsg.OffsetForLeaderEpochRequest)
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	for _, rt := range req.Topics {
		t := b.Topic(rt.Topic)
		out := kmsg.OffsetForLeaderEpochResponseTopic{Topic: rt.Topic}
		for _, rp := range rt.Partitions {
			op := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			op.Partition, op.LeaderEpoch, op.EndOffset = rp.Partition, -1, -1
			p, code := lookupPartition(t, rp.Partition)
			if code == 0 {
				code = p.checkLeader(rp.CurrentLeaderEpoch)
			}
			if op.ErrorCode = code; code == 0 {
				op.LeaderEpoch, op.EndOffset = p.endOffsetForEpoch(rp.LeaderEpoch)
			}
			out.Partitions = append(out.Partitions, op)
		}
		resp.Topics = append(resp.Topics, out)
	}
	r.Respond(resp)
}
