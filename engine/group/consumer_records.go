package group

// Records of consumer-protocol groups in __consumer_offsets, in Kafka's
// schemas (group-coordinator/src/main/resources/common/message), so that a
// log written by either broker reads the same. A key is its version
// (which names the record type) and non-flexible strings; a value is
// version 0, flexible (compact strings and arrays, an empty tag buffer):
//
//	key                                       value
//	3 ConsumerGroupMetadata {group}           {epoch}
//	4 ConsumerGroupPartitionMetadata {group}  {topics[id, name, numPartitions, partitionMetadata[]]}
//	5 ConsumerGroupMemberMetadata {group,     {instanceId?, rackId?, clientId, clientHost,
//	    member}                                subscribedTopicNames[], subscribedTopicRegex?,
//	                                           rebalanceTimeoutMs, serverAssignor?,
//	                                           tag 0: classicMemberMetadata? {sessionTimeoutMs,
//	                                           supportedProtocols[name, metadata]}}
//	6 ConsumerGroupTargetAssignmentMetadata   {assignmentEpoch}
//	    {group}
//	7 ConsumerGroupTargetAssignmentMember     {topicPartitions[topicId, partitions[]]}
//	    {group, member}
//	8 ConsumerGroupCurrentMemberAssignment    {memberEpoch, previousMemberEpoch, state,
//	    {group, member}                        assignedPartitions[], partitionsPendingRevocation[]}
//
// A nil value is a tombstone. A heartbeat writes, in one batch, only the
// records that changed (cgDiffRecords); replay applies them in log order.

import (
	"errors"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
)

// Key versions of consumer-group records.
const (
	keyCGMetadata          = 3
	keyCGPartitionMetadata = 4
	keyCGMemberMetadata    = 5
	keyCGTargetMetadata    = 6
	keyCGTargetMember      = 7
	keyCGCurrentAssignment = 8
)

func cgKey(version int16, group string, member *string) []byte {
	b := kbin.AppendInt16(nil, version)
	b = kbin.AppendString(b, group)
	if member != nil {
		b = kbin.AppendString(b, *member)
	}
	return b
}

func valueHeader() []byte { return kbin.AppendInt16(nil, 0) }

// endValue appends the empty tag buffer of a flexible struct.
func endValue(b []byte) []byte { return kbin.AppendUvarint(b, 0) }

func cgEpochRecord(group string, epoch int32) offsetsRecord {
	return offsetsRecord{key: cgKey(keyCGMetadata, group, nil), value: endValue(kbin.AppendInt32(valueHeader(), epoch))}
}

func cgTargetMetadataRecord(group string, epoch int32) offsetsRecord {
	return offsetsRecord{key: cgKey(keyCGTargetMetadata, group, nil), value: endValue(kbin.AppendInt32(valueHeader(), epoch))}
}

