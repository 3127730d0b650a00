package metadata

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
)

// PartitionChangeRecordType is KRaft's PartitionChangeRecord (5).
const PartitionChangeRecordType RecordType = 5

// NoLeaderChange is PartitionChangeRecord.Leader's "unchanged" (Kafka's
// NO_LEADER_CHANGE); -1 is "no leader".
const NoLeaderChange int32 = -2

// PartitionChangeRecord changes one partition, carrying only what changes:
// a nil list is unchanged, Leader == NoLeaderChange is unchanged. Applying
// it bumps the partition epoch always, and the leader epoch when Leader is
// set (even to the same broker: that is how a leader epoch is bumped
// without moving leadership), as KRaft does. The partition that results
// must keep the invariant of PartitionImage, so an unclean election sets
// the leader and ISR = [leader] in one record.
type PartitionChangeRecord struct {
	TopicID   [16]byte
	Partition int32
	Leader    int32
	ISR       []int32
	Replicas  []int32
	// AddingReplicas and RemovingReplicas replace the reassignment state
	// when non-nil; an empty non-nil list clears it.
	AddingReplicas   []int32
	RemovingReplicas []int32
}

func (PartitionChangeRecord) Type() RecordType { return PartitionChangeRecordType }

// Encoding:
//
//	topic id 16B, partition i32, leader i32,
//	isr, replicas, adding, removing: each a nullable []int32
//	                                 (uvarint count+1, 0 = null; count × i32)
func (r PartitionChangeRecord) appendBody(dst []byte) []byte {
	dst = append(dst, r.TopicID[:]...)
	dst = binary.BigEndian.AppendUint32(dst, uint32(r.Partition))
	dst = binary.BigEndian.AppendUint32(dst, uint32(r.Leader))
	for _, l := range [][]int32{r.ISR, r.Replicas, r.AddingReplicas, r.RemovingReplicas} {
		dst = appendNullableInt32s(dst, l)
	}
	return dst
}

func appendNullableInt32s(dst []byte, vs []int32) []byte {
	if vs == nil {
		return binary.AppendUvarint(dst, 0)
	}
	dst = binary.AppendUvarint(dst, uint64(len(vs))+1)
	for _, v := range vs {
		dst = binary.BigEndian.AppendUint32(dst, uint32(v))
	}
	return dst
}

func (d *decoder) partitionChange() PartitionChangeRecord {
	return PartitionChangeRecord{TopicID: d.uuid(), Partition: d.i32(), Leader: d.i32(),
		ISR: d.nullableI32s(), Replicas: d.nullableI32s(), AddingReplicas: d.nullableI32s(), RemovingReplicas: d.nullableI32s()}
}

func (d *decoder) nullableI32s() []int32 {
	n := d.uvarint()
	if n == 0 || d.bad {
		return nil
	}
	n--
	if n > maxListLen || n*4 > uint64(len(d.b)) {
		d.bad = true
		return nil
	}
	out := make([]int32, n)
	for i := range out {
		out[i] = d.i32()
	}
	return out
}

func (b *builder) partitionChange(r PartitionChangeRecord) error {
	t := b.img.topicsByID[r.TopicID]
	if t == nil {
		return invalid("change of partition %d of unknown topic id %x", r.Partition, r.TopicID)
	}
	if r.Partition < 0 || int(r.Partition) >= len(t.Partitions) {
		return invalid("change of partition %d of topic %q, which has %d", r.Partition, t.Name, len(t.Partitions))
	}
	p := t.Partitions[r.Partition]
	if r.Replicas != nil {
		p.Replicas = r.Replicas
	}
	if r.ISR != nil {
		p.ISR = r.ISR
	}
	if r.AddingReplicas != nil {
		p.AddingReplicas = nilIfEmpty(r.AddingReplicas)
	}
	if r.RemovingReplicas != nil {
		p.RemovingReplicas = nilIfEmpty(r.RemovingReplicas)
	}
	if r.Leader != NoLeaderChange {
		if r.Leader < -1 {
			return invalid("partition %s-%d: leader %d", t.Name, r.Partition, r.Leader)
		}
		p.Leader = r.Leader
		p.LeaderEpoch++
	}
	p.PartitionEpoch++
	if p.LeaderEpoch == math.MinInt32 || p.PartitionEpoch == math.MinInt32 {
		return invalid("partition %s-%d: epoch overflow", t.Name, r.Partition)
	}
	if err := p.check(); err != nil {
		return invalid("partition %s-%d: %v", t.Name, r.Partition, err)
	}
	t = b.ownTopic(t)
	t.Partitions[r.Partition] = p
	return nil
}

func nilIfEmpty(vs []int32) []int32 {
	if len(vs) == 0 {
		return nil
	}
	return vs
}

// checkReassignment states the reassignment part of the partition
// invariant.
func (p *PartitionImage) checkReassignment() error {
	if err := distinctNodes(p.AddingReplicas); err != nil {
		return fmt.Errorf("adding replicas: %v", err)
	}
	if err := distinctNodes(p.RemovingReplicas); err != nil {
		return fmt.Errorf("removing replicas: %v", err)
	}
	for _, n := range p.AddingReplicas {
		if !slices.Contains(p.Replicas, n) || slices.Contains(p.RemovingReplicas, n) {
			return fmt.Errorf("adding replica %d is not a replica or is also being removed", n)
		}
	}
	for _, n := range p.RemovingReplicas {
		if !slices.Contains(p.Replicas, n) {
			return fmt.Errorf("removing replica %d is not a replica", n)
		}
	}
	return nil
}
