package engine

// The group coordinator's view of a __consumer_offsets partition
// (group.PartitionLog), adapted from the engine's Partition. Keep it
// small: it is the one place that changes when partitions gain
// replication (append through the leader, replay from a reader).

import (
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/engine/group"
	"github.com/sluice-broker/sluice/record"
	"github.com/sluice-broker/sluice/storage"
)

// groupLog is a group.PartitionLog over one partition of
// __consumer_offsets.
type groupLog struct{ p *Partition }

// groupWriteTimeout bounds how long a coordinator write waits for the ISR
// (Kafka's offsets.commit.timeout.ms default).
const groupWriteTimeout = 5 * time.Second

// Append writes one batch through the partition and returns once the high
// watermark covers it: every in-sync replica has it, as Kafka's
// coordinator writes with acks=all. Answering after the leader's append
// alone lost a group's membership and offsets when its leadership moved
// before the followers had fetched them (a controlled shutdown right after
// the group formed). On a single node the watermark moves with the append.
func (l groupLog) Append(batch []byte) (int64, error) {
	res, err := l.p.appendInternal(batch, 0)
	if errors.Is(err, storage.ErrMessageTooLarge) || errors.Is(err, storage.ErrRecordListTooLarge) {
		return -1, fmt.Errorf("%w: %w", group.ErrTooLarge, err)
	}
	if err != nil {
		return -1, err
	}
	if err := l.awaitReplicated(res.LastOffset + 1); err != nil {
		return -1, err
	}
	return res.FirstOffset, nil
}

// writesGroupLog reports whether requests of an API may write to
// __consumer_offsets (and so, in a cluster, wait in Append for followers
// to fetch). A cluster serves them off the network loop: handlers run on
// it inline, and a follower's Fetch on the same loop, which is what moves
// the high watermark, would wait behind the blocked write until it timed
// out.
func writesGroupLog(key int16) bool {
	switch kmsg.Key(key) {
	case kmsg.OffsetCommit, kmsg.JoinGroup, kmsg.Heartbeat, kmsg.LeaveGroup, kmsg.SyncGroup,
		kmsg.DeleteGroups, kmsg.OffsetDelete, kmsg.TxnOffsetCommit,
		kmsg.ShareGroupHeartbeat, kmsg.ShareFetch, kmsg.ShareAcknowledge, kmsg.AlterShareGroupOffsets, kmsg.DeleteShareGroupOffsets,
		kmsg.InitializeShareGroupState, kmsg.WriteShareGroupState, kmsg.DeleteShareGroupState:
		return true
	}
	return false
}

// awaitReplicated waits until the high watermark reaches end.
func (l groupLog) awaitReplicated(end int64) error {
	done := make(chan int16, 1) // the waiter may answer after a timeout
	code, waiting := l.p.awaitHighWatermark(end, func(code int16) { done <- code })
	if waiting {
		select {
		case code = <-done:
		case <-time.After(groupWriteTimeout):
			return fmt.Errorf("__consumer_offsets-%d: not replicated within %v", l.p.Index, groupWriteTimeout)
		}
	}
	// NOT_ENOUGH_REPLICAS_AFTER_APPEND: the watermark passed the batch,
	// so every in-sync replica has it, but the ISR is below
	// min.insync.replicas. Not applied here: an offsets topic of fewer
	// replicas than the broker default (offsets.topic.replication.factor
	// is 1 by default) would refuse every commit (TestReassignment,
	// TestOffsetsAppendWaitsForInSyncReplicas).
	if code != 0 && code != kerr.NotEnoughReplicasAfterAppend.Code {
		return fmt.Errorf("__consumer_offsets-%d: %w", l.p.Index, kerr.ErrorForCode(code))
	}
	return nil
}

// Replay feeds every record of the partition, in log order, to fn. A batch
// it cannot decode stops the replay with an error: skipping it could
// resurrect deleted offsets.
func (l groupLog) Replay(fn func(key, value []byte) error) error {
	var scratch []byte
	return l.p.scan(replayReadSize, func(b []byte) (int64, error) { return replayBatches(b, &scratch, fn) })
}

// replayReadSize is how much of the log one read brings in at load.
const replayReadSize = 1 << 20

// replayBatches decodes the whole batches in b and returns the offset
// after the last one.
func replayBatches(b []byte, scratch *[]byte, fn func(key, value []byte) error) (int64, error) {
	next := int64(-1)
	for len(b) >= record.HeaderLen {
		h, err := record.ParseHeader(b)
		if err != nil {
			return next, err
		}
		size := h.Size()
		if size < record.HeaderLen {
			return next, record.ErrBadLength
		}
		if h.Magic != record.Magic {
			return next, fmt.Errorf("magic %d: %w", h.Magic, record.ErrBadRecord)
		}
		if size > int64(len(b)) {
			break // cut by the read size; read again from here
		}
		if !h.IsControl() {
			recs, err := record.Records((*scratch)[:0], b[:size], h, record.DefaultDecompressLimit)
			if err != nil {
				return next, err
			}
			if h.Compression() != record.None {
				*scratch = recs
			}
			if err := eachKeyValue(recs, fn); err != nil {
				return next, err
			}
		}
		next = h.NextOffset()
		b = b[size:]
	}
	return next, nil
}

// eachKeyValue walks an uncompressed records section, passing each key
// and value (nil for a tombstone).
func eachKeyValue(raw []byte, fn func(key, value []byte) error) error {
	it := record.NewIter(raw)
	for it.Next() {
		r := it.Record()
		if err := fn(r.Key, r.Value); err != nil {
			return err
		}
	}
	return it.Err()
}
