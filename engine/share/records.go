package share

// Kafka's coordinator records for share groups (Kafka 4.4's schemas):
//
//	key: int16 type, then the key fields (not flexible)
//	value: int16 version (0), the fields (flexible: compact strings and
//	       arrays, uvarint lengths + 1), tagged fields; nil = tombstone
//
//	type  topic                key                         value
//	 0    __share_group_state  ShareSnapshot{g,topicId,p}  SnapshotValue
//	 1    __share_group_state  ShareUpdate{g,topicId,p}    UpdateValue (read, never written)
//	10    __consumer_offsets   MemberMetadata{g,member}    MemberValue
//	11    __consumer_offsets   Metadata{g}                 GroupValue
//	12    __consumer_offsets   TargetAssignmentMetadata{g} TargetMetaValue
//	13    __consumer_offsets   TargetAssignmentMember{g,m} AssignmentValue
//	14    __consumer_offsets   CurrentMemberAssignment{g,m} CurrentValue
//	15    __consumer_offsets   StatePartitionMetadata{g}   (read and ignored)
//
// Decoders bound every length by the bytes left (kbin.Reader) and report
// a malformed record as an error, never a panic.

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kbin"
)

// Record types.
const (
	TypeShareSnapshot          int16 = 0
	TypeShareUpdate            int16 = 1
	TypeMemberMetadata         int16 = 10
	TypeGroupMetadata          int16 = 11
	TypeTargetAssignmentMeta   int16 = 12
	TypeTargetAssignmentMember int16 = 13
	TypeCurrentMemberAssign    int16 = 14
	TypeStatePartitionMeta     int16 = 15
)

// ErrBadRecord is a share record that cannot be decoded.
var ErrBadRecord = errors.New("malformed share record")

// Key is a record key; which fields apply depends on Type.
type Key struct {
	Type      int16
	Group     string
	Member    string   // types 10, 13, 14
	TopicID   [16]byte // types 0, 1
	Partition int32    // types 0, 1
}

// IsShareGroupKey reports whether a __consumer_offsets key is a share
// group's record (types 10-15).
func IsShareGroupKey(t int16) bool { return t >= TypeMemberMetadata && t <= TypeStatePartitionMeta }

func (k Key) hasMember() bool {
	return k.Type == TypeMemberMetadata || k.Type == TypeTargetAssignmentMember || k.Type == TypeCurrentMemberAssign
}

func (k Key) hasPartition() bool { return k.Type == TypeShareSnapshot || k.Type == TypeShareUpdate }

// AppendTo encodes the key.
func (k Key) AppendTo(dst []byte) []byte {
	dst = kbin.AppendInt16(dst, k.Type)
	dst = kbin.AppendString(dst, k.Group)
	switch {
	case k.hasMember():
		dst = kbin.AppendString(dst, k.Member)
	case k.hasPartition():
		dst = kbin.AppendUuid(dst, k.TopicID)
		dst = kbin.AppendInt32(dst, k.Partition)
	}
	return dst
}

// ParseKey decodes a key of the types above.
func ParseKey(b []byte) (Key, error) {
	r := kbin.Reader{Src: b}
	k := Key{Type: r.Int16()}
	if !IsShareGroupKey(k.Type) && !k.hasPartition() {
		return k, fmt.Errorf("%w: key type %d", ErrBadRecord, k.Type)
	}
	k.Group = r.String()
	switch {
	case k.hasMember():
		k.Member = r.String()
	case k.hasPartition():
		k.TopicID = r.Uuid()
		k.Partition = r.Int32()
	}
	return k, complete(&r)
}

func complete(r *kbin.Reader) error {
	if !r.Ok() || len(r.Src) != 0 {
		return ErrBadRecord
	}
	return nil
}

// startValue writes the value version.
func startValue(dst []byte) []byte { return kbin.AppendInt16(dst, 0) }

// endTags writes an empty tagged-field section.
func endTags(dst []byte) []byte { return kbin.AppendUvarint(dst, 0) }

// readVersion reads a value's version; only 0 exists.
func readVersion(r *kbin.Reader) bool { return r.Int16() == 0 && r.Ok() }

// skipTags reads a tagged-field section, passing each tag's bytes to fn
// (nil to skip them all).
func skipTags(r *kbin.Reader, fn func(tag uint32, b []byte)) {
	n := r.Uvarint()
	for i := uint32(0); i < n && r.Ok(); i++ {
		tag, size := r.Uvarint(), r.Uvarint()
		if uint64(size) > uint64(len(r.Src)) {
			r.Span(len(r.Src) + 1) // marks the reader bad
			return
		}
		b := r.Span(int(size))
		if fn != nil {
			fn(tag, b)
		}
	}
}

func appendStrings(dst []byte, ss []string) []byte {
	dst = kbin.AppendCompactArrayLen(dst, len(ss))
	for _, s := range ss {
		dst = kbin.AppendCompactString(dst, s)
	}
	return dst
}

