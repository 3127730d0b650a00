package group

// Offsets committed inside a transaction (TxnOffsetCommit, key 28). They
// are written to the group's __consumer_offsets partition at once, as one
// transactional batch of the producer, but stay pending until the
// transaction coordinator writes the producer's marker on that partition
// (TxnCompleted): a commit marker makes them the group's committed offsets,
// an abort marker drops them. A load replays them the same way: records of
// a transaction that committed count from its marker, records of one that
// aborted never, and those of a transaction still open come back pending
// (RestoreTxnOffset) so its marker still finds them.

import (
	"bytes"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/record"
)

// TxnLog is a PartitionLog that also writes a producer's transactional
// batches; the log chooses the base sequence (the producer's next one on
// the partition) and build encodes the batch with it.
type TxnLog interface {
	AppendTxn(producerID int64, producerEpoch int16, build func(baseSequence int32) ([]byte, error)) (int64, error)
}

// txnOffsets holds the offsets of open transactions, per offsets
// partition, producer id and group.
type txnOffsets struct {
	mu      sync.Mutex
	pending map[int32]map[int64]map[string]map[offsetTP]*committedOffset
}

func (t *txnOffsets) add(p int32, pid int64, group string, tp offsetTP, o *committedOffset) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.pending == nil {
		t.pending = map[int32]map[int64]map[string]map[offsetTP]*committedOffset{}
	}
	byPid := t.pending[p]
	if byPid == nil {
		byPid = map[int64]map[string]map[offsetTP]*committedOffset{}
		t.pending[p] = byPid
	}
	byGroup := byPid[pid]
	if byGroup == nil {
		byGroup = map[string]map[offsetTP]*committedOffset{}
		byPid[pid] = byGroup
	}
	if byGroup[group] == nil {
		byGroup[group] = map[offsetTP]*committedOffset{}
	}
	byGroup[group][tp] = o
}

func (t *txnOffsets) take(p int32, pid int64) map[string]map[offsetTP]*committedOffset {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := t.pending[p][pid]
	delete(t.pending[p], pid)
	return out
}

// drop forgets partition p's open transactions (at unload, and before a
// load replays them again).
func (t *txnOffsets) drop(p int32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.pending, p)
}

// TxnCommitRequest is a TxnOffsetCommit.
type TxnCommitRequest struct {
	Group         string
	ProducerID    int64
	ProducerEpoch int16
	Generation    int32 // -1 (v0-2, or a client without group metadata): no member check
	MemberID      string
	InstanceID    string
	Now           time.Time
	Offsets       []CommitOffset // ErrorCode set on each, as Commit does
}

// TxnCommit writes a transaction's offsets for the group, pending until
// the transaction ends. Member checks apply only when the request names a
// generation or member (TxnOffsetCommit v3+), as in Kafka.
func (c *Coordinator) TxnCommit(req *TxnCommitRequest) {
	g, m := c.lockGroup(req.Group, true)
	if g == nil {
		setCommitErrors(req.Offsets, m.code(0, kerr.CoordinatorNotAvailable.Code))
		return
	}
	defer g.unlock()
	if req.Generation >= 0 || req.MemberID != "" || req.InstanceID != "" {
		if code := g.checkCommit(req.Generation, req.MemberID, req.InstanceID); code != 0 {
			setCommitErrors(req.Offsets, code)
			g.dropIfUnused()
			return
		}
	}
	staged := stageCommit(&CommitRequest{Now: req.Now, RetentionMs: -1, Offsets: req.Offsets})
	if err := g.appendTxn(req.ProducerID, req.ProducerEpoch, staged); err != nil {
		g.c.log.Error("writing transactional offset commit failed", "group", g.name, "err", err)
		code := appendErrorCode(err, true)
		for _, s := range staged {
			*s.code = code
		}
		g.dropIfUnused()
		return
	}
	for _, s := range staged {
		c.txn.add(g.part.index, req.ProducerID, g.name, s.tp, s.o)
	}
}

// appendTxn writes staged offsets as one transactional batch.
func (g *group) appendTxn(pid int64, epoch int16, staged []stagedOffset) error {
	if len(staged) == 0 {
		return nil
	}
	tl, ok := g.part.log.(TxnLog)
	if !ok {
		return errNoTxnLog
	}
	now := g.c.clock.Now().UnixMilli()
	build := func(seq int32) ([]byte, error) {
		h := record.NewHeader()
		h.FirstTimestamp, h.ProducerID, h.ProducerEpoch, h.BaseSequence = now, pid, epoch, seq
		h.Attributes |= record.AttrTransactional
		var b record.Builder
		b.Reset(h)
		for i, s := range staged {
			rec := offsetCommitRecord(g.name, s.tp, s.o)
			b.Add(&record.Record{OffsetDelta: int32(i), Key: rec.key, Value: rec.value})
		}
		return b.AppendTo(nil)
	}
	p := g.part
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	_, err := tl.AppendTxn(pid, epoch, build)
	return err
}

var errNoTxnLog = errTxnLog("this log cannot write transactional batches")

type errTxnLog string

func (e errTxnLog) Error() string { return string(e) }

// TxnCompleted applies (commit) or drops (abort) the offsets producer pid
// wrote to offsets partition p in its transaction: the engine calls it
// once the producer's marker is written there.
func (c *Coordinator) TxnCompleted(p int32, pid int64, commit bool) {
	byGroup := c.txn.take(p, pid)
	if !commit {
		return
	}
	for name, offsets := range byGroup {
		g, _ := c.lockGroup(name, true)
		if g == nil {
			continue // the partition is gone: its next load replays the marker
		}
		for tp, o := range offsets {
			g.offsets[tp] = o
		}
		g.unlock()
	}
}

// RestoreTxnOffset puts back, during a load of partition p, one record of
// a transaction of pid that has no marker yet. Records other than offset
// commits are ignored.
func (c *Coordinator) RestoreTxnOffset(p int32, pid int64, key, value []byte) error {
	if len(key) < 2 || key[1] > 1 || key[0] != 0 || value == nil {
		return nil
	}
	var k kmsg.OffsetCommitKey
	if err := k.ReadFrom(bytes.Clone(key)); err != nil {
		return err
	}
	lg := &loadedGroup{offsets: map[offsetTP]*committedOffset{}}
	tp := offsetTP{k.Topic, k.Partition}
	if err := loadOffset(lg, tp, bytes.Clone(value)); err != nil {
		return err
	}
	c.txn.add(p, pid, k.Group, tp, lg.offsets[tp])
	return nil
}
