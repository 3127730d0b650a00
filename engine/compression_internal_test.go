package engine

import (
	"bytes"
	stdgzip "compress/gzip"
	"encoding/binary"
	"hash/crc32"
	"io"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/snappy/xerial"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/storage"
)

var codecs = map[string]int8{"none": codecNone, "gzip": codecGzip, "snappy": codecSnappy, "lz4": codecLZ4, "zstd": codecZstd}

func sampleRecords() []byte {
	var raw []byte
	for i := 0; i < 200; i++ {
		raw = appendTestRecord(raw, int32(i), TestRecord{Key: []byte{byte(i)}, Value: bytes.Repeat([]byte("value "), i%40)})
	}
	return raw
}

func TestCodecRoundTrip(t *testing.T) {
	raw := sampleRecords()
	for name, codec := range codecs {
		t.Run(name, func(t *testing.T) {
			prefix := []byte("keep")
			enc, err := compress(append([]byte(nil), prefix...), codec, raw)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(enc, prefix) {
				t.Fatal("compress did not append")
			}
			dec, err := decompress([]byte("x"), codec, enc[len(prefix):])
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(dec[1:], raw) || dec[0] != 'x' {
				t.Fatal("round trip changed the records")
			}
		})
	}
}

// Batches come from other implementations; each codec must read what they
// write and write what they read.
func TestCodecInterop(t *testing.T) {
	raw := sampleRecords()
	t.Run("gzip stdlib", func(t *testing.T) {
		var buf bytes.Buffer
		zw := stdgzip.NewWriter(&buf)
		zw.Write(raw)
		zw.Close()
		mustDecode(t, codecGzip, buf.Bytes(), raw)
		ours, _ := compress(nil, codecGzip, raw)
		zr, err := stdgzip.NewReader(bytes.NewReader(ours))
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := io.ReadAll(zr); !bytes.Equal(got, raw) {
			t.Fatal("stdlib gzip reads our output differently")
		}
	})
	t.Run("snappy raw block", func(t *testing.T) {
		mustDecode(t, codecSnappy, s2.EncodeSnappy(nil, raw), raw)
	})
	t.Run("snappy xerial", func(t *testing.T) {
		mustDecode(t, codecSnappy, xerial.Encode(nil, raw), raw)
		ours, _ := compress(nil, codecSnappy, raw)
		if got, err := xerial.Decode(ours); err != nil || !bytes.Equal(got, raw) {
			t.Fatalf("xerial decoder reads our output differently: %v", err)
		}
	})
	t.Run("snappy xerial empty", func(t *testing.T) {
		mustDecode(t, codecSnappy, xerial.Encode(nil, nil), nil)
	})
}

func mustDecode(t *testing.T, codec int8, enc, want []byte) {
	t.Helper()
	got, err := decompress(nil, codec, enc)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("decoded %d bytes, want %d", len(got), len(want))
	}
}

func TestDecompressRejectsGarbage(t *testing.T) {
	garbage := []byte("definitely not compressed data at all")
	for name, codec := range codecs {
		if codec == codecNone {
			continue
		}
		if _, err := decompress(nil, codec, garbage); err == nil {
			t.Errorf("%s accepted garbage", name)
		}
	}
	bad := xerial.Encode(nil, nil)                 // the stream header alone
	bad = binary.BigEndian.AppendUint32(bad, 1000) // block longer than the data
	if _, err := decompress(nil, codecSnappy, bad); err == nil {
		t.Error("xerial block overrunning the data accepted")
	}
}

// TestDecompressCap checks a batch that inflates beyond the cap is refused
// by every codec rather than allocated.
func TestDecompressCap(t *testing.T) {
	defer func(old int) { decompressLimit = old }(decompressLimit)
	big := make([]byte, 1<<20)
	decompressLimit = len(big) - 1
	for name, codec := range codecs {
		enc, err := compress(nil, codec, big)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := decompress(nil, codec, enc); err != errDecompressedTooLarge {
			t.Errorf("%s: %v, want the size cap", name, err)
		}
	}
}

// TestRebuildBatch re-encodes a batch with every codec and checks the
// result is a valid batch with the same records and header fields.
func TestRebuildBatch(t *testing.T) {
	for fromName, from := range codecs {
		orig := BuildTestBatch(t, TestBatchOpts{Codec: from, FirstTimestamp: 1000, ProducerID: 7, ProducerEpoch: 2, BaseSequence: 40},
			TestRecord{Key: []byte("a"), Value: []byte("1")}, TestRecord{Value: bytes.Repeat([]byte("z"), 5000), TimestampDelta: 9})
		h, err := storage.ParseBatchHeader(orig)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := batchRecords(nil, orig, h)
		if err != nil {
			t.Fatal(err)
		}
		for toName, to := range codecs {
			out, err := rebuildBatch([]byte("pre"), orig, raw, to)
			if err != nil {
				t.Fatalf("%s->%s: %v", fromName, toName, err)
			}
			checkRebuilt(t, out[3:], h, raw, to)
		}
	}
}

func checkRebuilt(t *testing.T, b []byte, orig storage.BatchHeader, raw []byte, codec int8) {
	t.Helper()
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(b); err != nil {
		t.Fatal(err)
	}
	if int(rb.Length)+12 != len(b) {
		t.Fatalf("length field %d for %d bytes", rb.Length, len(b))
	}
	if uint32(rb.CRC) != crc32.Checksum(b[21:], castagnoli) {
		t.Fatal("bad CRC")
	}
	h, _ := storage.ParseBatchHeader(b)
	if h.Compression() != codec || h.ProducerID != orig.ProducerID || h.BaseSequence != orig.BaseSequence ||
		h.MaxTimestamp != orig.MaxTimestamp || h.NumRecords != orig.NumRecords || h.Attributes&^7 != orig.Attributes&^7 {
		t.Fatalf("header %+v from %+v", h, orig)
	}
	got, err := batchRecords(nil, b, h)
	if err != nil || !bytes.Equal(got, raw) {
		t.Fatalf("records changed: %v", err)
	}
}

func BenchmarkRebuildBatchZstd(b *testing.B) {
	orig := BuildTestBatch(b, TestBatchOpts{Codec: codecNone, ProducerID: -1}, TestRecord{Value: bytes.Repeat([]byte("payload "), 2000)})
	h, _ := storage.ParseBatchHeader(orig)
	raw, _ := batchRecords(nil, orig, h)
	var dst []byte
	b.ReportAllocs()
	for b.Loop() {
		dst, _ = rebuildBatch(dst[:0], orig, raw, codecZstd)
	}
}