func readStrings(r *kbin.Reader) []string {
	n := r.CompactArrayLen()
	var out []string
	for i := int32(0); i < n && r.Ok(); i++ {
		out = append(out, r.CompactString())
	}
	return out
}

// TopicPartitions is an assignment's partitions of one topic.
type TopicPartitions struct {
	TopicID    [16]byte
	Partitions []int32
}

func appendTopicPartitions(dst []byte, tps []TopicPartitions) []byte {
	dst = kbin.AppendCompactArrayLen(dst, len(tps))
	for _, tp := range tps {
		dst = kbin.AppendUuid(dst, tp.TopicID)
		dst = kbin.AppendCompactArrayLen(dst, len(tp.Partitions))
		for _, p := range tp.Partitions {
			dst = kbin.AppendInt32(dst, p)
		}
		dst = endTags(dst)
	}
	return dst
}

func readTopicPartitions(r *kbin.Reader) []TopicPartitions {
	n := r.CompactArrayLen()
	var out []TopicPartitions
	for i := int32(0); i < n && r.Ok(); i++ {
		tp := TopicPartitions{TopicID: r.Uuid()}
		m := r.CompactArrayLen()
		for j := int32(0); j < m && r.Ok(); j++ {
			tp.Partitions = append(tp.Partitions, r.Int32())
		}
		skipTags(r, nil)
		out = append(out, tp)
	}
	return out
}

// MemberValue is ShareGroupMemberMetadataValue.
type MemberValue struct {
	RackID     *string
	ClientID   string
	ClientHost string
	Subscribed []string
}

func (v *MemberValue) AppendTo(dst []byte) []byte {
	dst = startValue(dst)
	dst = kbin.AppendCompactNullableString(dst, v.RackID)
	dst = kbin.AppendCompactString(dst, v.ClientID)
	dst = kbin.AppendCompactString(dst, v.ClientHost)
	dst = appendStrings(dst, v.Subscribed)
	return endTags(dst)
}

func (v *MemberValue) ReadFrom(b []byte) error {
	r := kbin.Reader{Src: b}
	if !readVersion(&r) {
		return ErrBadRecord
	}
	v.RackID = r.CompactNullableString()
	v.ClientID = r.CompactString()
	v.ClientHost = r.CompactString()
	v.Subscribed = readStrings(&r)
	skipTags(&r, nil)
	return complete(&r)
}

// GroupValue is ShareGroupMetadataValue.
type GroupValue struct {
	Epoch        int32
	MetadataHash int64
}

func (v *GroupValue) AppendTo(dst []byte) []byte {
	dst = startValue(dst)
	dst = kbin.AppendInt32(dst, v.Epoch)
	dst = kbin.AppendInt64(dst, v.MetadataHash)
	return endTags(dst)
}

func (v *GroupValue) ReadFrom(b []byte) error {
	r := kbin.Reader{Src: b}
	if !readVersion(&r) {
		return ErrBadRecord
	}
	v.Epoch = r.Int32()
	v.MetadataHash = r.Int64()
	skipTags(&r, nil)
	return complete(&r)
}

// TargetMetaValue is ShareGroupTargetAssignmentMetadataValue (its tagged
// AssignmentTimestamp is read and not written).
type TargetMetaValue struct {
	AssignmentEpoch int32
}

func (v *TargetMetaValue) AppendTo(dst []byte) []byte {
	dst = startValue(dst)
	dst = kbin.AppendInt32(dst, v.AssignmentEpoch)
	return endTags(dst)
}

func (v *TargetMetaValue) ReadFrom(b []byte) error {
	r := kbin.Reader{Src: b}
	if !readVersion(&r) {
		return ErrBadRecord
	}
	v.AssignmentEpoch = r.Int32()
	skipTags(&r, nil)
	return complete(&r)
}

// AssignmentValue is ShareGroupTargetAssignmentMemberValue.
type AssignmentValue struct {
	Partitions []TopicPartitions
}

func (v *AssignmentValue) AppendTo(dst []byte) []byte {
	dst = startValue(dst)
	dst = appendTopicPartitions(dst, v.Partitions)
	return endTags(dst)
}

func (v *AssignmentValue) ReadFrom(b []byte) error {
	r := kbin.Reader{Src: b}
	if !readVersion(&r) {
		return ErrBadRecord
	}
	v.Partitions = readTopicPartitions(&r)
	skipTags(&r, nil)
	return complete(&r)
}

// CurrentValue is ShareGroupCurrentMemberAssignmentValue.
type CurrentValue struct {
	MemberEpoch         int32
	PreviousMemberEpoch int32
	State               int8 // Kafka's MemberState: 0 stable
	Partitions          []TopicPartitions
}

func (v *CurrentValue) AppendTo(dst []byte) []byte {
	dst = startValue(dst)
	dst = kbin.AppendInt32(dst, v.MemberEpoch)
	dst = kbin.AppendInt32(dst, v.PreviousMemberEpoch)
	dst = kbin.AppendInt8(dst, v.State)
	dst = appendTopicPartitions(dst, v.Partitions)
	return endTags(dst)
}

