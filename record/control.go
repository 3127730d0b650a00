package record

import (
	"encoding/binary"
	"errors"
)

// ControlType is the type in a control record's key.
type ControlType int16

// The end-of-transaction markers. (KRaft uses further types for its own
// logs; Sluice's logs never hold them.)
const (
	ControlAbort  ControlType = 0
	ControlCommit ControlType = 1
)

// ErrNotMarker is ParseMarker's answer for a record that is not an
// end-of-transaction marker.
var ErrNotMarker = errors.New("record: not a transaction marker")

// Marker is an end-of-transaction marker: the one record of a control
// batch, written by a transaction coordinator to commit or abort a
// producer's transaction in a partition.
type Marker struct {
	Type             ControlType
	CoordinatorEpoch int32
}

// AppendKey appends the marker's record key: version 0, type.
func (m Marker) AppendKey(dst []byte) []byte {
	dst = binary.BigEndian.AppendUint16(dst, 0)
	return binary.BigEndian.AppendUint16(dst, uint16(m.Type))
}

// AppendValue appends the marker's record value: version 0,
// coordinator epoch.
func (m Marker) AppendValue(dst []byte) []byte {
	dst = binary.BigEndian.AppendUint16(dst, 0)
	return binary.BigEndian.AppendUint32(dst, uint32(m.CoordinatorEpoch))
}

// ParseMarker decodes the record of a control batch. Later key and value
// versions only add fields, so any version >= 0 is read.
func ParseMarker(r *Record) (Marker, error) {
	k, v := r.Key, r.Value
	if len(k) < 4 || len(v) < 6 || int16(binary.BigEndian.Uint16(k)) < 0 || int16(binary.BigEndian.Uint16(v)) < 0 {
		return Marker{}, ErrNotMarker
	}
	m := Marker{Type: ControlType(binary.BigEndian.Uint16(k[2:])), CoordinatorEpoch: int32(binary.BigEndian.Uint32(v[2:]))}
	if m.Type != ControlAbort && m.Type != ControlCommit {
		return Marker{}, ErrNotMarker
	}
	return m, nil
}

// AppendMarkerBatch appends a control batch holding m, as Kafka writes one:
// transactional and control bits set, uncompressed, one record at offset
// delta 0 with timestamp h.FirstTimestamp. h gives the base offset, leader
// epoch, producer id and epoch; its base sequence is written as -1.
func AppendMarkerBatch(dst []byte, h Header, m Marker) []byte {
	var kv [10]byte
	key := m.AppendKey(kv[:0])
	value := m.AppendValue(kv[len(key):len(key)])
	h.Attributes = AttrTransactional | AttrControl
	h.BaseSequence, h.NumRecords, h.LastOffsetDelta, h.MaxTimestamp = -1, 1, 0, h.FirstTimestamp
	var raw [32]byte
	r := Record{Key: key, Value: value}
	dst, _ = AppendBatch(dst, &h, AppendRecord(raw[:0], &r)) // uncompressed: no error
	return dst
}
