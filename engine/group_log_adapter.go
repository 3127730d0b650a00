package engine

// The group coordinator's view of a __consumer_offsets partition
// (group.PartitionLog), adapted from the engine's Partition. Keep it
// small: it is the one place that changes when partitions gain
// replication (append through the leader, replay from a reader).

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/sluice-broker/sluice/engine/group"
	"github.com/sluice-broker/sluice/storage"
)

// groupLog is a group.PartitionLog over one partition of
// __consumer_offsets.
type groupLog struct{ p *Partition }

// Append writes one batch through the partition, which moves the high
// watermark and wakes the fetches waiting on it, as a produce does.
func (l groupLog) Append(batch []byte) (int64, error) {
	res, err := l.p.appendInternal(batch, 0)
	if errors.Is(err, storage.ErrMessageTooLarge) || errors.Is(err, storage.ErrRecordListTooLarge) {
		return -1, fmt.Errorf("%w: %w", group.ErrTooLarge, err)
	}
	if err != nil {
		return -1, err
	}
	return res.FirstOffset, nil
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
// after the last one. It and the record walk below repeat the record
// format; they give way to package record's iteration once it lands.
func replayBatches(b []byte, scratch *[]byte, fn func(key, value []byte) error) (int64, error) {
	next := int64(-1)
	for len(b) >= storage.BatchHeaderLen {
		h, err := storage.ParseBatchHeader(b)
		if err != nil {
			return next, err
		}
		size := int64(h.Length) + batchLogOverhead
		if size < storage.BatchHeaderLen || h.Magic != 2 {
			return next, errBadRecord
		}
		if size > int64(len(b)) {
			break // cut by the read size; read again from here
		}
		if !h.IsControl() {
			recs, err := batchRecords((*scratch)[:0], b[:size], h)
			if err != nil {
				return next, err
			}
			if h.Compression() != codecNone {
				*scratch = recs
			}
			if err := eachKeyValue(recs, fn); err != nil {
				return next, err
			}
		}
		next = h.BaseOffset + int64(h.LastOffsetDelta) + 1
		b = b[size:]
	}
	return next, nil
}

// eachKeyValue walks uncompressed records, passing each key and value
// (nil for a tombstone).
func eachKeyValue(b []byte, fn func(key, value []byte) error) error {
	for len(b) > 0 {
		n, used := binary.Varint(b)
		if used <= 0 || n < 0 || n > int64(len(b)-used) {
			return errBadRecord
		}
		key, value, err := recordKeyValue(b[used : used+int(n)])
		if err != nil {
			return err
		}
		if err := fn(key, value); err != nil {
			return err
		}
		b = b[used+int(n):]
	}
	return nil
}

func recordKeyValue(r []byte) (key, value []byte, err error) {
	if len(r) < 1 {
		return nil, nil, errBadRecord
	}
	r = r[1:]                // attributes
	for i := 0; i < 2; i++ { // timestamp delta, offset delta
		_, used := binary.Varint(r)
		if used <= 0 {
			return nil, nil, errBadRecord
		}
		r = r[used:]
	}
	if key, r, err = varBytes(r); err != nil {
		return nil, nil, err
	}
	value, _, err = varBytes(r)
	return key, value, err
}

// varBytes reads a varint length and that many bytes (nil for -1).
func varBytes(r []byte) ([]byte, []byte, error) {
	n, used := binary.Varint(r)
	if used <= 0 || n < -1 || n > int64(len(r)-used) {
		return nil, nil, errBadRecord
	}
	r = r[used:]
	if n < 0 {
		return nil, r, nil
	}
	return r[:n], r[n:], nil
}
