package engine

// Record-batch compression: the codecs Kafka batches use, and the rewrite a
// produce needs when a topic's compression.type names a codec other than the
// one the producer used.
//
// Batches are stored as sent ("producer") unless the topic forces a codec;
// then the records section is decompressed and compressed again, and the
// batch gets a new length, codec bits and CRC-32C. Everything else in the
// header (producer id, sequence, timestamps) is kept, as Kafka keeps it.
//
// The codecs themselves (gzip, snappy with xerial framing, lz4 frames,
// zstd) live in storage, whose cleaner filters compressed batches too.

import (
	"encoding/binary"
	"hash/crc32"

	"github.com/sluice-broker/sluice/storage"
)

// Codec ids as stored in bits 0-2 of a batch's attributes.
const (
	codecNone   = storage.CodecNone
	codecGzip   = storage.CodecGzip
	codecSnappy = storage.CodecSnappy
	codecLZ4    = storage.CodecLZ4
	codecZstd   = storage.CodecZstd
	// codecProducer means "store what the producer sent".
	codecProducer int8 = -1
)

// decompressLimit bounds what one batch may inflate to, so that a small
// hostile batch cannot make the broker allocate gigabytes. Producers cap
// uncompressed batches far below it (batch.size defaults to 16 KiB). A
// variable only so tests can lower it.
var decompressLimit = storage.DefaultDecompressLimit

var errDecompressedTooLarge = storage.ErrDecompressedTooLarge

// Byte positions in a RecordBatch v2 header that a rewrite touches.
const (
	batchPosLength     = 8
	batchPosCRC        = 17
	batchPosAttributes = 21
	batchLogOverhead   = 12 // baseOffset + length, not counted by length
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// topicCodec maps a compression.type value to the codec batches are stored
// with, or codecProducer.
func topicCodec(compressionType string) int8 {
	switch compressionType {
	case "uncompressed":
		return codecNone
	case "gzip":
		return codecGzip
	case "snappy":
		return codecSnappy
	case "lz4":
		return codecLZ4
	case "zstd":
		return codecZstd
	}
	return codecProducer
}

// rebuildBatch appends to dst a batch made of header (the 61 header bytes
// of the original batch) and raw (its records, uncompressed) encoded with
// codec, fixing the length, the codec bits and the CRC-32C.
func rebuildBatch(dst, header, raw []byte, codec int8) ([]byte, error) {
	start := len(dst)
	dst = append(dst, header[:storage.BatchHeaderLen]...)
	dst, err := compress(dst, codec, raw)
	if err != nil {
		return dst[:start], err
	}
	b := dst[start:]
	attrs := binary.BigEndian.Uint16(b[batchPosAttributes:])
	binary.BigEndian.PutUint16(b[batchPosAttributes:], attrs&^7|uint16(codec))
	binary.BigEndian.PutUint32(b[batchPosLength:], uint32(len(b)-batchLogOverhead))
	binary.BigEndian.PutUint32(b[batchPosCRC:], crc32.Checksum(b[batchPosAttributes:], castagnoli))
	return dst, nil
}

// decompress appends the decompressed form of src to dst.
func decompress(dst []byte, codec int8, src []byte) ([]byte, error) {
	return storage.Decompress(dst, codec, src, decompressLimit)
}

// compress appends src compressed with codec to dst.
func compress(dst []byte, codec int8, src []byte) ([]byte, error) {
	return storage.Compress(dst, codec, src)
}

// grow extends dst by n bytes (contents of the new bytes unspecified).
func grow(dst []byte, n int) []byte {
	if cap(dst)-len(dst) >= n {
		return dst[:len(dst)+n]
	}
	return append(dst, make([]byte, n)...)
}