func cgPartitionMetadataRecord(group string, subscribed map[string]topicSnapshot) offsetsRecord {
	names := make([]string, 0, len(subscribed))
	for n := range subscribed {
		names = append(names, n)
	}
	slices.Sort(names)
	b := kbin.AppendCompactArrayLen(valueHeader(), len(names))
	for _, n := range names {
		t := subscribed[n]
		b = kbin.AppendUuid(b, t.id)
		b = kbin.AppendCompactString(b, n)
		b = kbin.AppendInt32(b, t.partitions)
		b = kbin.AppendCompactArrayLen(b, 0) // PartitionMetadata: unused since Kafka 4.0
		b = endValue(b)
	}
	return offsetsRecord{key: cgKey(keyCGPartitionMetadata, group, nil), value: endValue(b)}
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func cgMemberRecord(group string, m *cgMember) offsetsRecord {
	b := valueHeader()
	b = kbin.AppendCompactNullableString(b, nullable(m.instanceID))
	b = kbin.AppendCompactNullableString(b, nullable(m.rackID))
	b = kbin.AppendCompactString(b, m.clientID)
	b = kbin.AppendCompactString(b, m.clientHost)
	b = kbin.AppendCompactArrayLen(b, len(m.topics))
	for _, t := range m.topics {
		b = kbin.AppendCompactString(b, t)
	}
	b = kbin.AppendCompactNullableString(b, nullable(m.regex))
	b = kbin.AppendInt32(b, int32(m.rebalance.Milliseconds()))
	b = kbin.AppendCompactNullableString(b, nullable(m.assignor))
	return offsetsRecord{key: cgKey(keyCGMemberMetadata, group, &m.id), value: appendClassicTag(b, m.classic)}
}

// appendClassicTag ends a member value with its tagged fields: tag 0,
// ClassicMemberMetadata, for a member using the classic protocol.
func appendClassicTag(b []byte, c *classicMeta) []byte {
	if c == nil {
		return endValue(b)
	}
	f := kbin.AppendInt32(nil, int32(c.session.Milliseconds()))
	f = kbin.AppendCompactArrayLen(f, len(c.protocols))
	for _, p := range c.protocols {
		f = kbin.AppendCompactString(f, p.Name)
		f = kbin.AppendCompactBytes(f, p.Metadata)
		f = endValue(f)
	}
	f = endValue(f)
	b = kbin.AppendUvarint(b, 1) // one tagged field
	b = kbin.AppendUvarint(b, 0) // tag 0
	b = kbin.AppendUvarint(b, uint32(len(f)))
	return append(b, f...)
}

// readMemberTags reads a member value's tagged fields, keeping tag 0.
func readMemberTags(r *kbin.Reader, m *cgMember) {
	n := r.Uvarint()
	for i := uint32(0); i < n && r.Ok(); i++ {
		tag, size := r.Uvarint(), r.Uvarint()
		field := r.Span(int(size))
		if tag != 0 || !r.Ok() {
			continue
		}
		f := &kbin.Reader{Src: field}
		c := &classicMeta{session: time.Duration(f.Int32()) * time.Millisecond}
		for j, k := 0, arrayLen(f); j < k && f.Ok(); j++ {
			c.protocols = append(c.protocols, Protocol{Name: f.CompactString(), Metadata: f.CompactBytes()})
			skipTags(f)
		}
		skipTags(f)
		if !f.Ok() || len(c.protocols) == 0 {
			r.Span(len(r.Src) + 1) // poison: a malformed tag fails the record
			return
		}
		m.classic = c
	}
}

func appendTopicPartitions(b []byte, a assignment) []byte {
	ids := a.sortedTopics()
	b = kbin.AppendCompactArrayLen(b, len(ids))
	for _, tid := range ids {
		b = kbin.AppendUuid(b, tid)
		b = kbin.AppendCompactArrayLen(b, len(a[tid]))
		for _, p := range a[tid] {
			b = kbin.AppendInt32(b, p)
		}
		b = endValue(b)
	}
	return b
}

func cgTargetMemberRecord(group, member string, a assignment) offsetsRecord {
	return offsetsRecord{key: cgKey(keyCGTargetMember, group, &member), value: endValue(appendTopicPartitions(valueHeader(), a))}
}

func cgCurrentRecord(group string, m *cgMember) offsetsRecord {
	b := valueHeader()
	b = kbin.AppendInt32(b, m.epoch)
	b = kbin.AppendInt32(b, m.prevEpoch)
	b = kbin.AppendInt8(b, int8(m.state))
	b = appendTopicPartitions(b, m.assigned)
	b = appendTopicPartitions(b, m.pending)
	return offsetsRecord{key: cgKey(keyCGCurrentAssignment, group, &m.id), value: endValue(b)}
}

// memberTombstones removes a member's three records (in Kafka's order).
func memberTombstones(group, member string) []offsetsRecord {
	return []offsetsRecord{
		{key: cgKey(keyCGCurrentAssignment, group, &member)},
		{key: cgKey(keyCGTargetMember, group, &member)},
		{key: cgKey(keyCGMemberMetadata, group, &member)},
	}
}

// cgTombstones removes every record of a consumer group.
func cgTombstones(group string, st *cgState) []offsetsRecord {
	var recs []offsetsRecord
	for _, id := range st.sortedMemberIDs() {
		recs = append(recs, memberTombstones(group, id)...)
	}
	return append(recs,
		offsetsRecord{key: cgKey(keyCGTargetMetadata, group, nil)},
		offsetsRecord{key: cgKey(keyCGPartitionMetadata, group, nil)},
		offsetsRecord{key: cgKey(keyCGMetadata, group, nil)})
}

// cgDiffRecords are the records that turn old into st.
func cgDiffRecords(group string, old, st *cgState) []offsetsRecord {
	var recs []offsetsRecord
	for _, id := range old.sortedMemberIDs() {
		if st.members[id] == nil {
			recs = append(recs, memberTombstones(group, id)...)
		}
	}
	for _, id := range st.sortedMemberIDs() {
		m, o := st.members[id], old.members[id]
		if o == nil || !sameMemberMetadata(o, m) {
			recs = append(recs, cgMemberRecord(group, m))
		}
	}
	if !maps2Equal(old.subscribed, st.subscribed) {
		recs = append(recs, cgPartitionMetadataRecord(group, st.subscribed))
	}
	if old.epoch != st.epoch {
		recs = append(recs, cgEpochRecord(group, st.epoch))
	}
	for _, id := range st.sortedMemberIDs() {
		if t, ok := st.target[id]; ok {
			if ot, had := old.target[id]; !had || !ot.equal(t) {
				recs = append(recs, cgTargetMemberRecord(group, id, t))
			}
		}
	}
	if old.targetEpoch != st.targetEpoch {
		recs = append(recs, cgTargetMetadataRecord(group, st.targetEpoch))
	}
	for _, id := range st.sortedMemberIDs() {
		m, o := st.members[id], old.members[id]
		if o == nil || !sameCurrent(o, m) {
			recs = append(recs, cgCurrentRecord(group, m))
		}
	}
	return recs
}

func sameMemberMetadata(a, b *cgMember) bool {
	return a.instanceID == b.instanceID && a.rackID == b.rackID && a.clientID == b.clientID &&
		a.clientHost == b.clientHost && slices.Equal(a.topics, b.topics) && a.regex == b.regex &&
		a.rebalance == b.rebalance && a.assignor == b.assignor && a.classic.equal(b.classic)
}

func sameCurrent(a, b *cgMember) bool {
	return a.epoch == b.epoch && a.prevEpoch == b.prevEpoch && a.state == b.state &&
		a.assigned.equal(b.assigned) && a.pending.equal(b.pending)
}

// ---- decoding (replay) ----

// errBadCGRecord: a consumer-group record that cannot be decoded.
var errBadCGRecord = errors.New("malformed consumer group record in __consumer_offsets")

// maxRecordArray bounds every array a record decodes.
const maxRecordArray = 1 << 20

// cgRecordKey is a decoded consumer-group key.
type cgRecordKey struct {
	version int16
	group   string
	member  string
}

func decodeCGKey(key []byte) (cgRecordKey, error) {
	r := kbin.Reader{Src: key}
	k := cgRecordKey{version: r.Int16()}
	if k.version < keyCGMetadata || k.version > keyCGCurrentAssignment {
		return k, errBadCGRecord
	}
	k.group = r.String()
	if k.version == keyCGMemberMetadata || k.version == keyCGTargetMember || k.version == keyCGCurrentAssignment {
		k.member = r.String()
	}
	if r.Complete() != nil {
		return k, errBadCGRecord
	}
	return k, nil
}

// valueReader checks a value's version and hands back its reader.
func valueReader(value []byte) (*kbin.Reader, bool) {
	r := &kbin.Reader{Src: value}
	v := r.Int16()
	return r, r.Ok() && v >= 0
}

// skipTags skips a flexible struct's tagged fields.
func skipTags(r *kbin.Reader) {
	n := r.Uvarint()
	for i := uint32(0); i < n && r.Ok(); i++ {
		r.Uvarint()
		r.Span(int(r.Uvarint()))
	}
}

// arrayLen reads a compact array length (-1 for null), bounded.
func arrayLen(r *kbin.Reader) int {
	n := r.CompactArrayLen()
	if n < 0 || n > maxRecordArray || int(n) > len(r.Src) {
		if n > 0 {
			r.Span(len(r.Src) + 1) // poison the reader
		}
		return 0
	}
	return int(n)
}

func readInt32Value(value []byte) (int32, error) {
	r, ok := valueReader(value)
	if !ok {
		return 0, errBadCGRecord
	}
	v := r.Int32()
	skipTags(r)
	if !r.Ok() {
		return 0, errBadCGRecord
	}
	return v, nil
}

func readSubscribed(value []byte) (map[string]topicSnapshot, error) {
	r, ok := valueReader(value)
	if !ok {
		return nil, errBadCGRecord
	}
	out := map[string]topicSnapshot{}
	for i, n := 0, arrayLen(r); i < n && r.Ok(); i++ {
		id := r.Uuid()
		name := r.CompactString()
		parts := r.Int32()
		for j, k := 0, arrayLen(r); j < k && r.Ok(); j++ {
			r.Int32()
			for x, y := 0, arrayLen(r); x < y && r.Ok(); x++ {
				r.CompactString()
			}
			skipTags(r)
		}
		skipTags(r)
		out[name] = topicSnapshot{id: id, partitions: parts}
	}
	skipTags(r)
	if !r.Ok() {
		return nil, errBadCGRecord
	}
	return out, nil
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func readMember(id string, value []byte) (*cgMember, error) {
	r, ok := valueReader(value)
	if !ok {
		return nil, errBadCGRecord
	}
	m := &cgMember{id: id}
	m.instanceID = str(r.CompactNullableString())
	m.rackID = str(r.CompactNullableString())
	m.clientID = r.CompactString()
	m.clientHost = r.CompactString()
	for i, n := 0, arrayLen(r); i < n && r.Ok(); i++ {
		m.topics = append(m.topics, r.CompactString())
	}
	m.regex = str(r.CompactNullableString())
	m.rebalance = time.Duration(r.Int32()) * time.Millisecond
	m.assignor = str(r.CompactNullableString())
	readMemberTags(r, m)
	if !r.Ok() {
		return nil, errBadCGRecord
	}
	slices.Sort(m.topics)
	return m, nil
}

func readTopicPartitions(r *kbin.Reader) assignment {
	a := assignment{}
	for i, n := 0, arrayLen(r); i < n && r.Ok(); i++ {
		tid := r.Uuid()
		for j, k := 0, arrayLen(r); j < k && r.Ok(); j++ {
			a.add(tid, r.Int32())
		}
		skipTags(r)
	}
	a.sortAll()
	return a
}

func readTarget(value []byte) (assignment, error) {
	r, ok := valueReader(value)
	if !ok {
		return nil, errBadCGRecord
	}
	a := readTopicPartitions(r)
	skipTags(r)
	if !r.Ok() {
		return nil, errBadCGRecord
	}
	return a, nil
}

// currentAssignment is a decoded CurrentMemberAssignment value.
type currentAssignment struct {
	epoch, prevEpoch  int32
	state             memberState
	assigned, pending assignment
}

func readCurrent(value []byte) (*currentAssignment, error) {
	r, ok := valueReader(value)
	if !ok {
		return nil, errBadCGRecord
	}
	c := &currentAssignment{epoch: r.Int32(), prevEpoch: r.Int32(), state: memberState(r.Int8())}
	c.assigned = readTopicPartitions(r)
	c.pending = readTopicPartitions(r)
	skipTags(r)
	if !r.Ok() {
		return nil, errBadCGRecord
	}
	return c, nil
}
