package engine

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/engine/group"
	"github.com/sluice-broker/sluice/record"
)

// bytesLog is a group.PartitionLog over raw log bytes, replayed with the
// adapter's own decoder.
type bytesLog []byte

func (l bytesLog) Append([]byte) (int64, error) { return 0, nil }

func (l bytesLog) Replay(fn func(key, value []byte) error) error {
	_, err := replayBatches(l, new([]byte), fn)
	return err
}

// The adapter's replay walks batches in order, compressed ones included,
// and hands out each record's key and value.
func TestGroupLogReplayBatches(t *testing.T) {
	k1 := kmsg.OffsetCommitKey{Version: 1, Group: "g", Topic: "t", Partition: 0}
	v1 := kmsg.NewOffsetCommitValue()
	v1.Version, v1.Offset, v1.LeaderEpoch = 3, 42, -1
	first := BuildTestBatch(t, TestBatchOpts{Codec: int8(record.None), ProducerID: -1}, TestRecord{Key: k1.AppendTo(nil), Value: v1.AppendTo(nil)})
	v1.Offset = 43
	second := BuildTestBatch(t, TestBatchOpts{Codec: int8(record.Gzip), ProducerID: -1},
		TestRecord{Key: k1.AppendTo(nil), Value: v1.AppendTo(nil)}, TestRecord{Key: []byte{0, 9}, Value: []byte("skipped")})
	binary.BigEndian.PutUint64(second, 1) // base offset after the first batch
	log := append(append([]byte{}, first...), second...)

	var keys [][]byte
	next, err := replayBatches(log, new([]byte), func(k, v []byte) error {
		keys = append(keys, bytes.Clone(k))
		return nil
	})
	if err != nil || next != 3 || len(keys) != 3 || !bytes.Equal(keys[1], k1.AppendTo(nil)) {
		t.Fatalf("replay: next %d, err %v, %d records", next, err, len(keys))
	}
	c := group.New(group.Config{Partitions: 1, Clock: group.NewFakeClock(time.Unix(0, 0))})
	defer c.Close()
	if n, err := c.LoadPartition(0, bytesLog(log)); err != nil || n != 1 {
		t.Fatalf("load: %d groups, %v", n, err)
	}
	fetched, _ := c.FetchOffsets("g", nil)
	if len(fetched) != 1 || fetched[0].Partitions[0].Offset != 43 {
		t.Fatalf("fetched %+v, want offset 43 (the last record wins)", fetched)
	}
}

// Whatever a segment of __consumer_offsets holds, loading it returns an
// error or groups; it never panics.
func FuzzOffsetsReplay(f *testing.F) {
	k := kmsg.OffsetCommitKey{Version: 1, Group: "g", Topic: "t", Partition: 0}
	v := kmsg.NewOffsetCommitValue()
	v.Version, v.ExpireTimestamp = 1, 5
	f.Add(BuildTestBatch(f, TestBatchOpts{Codec: int8(record.None), ProducerID: -1},
		TestRecord{Key: k.AppendTo(nil), Value: v.AppendTo(nil)},
		TestRecord{Key: []byte{0, 2, 0, 0}, Value: []byte{0, 3, 0, 0}}))
	f.Add(BuildTestBatch(f, TestBatchOpts{Codec: int8(record.None), ProducerID: -1}, TestRecord{Key: []byte{0, 9, 1}}))
	negative := BuildTestBatch(f, TestBatchOpts{Codec: int8(record.None), ProducerID: -1}, TestRecord{Key: []byte{0, 2, 0, 0}})
	binary.BigEndian.PutUint32(negative[8:], 0xff300000) // a negative batch length once panicked
	f.Add(negative)
	f.Fuzz(func(t *testing.T, b []byte) {
		c := group.New(group.Config{Partitions: 1, Clock: group.NewFakeClock(time.Unix(0, 0))})
		defer c.Close()
		_, _ = c.LoadPartition(0, bytesLog(b))
	})
}
