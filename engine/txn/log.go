package txn

// Records of __transaction_state, in Kafka's own schemas so that Kafka's
// tools (kafka-dump-log --transaction-log-decoder) read them:
//
//	key                                   value (nil = tombstone: the id expired)
//	TransactionLogKey v0 {transactionalId} TransactionLogValue v0 {producerId, producerEpoch,
//	                                       timeoutMs, status, partitions[{topic, [partition]}],
//	                                       lastUpdateMs, startMs}
//	                                       v1 (transactions version 2) adds the tagged
//	                                       previousProducerId, nextProducerId and
//	                                       clientTransactionVersion
//
// Each write is one uncompressed RecordBatch v2 of one record. A load keeps
// the last record of each key, as compaction would.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/engine/group"
	"github.com/sluice-broker/sluice/record"
)

// errBadRecord: a record of __transaction_state that cannot be decoded.
var errBadRecord = errors.New("malformed __transaction_state record")

func recordKey(id string) []byte {
	k := kmsg.TxnMetadataKey{Version: 0, TransactionalID: id}
	return k.AppendTo(nil)
}

// recordValue encodes s as Kafka writes it: v1 for a client on
// transactions version 2, v0 otherwise. Complete and Empty states list no
// partitions.
func recordValue(s snapshot) []byte {
	v := kmsg.NewTxnMetadataValue()
	v.ProducerID, v.ProducerEpoch, v.TimeoutMillis = s.pid, s.epoch, s.timeoutMs
	v.State = kmsg.TransactionState(s.state)
	v.LastUpdateTimestamp, v.StartTimestamp = s.updateMs, s.startMs
	if s.tv2 {
		v.Version = 1
		v.PreviousProducerID, v.NextProducerID, v.ClientTransactionVersion = s.prevPid, s.nextPid, 2
	}
	v.Topics = []kmsg.TxnMetadataValueTopic{}
	for _, tp := range s.parts {
		if n := len(v.Topics); n == 0 || v.Topics[n-1].Topic != tp.Topic {
			v.Topics = append(v.Topics, kmsg.TxnMetadataValueTopic{Topic: tp.Topic})
		}
		t := &v.Topics[len(v.Topics)-1]
		t.Partitions = append(t.Partitions, tp.Partition)
	}
	return v.AppendTo(nil)
}

// batchOf is one record as an uncompressed RecordBatch v2 (CreateTime
// now, no producer id); the log fills in offsets and the leader epoch.
func batchOf(nowMs int64, key, value []byte) ([]byte, error) {
	h := record.NewHeader()
	h.FirstTimestamp = nowMs
	var b record.Builder
	b.Reset(h)
	b.Add(&record.Record{Key: key, Value: value})
	return b.AppendTo(nil)
}

// persist writes s as m's record and, once the log has it, makes it m's
// state. The caller set m.pending; persist clears it unless keepPending
// (a commit whose markers go out next). It answers NOT_COORDINATOR when
// m's partition was unloaded meanwhile.
func (c *Coordinator) persist(m *txnMeta, s snapshot, keepPending bool) int16 {
	err := c.appendRecord(m.part, m.id, recordValue(s))
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.ownedLocked(m) {
		return kerr.NotCoordinator.Code
	}
	if err != nil {
		m.pending = false
		c.log.Error("writing transaction state failed", "transactional_id", m.id, "err", err)
		return appendErrorCode(err)
	}
	m.apply(s)
	m.pending = keepPending
	return 0
}

func (c *Coordinator) appendRecord(p *partition, id string, value []byte) error {
	batch, err := batchOf(c.clock.Now().UnixMilli(), recordKey(id), value)
	if err != nil {
		return err
	}
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	_, err = p.log.Append(batch)
	return err
}

// appendErrorCode is the answer to a failed write: a record too large is
// a broken request (UNKNOWN_SERVER_ERROR, as Kafka answers); anything else
// a log that is no longer ours, and NOT_COORDINATOR sends the client to
// look for the coordinator again.
func appendErrorCode(err error) int16 {
	if errors.Is(err, group.ErrTooLarge) {
		return kerr.UnknownServerError.Code
	}
	return kerr.NotCoordinator.Code
}

// loadRecord applies one record to the replay's map. Key version 0 is a
// transaction; other versions are not Kafka's transaction log and are
// skipped. A tombstone or a Dead state removes the id.
func loadRecord(loaded map[string]*txnMeta, key, value []byte) error {
	if len(key) < 2 {
		return errBadRecord
	}
	if binary.BigEndian.Uint16(key) != 0 {
		return nil
	}
	// The replay reuses its buffers: decode from copies, since kmsg's
	// byte fields alias their input.
	key = bytes.Clone(key)
	var k kmsg.TxnMetadataKey
	if err := k.ReadFrom(key); err != nil {
		return fmt.Errorf("%w: key: %w", errBadRecord, err)
	}
	if value == nil {
		delete(loaded, k.TransactionalID)
		return nil
	}
	m, err := decodeValue(k.TransactionalID, bytes.Clone(value))
	if err != nil {
		return err
	}
	if m.state == Dead {
		delete(loaded, k.TransactionalID)
		return nil
	}
	loaded[k.TransactionalID] = m
	return nil
}

// decodeValue is the metadata a TransactionLogValue describes.
func decodeValue(id string, value []byte) (*txnMeta, error) {
	var v kmsg.TxnMetadataValue
	if err := v.ReadFrom(value); err != nil {
		return nil, fmt.Errorf("%w: value of %q: %w", errBadRecord, id, err)
	}
	st := State(v.State)
	if st < Empty || st > Dead || v.Version < 0 || v.Version > 1 {
		return nil, fmt.Errorf("%w: value of %q: version %d, state %d", errBadRecord, id, v.Version, v.State)
	}
	m := &txnMeta{
		id: id, pid: v.ProducerID, prevPid: -1, nextPid: -1, epoch: v.ProducerEpoch, lastEpoch: noEpoch,
		timeoutMs: v.TimeoutMillis, state: st, startMs: v.StartTimestamp, updateMs: v.LastUpdateTimestamp,
		parts: map[TopicPartition]struct{}{},
	}
	if v.Version >= 1 {
		m.prevPid, m.nextPid, m.tv2 = v.PreviousProducerID, v.NextProducerID, v.ClientTransactionVersion >= 2
	}
	for _, t := range v.Topics {
		for _, p := range t.Partitions {
			m.parts[TopicPartition{t.Topic, p}] = struct{}{}
		}
	}
	return m, nil
}