func (v *CurrentValue) ReadFrom(b []byte) error {
	r := kbin.Reader{Src: b}
	if !readVersion(&r) {
		return ErrBadRecord
	}
	v.MemberEpoch = r.Int32()
	v.PreviousMemberEpoch = r.Int32()
	v.State = r.Int8()
	v.Partitions = readTopicPartitions(&r)
	skipTags(&r, nil)
	return complete(&r)
}

// SnapshotValue is ShareSnapshotValue: a share-partition's whole state.
type SnapshotValue struct {
	SnapshotEpoch         int32
	StateEpoch            int32
	LeaderEpoch           int32
	StartOffset           int64
	DeliveryCompleteCount int32 // tagged 0; -1 unknown
	CreateTimestamp       int64
	WriteTimestamp        int64
	Batches               []StateBatch
}

func appendBatches(dst []byte, bs []StateBatch) []byte {
	dst = kbin.AppendCompactArrayLen(dst, len(bs))
	for _, b := range bs {
		dst = kbin.AppendInt64(dst, b.First)
		dst = kbin.AppendInt64(dst, b.Last)
		dst = kbin.AppendInt8(dst, int8(b.State))
		dst = kbin.AppendInt16(dst, b.Count)
		dst = endTags(dst)
	}
	return dst
}

func readBatches(r *kbin.Reader) []StateBatch {
	n := r.CompactArrayLen()
	var out []StateBatch
	for i := int32(0); i < n && r.Ok(); i++ {
		b := StateBatch{First: r.Int64(), Last: r.Int64(), State: RecordState(r.Int8()), Count: r.Int16()}
		skipTags(r, nil)
		out = append(out, b)
	}
	return out
}

// appendCompleteCount writes tag 0 when the count is known.
func appendCompleteCount(dst []byte, n int32) []byte {
	if n == -1 {
		return endTags(dst)
	}
	dst = kbin.AppendUvarint(dst, 1)
	dst = kbin.AppendUvarint(dst, 0)
	dst = kbin.AppendUvarint(dst, 4)
	return kbin.AppendInt32(dst, n)
}

func readCompleteCount(r *kbin.Reader) int32 {
	n := int32(-1)
	skipTags(r, func(tag uint32, b []byte) {
		if tag == 0 {
			tr := kbin.Reader{Src: b}
			if v := tr.Int32(); tr.Ok() {
				n = v
			}
		}
	})
	return n
}

func (v *SnapshotValue) AppendTo(dst []byte) []byte {
	dst = startValue(dst)
	dst = kbin.AppendInt32(dst, v.SnapshotEpoch)
	dst = kbin.AppendInt32(dst, v.StateEpoch)
	dst = kbin.AppendInt32(dst, v.LeaderEpoch)
	dst = kbin.AppendInt64(dst, v.StartOffset)
	dst = kbin.AppendInt64(dst, v.CreateTimestamp)
	dst = kbin.AppendInt64(dst, v.WriteTimestamp)
	dst = appendBatches(dst, v.Batches)
	return appendCompleteCount(dst, v.DeliveryCompleteCount)
}

func (v *SnapshotValue) ReadFrom(b []byte) error {
	r := kbin.Reader{Src: b}
	if !readVersion(&r) {
		return ErrBadRecord
	}
	v.SnapshotEpoch = r.Int32()
	v.StateEpoch = r.Int32()
	v.LeaderEpoch = r.Int32()
	v.StartOffset = r.Int64()
	v.CreateTimestamp = r.Int64()
	v.WriteTimestamp = r.Int64()
	v.Batches = readBatches(&r)
	v.DeliveryCompleteCount = readCompleteCount(&r)
	return complete(&r)
}

// UpdateValue is ShareUpdateValue: a delta over the last snapshot, which
// Kafka's share coordinator writes between snapshots (Sluice writes whole
// snapshots, and reads updates so that a Kafka-written log replays).
type UpdateValue struct {
	SnapshotEpoch         int32
	LeaderEpoch           int32
	StartOffset           int64
	DeliveryCompleteCount int32
	Batches               []StateBatch
}

func (v *UpdateValue) AppendTo(dst []byte) []byte {
	dst = startValue(dst)
	dst = kbin.AppendInt32(dst, v.SnapshotEpoch)
	dst = kbin.AppendInt32(dst, v.LeaderEpoch)
	dst = kbin.AppendInt64(dst, v.StartOffset)
	dst = appendBatches(dst, v.Batches)
	return appendCompleteCount(dst, v.DeliveryCompleteCount)
}

func (v *UpdateValue) ReadFrom(b []byte) error {
	r := kbin.Reader{Src: b}
	if !readVersion(&r) {
		return ErrBadRecord
	}
	v.SnapshotEpoch = r.Int32()
	v.LeaderEpoch = r.Int32()
	v.StartOffset = r.Int64()
	v.Batches = readBatches(&r)
	v.DeliveryCompleteCount = readCompleteCount(&r)
	return complete(&r)
}
