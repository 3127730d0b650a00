package record

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
)

// HeaderLen is the size of a RecordBatch v2 header, up to and including the
// record count: the records section starts there.
const HeaderLen = 61

// LogOverhead is the part of a batch its length field does not count
// (baseOffset and length): a batch is Length+LogOverhead bytes.
const LogOverhead = 12

// Magic is the only batch format version this package reads and writes.
const Magic = 2

// Byte positions of the v2 header fields (see the package doc). A field
// runs from its position to the next one's.
const (
	PosBaseOffset      = 0  // int64
	PosLength          = 8  // int32
	PosLeaderEpoch     = 12 // int32
	PosMagic           = 16 // int8
	PosCRC             = 17 // uint32, CRC-32C of [PosAttributes, end of batch)
	PosAttributes      = 21 // int16
	PosLastOffsetDelta = 23 // int32
	PosFirstTimestamp  = 27 // int64
	PosMaxTimestamp    = 35 // int64
	PosProducerID      = 43 // int64
	PosProducerEpoch   = 51 // int16
	PosBaseSequence    = 53 // int32
	PosNumRecords      = 57 // int32
)

// Attribute bits of a v2 batch.
const (
	AttrCompressionMask = 0x07 // the Codec
	AttrLogAppendTime   = 0x08 // timestamps are the broker's, not the producer's
	AttrTransactional   = 0x10
	AttrControl         = 0x20 // the batch holds a transaction marker
	// AttrDeleteHorizon says firstTimestamp holds the time after which the
	// cleaner removes the batch's tombstones (KIP-534); records' timestamp
	// deltas are then relative to it.
	AttrDeleteHorizon = 0x40
)

// ErrShortHeader is ParseHeader's answer for fewer than HeaderLen bytes.
var ErrShortHeader = errors.New("record: batch header truncated")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Header is the decoded header of one RecordBatch v2.
type Header struct {
	BaseOffset           int64
	Length               int32 // bytes after the length field
	PartitionLeaderEpoch int32
	Magic                int8
	CRC                  uint32
	Attributes           int16
	LastOffsetDelta      int32
	FirstTimestamp       int64
	MaxTimestamp         int64
	ProducerID           int64 // -1: none
	ProducerEpoch        int16
	BaseSequence         int32
	NumRecords           int32
}

// ParseHeader decodes the first HeaderLen bytes of b. It checks only that
// the header is present, not the CRC or any field's value.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderLen {
		return Header{}, ErrShortHeader
	}
	be := binary.BigEndian
	return Header{
		BaseOffset:           int64(be.Uint64(b[PosBaseOffset:])),
		Length:               int32(be.Uint32(b[PosLength:])),
		PartitionLeaderEpoch: int32(be.Uint32(b[PosLeaderEpoch:])),
		Magic:                int8(b[PosMagic]),
		CRC:                  be.Uint32(b[PosCRC:]),
		Attributes:           int16(be.Uint16(b[PosAttributes:])),
		LastOffsetDelta:      int32(be.Uint32(b[PosLastOffsetDelta:])),
		FirstTimestamp:       int64(be.Uint64(b[PosFirstTimestamp:])),
		MaxTimestamp:         int64(be.Uint64(b[PosMaxTimestamp:])),
		ProducerID:           int64(be.Uint64(b[PosProducerID:])),
		ProducerEpoch:        int16(be.Uint16(b[PosProducerEpoch:])),
		BaseSequence:         int32(be.Uint32(b[PosBaseSequence:])),
		NumRecords:           int32(be.Uint32(b[PosNumRecords:])),
	}, nil
}

// AppendTo appends the header's HeaderLen bytes to dst, every field as it
// is in h (Length and CRC included).
func (h Header) AppendTo(dst []byte) []byte {
	be := binary.BigEndian
	dst = be.AppendUint64(dst, uint64(h.BaseOffset))
	dst = be.AppendUint32(dst, uint32(h.Length))
	dst = be.AppendUint32(dst, uint32(h.PartitionLeaderEpoch))
	dst = append(dst, byte(h.Magic))
	dst = be.AppendUint32(dst, h.CRC)
	dst = be.AppendUint16(dst, uint16(h.Attributes))
	dst = be.AppendUint32(dst, uint32(h.LastOffsetDelta))
	dst = be.AppendUint64(dst, uint64(h.FirstTimestamp))
	dst = be.AppendUint64(dst, uint64(h.MaxTimestamp))
	dst = be.AppendUint64(dst, uint64(h.ProducerID))
	dst = be.AppendUint16(dst, uint16(h.ProducerEpoch))
	dst = be.AppendUint32(dst, uint32(h.BaseSequence))
	return be.AppendUint32(dst, uint32(h.NumRecords))
}

