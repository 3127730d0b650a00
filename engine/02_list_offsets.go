package engine

// ListOffsets (key 2), versions 1-10 (Kafka 4 removed v0).
//
// Per partition, by the requested timestamp:
//
//	-2 earliest         log start offset, with the epoch that wrote it
//	-1 latest           high watermark (the log end offset for replicas);
//	                    read_committed gets the last stable offset (the
//	                    first offset of the oldest undecided transaction,
//	                    or the high watermark)
//	-3 max timestamp    the record with the largest timestamp (v7+, KIP-734)
//	-4 earliest local   as earliest: no tiered storage (KIP-405)
//	-5 latest tiered    offset -1, epoch -1: nothing is tiered (KIP-1005);
//	                    this is Kafka's answer when remote storage is off
//	 t >= 0             the first record with timestamp >= t, below the
//	                    high watermark (read_committed: below the last
//	                    stable offset); offset -1 if there is none
//
// Storage finds the batch; the engine reads that one batch (decompressing
// it if needed) to answer with the exact record, as Kafka does, so a
// consumer seeking by time does not re-read earlier records of the batch.
// Timestamps and leader epochs are -1 where Kafka leaves them unset.
// CurrentLeaderEpoch (v4+) fences stale clients (FENCED_LEADER_EPOCH,
// UNKNOWN_LEADER_EPOCH). A partition listed twice gets INVALID_REQUEST.
// v10's TimeoutMillis only matters for tiered storage and is ignored.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/record"
	"github.com/sluice-broker/sluice/storage"
)

func init() { register(kmsg.ListOffsets, 1, 10, (*Broker).handleListOffsets) }

// Special timestamps of ListOffsets.
const (
	listLatest          = -1
	listEarliest        = -2
	listMaxTimestamp    = -3
	listEarliestLocal   = -4
	listLatestTiered    = -5
	listConsumerReplica = -1 // ReplicaID of consumers
)

func (b *Broker) handleListOffsets(r *Request) {
	req := r.Msg.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	seen := map[topicPartition]int{}
	for _, rt := range req.Topics {
		t := b.Topic(rt.Topic)
		out := kmsg.ListOffsetsResponseTopic{Topic: rt.Topic}
		for _, rp := range rt.Partitions {
			seen[topicPartition{rt.Topic, rp.Partition}]++
			op := kmsg.NewListOffsetsResponseTopicPartition()
			op.Partition = rp.Partition
			b.listOffset(r.Version, req, t, &rp, &op)
			out.Partitions = append(out.Partitions, op)
		}
		resp.Topics = append(resp.Topics, out)
	}
	markDuplicates(resp, seen)
	r.Respond(resp)
}

type topicPartition struct {
	topic     string
	partition int32
}

// markDuplicates answers INVALID_REQUEST for partitions asked more than
// once, as Kafka does.
func markDuplicates(resp *kmsg.ListOffsetsResponse, seen map[topicPartition]int) {
	for i := range resp.Topics {
		t := &resp.Topics[i]
		for j := range t.Partitions {
			if p := &t.Partitions[j]; seen[topicPartition{t.Topic, p.Partition}] > 1 {
				*p = kmsg.NewListOffsetsResponseTopicPartition()
				p.Partition, p.ErrorCode = t.Partitions[j].Partition, kerr.InvalidRequest.Code
			}
		}
	}
}

func (b *Broker) listOffset(version int16, req *kmsg.ListOffsetsRequest, t *Topic, rp *kmsg.ListOffsetsRequestTopicPartition, out *kmsg.ListOffsetsResponseTopicPartition) {
	p, code := lookupPartition(t, rp.Partition)
	if code == 0 {
		code = p.checkLeader(leaderEpochFrom(version, 4, rp.CurrentLeaderEpoch))
	}
	if code != 0 {
		out.ErrorCode = code
		return
	}
	fetchable := p.fetchableOffset(isolationFor(req.ReplicaID != listConsumerReplica, req.IsolationLevel))
	switch ts := rp.Timestamp; ts {
	case listLatest:
		out.Offset, out.LeaderEpoch = fetchable, p.LeaderEpoch()
	case listEarliest, listEarliestLocal:
		out.Offset = p.LogStartOffset()
		out.LeaderEpoch = p.epochForOffset(out.Offset)
	case listLatestTiered:
	case listMaxTimestamp:
		off, _ := p.maxTimestamp()
		if off >= 0 {
			b.maxTimestampRecord(p, off, out)
		}
	default:
		if off, _, ok := p.offsetForTimestamp(ts); ok {
			b.timestampRecord(p, off, ts, fetchable, out)
		}
	}
}

