package metadata

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// RecordType identifies a metadata record. The numbers are KRaft's
// MetadataRecordType values where Kafka has the record, so a reader of
// Kafka's metadata.json files finds the same shapes under the same numbers.
type RecordType uint8

const (
	TopicRecordType        RecordType = 2
	PartitionRecordType    RecordType = 3
	ConfigRecordType       RecordType = 4
	RemoveTopicRecordType  RecordType = 9
	FeatureLevelRecordType RecordType = 12
	ProducerIDsRecordType  RecordType = 15
	// ClusterRecordType is Sluice's own (Kafka keeps the cluster id in
	// meta.properties only): it ties a metadata log to the cluster whose
	// meta.properties sits next to it, so a log copied into another
	// cluster's data dir is refused instead of silently adopted.
	ClusterRecordType RecordType = 200
)

func (t RecordType) String() string {
	switch t {
	case UserScramCredentialRecordType: // scram.go
		return "UserScramCredentialRecord"
	case RemoveUserScramCredentialRecordType:
		return "RemoveUserScramCredentialRecord"
	case TopicRecordType:
		return "TopicRecord"
	case PartitionRecordType:
		return "PartitionRecord"
	case ConfigRecordType:
		return "ConfigRecord"
	case RemoveTopicRecordType:
		return "RemoveTopicRecord"
	case FeatureLevelRecordType:
		return "FeatureLevelRecord"
	case ProducerIDsRecordType:
		return "ProducerIDsRecord"
	case ClusterRecordType:
		return "ClusterRecord"
	case RegisterBrokerRecordType:
		return "RegisterBrokerRecord"
	case UnregisterBrokerRecordType:
		return "UnregisterBrokerRecord"
	case FenceBrokerRecordType:
		return "FenceBrokerRecord"
	case UnfenceBrokerRecordType:
		return "UnfenceBrokerRecord"
	case BrokerRegistrationChangeRecordType:
		return "BrokerRegistrationChangeRecord"
	case PartitionChangeRecordType:
		return "PartitionChangeRecord"
	case AccessControlEntryRecordType:
		return "AccessControlEntryRecord"
	case RemoveAccessControlEntryRecordType:
		return "RemoveAccessControlEntryRecord"
	case ClientQuotaRecordType:
		return "ClientQuotaRecord"
	}
	return fmt.Sprintf("RecordType(%d)", uint8(t))
}

// ResourceType is the kind of thing a ConfigRecord configures, with Kafka's
// ConfigResource type codes (the ones DescribeConfigs uses).
type ResourceType int8

const (
	ResourceTopic  ResourceType = 2
	ResourceBroker ResourceType = 4
	ResourceGroup  ResourceType = 32
)

// Record is one typed change to the metadata image. Records are values:
// once built they are never modified (the image keeps their slices).
type Record interface {
	Type() RecordType
	// appendBody appends the record's fields at its current version.
	appendBody(dst []byte) []byte
}

// TopicRecord creates a topic. Its partitions follow as PartitionRecords.
type TopicRecord struct {
	Name    string
	TopicID [16]byte // never zero
}

// PartitionRecord adds partition Partition to a topic, which must have
// exactly Partition partitions already (indexes stay dense).
type PartitionRecord struct {
	TopicID   [16]byte
	Partition int32
	// Replicas is non-empty and has no duplicates. Invariant (checked by
	// Apply): ISR ⊆ Replicas, Leader == -1 or Leader ∈ ISR.
	Replicas       []int32
	ISR            []int32
	Leader         int32 // node id, -1 for none
	LeaderEpoch    int32
	PartitionEpoch int32
	// AddingReplicas and RemovingReplicas are the replicas a reassignment
	// in progress adds and removes (both ⊆ Replicas, disjoint). Encoded
	// at version 1, only when one is non-empty.
	AddingReplicas   []int32
	RemovingReplicas []int32
}

// ConfigRecord sets (Value != nil) or deletes (Value == nil) one config key
// of a resource.
type ConfigRecord struct {
	ResourceType ResourceType
	ResourceName string // topic name, broker id ("" = cluster default) or group id
	Name         string
	Value        *string
}

