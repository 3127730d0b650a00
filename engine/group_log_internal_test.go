package engine

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The records the coordinator writes decode back, through kmsg's own
// RecordBatch and Record decoders (an independent reader), to the same keys
// and values, tombstones included.
func TestOffsetsRecordBatchRoundTrip(t *testing.T) {
	recs := []offsetsRecord{
		offsetCommitRecord("g", offsetTP{"t", 3}, &committedOffset{offset: 42, leaderEpoch: 7, metadata: "m", commitMs: 1000, expireMs: -1}),
		offsetCommitRecord("g", offsetTP{"t", 4}, nil),
		{key: groupMetadataKey("g")},
	}
	batch := appendRecordBatch(nil, 1234, recs)

	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(batch); err != nil {
		t.Fatal(err)
	}
	if rb.Magic != 2 || rb.NumRecords != 3 || rb.LastOffsetDelta != 2 || rb.FirstTimestamp != 1234 || rb.ProducerID != -1 || int(rb.Length) != len(batch)-12 {
		t.Fatalf("header: %+v", rb)
	}
	if crc := crc32.Checksum(batch[21:], crc32.MakeTable(crc32.Castagnoli)); uint32(rb.CRC) != crc {
		t.Fatalf("crc %x, want %x", uint32(rb.CRC), crc)
	}
	b := rb.Records
	for i, want := range recs {
		var r kmsg.Record
		n, used := binary.Varint(b)
		if err := r.ReadFrom(b[:used+int(n)]); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		b = b[used+int(n):]
		if r.OffsetDelta != int32(i) || !bytes.Equal(r.Key, want.key) || !bytes.Equal(r.Value, want.value) || (want.value == nil) != (r.Value == nil) {
			t.Fatalf("record %d: %+v", i, r)
		}
	}

	var got []offsetsRecord
	next, err := replayBatches(batch, new([]byte), func(k, v []byte) error {
		got = append(got, offsetsRecord{bytes.Clone(k), cloneOrNil(v)})
		return nil
	})
	if err != nil || next != 3 || len(got) != 3 || got[1].value != nil || !bytes.Equal(got[0].value, recs[0].value) {
		t.Fatalf("replay: next %d, err %v, %d records", next, err, len(got))
	}
}

// Whatever a segment holds, replaying it returns an error or records; it
// never panics.
func FuzzOffsetsReplay(f *testing.F) {
	f.Add(appendRecordBatch(nil, 1, []offsetsRecord{
		offsetCommitRecord("g", offsetTP{"t", 0}, &committedOffset{offset: 1, leaderEpoch: -1, expireMs: 5}),
		{key: groupMetadataKey("g"), value: []byte{0, 3, 0, 0}},
	}))
	f.Add(appendRecordBatch(nil, 1, []offsetsRecord{{key: []byte{0, 9, 1}}}))
	negative := appendRecordBatch(nil, 1, []offsetsRecord{{key: []byte{0, 2, 0, 0}}})
	binary.BigEndian.PutUint32(negative[8:], 0xff300000) // a negative batch length once panicked
	f.Add(negative)
	f.Fuzz(func(t *testing.T, b []byte) {
		loaded := map[string]*loadedGroup{}
		get := func(name string) *loadedGroup {
			if loaded[name] == nil {
				loaded[name] = &loadedGroup{offsets: map[offsetTP]*committedOffset{}}
			}
			return loaded[name]
		}
		_, _ = replayBatches(b, new([]byte), func(k, v []byte) error { return loadRecord(get, k, v) })
	})
}
