package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/sluice-broker/sluice/record"
)

// producerBatchCache is how many recent batches per producer are remembered
// for duplicate detection; Kafka's clients keep at most 5 requests in flight.
const producerBatchCache = 5

const noProducerEpoch = -1

// batchMeta identifies one appended idempotent batch.
type batchMeta struct {
	firstSeq, lastSeq       int32
	firstOffset, lastOffset int64
}

// producerEntry is the log's memory of one producer id.
type producerEntry struct {
	pid              int64
	epoch            int16
	batches          [producerBatchCache]batchMeta // oldest first
	nb               int                           // valid entries in batches
	lastTimestamp    int64
	lastOffset       int64 // last offset written by this producer (data or marker)
	coordinatorEpoch int32
	txnStart         int64 // first offset of the open transaction, or -1
}

func (e *producerEntry) lastSeq() (int32, bool) {
	if e.nb == 0 {
		return 0, false
	}
	return e.batches[e.nb-1].lastSeq, true
}

func (e *producerEntry) findDuplicate(first, last int32) (batchMeta, bool) {
	for _, b := range e.batches[:e.nb] {
		if b.firstSeq == first && b.lastSeq == last {
			return b, true
		}
	}
	return batchMeta{}, false
}

func (e *producerEntry) addBatch(b batchMeta) {
	if e.nb == producerBatchCache {
		copy(e.batches[:], e.batches[1:])
		e.nb--
	}
	e.batches[e.nb] = b
	e.nb++
}

// producerUndo restores one entry if a later batch of the same record set
// fails, so a rejected record set leaves no trace.
type producerUndo struct {
	pid     int64
	existed bool
	old     producerEntry
}

// producerState maps producer ids to their entries.
type producerState struct {
	mu struct {
		sync.Mutex
		m map[int64]*producerEntry
	}
	// txnDirty: some entry's open transaction (txnStart) changed since
	// the log last recomputed its first unstable offset (txn.go).
	txnDirty atomic.Bool
}

func newProducerState() *producerState {
	p := &producerState{}
	p.mu.m = make(map[int64]*producerEntry)
	return p
}

// inSequence reports whether next follows last, wrapping at MaxInt32.
func inSequence(last, next int32) bool {
	return next == last+1 || (next == 0 && last == math.MaxInt32)
}

// check validates an idempotent batch against the producer's state, as Kafka
// 3.x does:
//   - an older epoch is fenced (ErrInvalidProducerEpoch);
//   - a batch matching one of the last 5 of the current epoch is a duplicate;
//   - a new epoch of a known producer must start at sequence 0;
//   - within an epoch, the first sequence must follow the last one.
//
// A producer id the log does not know is accepted at any sequence: since
// KIP-360 (Kafka 2.5) the broker cannot tell an unknown producer from one
// whose state was removed with old segments, so it does not answer
// UNKNOWN_PRODUCER_ID on produce. The exception is a transactional batch
// of a transactions-version-2 producer (txnV2), which starts every
// transaction at sequence 0: anything else is out of order, and the
// producer retries it behind its earlier batch. The caller holds p.mu.
func (p *producerState) check(h *record.Header, txnV2 bool) (dup batchMeta, isDup bool, err error) {
	e := p.mu.m[h.ProducerID]
	if e == nil || e.epoch == noProducerEpoch {
		if txnV2 && h.IsTransactional() && h.BaseSequence != 0 {
			return batchMeta{}, false, &sequenceGapError{pid: h.ProducerID, epoch: h.ProducerEpoch, base: h.BaseSequence, last: -1}
		}
		if e == nil {
			return batchMeta{}, false, nil
		}
	}
	if h.ProducerEpoch < e.epoch {
		return batchMeta{}, false, ErrInvalidProducerEpoch
	}
	if h.IsControl() {
		return batchMeta{}, false, nil
	}
	if h.ProducerEpoch == e.epoch {
		if d, ok := e.findDuplicate(h.BaseSequence, h.LastSequence()); ok {
			return d, true, nil
		}
	}
	if h.ProducerEpoch != e.epoch {
		if h.BaseSequence != 0 && e.epoch != noProducerEpoch {
			return batchMeta{}, false, errNewEpochSeq
		}
		return batchMeta{}, false, nil
	}
	last, ok := e.lastSeq()
	if !ok {
		last = -1
	}
	if !inSequence(last, h.BaseSequence) {
		return batchMeta{}, false, &sequenceGapError{pid: h.ProducerID, epoch: h.ProducerEpoch, base: h.BaseSequence, last: last, nb: e.nb}
	}
	return batchMeta{}, false, nil
}