// RemoveTopicRecord deletes a topic, its partitions and its configs.
type RemoveTopicRecord struct {
	TopicID [16]byte
}

// ProducerIDsRecord allocates the producer-id block that ends at
// NextProducerID to broker BrokerID: the block runs from the previous
// NextProducerID up to (not including) this one, which must be larger.
type ProducerIDsRecord struct {
	BrokerID       int32
	BrokerEpoch    int64
	NextProducerID int64
}

// FeatureLevelRecord sets the level of a feature (e.g. metadata.version).
type FeatureLevelRecord struct {
	Name         string
	FeatureLevel int16
}

// ClusterRecord names the cluster the log belongs to; it is written once.
type ClusterRecord struct {
	ClusterID string
}

func (TopicRecord) Type() RecordType        { return TopicRecordType }
func (PartitionRecord) Type() RecordType    { return PartitionRecordType }
func (ConfigRecord) Type() RecordType       { return ConfigRecordType }
func (RemoveTopicRecord) Type() RecordType  { return RemoveTopicRecordType }
func (ProducerIDsRecord) Type() RecordType  { return ProducerIDsRecordType }
func (FeatureLevelRecord) Type() RecordType { return FeatureLevelRecordType }
func (ClusterRecord) Type() RecordType      { return ClusterRecordType }

// Encoding of one record (big-endian fixed-width integers; lengths and
// counts as unsigned varints):
//
//	+------+---------+------------------------------+
//	| type | version | fields of that type/version  |
//	|  u8  |   u8    |                              |
//	+------+---------+------------------------------+
//
//	string          uvarint length, bytes (length <= maxStringLen)
//	nullable string uvarint length+1 (0 = null), bytes
//	[]int32         uvarint count (count <= maxListLen), count × int32
//	topic id        16 bytes
//
// Every type is at version 0 but PartitionRecord, which is at version 1
// when it has adding or removing replicas (appended after the version 0
// fields) and at version 0 otherwise, so each record still has one
// encoding. A later version appends fields; a decoder refuses versions it
// does not know rather than guess.
const (
	recordVersion = 0
	maxStringLen  = MaxStringLen
	maxListLen    = 1 << 16
	// MaxRecordBytes bounds one encoded record; the largest real ones are
	// a PartitionRecord or PartitionChangeRecord with four lists of
	// maxListLen (1 MiB) and a RegisterBrokerRecord of maxEndpoints
	// endpoints with the longest names and hosts (about 1 MiB).
	MaxRecordBytes = 2 << 20
)

// MaxStringLen bounds every string of a record (Kafka's string limit);
// Apply refuses a record whose strings are longer, so that nothing is
// written that the decoder would refuse to read back.
const MaxStringLen = 32767

// AppendRecord appends r's encoding to dst.
func AppendRecord(dst []byte, r Record) []byte {
	v := uint8(recordVersion)
	if vr, ok := r.(versioned); ok {
		v = vr.version()
	}
	dst = append(dst, byte(r.Type()), v)
	return r.appendBody(dst)
}

// versioned is a record whose encoding version depends on its content.
type versioned interface{ version() uint8 }

func (r PartitionRecord) version() uint8 {
	if len(r.AddingReplicas) > 0 || len(r.RemovingReplicas) > 0 {
		return 1
	}
	return 0
}

func (r TopicRecord) appendBody(dst []byte) []byte {
	dst = appendString(dst, r.Name)
	return append(dst, r.TopicID[:]...)
}

func (r PartitionRecord) appendBody(dst []byte) []byte {
	dst = append(dst, r.TopicID[:]...)
	dst = binary.BigEndian.AppendUint32(dst, uint32(r.Partition))
	dst = appendInt32s(dst, r.Replicas)
	dst = appendInt32s(dst, r.ISR)
	dst = binary.BigEndian.AppendUint32(dst, uint32(r.Leader))
	dst = binary.BigEndian.AppendUint32(dst, uint32(r.LeaderEpoch))
	dst = binary.BigEndian.AppendUint32(dst, uint32(r.PartitionEpoch))
	if r.version() == 0 {
		return dst
	}
	dst = appendInt32s(dst, r.AddingReplicas)
	return appendInt32s(dst, r.RemovingReplicas)
}

