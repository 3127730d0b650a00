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
// Wire formats, as Kafka clients write them:
//   - gzip: a gzip stream (RFC 1952).
//   - snappy: the Java client writes xerial framing (a magic header, then
//     length-prefixed snappy blocks); librdkafka and franz-go write one raw
//     snappy block. Both are read; xerial framing is written, which every
//     client reads.
//   - lz4: the LZ4 frame format with independent blocks.
//   - zstd: a zstd frame.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/sluice-broker/sluice/storage"
)

// Codec ids as stored in bits 0-2 of a batch's attributes.
const (
	codecNone   int8 = 0
	codecGzip   int8 = 1
	codecSnappy int8 = 2
	codecLZ4    int8 = 3
	codecZstd   int8 = 4
	// codecProducer means "store what the producer sent".
	codecProducer int8 = -1
)

// decompressLimit bounds what one batch may inflate to, so that a small
// hostile batch cannot make the broker allocate gigabytes. Producers cap
// uncompressed batches far below it (batch.size defaults to 16 KiB). A
// variable only so tests can lower it.
var decompressLimit = 128 << 20

var (
	errDecompressedTooLarge = errors.New("decompressed batch exceeds 128 MiB")
	errBadCodec             = errors.New("unknown compression codec")
	errMalformedSnappy      = errors.New("malformed snappy data")
)

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
	switch codec {
	case codecNone:
		if len(src) > decompressLimit {
			return dst, errDecompressedTooLarge
		}
		return append(dst, src...), nil
	case codecGzip:
		return gunzip(dst, src)
	case codecSnappy:
		return unsnappy(dst, src)
	case codecLZ4:
		return unlz4(dst, src)
	case codecZstd:
		return unzstd(dst, src)
	}
	return dst, errBadCodec
}

// compress appends src compressed with codec to dst.
func compress(dst []byte, codec int8, src []byte) ([]byte, error) {
	switch codec {
	case codecNone:
		return append(dst, src...), nil
	case codecGzip:
		return gzipTo(dst, src)
	case codecSnappy:
		return xerialSnappy(dst, src), nil
	case codecLZ4:
		return lz4To(dst, src)
	case codecZstd:
		return zstdEncoder().EncodeAll(src, dst), nil
	}
	return dst, errBadCodec
}

// appendWriter is an io.Writer that appends to a slice, so the streaming
// encoders write straight into the batch being built.
type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// readCapped appends everything r yields to dst, failing once the total
// passes decompressLimit.
func readCapped(dst []byte, r io.Reader) ([]byte, error) {
	start := len(dst)
	for {
		if len(dst) == cap(dst) {
			dst = append(dst, 0)[:len(dst)]
		}
		n, err := r.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+n]
		if len(dst)-start > decompressLimit {
			return dst[:start], errDecompressedTooLarge
		}
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return dst[:start], err
		}
	}
}

var gzipReaders, gzipWriters, lz4Readers, lz4Writers sync.Pool

func gunzip(dst, src []byte) ([]byte, error) {
	zr, _ := gzipReaders.Get().(*gzip.Reader)
	var err error
	if zr == nil {
		zr, err = gzip.NewReader(bytes.NewReader(src))
	} else {
		err = zr.Reset(bytes.NewReader(src))
	}
	if err != nil {
		return dst, err
	}
	defer gzipReaders.Put(zr)
	return readCapped(dst, zr)
}

func gzipTo(dst, src []byte) ([]byte, error) {
	w := &appendWriter{b: dst}
	zw, _ := gzipWriters.Get().(*gzip.Writer)
	if zw == nil {
		zw = gzip.NewWriter(w)
	} else {
		zw.Reset(w)
	}
	defer gzipWriters.Put(zw)
	if _, err := zw.Write(src); err != nil {
		return dst, err
	}
	if err := zw.Close(); err != nil {
		return dst, err
	}
	return w.b, nil
}

func unlz4(dst, src []byte) ([]byte, error) {
	zr, _ := lz4Readers.Get().(*lz4.Reader)
	if zr == nil {
		zr = lz4.NewReader(bytes.NewReader(src))
	} else {
		zr.Reset(bytes.NewReader(src))
	}
	defer lz4Readers.Put(zr)
	return readCapped(dst, zr)
}