// sequenceGapError is an OUT_OF_ORDER_SEQUENCE_NUMBER with the state that
// refused it, so the client's log (which prints the error message) says
// which sequence the partition expected. It allocates, but only on a
// refusal, which a producer in order never sees.
type sequenceGapError struct {
	pid        int64
	epoch      int16
	base, last int32
	nb         int // batches of this epoch the partition remembers
}

func (e *sequenceGapError) Error() string {
	return fmt.Sprintf("%v: producer %d epoch %d sent sequence %d, the partition's last is %d (%d batches of this epoch remembered)",
		ErrOutOfOrderSequence, e.pid, e.epoch, e.base, e.last, e.nb)
}

func (e *sequenceGapError) Unwrap() error { return ErrOutOfOrderSequence }

// update records an appended batch (with its assigned offsets) and returns
// the undo record for it. The caller holds p.mu.
func (p *producerState) update(h *record.Header) producerUndo {
	e := p.mu.m[h.ProducerID]
	u := producerUndo{pid: h.ProducerID, existed: e != nil}
	if e == nil {
		e = &producerEntry{pid: h.ProducerID, epoch: noProducerEpoch, txnStart: -1, coordinatorEpoch: -1}
		p.mu.m[h.ProducerID] = e
	} else {
		u.old = *e
	}
	p.apply(e, h)
	return u
}

func (p *producerState) apply(e *producerEntry, h *record.Header) {
	if h.ProducerEpoch != e.epoch {
		e.epoch = h.ProducerEpoch
		e.nb = 0
	}
	e.lastTimestamp = h.MaxTimestamp
	e.lastOffset = h.LastOffset()
	switch {
	case h.IsControl():
		if e.txnStart >= 0 {
			e.txnStart = -1 // a marker ends the open transaction
			p.txnDirty.Store(true)
		}
	default:
		e.addBatch(batchMeta{h.BaseSequence, h.LastSequence(), h.BaseOffset, h.LastOffset()})
		if h.IsTransactional() && e.txnStart < 0 {
			e.txnStart = h.BaseOffset
			p.txnDirty.Store(true)
		}
	}
}

// undo reverts updates, newest first. The caller holds p.mu.
func (p *producerState) undo(us []producerUndo) {
	if len(us) > 0 {
		p.txnDirty.Store(true) // an open transaction may have been undone
	}
	for i := len(us) - 1; i >= 0; i-- {
		u := us[i]
		if !u.existed {
			delete(p.mu.m, u.pid)
			continue
		}
		*p.mu.m[u.pid] = u.old
	}
}

// evictBefore forgets producers whose last write is below the log start:
// their batches are gone, as Kafka does on log start offset increments.
func (p *producerState) evictBefore(logStart int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for pid, e := range p.mu.m {
		if e.lastOffset < logStart {
			if e.txnStart >= 0 {
				p.txnDirty.Store(true)
			}
			delete(p.mu.m, pid)
		}
	}
}

// firstUnstable is the first offset of the oldest open transaction, or
// math.MaxInt64 if none is open.
func (p *producerState) firstUnstable() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	first := int64(math.MaxInt64)
	for _, e := range p.mu.m {
		if e.txnStart >= 0 {
			first = min(first, e.txnStart)
		}
	}
	return first
}

