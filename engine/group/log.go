package group

// Records of __consumer_offsets, in Kafka's own schemas so that Kafka's
// tools (kafka-console-consumer with its offsets formatter, kafka-dump-log)
// read them as they read Kafka's:
//
//	key                                        value (nil = tombstone)
//	OffsetCommitKey v1 {group, topic, part}    OffsetCommitValue v3 {offset, leaderEpoch, metadata, commitTs}
//	                                           (v1 {offset, metadata, commitTs, expireTs} when the
//	                                            commit carried a retention time, OffsetCommit v2-4)
//	GroupMetadataKey v2 {group}                GroupMetadataValue v3 {protocolType, generation,
//	                                            protocol, leader, stateTs, members[…]}
//
// Each write is one uncompressed RecordBatch v2 (CreateTime, no producer
// id), appended to the group's partition; callers answer only after the
// append succeeded. LoadPartition replays a partition in log order, the
// last record of each key winning, as compaction would leave it.

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/record"
)

// PartitionLog is the coordinator's whole view of one partition of
// __consumer_offsets (the engine adapts its partition to it).
type PartitionLog interface {
	// Append writes one record batch and makes it readable (the high
	// watermark covers it) before returning. An error wrapping
	// ErrTooLarge means the batch exceeds the log's size limits.
	Append(batch []byte) (baseOffset int64, err error)
	// Replay calls fn with every record's key and value (nil for a
	// tombstone), in log order, and stops at fn's first error. The slices
	// are only valid during the call.
	Replay(fn func(key, value []byte) error) error
}

// ErrTooLarge is what a PartitionLog's Append error wraps when the batch
// is over the log's message or batch size limit.
var ErrTooLarge = errors.New("record batch too large")

// offsetTP names one partition whose offset a group commits.
type offsetTP struct {
	topic     string
	partition int32
}

// committedOffset is one committed offset.
type committedOffset struct {
	offset      int64
	leaderEpoch int32 // -1 if unknown
	metadata    string
	commitMs    int64
	// expireMs is an explicit expiry from OffsetCommit v2-4's retention
	// time; -1 means the offsets.retention.minutes rules apply (KIP-211).
	expireMs int64
}

// offsetsRecord is one record of __consumer_offsets; a nil value is a
// tombstone.
type offsetsRecord struct {
	key, value []byte
}

func offsetCommitRecord(group string, tp offsetTP, o *committedOffset) offsetsRecord {
	k := kmsg.OffsetCommitKey{Version: 1, Group: group, Topic: tp.topic, Partition: tp.partition}
	rec := offsetsRecord{key: k.AppendTo(nil)}
	if o == nil {
		return rec
	}
	v := kmsg.NewOffsetCommitValue()
	v.Version = 3
	v.Offset = o.offset
	v.LeaderEpoch = o.leaderEpoch
	v.Metadata = o.metadata
	v.CommitTimestamp = o.commitMs
	if o.expireMs >= 0 {
		v.Version = 1
		v.ExpireTimestamp = o.expireMs
	}
	rec.value = v.AppendTo(nil)
	return rec
}

func groupMetadataKey(group string) []byte {
	k := kmsg.GroupMetadataKey{Version: 2, Group: group}
	return k.AppendTo(nil)
}

// metadataRecord is the group's current generation and membership.
func (g *group) metadataRecord() offsetsRecord {
	v := kmsg.NewGroupMetadataValue()
	v.Version = 3
	v.ProtocolType = g.protocolType
	v.Generation = g.generation
	if g.protocol != "" {
		v.Protocol = kmsg.StringPtr(g.protocol)
	}
	if g.leader != "" {
		v.Leader = kmsg.StringPtr(g.leader)
	}
	v.CurrentStateTimestamp = g.stateSince.UnixMilli()
	for _, m := range g.sortedMembers() {
		vm := kmsg.NewGroupMetadataValueMember()
		vm.MemberID = m.id
		if m.instanceID != "" {
			vm.InstanceID = kmsg.StringPtr(m.instanceID)
		}
		vm.ClientID = m.clientID
		vm.ClientHost = m.clientHost
		vm.RebalanceTimeoutMillis = int32(m.rebalance.Milliseconds())
		vm.SessionTimeoutMillis = int32(m.session.Milliseconds())
		vm.Subscription = m.metadataFor(g.protocol)
		vm.Assignment = m.assignment
		if vm.Assignment == nil {
			vm.Assignment = []byte{}
		}
		v.Members = append(v.Members, vm)
	}
	return offsetsRecord{key: groupMetadataKey(g.name), value: v.AppendTo(nil)}
}

// storeGroup writes the group's generation and membership.
func (g *group) storeGroup() error {
	return g.append([]offsetsRecord{g.metadataRecord()})
}

// append writes recs as one batch to the group's partition.
func (g *group) append(recs []offsetsRecord) error {
	if len(recs) == 0 {
		return nil
	}
	batch, err := appendRecordBatch(nil, g.c.clock.Now().UnixMilli(), recs)
	if err != nil {
		return err
	}
	p := g.part
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	_, err = p.log.Append(batch)
	return err
}

// appendErrorCode is the code a failed write of the coordinator answers
// with, as Kafka maps them: a batch too large is the client's doing
// (INVALID_COMMIT_OFFSET_SIZE for commits); anything else is a broken log,
// and NOT_COORDINATOR sends clients to look again.
func appendErrorCode(err error, commit bool) int16 {
	if errors.Is(err, ErrTooLarge) {
		if commit {
			return kerr.InvalidCommitOffsetSize.Code
		}
		return kerr.UnknownServerError.Code
	}
	return kerr.NotCoordinator.Code
}

// appendRecordBatch appends recs as one uncompressed RecordBatch v2, the
// way Kafka's coordinator writes them: CreateTime now, no producer id. The
// base offset and leader epoch are the log's to fill in.
func appendRecordBatch(dst []byte, nowMs int64, recs []offsetsRecord) ([]byte, error) {
	h := record.NewHeader()
	h.FirstTimestamp = nowMs
	var b record.Builder
	b.Reset(h)
	for i, rec := range recs {
		b.Add(&record.Record{OffsetDelta: int32(i), Key: rec.key, Value: rec.value})
	}
	return b.AppendTo(dst)
}
