package storage

import (
	"encoding/binary"
	"hash/crc32"
	"math"
)

// BatchHeaderLen is the size of a RecordBatch v2 header, up to and including
// the record count.
const BatchHeaderLen = 61

// Byte positions of the RecordBatch v2 header fields (see the package doc).
const (
	posBaseOffset      = 0
	posLength          = 8
	posLeaderEpoch     = 12
	posMagic           = 16
	posCRC             = 17
	posAttributes      = 21
	posLastOffsetDelta = 23
	posFirstTimestamp  = 27
	posMaxTimestamp    = 35
	posProducerID      = 43
	posProducerEpoch   = 51
	posBaseSequence    = 53
	posNumRecords      = 57

	// logOverhead is the part of a batch its length field does not count.
	logOverhead = 12
)

// Attribute bits of a v2 batch.
const (
	attrCompressionMask = 0x07
	attrLogAppendTime   = 0x08
	attrTransactional   = 0x10
	attrControl         = 0x20
	// attrDeleteHorizon says firstTimestamp holds the time after which the
	// cleaner removes the batch's tombstones (KIP-534); records' timestamp
	// deltas are then relative to it.
	attrDeleteHorizon = 0x40
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// BatchHeader is the decoded header of one RecordBatch v2.
type BatchHeader struct {
	BaseOffset           int64
	Length               int32 // bytes after the length field
	PartitionLeaderEpoch int32
	Magic                int8
	CRC                  uint32
	Attributes           int16
	LastOffsetDelta      int32
	FirstTimestamp       int64
	MaxTimestamp         int64
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
	NumRecords           int32
}

// ParseBatchHeader decodes the first BatchHeaderLen bytes of b. It checks
// only that the header is present, not the CRC or any field's value.
func ParseBatchHeader(b []byte) (BatchHeader, error) {
	if len(b) < BatchHeaderLen {
		return BatchHeader{}, errBatchTruncated
	}
	be := binary.BigEndian
	return BatchHeader{
		BaseOffset:           int64(be.Uint64(b[posBaseOffset:])),
		Length:               int32(be.Uint32(b[posLength:])),
		PartitionLeaderEpoch: int32(be.Uint32(b[posLeaderEpoch:])),
		Magic:                int8(b[posMagic]),
		CRC:                  be.Uint32(b[posCRC:]),
		Attributes:           int16(be.Uint16(b[posAttributes:])),
		LastOffsetDelta:      int32(be.Uint32(b[posLastOffsetDelta:])),
		FirstTimestamp:       int64(be.Uint64(b[posFirstTimestamp:])),
		MaxTimestamp:         int64(be.Uint64(b[posMaxTimestamp:])),
		ProducerID:           int64(be.Uint64(b[posProducerID:])),
		ProducerEpoch:        int16(be.Uint16(b[posProducerEpoch:])),
		BaseSequence:         int32(be.Uint32(b[posBaseSequence:])),
		NumRecords:           int32(be.Uint32(b[posNumRecords:])),
	}, nil
}

// Compression is the codec id: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd.
func (h BatchHeader) Compression() int8 { return int8(h.Attributes & attrCompressionMask) }

// Size is the whole batch's size in bytes, header included.
func (h BatchHeader) Size() int64 { return int64(h.Length) + logOverhead }

// LastOffset is the offset of the batch's last record.
func (h BatchHeader) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// IsTransactional reports the transactional attribute bit.
func (h BatchHeader) IsTransactional() bool { return h.Attributes&attrTransactional != 0 }

// IsControl reports the control attribute bit (transaction markers).
func (h BatchHeader) IsControl() bool { return h.Attributes&attrControl != 0 }

// HasProducerID reports whether the batch comes from an idempotent producer.
func (h BatchHeader) HasProducerID() bool { return h.ProducerID >= 0 }

// LastSequence is the sequence number of the batch's last record; sequences
// wrap from MaxInt32 to 0.
func (h BatchHeader) LastSequence() int32 {
	return addSequence(h.BaseSequence, h.LastOffsetDelta)
}

func addSequence(seq, delta int32) int32 {
	if seq > math.MaxInt32-delta {
		return delta - (math.MaxInt32 - seq) - 1
	}
	return seq + delta
}

// batchSize reads the size of the batch at the start of b from its length
// field, or returns 0 if fewer than logOverhead bytes are present.
func batchSize(b []byte) int64 {
	if len(b) < logOverhead {
		return 0
	}
	return int64(int32(binary.BigEndian.Uint32(b[posLength:]))) + logOverhead
}

// checkBatch validates the batch at the start of b as it is validated on
// append and at recovery: length bounds, magic, CRC-32C, and a lastOffsetDelta
// that agrees with the record count. It returns the batch size. maxSize <= 0
// means no size limit. The checks that need no CRC run first, so garbage is
// rejected cheaply.
func checkBatch(b []byte, maxSize int64) (int64, error) {
	return checkBatchAs(b, maxSize, false)
}

// checkBatchAs is checkBatch; cleaned admits batches the cleaner wrote,
// which keep their original offset span (lastOffsetDelta) with fewer
// records, down to none (the last batch of a producer is kept empty).
func checkBatchAs(b []byte, maxSize int64, cleaned bool) (int64, error) {
	if len(b) < BatchHeaderLen {
		return 0, errBatchTruncated
	}
	size := batchSize(b)
	switch {
	case size < BatchHeaderLen:
		return 0, errBatchTooShort
	case b[posMagic] != 2:
		return 0, errBadMagic
	case maxSize > 0 && size > maxSize:
		return 0, ErrMessageTooLarge
	case size > int64(len(b)):
		return 0, errBatchTruncated
	}
	if err := checkCounts(b, cleaned); err != nil {
		return 0, err
	}
	if crc32.Checksum(b[posAttributes:size], castagnoli) != binary.BigEndian.Uint32(b[posCRC:]) {
		return 0, errBadCRC
	}
	return size, nil
}

// checkCounts checks the record count against lastOffsetDelta and the
// attribute bits that the log layer cares about.
func checkCounts(b []byte, cleaned bool) error {
	be := binary.BigEndian
	n := int32(be.Uint32(b[posNumRecords:]))
	delta := int32(be.Uint32(b[posLastOffsetDelta:]))
	attrs := be.Uint16(b[posAttributes:])
	pid := int64(be.Uint64(b[posProducerID:]))
	switch {
	case cleaned && (n < 0 || delta < 0 || n > delta+1):
		return errBadLastOffsetDelta
	case !cleaned && n <= 0:
		return errNoRecords
	case !cleaned && delta != n-1:
		return errBadLastOffsetDelta
	case attrs&attrCompressionMask > 4:
		return errBadCompression
	case pid >= 0 && int32(be.Uint32(b[posBaseSequence:])) < 0 && attrs&attrControl == 0:
		return errBadBaseSequence
	case pid < 0 && attrs&attrTransactional != 0:
		return errTxnWithoutPID
	}
	return nil
}

// setBaseOffset and setLeaderEpoch rewrite the two fields that lie outside
// the CRC, so the batch stays valid without recomputing it.
func setBaseOffset(b []byte, off int64) { binary.BigEndian.PutUint64(b[posBaseOffset:], uint64(off)) }
func setLeaderEpoch(b []byte, epoch int32) {
	binary.BigEndian.PutUint32(b[posLeaderEpoch:], uint32(epoch))
}

// setLogAppendTime stamps a batch as Kafka does for LogAppendTime topics: the
// timestamp-type attribute bit and maxTimestamp are set, and since both are
// covered by the CRC, the CRC is recomputed. size is the batch size.
func setLogAppendTime(b []byte, size int64, now int64) {
	be := binary.BigEndian
	attrs := be.Uint16(b[posAttributes:]) | attrLogAppendTime
	be.PutUint16(b[posAttributes:], attrs)
	be.PutUint64(b[posMaxTimestamp:], uint64(now))
	be.PutUint32(b[posCRC:], crc32.Checksum(b[posAttributes:size], castagnoli))
}

// Small accessors used on hot paths to avoid decoding a whole header.
func batchBaseOffset(b []byte) int64 { return int64(binary.BigEndian.Uint64(b[posBaseOffset:])) }
func batchLastOffsetDelta(b []byte) int64 {
	return int64(int32(binary.BigEndian.Uint32(b[posLastOffsetDelta:])))
}
func batchMaxTimestamp(b []byte) int64 { return int64(binary.BigEndian.Uint64(b[posMaxTimestamp:])) }
func batchNumRecords(b []byte) int64   { return int64(int32(binary.BigEndian.Uint32(b[posNumRecords:]))) }
