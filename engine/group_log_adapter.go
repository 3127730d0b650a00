package engine

// The coordinators' view of their internal partitions: the group
// coordinator's __consumer_offsets and the transaction coordinator's
// __transaction_state (group.PartitionLog, which txn.PartitionLog is),
// adapted from the engine's Partition. Keep it small: it is the one place
// that changes when partitions gain replication (append through the
// leader, replay from a reader).

import (
	"bytes"
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
// __consumer_offsets or __transaction_state. Its replay gives records of
// committed transactions at their marker, never those of aborted ones,
// and drops those of transactions still open (offsetsLog keeps them).
type groupLog struct{ p *Partition }

// offsetsLog is the group coordinator's groupLog: openTxn receives, at
// the end of a replay, each record of a transaction with no marker yet.
type offsetsLog struct {
	groupLog
	openTxn func(producerID int64, key, value []byte) error
}

// Replay is groupLog's, giving the open transactions' records to openTxn.
func (l offsetsLog) Replay(fn func(key, value []byte) error) error { return l.replay(fn, l.openTxn) }

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
		// and __transaction_state, or wait for markers to replicate
		kmsg.InitProducerID, kmsg.AddPartitionsToTxn, kmsg.AddOffsetsToTxn, kmsg.EndTxn, kmsg.WriteTxnMarkers,
		kmsg.ShareGroupHeartbeat, kmsg.ShareFetch, kmsg.ShareAcknowledge, kmsg.AlterShareGroupOffsets, kmsg.DeleteShareGroupOffsets,
		kmsg.InitializeShareGroupState, kmsg.WriteShareGroupState, kmsg.DeleteShareGroupState:
		return true
	}
	return false
}

// awaitReplicated waits until the high watermark reaches end.
func (l groupLog) awaitReplicated(end int64) error { return awaitHighWatermark(l.p, end) }

// awaitHighWatermark waits until p's high watermark reaches end, at most
// groupWriteTimeout (coordinator writes and transaction markers).
func awaitHighWatermark(p *Partition, end int64) error {
	l := groupLog{p: p}
	done := make(chan int16, 1) // the waiter may answer after a timeout
	code, waiting := l.p.awaitHighWatermark(end, func(code int16) { done <- code })
	if waiting {
		select {
		case code = <-done:
		case <-time.After(groupWriteTimeout):
			return fmt.Errorf("%s-%d: not replicated within %v", l.p.Topic.Name, l.p.Index, groupWriteTimeout)
		}
	}
	// NOT_ENOUGH_REPLICAS_AFTER_APPEND: the watermark passed the batch,
	// so every in-sync replica has it, but the ISR is below
	// min.insync.replicas. Not applied here: an offsets topic of fewer
	// replicas than the broker default (offsets.topic.replication.factor
	// is 1 by default) would refuse every commit (TestReassignment,
	// TestOffsetsAppendWaitsForInSyncReplicas).
	if code != 0 && code != kerr.NotEnoughReplicasAfterAppend.Code {
		return fmt.Errorf("%s-%d: %w", l.p.Topic.Name, l.p.Index, kerr.ErrorForCode(code))
	}
	return nil
}

// Replay feeds every record of the partition, in log order, to fn. A batch
// it cannot decode stops the replay with an error: skipping it could
// resurrect deleted offsets.
func (l groupLog) Replay(fn func(key, value []byte) error) error { return l.replay(fn, nil) }

func (l groupLog) replay(fn func(key, value []byte) error, openTxn func(producerID int64, key, value []byte) error) error {
	var scratch []byte
	txns := newReplayTxns()
	err := l.p.scan(replayReadSize, func(b []byte) (int64, error) { return replayBatches(b, &scratch, txns, fn) })
	if err != nil || openTxn == nil {
		return err
	}
	for pid, kvs := range txns.open {
		for _, kv := range kvs {
			if err := openTxn(pid, kv.key, kv.value); err != nil {
				return err
			}
		}
	}
	return nil
}

// AppendTxn writes a producer's transactional batch (the group
// coordinator's TxnOffsetCommit) at the producer's next sequence on this
// partition, which the log checks as it checks any producer's.
func (l groupLog) AppendTxn(pid int64, epoch int16, build func(baseSequence int32) ([]byte, error)) (int64, error) {
	seq := int32(0)
	for _, pi := range l.p.producers() {
		if pi.ProducerID == pid && pi.ProducerEpoch == epoch {
			seq = pi.LastSequence + 1
		}
	}
	batch, err := build(seq)
	if err != nil {
		return -1, err
	}
	return l.Append(batch)
}

// replayTxns holds, during a replay, the records of transactions whose
// marker has not been read yet, per producer id.
type replayTxns struct{ open map[int64][]keyValue }

func newReplayTxns() *replayTxns { return &replayTxns{open: map[int64][]keyValue{}} }

type keyValue struct{ key, value []byte }

// add keeps copies of a transactional batch's records until its marker.
func (t *replayTxns) add(pid int64, raw []byte) error {
	return eachKeyValue(raw, func(key, value []byte) error {
		kv := keyValue{key: bytes.Clone(key)}
		if value != nil {
			kv.value = bytes.Clone(value)
		}
		t.open[pid] = append(t.open[pid], kv)
		return nil
	})
}

// end applies a marker: a commit replays the producer's records now.
func (t *replayTxns) end(pid int64, raw []byte, fn func(key, value []byte) error) error {
	it := record.NewIter(raw)
	if !it.Next() {
		return it.Err()
	}
	m, err := record.ParseMarker(it.Record())
	if err != nil {
		return err
	}
	kvs := t.open[pid]
	delete(t.open, pid)
	if m.Type != record.ControlCommit {
		return nil
	}
	for _, kv := range kvs {
		if err := fn(kv.key, kv.value); err != nil {
			return err
		}
	}
	return nil
}

// replayReadSize is how much of the log one read brings in at load.
const replayReadSize = 1 << 20

// replayBatches decodes the whole batches in b and returns the offset
// after the last one.
func replayBatches(b []byte, scratch *[]byte, txns *replayTxns, fn func(key, value []byte) error) (int64, error) {
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
		recs, err := record.Records((*scratch)[:0], b[:size], h, record.DefaultDecompressLimit)
		if err != nil {
			return next, err
		}
		if h.Compression() != record.None {
			*scratch = recs
		}
		switch {
		case h.IsControl():
			err = txns.end(h.ProducerID, recs, fn)
		case h.IsTransactional():
			err = txns.add(h.ProducerID, recs)
		default:
			err = eachKeyValue(recs, fn)
		}
		if err != nil {
			return next, err
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
