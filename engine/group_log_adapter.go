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

	"github.com/sluice-broker/sluice/engine/group"
	"github.com/sluice-broker/sluice/record"
	"github.com/sluice-broker/sluice/storage"
)

// groupLog is a group.PartitionLog over one partition of
// __consumer_offsets.
type groupLog struct{ p *Partition }

// Append writes one batch through the partition and returns once the
// high watermark covers it: every in-sync follower has it, so a new
// leader elected from the ISR keeps it. (It used to return after the
// local append, so a coordinator cut off from its followers acknowledged
// commits that the next leader never had, and committed offsets went
// backwards: found by tools/chaos's isolate-coordinator,
// TestOffsetsAppendWaitsForInSyncReplicas.) min.insync.replicas is not
// applied: an offsets topic of fewer replicas than the broker's default
// (offsets.topic.replication.factor is 1 here) keeps working, and an ISR
// of the leader alone can only be one the controller committed. Waiting
// longer than offsetsCommitTimeout, or losing the leadership meanwhile,
// is an error: the coordinator answers NOT_COORDINATOR and changes
// nothing in memory; the record may still become committed, as in Kafka.
func (l groupLog) Append(batch []byte) (int64, error) {
	res, err := l.p.appendInternal(batch, 0)
	if errors.Is(err, storage.ErrMessageTooLarge) || errors.Is(err, storage.ErrRecordListTooLarge) {
		return -1, fmt.Errorf("%w: %w", group.ErrTooLarge, err)
	}
	if err != nil {
		return -1, err
	}
	if err := l.awaitReplicated(res.LastOffset+1, offsetsCommitTimeout); err != nil {
		return -1, err
	}
	return res.FirstOffset, nil
}

// offsetsCommitTimeout bounds how long a coordinator's write waits for
// the in-sync replicas: Kafka's offsets.commit.timeout.ms default.
const offsetsCommitTimeout = 5 * time.Second

// awaitReplicated waits until the partition's high watermark reaches end.
func (l groupLog) awaitReplicated(end int64, timeout time.Duration) error {
	done := make(chan int16, 1) // the callback never blocks, even after a timeout
	code, waiting := l.p.awaitHighWatermark(end, func(code int16) { done <- code })
	if waiting {
		t := time.NewTimer(timeout)
		defer t.Stop()
		select {
		case code = <-done:
		case <-t.C:
			return fmt.Errorf("%s-%d: not replicated to the ISR within %v: %w", offsetsTopic, l.p.Index, timeout, kerr.RequestTimedOut)
		}
	}
	// NOT_ENOUGH_REPLICAS_AFTER_APPEND says the watermark passed the
	// batch with an ISR below min.insync.replicas, which Append does not
	// apply (see there).
	if code != 0 && code != kerr.NotEnoughReplicasAfterAppend.Code {
		return fmt.Errorf("%s-%d: %w", offsetsTopic, l.p.Index, kerr.ErrorForCode(code))
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
