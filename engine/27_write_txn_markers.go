package engine

// WriteTxnMarkers (key 27), versions 0-2.
//
// The broker side of a transaction's second phase: a transaction
// coordinator on another broker asks this one, as the leader of each
// partition named, to write the producer's COMMIT or ABORT marker
// (txn_markers.go's writeLocalMarker, the same path the coordinator takes
// for partitions it leads). Each partition is answered once the high
// watermark passes its marker. Per partition: UNKNOWN_TOPIC_OR_PARTITION,
// NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS (the ISR did not take it in
// time), TRANSACTION_COORDINATOR_FENCED (an older coordinator epoch than
// the producer's last marker here), INVALID_PRODUCER_EPOCH (older than the
// producer's epoch here; with v2's TransactionVersion 2, not newer than an
// open transaction's: a late marker of the transaction before). Kafka
// requires CLUSTER_ACTION; without ACLs any client may send it.

import "github.com/twmb/franz-go/pkg/kmsg"

func init() { register(kmsg.WriteTxnMarkers, 0, 2, (*Broker).handleWriteTxnMarkers) }

func (b *Broker) handleWriteTxnMarkers(r *Request) {
	req := r.Msg.(*kmsg.WriteTxnMarkersRequest)
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	for _, m := range req.Markers {
		rm := kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = m.ProducerID
		for _, t := range m.Topics {
			rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				rp.Partition = p
				rp.ErrorCode = b.writeLocalMarker(m.ProducerID, m.ProducerEpoch, m.CoordinatorEpoch, m.Committed, m.TransactionVersion, t.Topic, p)
				rt.Partitions = append(rt.Partitions, rp)
			}
			rm.Topics = append(rm.Topics, rt)
		}
		resp.Markers = append(resp.Markers, rm)
	}
	r.Respond(resp)
}