// timestampRecord answers with the first record at or after batchOffset
// (the batch storage found) whose timestamp is >= ts, if it is below the
// last fetchable offset.
func (b *Broker) timestampRecord(p *Partition, batchOffset, ts, fetchable int64, out *kmsg.ListOffsetsResponseTopicPartition) {
	from := max(batchOffset, p.LogStartOffset())
	rec, err := findRecord(p, batchOffset, func(_ *record.Header, off, recTs int64) bool { return off >= from && recTs >= ts })
	if err != nil {
		out.ErrorCode = ErrorCode(err)
		return
	}
	if rec.found && rec.offset < fetchable {
		out.Offset, out.Timestamp, out.LeaderEpoch = rec.offset, rec.timestamp, rec.epoch
	}
}

// maxTimestampRecord answers with the first record carrying the largest
// timestamp of the batch at batchOffset.
func (b *Broker) maxTimestampRecord(p *Partition, batchOffset int64, out *kmsg.ListOffsetsResponseTopicPartition) {
	rec, err := findRecord(p, batchOffset, func(h *record.Header, _, recTs int64) bool { return recTs == h.MaxTimestamp })
	if err != nil {
		out.ErrorCode = ErrorCode(err)
		return
	}
	if rec.found {
		out.Offset, out.Timestamp, out.LeaderEpoch = rec.offset, rec.timestamp, rec.epoch
	}
}

type foundRecord struct {
	offset, timestamp int64
	epoch             int32
	found             bool
}

// maxListedBatch bounds the batch read for a ListOffsets answer; a batch
// is at most max.message.bytes, far below this.
const maxListedBatch = 64 << 20

// findRecord reads the batch holding offset and returns its first record
// for which match holds. Records of LogAppendTime batches all carry the
// batch's timestamp.
func findRecord(p *Partition, offset int64, match func(h *record.Header, off, ts int64) bool) (foundRecord, error) {
	batch, h, err := readOneBatch(p, offset)
	if err != nil || batch == nil {
		return foundRecord{}, err
	}
	raw, err := record.Records(nil, batch, h, record.DefaultDecompressLimit)
	if err != nil {
		return foundRecord{}, storage.ErrCorruptMessage
	}
	it := record.NewIter(raw)
	for it.Next() {
		rec := it.Record()
		off, ts := h.BaseOffset+int64(rec.OffsetDelta), h.FirstTimestamp+rec.TimestampDelta
		if h.IsLogAppendTime() {
			ts = h.MaxTimestamp
		}
		if match(&h, off, ts) {
			return foundRecord{offset: off, timestamp: ts, epoch: max(h.PartitionLeaderEpoch, -1), found: true}, nil
		}
	}
	if it.Err() != nil {
		return foundRecord{}, storage.ErrCorruptMessage
	}
	return foundRecord{}, nil
}

// readOneBatch reads the whole batch holding offset into memory (nil if
// offset is at the end of what is readable).
func readOneBatch(p *Partition, offset int64) ([]byte, record.Header, error) {
	var h record.Header
	reg, err := p.read(offset, 1, fetchLogEnd)
	if err != nil || reg.Len == 0 {
		return nil, h, err
	}
	defer reg.Release()
	var head [record.HeaderLen]byte
	if _, err := reg.File.ReadAt(head[:], reg.Pos); err != nil {
		return nil, h, err
	}
	if h, err = record.ParseHeader(head[:]); err != nil {
		return nil, h, err
	}
	size := h.Size()
	if size < record.HeaderLen || size > reg.Len || size > maxListedBatch {
		return nil, h, storage.ErrCorruptMessage
	}
	batch := make([]byte, size)
	if _, err := reg.File.ReadAt(batch, reg.Pos); err != nil {
		return nil, h, err
	}
	return batch, h, nil
}

// leaderEpochFrom is a request's CurrentLeaderEpoch, or -1 (no fencing)
// for versions before since, which lack the field.
func leaderEpochFrom(version, since int16, epoch int32) int32 {
	if version < since {
		return -1
	}
	return epoch
}