// lastOffsets maps every producer to the last offset it wrote.
func (p *producerState) lastOffsets() map[int64]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := make(map[int64]int64, len(p.mu.m))
	for pid, e := range p.mu.m {
		m[pid] = e.lastOffset
	}
	return m
}

// lastDataOffsets maps every producer with a data batch of its current
// epoch to that batch's last offset.
func (p *producerState) lastDataOffsets() map[int64]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := make(map[int64]int64, len(p.mu.m))
	for pid, e := range p.mu.m {
		if e.nb > 0 {
			m[pid] = e.batches[e.nb-1].lastOffset
		}
	}
	return m
}

func (p *producerState) infos() []ProducerInfo {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]ProducerInfo, 0, len(p.mu.m))
	for _, e := range p.mu.m {
		last, ok := e.lastSeq()
		if !ok {
			last = -1
		}
		out = append(out, ProducerInfo{
			ProducerID:            e.pid,
			ProducerEpoch:         e.epoch,
			LastSequence:          last,
			LastTimestamp:         e.lastTimestamp,
			CoordinatorEpoch:      e.coordinatorEpoch,
			CurrentTxnStartOffset: e.txnStart,
		})
	}
	slices.SortFunc(out, func(a, b ProducerInfo) int { return int(min(max(a.ProducerID-b.ProducerID, -1), 1)) })
	return out
}

// ProducerInfo describes one idempotent producer known to the partition.
type ProducerInfo struct {
	ProducerID            int64
	ProducerEpoch         int16
	LastSequence          int32
	LastTimestamp         int64
	CoordinatorEpoch      int32
	CurrentTxnStartOffset int64 // -1 when no transaction is open
}

// Producer snapshot files, "<offset, 20 digits>.snapshot", hold the state as
// of that offset (all batches below it applied):
//
//	magic "SLPS" | version u16 = 1 | count u32 | count × entry | crc32c u32
//	entry: pid i64 | epoch i16 | lastTimestamp i64 | lastOffset i64 |
//	       coordinatorEpoch i32 | txnStart i64 | nb u8 |
//	       nb × (firstSeq i32 | lastSeq i32 | firstOffset i64 | lastOffset i64)
//
// The CRC covers everything before it, all integers are big-endian.
const (
	snapshotSuffix  = ".snapshot"
	snapshotMagic   = "SLPS"
	snapshotVersion = 1
)

func (p *producerState) encode() []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	be := binary.BigEndian
	b := append([]byte(snapshotMagic), 0, snapshotVersion)
	b = be.AppendUint32(b, uint32(len(p.mu.m)))
	for _, e := range p.mu.m {
		b = be.AppendUint64(b, uint64(e.pid))
		b = be.AppendUint16(b, uint16(e.epoch))
		b = be.AppendUint64(b, uint64(e.lastTimestamp))
		b = be.AppendUint64(b, uint64(e.lastOffset))
		b = be.AppendUint32(b, uint32(e.coordinatorEpoch))
		b = be.AppendUint64(b, uint64(e.txnStart))
		b = append(b, byte(e.nb))
		for _, m := range e.batches[:e.nb] {
			b = be.AppendUint32(b, uint32(m.firstSeq))
			b = be.AppendUint32(b, uint32(m.lastSeq))
			b = be.AppendUint64(b, uint64(m.firstOffset))
			b = be.AppendUint64(b, uint64(m.lastOffset))
		}
	}
	return be.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

var errBadSnapshot = errors.New("storage: bad producer snapshot")

