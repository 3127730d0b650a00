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
	_, err := replayBatches(l, new([]byte), newReplayTxns(), fn)
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
	next, err := replayBatches(log, new([]byte), newReplayTxns(), func(k, v []byte) error {
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

// TestGroupWriteWaitsForISR: a coordinator write (group membership,
// offset commit) returns only once the high watermark covers it. It used
// to return after the leader's own append, so a group that formed and
// committed just before a controlled shutdown moved its offsets
// partition's leadership was gone on the new leader, whose replica had
// not fetched the records yet: the member's next commit was answered
// GROUP_ID_NOT_FOUND (found by the interop matrix's cluster run).
func TestGroupWriteWaitsForISR(t *testing.T) {
	br := benchBroker(t)
	p := br.Topic("bench").Partition(0)
	p.holdHighWatermark(true) // an in-sync follower that has not fetched yet
	k := kmsg.OffsetCommitKey{Version: 1, Group: "g", Topic: "t", Partition: 0}
	v := kmsg.NewOffsetCommitValue()
	v.Version, v.Offset, v.LeaderEpoch = 3, 42, -1
	batch := BuildTestBatch(t, TestBatchOpts{Codec: int8(record.None), ProducerID: -1}, TestRecord{Key: k.AppendTo(nil), Value: v.AppendTo(nil)})
	type result struct {
		base int64
		err  error
	}
	returned := make(chan result, 1)
	go func() {
		base, err := groupLog{p: p}.Append(batch)
		returned <- result{base, err}
	}()
	// The write is in the log and waits on the watermark: Append must not
	// return before the watermark is released.
	for waiting := 0; waiting == 0; {
		select {
		case r := <-returned:
			t.Fatalf("Append returned (%d, %v) with the high watermark at %d, short of its batch", r.base, r.err, p.HighWatermark())
		default:
		}
		p.mu.Lock()
		waiting = len(p.mu.hwWaiters)
		p.mu.Unlock()
		time.Sleep(time.Millisecond)
	}
	if leo, hw := p.LogEndOffset(), p.HighWatermark(); leo != 1 || hw != 0 {
		t.Fatalf("log end %d, high watermark %d; want 1, 0", leo, hw)
	}
	p.holdHighWatermark(false)
	if r := <-returned; r.err != nil || r.base != 0 || p.HighWatermark() != 1 {
		t.Fatalf("Append = (%d, %v), high watermark %d; want (0, nil), 1", r.base, r.err, p.HighWatermark())
	}
}