func (r ConfigRecord) appendBody(dst []byte) []byte {
	dst = append(dst, byte(r.ResourceType))
	dst = appendString(dst, r.ResourceName)
	dst = appendString(dst, r.Name)
	return appendNullableString(dst, r.Value)
}

func (r RemoveTopicRecord) appendBody(dst []byte) []byte { return append(dst, r.TopicID[:]...) }

func (r ProducerIDsRecord) appendBody(dst []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(r.BrokerID))
	dst = binary.BigEndian.AppendUint64(dst, uint64(r.BrokerEpoch))
	return binary.BigEndian.AppendUint64(dst, uint64(r.NextProducerID))
}

func (r FeatureLevelRecord) appendBody(dst []byte) []byte {
	dst = appendString(dst, r.Name)
	return binary.BigEndian.AppendUint16(dst, uint16(r.FeatureLevel))
}

func (r ClusterRecord) appendBody(dst []byte) []byte { return appendString(dst, r.ClusterID) }

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func appendNullableString(dst []byte, s *string) []byte {
	if s == nil {
		return binary.AppendUvarint(dst, 0)
	}
	dst = binary.AppendUvarint(dst, uint64(len(*s))+1)
	return append(dst, *s...)
}

func appendInt32s(dst []byte, vs []int32) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(vs)))
	for _, v := range vs {
		dst = binary.BigEndian.AppendUint32(dst, uint32(v))
	}
	return dst
}

// ErrMalformed is wrapped by every decoding error.
var ErrMalformed = errors.New("malformed metadata record")

// DecodeRecord decodes one record that fills b exactly. It never panics,
// and allocates at most in proportion to len(b), whatever the bytes say.
func DecodeRecord(b []byte) (Record, error) {
	if len(b) > MaxRecordBytes {
		return nil, fmt.Errorf("%w: %d bytes", ErrMalformed, len(b))
	}
	d := decoder{b: b}
	typ, version := RecordType(d.u8()), d.u8()
	if d.bad {
		return nil, fmt.Errorf("%w: short header", ErrMalformed)
	}
	if version != recordVersion && (typ != PartitionRecordType || version != 1) {
		return nil, fmt.Errorf("%w: %v version %d is unknown", ErrMalformed, typ, version)
	}
	r := d.body(typ, version)
	if r == nil {
		return nil, fmt.Errorf("%w: unknown type %d", ErrMalformed, uint8(typ))
	}
	if d.bad || len(d.b) != 0 {
		return nil, fmt.Errorf("%w: bad %v", ErrMalformed, typ)
	}
	return r, nil
}

func (d *decoder) body(typ RecordType, version uint8) Record {
	switch typ {
	case UserScramCredentialRecordType: // scram.go
		return d.userScramCredential()
	case RemoveUserScramCredentialRecordType:
		return d.removeUserScramCredential()
	case TopicRecordType:
		return TopicRecord{Name: d.str(), TopicID: d.uuid()}
	case PartitionRecordType:
		return d.partition(version)
	case ConfigRecordType:
		return ConfigRecord{ResourceType: ResourceType(d.u8()), ResourceName: d.str(), Name: d.str(), Value: d.nullableStr()}
	case RemoveTopicRecordType:
		return RemoveTopicRecord{TopicID: d.uuid()}
	case ProducerIDsRecordType:
		return ProducerIDsRecord{BrokerID: d.i32(), BrokerEpoch: d.i64(), NextProducerID: d.i64()}
	case FeatureLevelRecordType:
		return FeatureLevelRecord{Name: d.str(), FeatureLevel: int16(d.u16())}
	case ClusterRecordType:
		return ClusterRecord{ClusterID: d.str()}
	case RegisterBrokerRecordType:
		return d.registerBroker()
	case UnregisterBrokerRecordType:
		return UnregisterBrokerRecord{BrokerID: d.i32(), BrokerEpoch: d.i64()}
	case FenceBrokerRecordType:
		return FenceBrokerRecord{BrokerID: d.i32(), BrokerEpoch: d.i64()}
	case UnfenceBrokerRecordType:
		return UnfenceBrokerRecord{BrokerID: d.i32(), BrokerEpoch: d.i64()}
	case BrokerRegistrationChangeRecordType:
		return BrokerRegistrationChangeRecord{BrokerID: d.i32(), BrokerEpoch: d.i64(),
			Fenced: int8(d.u8()), InControlledShutdown: int8(d.u8())}
	case PartitionChangeRecordType:
		return d.partitionChange()
	case AccessControlEntryRecordType:
		return d.accessControlEntry()
	case RemoveAccessControlEntryRecordType:
		return RemoveAccessControlEntryRecord{ID: d.uuid()}
	case ClientQuotaRecordType:
		return d.clientQuota()
	}
	return nil
}