// castagnoli is the CRC of a snapshot file, CRC-32C like a batch's.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// decodeSnapshot parses a snapshot; it uses a sticky failure flag so the
// field reads stay straight-line.
func decodeSnapshot(b []byte) (map[int64]*producerEntry, error) {
	if len(b) < 14 || string(b[:4]) != snapshotMagic || binary.BigEndian.Uint16(b[4:]) != snapshotVersion {
		return nil, errBadSnapshot
	}
	body := b[:len(b)-4]
	if crc32.Checksum(body, castagnoli) != binary.BigEndian.Uint32(b[len(b)-4:]) {
		return nil, errBadSnapshot
	}
	d := decoder{b: body[6:]}
	n := int(d.u32())
	m := make(map[int64]*producerEntry, min(n, 1<<16))
	for i := 0; i < n && !d.bad; i++ {
		e := &producerEntry{pid: int64(d.u64()), epoch: int16(d.u16()), lastTimestamp: int64(d.u64()),
			lastOffset: int64(d.u64()), coordinatorEpoch: int32(d.u32()), txnStart: int64(d.u64())}
		e.nb = int(d.u8())
		if e.nb > producerBatchCache {
			d.bad = true
			break
		}
		for j := range e.nb {
			e.batches[j] = batchMeta{int32(d.u32()), int32(d.u32()), int64(d.u64()), int64(d.u64())}
		}
		m[e.pid] = e
	}
	if d.bad || len(d.b) != 0 {
		return nil, errBadSnapshot
	}
	return m, nil
}

type decoder struct {
	b   []byte
	bad bool
}

func (d *decoder) take(n int) []byte {
	if d.bad || len(d.b) < n {
		d.bad = true
		return make([]byte, n)
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) u8() uint8   { return d.take(1)[0] }
func (d *decoder) u16() uint16 { return binary.BigEndian.Uint16(d.take(2)) }
func (d *decoder) u32() uint32 { return binary.BigEndian.Uint32(d.take(4)) }
func (d *decoder) u64() uint64 { return binary.BigEndian.Uint64(d.take(8)) }

func writeSnapshot(dir string, offset int64, data []byte) error {
	return writeFileAtomic(dir, segmentName(offset, snapshotSuffix), data)
}

// listSnapshots returns the offsets of the snapshot files in dir, ascending.
func listSnapshots(dir string) ([]int64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var offs []int64
	for _, e := range ents {
		if off, ok := parseSegmentName(e.Name(), snapshotSuffix); ok {
			offs = append(offs, off)
		}
	}
	slices.Sort(offs)
	return offs, nil
}

// loadLatestSnapshot loads the newest readable snapshot at or below limit
// and returns its offset (-1 with an empty state if there is none). Newer
// snapshots (above a truncated log end) and unreadable ones are removed.
func loadLatestSnapshot(dir string, limit int64) (map[int64]*producerEntry, int64, error) {
	offs, err := listSnapshots(dir)
	if err != nil {
		return nil, 0, err
	}
	for i := len(offs) - 1; i >= 0; i-- {
		path := filepath.Join(dir, segmentName(offs[i], snapshotSuffix))
		if offs[i] > limit {
			os.Remove(path)
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, 0, err
		}
		m, err := decodeSnapshot(data)
		if err != nil {
			os.Remove(path) // unreadable: fall back to an older one
			continue
		}
		return m, offs[i], nil
	}
	return make(map[int64]*producerEntry), -1, nil
}

// removeSnapshotsBelow deletes snapshots older than keep, always keeping the
// newest one at or below keep so recovery has a starting point.
func removeSnapshotsBelow(dir string, keep int64) error {
	offs, err := listSnapshots(dir)
	if err != nil {
		return err
	}
	var errs []error
	for i, off := range offs {
		if off < keep && i+1 < len(offs) && offs[i+1] <= keep {
			// Flushes and retention both prune; losing the race is fine.
			if err := os.Remove(filepath.Join(dir, segmentName(off, snapshotSuffix))); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("storage: removing snapshots: %w", errors.Join(errs...))
	}
	return nil
}

// replay applies a batch read back from the log, without checks: the log is
// the truth. The caller holds p.mu.
func (p *producerState) replay(h *record.Header) {
	e := p.mu.m[h.ProducerID]
	if e == nil {
		e = &producerEntry{pid: h.ProducerID, epoch: noProducerEpoch, txnStart: -1, coordinatorEpoch: -1}
		p.mu.m[h.ProducerID] = e
	}
	if h.ProducerEpoch < e.epoch {
		return
	}
	p.apply(e, h)
}
