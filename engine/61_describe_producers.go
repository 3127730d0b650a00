package engine

// DescribeProducers (key 61), version 0.
//
// Lists the idempotent producers each partition keeps state for (producer
// id and epoch, last sequence and timestamp), as storage rebuilt or
// snapshotted it, with CurrentTxnStartOffset, the first offset of the
// producer's open transaction in the partition (-1 when none is open), and
// CoordinatorEpoch, that of the last marker written for it (-1 before
// any). Unknown topics and partitions get UNKNOWN_TOPIC_OR_PARTITION.

import "github.com/twmb/franz-go/pkg/kmsg"

func init() { register(kmsg.DescribeProducers, 0, 0, (*Broker).handleDescribeProducers) }

func (b *Broker) handleDescribeProducers(r *Request) {
	req := r.Msg.(*kmsg.DescribeProducersRequest)
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	for _, rt := range req.Topics {
		t := b.Topic(rt.Topic)
		out := kmsg.DescribeProducersResponseTopic{Topic: rt.Topic}
		for _, idx := range rt.Partitions {
			op := kmsg.NewDescribeProducersResponseTopicPartition()
			op.Partition = idx
			var p *Partition
			if p, op.ErrorCode = lookupPartition(t, idx); p != nil {
				op.ErrorCode = p.checkLeader(-1)
			}
			if op.ErrorCode == 0 {
				op.ActiveProducers = activeProducers(p)
			}
			out.Partitions = append(out.Partitions, op)
		}
		resp.Topics = append(resp.Topics, out)
	}
	r.Respond(resp)
}

func activeProducers(p *Partition) []kmsg.DescribeProducersResponseTopicPartitionActiveProducer {
	infos := p.producers()
	out := make([]kmsg.DescribeProducersResponseTopicPartitionActiveProducer, 0, len(infos))
	for _, pi := range infos {
		ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
		ap.ProducerID, ap.ProducerEpoch = pi.ProducerID, int32(pi.ProducerEpoch)
		ap.LastSequence, ap.LastTimestamp = pi.LastSequence, pi.LastTimestamp
		ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = pi.CoordinatorEpoch, pi.CurrentTxnStartOffset
		out = append(out, ap)
	}
	return out
}