// lz4To writes an LZ4 frame with 64 KiB independent blocks, the layout
// Kafka's Java client writes and every client reads.
func lz4To(dst, src []byte) ([]byte, error) {
	w := &appendWriter{b: dst}
	zw, _ := lz4Writers.Get().(*lz4.Writer)
	if zw == nil {
		zw = lz4.NewWriter(w)
		if err := zw.Apply(lz4.BlockSizeOption(lz4.Block64Kb)); err != nil {
			return dst, err
		}
	} else {
		zw.Reset(w)
	}
	defer lz4Writers.Put(zw)
	if _, err := zw.Write(src); err != nil {
		return dst, err
	}
	if err := zw.Close(); err != nil {
		return dst, err
	}
	return w.b, nil
}

// The zstd coder objects are safe for concurrent EncodeAll/DecodeAll and
// costly to build, so one of each serves the broker.
var (
	zstdOnce sync.Once
	zstdEnc  *zstd.Encoder
	zstdDec  *zstd.Decoder
)

func initZstd() {
	var err error
	if zstdEnc, err = zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1)); err != nil {
		panic(err) // only bad options fail here
	}
	if zstdDec, err = zstd.NewReader(nil, zstd.WithDecoderMaxMemory(uint64(decompressLimit)), zstd.WithDecoderConcurrency(0)); err != nil {
		panic(err)
	}
}

func zstdEncoder() *zstd.Encoder { zstdOnce.Do(initZstd); return zstdEnc }

func unzstd(dst, src []byte) ([]byte, error) {
	zstdOnce.Do(initZstd)
	out, err := zstdDec.DecodeAll(src, dst)
	if errors.Is(err, zstd.ErrDecoderSizeExceeded) || errors.Is(err, zstd.ErrWindowSizeExceeded) {
		return dst, errDecompressedTooLarge
	}
	if err != nil {
		return dst, err
	}
	if len(out)-len(dst) > decompressLimit {
		return dst, errDecompressedTooLarge
	}
	return out, nil
}

// xerial framing: an 8-byte magic, 8 bytes of version info, then blocks of
// [4-byte big-endian length][raw snappy block].
var (
	xerialMagic   = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}
	xerialVersion = []byte{0, 0, 0, 1, 0, 0, 0, 1}
)

const xerialBlock = 32 << 10 // uncompressed bytes per block, as the Java client

// unsnappy decodes one raw snappy block or an xerial-framed stream.
func unsnappy(dst, src []byte) ([]byte, error) {
	if !bytes.HasPrefix(src, xerialMagic) {
		return snappyBlock(dst, src, len(dst))
	}
	if len(src) < len(xerialMagic)+len(xerialVersion) {
		return dst, errMalformedSnappy
	}
	start := len(dst)
	for rest := src[len(xerialMagic)+len(xerialVersion):]; len(rest) > 0; {
		if len(rest) < 4 {
			return dst[:start], errMalformedSnappy
		}
		n := binary.BigEndian.Uint32(rest)
		if uint64(n) > uint64(len(rest)-4) {
			return dst[:start], errMalformedSnappy
		}
		var err error
		if dst, err = snappyBlock(dst, rest[4:4+n], start); err != nil {
			return dst[:start], err
		}
		rest = rest[4+n:]
	}
	return dst, nil
}

// snappyBlock appends one decoded raw snappy block; start is where this
// batch's output began in dst, for the size cap.
func snappyBlock(dst, block []byte, start int) ([]byte, error) {
	n, err := s2.DecodedLen(block)
	if err != nil {
		return dst, errMalformedSnappy
	}
	if len(dst)-start+n > decompressLimit {
		return dst, errDecompressedTooLarge
	}
	at := len(dst)
	dst = grow(dst, n)
	if _, err := s2.Decode(dst[at:at+n], block); err != nil {
		return dst[:at], errMalformedSnappy
	}
	return dst, nil
}

// xerialSnappy appends src as an xerial-framed snappy stream.
func xerialSnappy(dst, src []byte) []byte {
	dst = append(dst, xerialMagic...)
	dst = append(dst, xerialVersion...)
	for len(src) > 0 {
		chunk := src[:min(len(src), xerialBlock)]
		src = src[len(chunk):]
		at := len(dst)
		dst = grow(dst, 4+s2.MaxEncodedLen(len(chunk)))
		enc := s2.EncodeSnappy(dst[at+4:], chunk)
		binary.BigEndian.PutUint32(dst[at:], uint32(len(enc)))
		dst = dst[:at+4+len(enc)]
	}
	return dst
}

// grow extends dst by n bytes (contents of the new bytes unspecified).
func grow(dst []byte, n int) []byte {
	if cap(dst)-len(dst) >= n {
		return dst[:len(dst)+n]
	}
	return append(dst, make([]byte, n)...)
}
