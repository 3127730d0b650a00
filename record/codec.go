package record

// Record-batch codecs: what the cleaner needs to filter compressed batches,
// what the engine uses when a topic's compression.type forces a codec, and
// what reading records inside a compressed batch takes.
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
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Codec is a compression codec id, as stored in bits 0-2 of a batch's
// attributes.
type Codec int8

// The codecs of Kafka's batches.
const (
	None   Codec = 0
	Gzip   Codec = 1
	Snappy Codec = 2
	LZ4    Codec = 3
	Zstd   Codec = 4
)

// Valid reports whether c is one of the codecs above; attributes may carry
// values 5-7, which no client writes.
func (c Codec) Valid() bool { return c >= None && c <= Zstd }

// String is the codec's compression.type name.
func (c Codec) String() string {
	switch c {
	case None:
		return "none"
	case Gzip:
		return "gzip"
	case Snappy:
		return "snappy"
	case LZ4:
		return "lz4"
	case Zstd:
		return "zstd"
	}
	return "unknown"
}

// DefaultDecompressLimit bounds what one batch may inflate to, so that a
// small hostile batch cannot make the broker allocate gigabytes. Producers
// cap uncompressed batches far below it (batch.size defaults to 16 KiB).
const DefaultDecompressLimit = 128 << 20

var (
	// ErrDecompressedTooLarge is Decompress's answer for a batch that
	// inflates beyond the limit it was given.
	ErrDecompressedTooLarge = errors.New("record: decompressed batch exceeds the size limit")
	// ErrUnknownCodec is the answer for codec ids 5-7.
	ErrUnknownCodec    = errors.New("record: unknown compression codec")
	errMalformedSnappy = errors.New("record: malformed snappy data")
)

// Decompress appends the decompressed form of src (a batch's records
// section compressed with c) to dst, failing with ErrDecompressedTooLarge
// once more than limit bytes come out.
func (c Codec) Decompress(dst, src []byte, limit int) ([]byte, error) {
	switch c {
	case None:
		if len(src) > limit {
			return dst, ErrDecompressedTooLarge
		}
		return append(dst, src...), nil
	case Gzip:
		return gunzip(dst, src, limit)
	case Snappy:
		return unsnappy(dst, src, limit)
	case LZ4:
		return unlz4(dst, src, limit)
	case Zstd:
		return unzstd(dst, src, limit)
	}
	return dst, ErrUnknownCodec
}

// Compress appends src compressed with c to dst.
func (c Codec) Compress(dst, src []byte) ([]byte, error) {
	switch c {
	case None:
		return append(dst, src...), nil
	case Gzip:
		return gzipTo(dst, src)
	case Snappy:
		return xerialSnappy(dst, src), nil
	case LZ4:
		return lz4To(dst, src)
	case Zstd:
		return zstdEncoder().EncodeAll(src, dst), nil
	}
	return dst, ErrUnknownCodec
}

// appendWriter is an io.Writer that appends to a slice, so the streaming
// encoders write straight into the batch being built.
type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// readCapped appends everything r yields to dst, failing once the total
// passes limit.
func readCapped(dst []byte, r io.Reader, limit int) ([]byte, error) {
	start := len(dst)
	for {
		if len(dst) == cap(dst) {
			dst = append(dst, 0)[:len(dst)]
		}
		n, err := r.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+n]
		if len(dst)-start > limit {
			return dst[:start], ErrDecompressedTooLarge
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

func gunzip(dst, src []byte, limit int) ([]byte, error) {
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
	return readCapped(dst, zr, limit)
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

func unlz4(dst, src []byte, limit int) ([]byte, error) {
	zr, _ := lz4Readers.Get().(*lz4.Reader)
	if zr == nil {
		zr = lz4.NewReader(bytes.NewReader(src))
	} else {
		zr.Reset(bytes.NewReader(src))
	}
	defer lz4Readers.Put(zr)
	return readCapped(dst, zr, limit)
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
// costly to build, so one of each serves the process. The decoder's memory
// bound is the default limit; smaller limits are checked on its output.
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
	if zstdDec, err = zstd.NewReader(nil, zstd.WithDecoderMaxMemory(DefaultDecompressLimit), zstd.WithDecoderConcurrency(0)); err != nil {
		panic(err)
	}
}

func zstdEncoder() *zstd.Encoder { zstdOnce.Do(initZstd); return zstdEnc }

func unzstd(dst, src []byte, limit int) ([]byte, error) {
	zstdOnce.Do(initZstd)
	out, err := zstdDec.DecodeAll(src, dst)
	if errors.Is(err, zstd.ErrDecoderSizeExceeded) || errors.Is(err, zstd.ErrWindowSizeExceeded) {
		return dst, ErrDecompressedTooLarge
	}
	if err != nil {
		return dst, err
	}
	if len(out)-len(dst) > limit {
		return dst, ErrDecompressedTooLarge
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
func unsnappy(dst, src []byte, limit int) ([]byte, error) {
	if !bytes.HasPrefix(src, xerialMagic) {
		return snappyBlock(dst, src, len(dst), limit)
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
		if dst, err = snappyBlock(dst, rest[4:4+n], start, limit); err != nil {
			return dst[:start], err
		}
		rest = rest[4+n:]
	}
	return dst, nil
}

// snappyBlock appends one decoded raw snappy block; start is where this
// batch's output began in dst, for the size cap.
func snappyBlock(dst, block []byte, start, limit int) ([]byte, error) {
	n, err := s2.DecodedLen(block)
	if err != nil {
		return dst, errMalformedSnappy
	}
	if len(dst)-start+n > limit {
		return dst, ErrDecompressedTooLarge
	}
	at := len(dst)
	dst = growBytes(dst, n)
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
		dst = growBytes(dst, 4+s2.MaxEncodedLen(len(chunk)))
		enc := s2.EncodeSnappy(dst[at+4:], chunk)
		binary.BigEndian.PutUint32(dst[at:], uint32(len(enc)))
		dst = dst[:at+4+len(enc)]
	}
	return dst
}

// growBytes extends dst by n bytes (contents of the new bytes unspecified).
func growBytes(dst []byte, n int) []byte {
	if cap(dst)-len(dst) >= n {
		return dst[:len(dst)+n]
	}
	return append(dst, make([]byte, n)...)
}