// Compression is the codec of the records section.
func (h Header) Compression() Codec { return Codec(h.Attributes & AttrCompressionMask) }

// Size is the whole batch's size in bytes, header included.
func (h Header) Size() int64 { return int64(h.Length) + LogOverhead }

// LastOffset is the offset of the batch's last record.
func (h Header) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// NextOffset is the offset after the batch's last record.
func (h Header) NextOffset() int64 { return h.LastOffset() + 1 }

// IsTransactional reports the transactional attribute bit.
func (h Header) IsTransactional() bool { return h.Attributes&AttrTransactional != 0 }

// IsControl reports the control attribute bit (transaction markers).
func (h Header) IsControl() bool { return h.Attributes&AttrControl != 0 }

// IsLogAppendTime reports whether the timestamps are the broker's.
func (h Header) IsLogAppendTime() bool { return h.Attributes&AttrLogAppendTime != 0 }

// HasDeleteHorizon reports the KIP-534 delete-horizon attribute bit.
func (h Header) HasDeleteHorizon() bool { return h.Attributes&AttrDeleteHorizon != 0 }

// HasProducerID reports whether the batch comes from an idempotent producer.
func (h Header) HasProducerID() bool { return h.ProducerID >= 0 }

// LastSequence is the sequence number of the batch's last record; sequences
// wrap from MaxInt32 to 0.
func (h Header) LastSequence() int32 { return AddSequence(h.BaseSequence, h.LastOffsetDelta) }

// AddSequence adds delta to a producer sequence number, wrapping from
// MaxInt32 to 0 as Kafka's sequences do.
func AddSequence(seq, delta int32) int32 {
	if seq > math.MaxInt32-delta {
		return delta - (math.MaxInt32 - seq) - 1
	}
	return seq + delta
}

// Checksum is the CRC-32C a batch's CRC field must hold: that of
// batch[PosAttributes:]. batch is exactly one batch and at least HeaderLen
// bytes.
func Checksum(batch []byte) uint32 { return crc32.Checksum(batch[PosAttributes:], castagnoli) }

// SetCRC stores Checksum(batch) in the batch's CRC field.
func SetCRC(batch []byte) { binary.BigEndian.PutUint32(batch[PosCRC:], Checksum(batch)) }

// SetBaseOffset and SetLeaderEpoch rewrite the two fields that lie outside
// the CRC, so the batch stays valid without recomputing it.
func SetBaseOffset(b []byte, off int64) { binary.BigEndian.PutUint64(b[PosBaseOffset:], uint64(off)) }

// SetLeaderEpoch: see SetBaseOffset.
func SetLeaderEpoch(b []byte, epoch int32) {
	binary.BigEndian.PutUint32(b[PosLeaderEpoch:], uint32(epoch))
}

// SetLogAppendTime stamps a batch as Kafka does for LogAppendTime topics:
// the timestamp-type attribute bit and maxTimestamp are set, and since both
// are covered by the CRC, the CRC is recomputed. batch is exactly one batch.
func SetLogAppendTime(batch []byte, nowMs int64) {
	be := binary.BigEndian
	be.PutUint16(batch[PosAttributes:], be.Uint16(batch[PosAttributes:])|AttrLogAppendTime)
	be.PutUint64(batch[PosMaxTimestamp:], uint64(nowMs))
	SetCRC(batch)
}

// Size reads the size of the batch at the start of b from its length
// field, or returns 0 if fewer than LogOverhead bytes are present.
func Size(b []byte) int64 {
	if len(b) < LogOverhead {
		return 0
	}
	return int64(int32(binary.BigEndian.Uint32(b[PosLength:]))) + LogOverhead
}

// Single-field readers for hot paths that need one field, not a whole
// Header. b holds at least HeaderLen bytes.

// BaseOffset reads the baseOffset field.
func BaseOffset(b []byte) int64 { return int64(binary.BigEndian.Uint64(b[PosBaseOffset:])) }

// Attributes reads the attributes field.
func Attributes(b []byte) int16 { return int16(binary.BigEndian.Uint16(b[PosAttributes:])) }

// LastOffsetDelta reads the lastOffsetDelta field.
func LastOffsetDelta(b []byte) int32 { return int32(binary.BigEndian.Uint32(b[PosLastOffsetDelta:])) }

// LastOffset reads baseOffset + lastOffsetDelta: the batch's last offset.
func LastOffset(b []byte) int64 { return BaseOffset(b) + int64(LastOffsetDelta(b)) }

// MaxTimestamp reads the maxTimestamp field.
func MaxTimestamp(b []byte) int64 { return int64(binary.BigEndian.Uint64(b[PosMaxTimestamp:])) }

// NumRecords reads the record count field.
func NumRecords(b []byte) int32 { return int32(binary.BigEndian.Uint32(b[PosNumRecords:])) }
