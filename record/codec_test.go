package record_test

import (
	"bytes"
	stdgzip "compress/gzip"
	"encoding/binary"
	"io"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/snappy/xerial"

	"github.com/sluice-broker/sluice/record"
)

var codecs = []record.Codec{record.None, record.Gzip, record.Snappy, record.LZ4, record.Zstd}

// sampleRecords is a records section of 200 keyed records.
func sampleRecords() []byte {
	var raw []byte
	for i := 0; i < 200; i++ {
		r := record.Record{OffsetDelta: int32(i), Key: []byte{byte(i)}, Value: bytes.Repeat([]byte("value "), i%40)}
		raw = record.AppendRecord(raw, &r)
	}
	return raw
}

func TestCodecRoundTrip(t *testing.T) {
	raw := sampleRecords()
	for _, codec := range codecs {
		t.Run(codec.String(), func(t *testing.T) {
			prefix := []byte("keep")
			enc, err := codec.Compress(append([]byte(nil), prefix...), raw)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(enc, prefix) {
				t.Fatal("compress did not append")
			}
			dec, err := codec.Decompress([]byte("x"), enc[len(prefix):], record.DefaultDecompressLimit)
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
		mustDecode(t, record.Gzip, buf.Bytes(), raw)
		ours, _ := record.Gzip.Compress(nil, raw)
		zr, err := stdgzip.NewReader(bytes.NewReader(ours))
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := io.ReadAll(zr); !bytes.Equal(got, raw) {
			t.Fatal("stdlib gzip reads our output differently")
		}
	})
	t.Run("snappy raw block", func(t *testing.T) {
		mustDecode(t, record.Snappy, s2.EncodeSnappy(nil, raw), raw)
	})
	t.Run("snappy xerial", func(t *testing.T) {
		mustDecode(t, record.Snappy, xerial.Encode(nil, raw), raw)
		ours, _ := record.Snappy.Compress(nil, raw)
		if got, err := xerial.Decode(ours); err != nil || !bytes.Equal(got, raw) {
			t.Fatalf("xerial decoder reads our output differently: %v", err)
		}
	})
	t.Run("snappy xerial empty", func(t *testing.T) {
		mustDecode(t, record.Snappy, xerial.Encode(nil, nil), nil)
	})
}

func mustDecode(t *testing.T, codec record.Codec, enc, want []byte) {
	t.Helper()
	got, err := codec.Decompress(nil, enc, record.DefaultDecompressLimit)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("decoded %d bytes, want %d", len(got), len(want))
	}
}

func TestDecompressRejectsGarbage(t *testing.T) {
	garbage := []byte("definitely not compressed data at all")
	for _, codec := range codecs[1:] {
		if _, err := codec.Decompress(nil, garbage, record.DefaultDecompressLimit); err == nil {
			t.Errorf("%s accepted garbage", codec)
		}
	}
	bad := xerial.Encode(nil, nil)                 // the stream header alone
	bad = binary.BigEndian.AppendUint32(bad, 1000) // block longer than the data
	if _, err := record.Snappy.Decompress(nil, bad, record.DefaultDecompressLimit); err == nil {
		t.Error("xerial block overrunning the data accepted")
	}
	for _, c := range []record.Codec{5, 6, 7} {
		if c.Valid() {
			t.Errorf("codec %d valid", c)
		}
		if _, err := c.Decompress(nil, garbage, 1<<20); err != record.ErrUnknownCodec {
			t.Errorf("codec %d: %v", c, err)
		}
	}
}

// TestDecompressCap checks a batch that inflates beyond the cap is refused
// by every codec rather than allocated.
func TestDecompressCap(t *testing.T) {
	big := make([]byte, 1<<20)
	for _, codec := range codecs {
		enc, err := codec.Compress(nil, big)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := codec.Decompress(nil, enc, len(big)-1); err != record.ErrDecompressedTooLarge {
			t.Errorf("%s: %v, want the size cap", codec, err)
		}
		if _, err := codec.Decompress(nil, enc, len(big)); err != nil {
			t.Errorf("%s at the cap: %v", codec, err)
		}
	}
}
