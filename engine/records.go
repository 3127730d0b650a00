package engine

// Reading records inside a batch. The data path never does this; it is for
// the few places where Kafka looks at single records: keys on compacted
// topics at produce, and the exact offset ListOffsets answers for a
// timestamp.

import (
	"encoding/binary"
	"errors"

	"github.com/sluice-broker/sluice/storage"
)

var errBadRecord = errors.New("malformed record in batch")

// Batch attribute bits the engine looks at (bits 0-2 are the codec).
const (
	attrLogAppendTime = 0x08
	attrTransactional = 0x10
)

// recordInfo is what the broker needs from one record.
type recordInfo struct {
	OffsetDelta    int32
	TimestampDelta int64
	HasKey         bool
}

// eachRecord walks the records of an uncompressed records section, calling
// fn until it returns false. A record is
//
//	length varint | attributes int8 | timestampDelta varlong |
//	offsetDelta varint | keyLength varint | key | value… | headers…
//
// and only the fields up to the key length are decoded; length skips the rest.
func eachRecord(b []byte, fn func(recordInfo) bool) error {
	for len(b) > 0 {
		n, used := binary.Varint(b)
		if used <= 0 || n < 0 || n > int64(len(b)-used) {
			return errBadRecord
		}
		rec, err := parseRecord(b[used : used+int(n)])
		if err != nil {
			return err
		}
		if !fn(rec) {
			return nil
		}
		b = b[used+int(n):]
	}
	return nil
}

func parseRecord(r []byte) (recordInfo, error) {
	var info recordInfo
	if len(r) < 1 {
		return info, errBadRecord
	}
	r = r[1:] // attributes: unused by Kafka so far
	var vals [3]int64
	for i := range vals {
		v, used := binary.Varint(r)
		if used <= 0 {
			return info, errBadRecord
		}
		vals[i], r = v, r[used:]
	}
	info.TimestampDelta = vals[0]
	info.OffsetDelta = int32(vals[1])
	info.HasKey = vals[2] >= 0
	return info, nil
}

// batchRecords returns the uncompressed records section of batch (one
// whole batch, header parsed as h), decompressing into scratch if needed.
func batchRecords(scratch, batch []byte, h storage.BatchHeader) ([]byte, error) {
	end := int64(h.Length) + batchLogOverhead
	if end > int64(len(batch)) || end < storage.BatchHeaderLen {
		return nil, errBadRecord
	}
	body := batch[storage.BatchHeaderLen:end]
	if h.Compression() == codecNone {
		return body, nil
	}
	return decompress(scratch[:0], h.Compression(), body)
}
