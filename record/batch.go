package record

import (
	"encoding/binary"
	"errors"
)

// ErrBadLength is the answer for a batch whose length field does not fit
// the bytes given or is shorter than a header.
var ErrBadLength = errors.New("record: batch length out of bounds")

// NewHeader is the header of a batch from no idempotent producer, as the
// broker writes its own batches: leader epoch, producer id and epoch and
// base sequence -1, magic 2, everything else zero.
func NewHeader() Header {
	return Header{Magic: Magic, PartitionLeaderEpoch: -1, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
}

// Records returns the uncompressed records section of batch, which holds
// one whole batch whose header is h: a subslice of batch when it is
// uncompressed, otherwise the records decompressed into scratch[:0] (keep
// the result as the next call's scratch to reuse its memory). At most
// limit bytes are decompressed.
func Records(scratch, batch []byte, h Header, limit int) ([]byte, error) {
	end := h.Size()
	if end > int64(len(batch)) || end < HeaderLen {
		return nil, ErrBadLength
	}
	body := batch[HeaderLen:end]
	if h.Compression() == None {
		return body, nil
	}
	return h.Compression().Decompress(scratch[:0], body, limit)
}

// AppendBatch appends a batch made of h and the uncompressed records
// section raw, compressed with h.Compression(). Every header field is
// written as it is in h but Magic, Length and CRC, which it sets, in the
// batch and in h: h is then the header of the batch written.
func AppendBatch(dst []byte, h *Header, raw []byte) ([]byte, error) {
	start := len(dst)
	h.Magic = Magic
	dst = h.AppendTo(dst)
	dst, err := h.Compression().Compress(dst, raw)
	if err != nil {
		return dst[:start], err
	}
	b := dst[start:]
	h.Length = int32(len(b) - LogOverhead)
	binary.BigEndian.PutUint32(b[PosLength:], uint32(h.Length))
	SetCRC(b)
	h.CRC = binary.BigEndian.Uint32(b[PosCRC:])
	return dst, nil
}

// Rebuild appends a batch with header h and the uncompressed records
// section raw, encoded with codec: the codec bits, length and CRC change
// (in h too, as AppendBatch), every other header field (producer id,
// sequence, timestamps, counts) is kept, as Kafka keeps it when a topic's
// compression.type recompresses a batch.
func Rebuild(dst []byte, h *Header, raw []byte, codec Codec) ([]byte, error) {
	h.Attributes = h.Attributes&^AttrCompressionMask | int16(codec)
	return AppendBatch(dst, h, raw)
}

// Builder writes a batch record by record. It computes the record count,
// lastOffsetDelta and maxTimestamp; the caller gives the other header
// fields to Reset. The zero Builder is ready for Reset; reusing one reuses
// its memory.
type Builder struct {
	h   Header
	raw []byte // the records section so far, uncompressed
}

// Reset starts a batch whose header is h (codec included);
// FirstTimestamp is the base of the records' timestamp deltas.
func (b *Builder) Reset(h Header) {
	h.NumRecords, h.LastOffsetDelta, h.MaxTimestamp = 0, -1, h.FirstTimestamp
	b.h, b.raw = h, b.raw[:0]
}

// Add appends a record. Records are added in offset order: r.OffsetDelta
// grows from one record to the next.
func (b *Builder) Add(r *Record) {
	b.raw = AppendRecord(b.raw, r)
	b.h.NumRecords++
	b.h.LastOffsetDelta = r.OffsetDelta
	b.h.MaxTimestamp = max(b.h.MaxTimestamp, b.h.FirstTimestamp+r.TimestampDelta)
}

// NumRecords is how many records were added since Reset.
func (b *Builder) NumRecords() int { return int(b.h.NumRecords) }

// AppendTo appends the batch to dst.
func (b *Builder) AppendTo(dst []byte) ([]byte, error) {
	h := b.h
	return AppendBatch(dst, &h, b.raw)
}