func (d *decoder) partition(version uint8) PartitionRecord {
	r := PartitionRecord{TopicID: d.uuid(), Partition: d.i32(), Replicas: d.i32s(), ISR: d.i32s(),
		Leader: d.i32(), LeaderEpoch: d.i32(), PartitionEpoch: d.i32()}
	if version == 1 {
		r.AddingReplicas, r.RemovingReplicas = d.i32s(), d.i32s()
		if r.version() != 1 { // version 1 with nothing of version 1
			d.bad = true
		}
	}
	return r
}

// decoder reads fields off b. Once a read runs short, bad sticks and every
// later read returns zero, so callers check once at the end (kbin's way).
type decoder struct {
	b   []byte
	bad bool
}

func (d *decoder) take(n int) []byte {
	if d.bad || n < 0 || n > len(d.b) {
		d.bad = true
		return nil
	}
	out := d.b[:n]
	d.b = d.b[n:]
	return out
}

func (d *decoder) u8() uint8 {
	if b := d.take(1); b != nil {
		return b[0]
	}
	return 0
}

func (d *decoder) u16() uint16 {
	if b := d.take(2); b != nil {
		return binary.BigEndian.Uint16(b)
	}
	return 0
}

func (d *decoder) i32() int32 {
	if b := d.take(4); b != nil {
		return int32(binary.BigEndian.Uint32(b))
	}
	return 0
}

func (d *decoder) i64() int64 {
	if b := d.take(8); b != nil {
		return int64(binary.BigEndian.Uint64(b))
	}
	return 0
}

func (d *decoder) uvarint() uint64 {
	if d.bad {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	// A longer form than needed is refused, so every record has exactly
	// one encoding.
	if n <= 0 || n != uvarintLen(v) {
		d.bad = true
		return 0
	}
	d.b = d.b[n:]
	return v
}

func uvarintLen(v uint64) int {
	n := 1
	for ; v >= 0x80; v >>= 7 {
		n++
	}
	return n
}

func (d *decoder) uuid() (id [16]byte) {
	copy(id[:], d.take(16))
	return id
}

// length reads a length or count and checks it against max and against
// the bytes left (each element at least size bytes), so that no garbage
// count makes us allocate more than the input holds.
func (d *decoder) length(max uint64, size int) int {
	n := d.uvarint()
	if n > max || n*uint64(size) > uint64(len(d.b)) {
		d.bad = true
		return 0
	}
	return int(n)
}

func (d *decoder) str() string { return string(d.take(d.length(maxStringLen, 1))) }

func (d *decoder) nullableStr() *string {
	n := d.uvarint()
	if n == 0 || d.bad {
		return nil
	}
	if n-1 > maxStringLen {
		d.bad = true
		return nil
	}
	s := string(d.take(int(n - 1)))
	return &s
}

func (d *decoder) i32s() []int32 {
	n := d.length(maxListLen, 4)
	if d.bad {
		return nil
	}
	out := make([]int32, n)
	for i := range out {
		out[i] = d.i32()
	}
	return out
}
