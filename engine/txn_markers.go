package engine

// The transaction coordinator's markers (txn.MarkerWriter): each
// partition's marker is written by its leader, in-process when that is
// this broker, with a WriteTxnMarkers request to the leader otherwise (the
// handler, 27_write_txn_markers.go, ends in the same writeLocalMarker).
// A marker is answered once the high watermark passes it, as Kafka's
// coordinator writes markers with acks=all: a marker the ISR does not
// have could be lost to a leader change after the transaction completed.

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/engine/txn"
)

// markerWriter is the coordinator's txn.MarkerWriter.
type markerWriter struct{ b *Broker }

func (w markerWriter) Write(req txn.MarkerRequest, done func(retry []txn.TopicPartition)) {
	go func() { done(w.b.writeMarkers(req)) }()
}

// writeMarkers writes req's markers and returns the partitions to retry.
func (b *Broker) writeMarkers(req txn.MarkerRequest) []txn.TopicPartition {
	byLeader := map[int32][]txn.TopicPartition{}
	var retry []txn.TopicPartition
	for _, tp := range req.Partitions {
		leader, exists := b.markerLeader(tp)
		switch {
		case !exists:
			b.log.Info("transaction marker dropped: the partition no longer exists", "topic", tp.Topic, "partition", tp.Partition)
		case leader < 0:
			retry = append(retry, tp)
		default:
			byLeader[leader] = append(byLeader[leader], tp)
		}
	}
	for leader, tps := range byLeader {
		var codes []int16
		if leader == b.cfg.NodeID {
			codes = b.writeLocalMarkers(req, tps)
		} else {
			codes = b.sendMarkers(leader, req, tps)
		}
		retry = append(retry, b.markersToRetry(req, tps, codes)...)
	}
	return retry
}

// markerLeader is the leader of tp in the image (-1 when it has none);
// false when the partition no longer exists.
func (b *Broker) markerLeader(tp txn.TopicPartition) (int32, bool) {
	if b.cluster == nil {
		return b.cfg.NodeID, b.Topic(tp.Topic) != nil
	}
	ti := b.image().Topic(tp.Topic)
	if ti == nil || tp.Partition < 0 || int(tp.Partition) >= len(ti.Partitions) {
		return -1, false
	}
	return ti.Partitions[tp.Partition].Leader, true
}

// markersToRetry picks the partitions whose marker failed retriably. A
// marker refused for good (the producer fenced by a newer epoch, a newer
// coordinator) is dropped: whoever fenced it ends that transaction.
func (b *Broker) markersToRetry(req txn.MarkerRequest, tps []txn.TopicPartition, codes []int16) []txn.TopicPartition {
	var retry []txn.TopicPartition
	for i, tp := range tps {
		switch codes[i] {
		case 0:
		case kerr.InvalidProducerEpoch.Code, kerr.TransactionCoordinatorFenced.Code:
			b.log.Warn("transaction marker refused", "transactional_id", req.TransactionalID, "topic", tp.Topic,
				"partition", tp.Partition, "err", kerr.ErrorForCode(codes[i]))
		default:
			retry = append(retry, tp)
		}
	}
	return retry
}

func (b *Broker) writeLocalMarkers(req txn.MarkerRequest, tps []txn.TopicPartition) []int16 {
	codes := make([]int16, len(tps))
	for i, tp := range tps {
		codes[i] = b.writeLocalMarker(req.ProducerID, req.ProducerEpoch, req.CoordinatorEpoch, req.Commit, req.TransactionVersion, tp.Topic, tp.Partition)
	}
	return codes
}

// writeLocalMarker writes one marker on a partition this broker leads and
// waits until the high watermark passes it. A marker on __consumer_offsets
// also ends the producer's pending transactional offsets there.
func (b *Broker) writeLocalMarker(pid int64, epoch int16, coordinatorEpoch int32, commit bool, tv int8, topic string, partition int32) int16 {
	t := b.Topic(topic)
	if t == nil {
		return kerr.UnknownTopicOrPartition.Code
	}
	p := t.Partition(partition)
	if p == nil {
		return kerr.NotLeaderForPartition.Code
	}
	if err := p.writeTxnMarker(pid, epoch, coordinatorEpoch, commit, tv, time.Now().UnixMilli()); err != nil {
		return ErrorCode(err)
	}
	b.txnVerified.forget(p, pid)
	if err := awaitHighWatermark(p, p.LogEndOffset()); err != nil {
		b.log.Warn("transaction marker not replicated", "topic", topic, "partition", partition, "err", err)
		return kerr.NotEnoughReplicas.Code
	}
	if topic == offsetsTopic {
		b.groups.TxnCompleted(partition, pid, commit)
	}
	return 0
}

// sendMarkers asks broker leader to write the markers; every partition
// answers the request's failure when it fails as a whole.
func (b *Broker) sendMarkers(leader int32, req txn.MarkerRequest, tps []txn.TopicPartition) []int16 {
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.CoordinatorEpoch, m.Committed = req.ProducerID, req.ProducerEpoch, req.CoordinatorEpoch, req.Commit
	m.TransactionVersion = req.TransactionVersion
	for _, tp := range tps {
		if n := len(m.Topics); n == 0 || m.Topics[n-1].Topic != tp.Topic {
			m.Topics = append(m.Topics, kmsg.WriteTxnMarkersRequestMarkerTopic{Topic: tp.Topic})
		}
		t := &m.Topics[len(m.Topics)-1]
		t.Partitions = append(t.Partitions, tp.Partition)
	}
	wr := kmsg.NewPtrWriteTxnMarkersRequest()
	wr.Markers = []kmsg.WriteTxnMarkersRequestMarker{m}
	codes := make([]int16, len(tps))
	resp := new(kmsg.WriteTxnMarkersResponse)
	if err := b.peers.call(b, leader, wr, 1, resp); err != nil || len(resp.Markers) != 1 {
		b.log.Debug("WriteTxnMarkers failed", "broker", leader, "err", err)
		for i := range codes {
			codes[i] = kerr.NotLeaderForPartition.Code
		}
		return codes
	}
	got := map[txn.TopicPartition]int16{}
	for _, t := range resp.Markers[0].Topics {
		for _, p := range t.Partitions {
			got[txn.TopicPartition{Topic: t.Topic, Partition: p.Partition}] = p.ErrorCode
		}
	}
	for i, tp := range tps {
		code, ok := got[tp]
		if !ok {
			code = kerr.UnknownServerError.Code
		}
		codes[i] = code
	}
	return codes
}
