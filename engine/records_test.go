package engine

import (
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/record"
)

// TestRecord is one record for BuildTestBatch.
type TestRecord struct {
	Key, Value     []byte // nil Key: a record without key
	TimestampDelta int64
}

// TestBatchOpts are the batch-level fields of BuildTestBatch.
type TestBatchOpts struct {
	Codec          int8
	FirstTimestamp int64
	ProducerID     int64 // -1 for a plain producer
	ProducerEpoch  int16
	BaseSequence   int32
}

// BuildTestBatch encodes a RecordBatch v2 as a producer would, for tests in
// this package and in engine_test.
func BuildTestBatch(tb testing.TB, o TestBatchOpts, recs ...TestRecord) []byte {
	tb.Helper()
	var raw []byte
	maxTs := o.FirstTimestamp
	for i, r := range recs {
		raw = appendTestRecord(raw, int32(i), r)
		maxTs = max(maxTs, o.FirstTimestamp+r.TimestampDelta)
	}
	section, err := record.Codec(o.Codec).Compress(nil, raw)
	if err != nil {
		tb.Fatal(err)
	}
	seq := o.BaseSequence
	if o.ProducerID < 0 {
		seq = -1
	}
	batch := kmsg.RecordBatch{
		Length: int32(49 + len(section)), PartitionLeaderEpoch: -1, Magic: 2, Attributes: int16(o.Codec),
		LastOffsetDelta: int32(len(recs) - 1), FirstTimestamp: o.FirstTimestamp, MaxTimestamp: maxTs,
		ProducerID: o.ProducerID, ProducerEpoch: o.ProducerEpoch, FirstSequence: seq,
		NumRecords: int32(len(recs)), Records: section,
	}
	b := batch.AppendTo(nil)
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

func appendTestRecord(dst []byte, offsetDelta int32, r TestRecord) []byte {
	body := []byte{0} // attributes
	body = binary.AppendVarint(body, r.TimestampDelta)
	body = binary.AppendVarint(body, int64(offsetDelta))
	if r.Key == nil {
		body = binary.AppendVarint(body, -1)
	} else {
		body = binary.AppendVarint(body, int64(len(r.Key)))
		body = append(body, r.Key...)
	}
	body = binary.AppendVarint(body, int64(len(r.Value)))
	body = append(body, r.Value...)
	body = binary.AppendVarint(body, 0) // headers
	dst = binary.AppendVarint(dst, int64(len(body)))
	return append(dst, body...)
}
