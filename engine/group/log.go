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
	"encoding/binary"
	"errors"
	"hash/crc32"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
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

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

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
	batch := appendRecordBatch(nil, g.c.clock.Now().UnixMilli(), recs)
	p := g.part
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	_, err := p.log.Append(batch)
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

// appendRecordBatch (and appendOffsetsRecord, varintLen) repeat the
// record format; they give way to package record's batch builder once it
// lands.
//
// appendRecordBatch appends recs as one uncompressed RecordBatch v2, the
// way Kafka's coordinator writes them: CreateTime now, no producer id. The
// base offset and leader epoch are the log's to fill in.
func appendRecordBatch(dst []byte, nowMs int64, recs []offsetsRecord) []byte {
	start := len(dst)
	be := binary.BigEndian
	dst = be.AppendUint64(dst, 0)                   // base offset
	dst = be.AppendUint32(dst, 0)                   // length, set below
	dst = be.AppendUint32(dst, ^uint32(0))          // partition leader epoch: -1
	dst = append(dst, 2)                            // magic
	dst = be.AppendUint32(dst, 0)                   // crc, set below
	dst = be.AppendUint16(dst, 0)                   // attributes
	dst = be.AppendUint32(dst, uint32(len(recs)-1)) // last offset delta
	dst = be.AppendUint64(dst, uint64(nowMs))       // first timestamp
	dst = be.AppendUint64(dst, uint64(nowMs))       // max timestamp
	dst = be.AppendUint64(dst, ^uint64(0))          // producer id: -1
	dst = be.AppendUint16(dst, ^uint16(0))          // producer epoch: -1
	dst = be.AppendUint32(dst, ^uint32(0))          // base sequence: -1
	dst = be.AppendUint32(dst, uint32(len(recs)))   // record count
	for i, rec := range recs {
		dst = appendOffsetsRecord(dst, int64(i), rec)
	}
	be.PutUint32(dst[start+8:], uint32(len(dst)-start-12))
	be.PutUint32(dst[start+17:], crc32.Checksum(dst[start+21:], castagnoli))
	return dst
}

func appendOffsetsRecord(dst []byte, offsetDelta int64, rec offsetsRecord) []byte {
	valueLen := int64(-1)
	if rec.value != nil {
		valueLen = int64(len(rec.value))
	}
	size := 1 + varintLen(0) + varintLen(offsetDelta) +
		varintLen(int64(len(rec.key))) + len(rec.key) +
		varintLen(valueLen) + len(rec.value) + varintLen(0)
	dst = binary.AppendVarint(dst, int64(size))
	dst = append(dst, 0)              // attributes
	dst = binary.AppendVarint(dst, 0) // timestamp delta
	dst = binary.AppendVarint(dst, offsetDelta)
	dst = binary.AppendVarint(dst, int64(len(rec.key)))
	dst = append(dst, rec.key...)
	dst = binary.AppendVarint(dst, valueLen)
	dst = append(dst, rec.value...)
	return binary.AppendVarint(dst, 0) // headers
}

// varintLen is the size of v as a zig-zag varint.
func varintLen(v int64) int {
	u := uint64(v<<1) ^ uint64(v>>63)
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}
