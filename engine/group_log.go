package engine

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
// append succeeded. At start every partition is replayed in log order, the
// last record of each key winning, as compaction would leave it.

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/storage"
)

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
	return g.c.append(g.part, []offsetsRecord{g.metadataRecord()})
}

// append writes recs as one batch to an offsets partition through the
// partition, which moves the high watermark and wakes waiting fetches.
func (c *groupCoordinator) append(p *Partition, recs []offsetsRecord) error {
	if len(recs) == 0 {
		return nil
	}
	batch := appendRecordBatch(nil, time.Now().UnixMilli(), recs)
	mu := &c.appendMu[p.Index]
	mu.Lock()
	defer mu.Unlock()
	_, err := p.appendInternal(batch, 0)
	return err
}

// coordinatorAppendError is the code a failed write of the coordinator
// answers with, as Kafka maps them: a batch too large is the client's
// doing (INVALID_COMMIT_OFFSET_SIZE for commits); anything else is a
// broken log, and NOT_COORDINATOR sends clients to look again.
func coordinatorAppendError(err error, commit bool) int16 {
	if errors.Is(err, storage.ErrMessageTooLarge) || errors.Is(err, storage.ErrRecordListTooLarge) {
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

// ---- replay ----

// replayReadSize is how much of the log one read brings in at start.
const replayReadSize = 1 << 20

// replay feeds every record of an offsets partition, in log order, to fn.
// A batch it cannot decode stops the replay with an error naming it:
// skipping it could resurrect deleted offsets.
func replay(p *Partition, fn func(key, value []byte) error) error {
	var scratch []byte
	return p.scan(replayReadSize, func(b []byte) (int64, error) { return replayBatches(b, &scratch, fn) })
}

// replayBatches decodes the whole batches in b and returns the offset
// after the last one.
func replayBatches(b []byte, scratch *[]byte, fn func(key, value []byte) error) (int64, error) {
	next := int64(-1)
	for len(b) >= storage.BatchHeaderLen {
		h, err := storage.ParseBatchHeader(b)
		if err != nil {
			return next, err
		}
		size := int64(h.Length) + batchLogOverhead
		if size < storage.BatchHeaderLen || h.Magic != 2 {
			return next, errBadRecord
		}
		if size > int64(len(b)) {
			break // cut by the read size; read again from here
		}
		if !h.IsControl() {
			recs, err := batchRecords((*scratch)[:0], b[:size], h)
			if err != nil {
				return next, err
			}
			if h.Compression() != codecNone {
				*scratch = recs
			}
			if err := eachKeyValue(recs, fn); err != nil {
				return next, err
			}
		}
		next = h.BaseOffset + int64(h.LastOffsetDelta) + 1
		b = b[size:]
	}
	return next, nil
}

// eachKeyValue walks uncompressed records, passing each key and value
// (nil for a tombstone).
func eachKeyValue(b []byte, fn func(key, value []byte) error) error {
	for len(b) > 0 {
		n, used := binary.Varint(b)
		if used <= 0 || n < 0 || n > int64(len(b)-used) {
			return errBadRecord
		}
		key, value, err := recordKeyValue(b[used : used+int(n)])
		if err != nil {
			return err
		}
		if err := fn(key, value); err != nil {
			return err
		}
		b = b[used+int(n):]
	}
	return nil
}

func recordKeyValue(r []byte) (key, value []byte, err error) {
	if len(r) < 1 {
		return nil, nil, errBadRecord
	}
	r = r[1:]                // attributes
	for i := 0; i < 2; i++ { // timestamp delta, offset delta
		_, used := binary.Varint(r)
		if used <= 0 {
			return nil, nil, errBadRecord
		}
		r = r[used:]
	}
	if key, r, err = varBytes(r); err != nil {
		return nil, nil, err
	}
	value, _, err = varBytes(r)
	return key, value, err
}

// varBytes reads a varint length and that many bytes (nil for -1).
func varBytes(r []byte) ([]byte, []byte, error) {
	n, used := binary.Varint(r)
	if used <= 0 || n < -1 || n > int64(len(r)-used) {
		return nil, nil, errBadRecord
	}
	r = r[used:]
	if n < 0 {
		return nil, r, nil
	}
	return r[:n], r[n:], nil
}
