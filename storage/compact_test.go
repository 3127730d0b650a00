package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-broker/sluice/record"
)

// kv is one record of a test batch; a nil value is a tombstone, a nil key
// a record without key.
type kv struct {
	key, value []byte
}

func rec(key, value string) kv { return kv{[]byte(key), []byte(value)} }
func tombstone(key string) kv  { return kv{key: []byte(key)} }
func keyless(value string) kv  { return kv{value: []byte(value)} }

type keyedSpec struct {
	codec record.Codec
	ts    int64
	pid   int64
	seq   int32
}

// keyedBatch encodes records as one RecordBatch v2 with the given codec.
func keyedBatch(t testing.TB, s keyedSpec, recs ...kv) []byte {
	t.Helper()
	var raw []byte
	for i, r := range recs {
		var body []byte
		body = append(body, 0)
		body = binary.AppendVarint(body, int64(i))
		body = binary.AppendVarint(body, int64(i))
		if r.key == nil {
			body = binary.AppendVarint(body, -1)
		} else {
			body = binary.AppendVarint(body, int64(len(r.key)))
			body = append(body, r.key...)
		}
		if r.value == nil {
			body = binary.AppendVarint(body, -1)
		} else {
			body = binary.AppendVarint(body, int64(len(r.value)))
			body = append(body, r.value...)
		}
		body = binary.AppendVarint(body, 0)
		raw = binary.AppendVarint(raw, int64(len(body)))
		raw = append(raw, body...)
	}
	be := binary.BigEndian
	b := make([]byte, record.HeaderLen)
	b[record.PosMagic] = 2
	be.PutUint32(b[record.PosLeaderEpoch:], 0xffffffff)
	be.PutUint16(b[record.PosAttributes:], uint16(s.codec))
	be.PutUint32(b[record.PosLastOffsetDelta:], uint32(len(recs)-1))
	if s.ts == 0 {
		s.ts = 1_700_000_000_000
	}
	be.PutUint64(b[record.PosFirstTimestamp:], uint64(s.ts))
	be.PutUint64(b[record.PosMaxTimestamp:], uint64(s.ts+int64(len(recs))-1))
	pid, epoch, seq := int64(-1), int16(-1), int32(-1)
	if s.pid > 0 {
		pid, epoch, seq = s.pid, 0, s.seq
	}
	be.PutUint64(b[record.PosProducerID:], uint64(pid))
	be.PutUint16(b[record.PosProducerEpoch:], uint16(epoch))
	be.PutUint32(b[record.PosBaseSequence:], uint32(seq))
	be.PutUint32(b[record.PosNumRecords:], uint32(len(recs)))
	b, err := s.codec.Compress(b, raw)
	if err != nil {
		t.Fatal(err)
	}
	be.PutUint32(b[record.PosLength:], uint32(len(b)-record.LogOverhead))
	record.SetCRC(b)
	return b
}

// logRec is a record read back from a log.
type logRec struct {
	off   int64
	ts    int64
	key   string
	value []byte // nil: tombstone
	batch record.Header
}

// readRecords reads the whole log (up to its end) through Read and decodes
// every record, checking the batches as recovery would.
func readRecords(t testing.TB, l *Log) ([]record.Header, []logRec) {
	t.Helper()
	var hs []record.Header
	var recs []logRec
	off := l.LogStartOffset()
	for {
		r, err := l.Read(off, 1<<20, true)
		if err != nil {
			t.Fatalf("Read(%d): %v", off, err)
		}
		if r.Len == 0 {
			if off != l.LogEndOffset() {
				t.Fatalf("Read(%d) empty before the end %d", off, l.LogEndOffset())
			}
			return hs, recs
		}
		b := readRegion(t, r)
		for len(b) > 0 {
			h, rs := decodeBatch(t, b)
			if h.BaseOffset < off && h.LastOffset() < off {
				t.Fatalf("Read(%d) returned batch [%d, %d]", off, h.BaseOffset, h.LastOffset())
			}
			hs = append(hs, h)
			recs = append(recs, rs...)
			off = h.LastOffset() + 1
			b = b[h.Size():]
		}
	}
}

func decodeBatch(t testing.TB, b []byte) (record.Header, []logRec) {
	t.Helper()
	if _, err := checkBatchAs(b, 0, true); err != nil {
		t.Fatalf("bad batch: %v", err)
	}
	h, _ := record.ParseHeader(b)
	raw, err := h.Compression().Decompress(nil, b[record.HeaderLen:h.Size()], record.DefaultDecompressLimit)
	if err != nil {
		t.Fatal(err)
	}
	var recs []logRec
	prev := int32(-1)
	for len(raw) > 0 {
		r, n, err := record.ParseRecord(raw)
		if err != nil {
			t.Fatal(err)
		}
		if r.OffsetDelta <= prev || r.OffsetDelta > h.LastOffsetDelta {
			t.Fatalf("batch %d: offset delta %d after %d (last %d)", h.BaseOffset, r.OffsetDelta, prev, h.LastOffsetDelta)
		}
		prev = r.OffsetDelta
		lr := logRec{off: h.BaseOffset + int64(r.OffsetDelta), ts: h.FirstTimestamp + r.TimestampDelta, key: string(r.Key), batch: h}
		if !r.IsTombstone() {
			lr.value = append([]byte{}, r.Value...)
		}
		recs = append(recs, lr)
		raw = raw[n:]
	}
	if len(recs) != int(h.NumRecords) {
		t.Fatalf("batch %d: %d records, header says %d", h.BaseOffset, len(recs), h.NumRecords)
	}
	return h, recs
}

// model tracks what a compacted log must still answer: the latest record
// of every key.
type model struct {
	latest map[string]logRec
	next   int64
}

func newModel() *model { return &model{latest: map[string]logRec{}} }

// add appends recs as one batch to l and to the model.
func (m *model) add(t testing.TB, l *Log, s keyedSpec, recs ...kv) {
	t.Helper()
	res := appendOne(t, l, keyedBatch(t, s, recs...))
	if res.FirstOffset != m.next {
		t.Fatalf("appended at %d, model at %d", res.FirstOffset, m.next)
	}
	for i, r := range recs {
		if r.key != nil {
			m.latest[string(r.key)] = logRec{off: m.next + int64(i), key: string(r.key), value: r.value}
		}
	}
	m.next += int64(len(recs))
}

// check verifies that every key's latest record is in the log, at its
// offset and with its value, and that records come in offset order. With
// tombstonesGone, tombstoned keys must have vanished entirely.
func (m *model) check(t testing.TB, l *Log, tombstonesGone bool) []logRec {
	t.Helper()
	_, recs := readRecords(t, l)
	last := map[string]logRec{}
	prev := int64(-1)
	for _, r := range recs {
		if r.off <= prev {
			t.Fatalf("offset %d after %d", r.off, prev)
		}
		prev = r.off
		last[r.key] = r
	}
	for k, want := range m.latest {
		got, ok := last[k]
		switch {
		case want.value == nil && tombstonesGone:
			if ok {
				t.Fatalf("key %q: tombstoned, still has %d=%q", k, got.off, got.value)
			}
		case !ok:
			t.Fatalf("key %q: latest record (offset %d) lost", k, want.off)
		case got.off != want.off || !bytes.Equal(got.value, want.value) || (got.value == nil) != (want.value == nil):
			t.Fatalf("key %q: last record %d=%q, want %d=%q", k, got.off, got.value, want.off, want.value)
		}
	}
	if l.LogEndOffset() != m.next {
		t.Fatalf("log end %d, want %d", l.LogEndOffset(), m.next)
	}
	return recs
}

func compactConfig() Config {
	cfg := testConfig()
	cfg.Compact = true
	cfg.SegmentBytes = 2048
	cfg.IndexIntervalBytes = 256
	cfg.SegmentIndexBytes = 4096
	cfg.RetentionMs, cfg.RetentionBytes = -1, -1
	return cfg
}

// settle makes everything appended cleanable: committed and below the
// durable recovery point.
func settle(t testing.TB, l *Log) {
	t.Helper()
	l.SetHighWatermark(l.LogEndOffset())
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
}

func mustCompact(t testing.TB, l *Log, now int64) CompactStats {
	t.Helper()
	st, err := l.Compact(now)
	if err != nil {
		t.Fatalf("Compact: %v", err)
	}
	return st
}

// overwrite writes rounds batches of 4 records over keys key-0..key-(keys-1).
func overwrite(t testing.TB, l *Log, m *model, rounds, keys int, codec record.Codec) {
	t.Helper()
	for i := 0; i < rounds; i++ {
		var recs []kv
		for j := 0; j < 4; j++ {
			k := (i*4 + j) % keys
			recs = append(recs, rec(fmt.Sprintf("key-%d", k), fmt.Sprintf("value-%d-%d", k, i*4+j)))
		}
		m.add(t, l, keyedSpec{codec: codec, ts: 1_700_000_000_000 + int64(i)}, recs...)
	}
}

func TestCompactKeepsLatestOfEachKey(t *testing.T) {
	l := mustOpen(t, fastTempDir(t), compactConfig())
	defer l.Close()
	m := newModel()
	overwrite(t, l, m, 200, 10, record.None)
	settle(t, l)
	leo, hw, start, size := l.LogEndOffset(), l.HighWatermark(), l.LogStartOffset(), l.Size()
	segsBefore := len(l.segs.Load().segs)
	activeBase := l.mu.active.base

	st := mustCompact(t, l, time.Now().UnixMilli())
	t.Logf("%+v", st)
	if st.SegmentsWritten == 0 || st.Keys != 10 || st.RecordsKept >= st.Records {
		t.Fatalf("nothing cleaned: %+v", st)
	}
	if l.LogEndOffset() != leo || l.HighWatermark() != hw || l.LogStartOffset() != start {
		t.Fatalf("offsets moved: leo %d→%d hw %d→%d start %d→%d", leo, l.LogEndOffset(), hw, l.HighWatermark(), start, l.LogStartOffset())
	}
	if l.Size() >= size/2 {
		t.Fatalf("size %d→%d", size, l.Size())
	}
	if l.Size() != sumSegments(l) {
		t.Fatalf("Size %d, segments hold %d", l.Size(), sumSegments(l))
	}
	recs := m.check(t, l, false)
	// Below the active segment each key appears once: its latest record there.
	seen := map[string]bool{}
	for _, r := range recs {
		if r.off < activeBase {
			if seen[r.key] {
				t.Fatalf("key %q twice below the active segment", r.key)
			}
			seen[r.key] = true
		}
	}
	// A second pass without new data finds nothing to do.
	if st := mustCompact(t, l, time.Now().UnixMilli()); st.SegmentsRead != 0 {
		t.Fatalf("second pass read: %+v", st)
	}
	// The first pass could not merge full segments (Kafka groups by their
	// size before cleaning); the next one merges the cleaned ones.
	overwrite(t, l, m, 20, 10, record.None)
	settle(t, l)
	st = mustCompact(t, l, time.Now().UnixMilli())
	t.Logf("%+v", st)
	if segs := len(l.segs.Load().segs); segs >= segsBefore/2 || st.SegmentsReplaced <= st.SegmentsWritten {
		t.Fatalf("segments %d→%d: %+v", segsBefore, segs, st)
	}
	m.check(t, l, false)
	reopenAndCheck(t, l, m, false)
}

func sumSegments(l *Log) int64 {
	var n int64
	for _, s := range l.segs.Load().segs {
		n += s.size.Load()
	}
	return n
}

// reopenAndCheck closes l, opens it again (clean) and, after an unclean
// stop that must rescan and validate every segment, checks the model.
func reopenAndCheck(t *testing.T, l *Log, m *model, tombstonesGone bool) {
	t.Helper()
	dir, cfg := l.Dir(), l.config()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2 := mustOpen(t, dir, cfg)
	m.check(t, l2, tombstonesGone)
	crash(l2)
	// Without a recovery point every segment is read and CRC-checked again.
	os.Remove(filepath.Join(dir, recoveryPointFile))
	cfg.Compact = false // a topic may stop being compacted: the checkpoint still admits the gaps
	l3 := mustOpen(t, dir, cfg)
	defer l3.Close()
	m.check(t, l3, tombstonesGone)
}

// TestCompactReadsIntoGaps reads every offset of a compacted log: an
// offset the cleaner removed reads from the next batch that remains, even
// across segments.
func TestCompactReadsIntoGaps(t *testing.T) {
	l := mustOpen(t, fastTempDir(t), compactConfig())
	defer l.Close()
	m := newModel()
	overwrite(t, l, m, 120, 6, record.None)
	settle(t, l)
	mustCompact(t, l, time.Now().UnixMilli())
	hs, _ := readRecords(t, l)
	for off := l.LogStartOffset(); off < l.LogEndOffset(); off++ {
		want := -1
		for i, h := range hs {
			if h.LastOffset() >= off {
				want = i
				break
			}
		}
		r, err := l.Read(off, 1, false)
		if err != nil {
			t.Fatalf("Read(%d): %v", off, err)
		}
		got, _ := decodeBatch(t, readRegion(t, r))
		if got.BaseOffset != hs[want].BaseOffset {
			t.Fatalf("Read(%d) starts at batch %d, want %d", off, got.BaseOffset, hs[want].BaseOffset)
		}
		if r.NextOffset <= off {
			t.Fatalf("Read(%d): next offset %d", off, r.NextOffset)
		}
	}
	// OffsetForTimestamp still finds batches.
	if off, _, ok := l.OffsetForTimestamp(0); !ok || off != hs[0].BaseOffset {
		t.Fatalf("OffsetForTimestamp(0) = %d, %v", off, ok)
	}
}

func TestCompactTombstones(t *testing.T) {
	cfg := compactConfig()
	cfg.DeleteRetentionMs = 1000
	l := mustOpen(t, fastTempDir(t), cfg)
	defer l.Close()
	m := newModel()
	m.add(t, l, keyedSpec{}, rec("gone", "v1"), rec("kept", "k1"))
	m.add(t, l, keyedSpec{}, rec("gone", "v2"))
	m.add(t, l, keyedSpec{}, tombstone("gone"), rec("other", "o1"))
	overwrite(t, l, m, 60, 5, record.None) // fill segments
	settle(t, l)
	const now = int64(1_800_000_000_000)
	mustCompact(t, l, now)
	recs := m.check(t, l, false)
	var tomb *logRec
	for i, r := range recs {
		if r.key == "gone" {
			if r.value != nil {
				t.Fatalf("older value of a tombstoned key kept: %q", r.value)
			}
			tomb = &recs[i]
		}
	}
	if tomb == nil {
		t.Fatal("tombstone removed before delete.retention.ms")
	}
	if tomb.batch.Attributes&record.AttrDeleteHorizon == 0 || tomb.batch.FirstTimestamp != now+1000 {
		t.Fatalf("tombstone batch without its delete horizon: %+v", tomb.batch)
	}
	// Record timestamps survive the re-based deltas.
	for _, r := range recs {
		if r.key == "other" && r.ts != 1_700_000_000_000+1 {
			t.Fatalf("record timestamp %d changed", r.ts)
		}
	}
	if l.CompactionDue(now+999) || !l.CompactionDue(now+1000) {
		t.Fatalf("CompactionDue before/at the horizon: %v %v", l.CompactionDue(now+999), l.CompactionDue(now+1000))
	}
	mustCompact(t, l, now+999)
	m.check(t, l, false)

	// The horizon survives a restart.
	dir := l.Dir()
	l.Close()
	l = mustOpen(t, dir, cfg)
	defer l.Close()
	if !l.CompactionDue(now + 1000) {
		t.Fatal("delete horizon forgotten across a restart")
	}
	st := mustCompact(t, l, now+1000)
	if st.TombstonesRemoved != 1 {
		t.Fatalf("%+v", st)
	}
	recs = m.check(t, l, true)
	for _, r := range recs {
		if r.batch.Attributes&record.AttrDeleteHorizon != 0 {
			t.Fatalf("batch %d still has a delete horizon without tombstones", r.batch.BaseOffset)
		}
		if r.key == "other" && r.ts != 1_700_000_000_000+1 {
			t.Fatalf("record timestamp %d changed", r.ts)
		}
	}
	if l.CompactionDue(now + 1e9) {
		t.Fatal("compaction still due with nothing left to do")
	}
}

func TestCompactCompressedBatches(t *testing.T) {
	for _, codec := range []record.Codec{record.Gzip, record.Snappy, record.LZ4, record.Zstd} {
		t.Run(fmt.Sprint(codec), func(t *testing.T) {
			l := mustOpen(t, fastTempDir(t), compactConfig())
			defer l.Close()
			m := newModel()
			overwrite(t, l, m, 150, 7, codec)
			m.add(t, l, keyedSpec{codec: codec}, rec("key-1", "last"), tombstone("key-2"))
			overwrite(t, l, m, 40, 3, record.None)
			settle(t, l)
			st := mustCompact(t, l, time.Now().UnixMilli())
			if st.SegmentsWritten == 0 {
				t.Fatalf("%+v", st)
			}
			hs, _ := readRecords(t, l)
			rewritten := 0
			for _, h := range hs {
				if h.NumRecords < h.LastOffsetDelta+1 {
					rewritten++
					if h.NumRecords > 0 && h.Compression() != codec && h.Compression() != record.None {
						t.Fatalf("batch %d recompressed with %d", h.BaseOffset, h.Compression())
					}
				}
			}
			if rewritten == 0 {
				t.Fatal("no batch was filtered")
			}
			reopenAndCheck(t, l, m, false)
		})
	}
}

func TestCompactKeylessRecordsDropped(t *testing.T) {
	l := mustOpen(t, fastTempDir(t), compactConfig())
	defer l.Close()
	m := newModel()
	m.add(t, l, keyedSpec{}, keyless("x"), rec("a", "1"))
	overwrite(t, l, m, 60, 4, record.None)
	settle(t, l)
	mustCompact(t, l, time.Now().UnixMilli())
	for _, r := range m.check(t, l, false) {
		if r.key == "" {
			t.Fatal("record without key kept")
		}
	}
}

// The last batch of an idempotent producer survives, empty, so that its
// state can be rebuilt from the log.
func TestCompactKeepsProducersLastBatch(t *testing.T) {
	l := mustOpen(t, fastTempDir(t), compactConfig())
	defer l.Close()
	m := newModel()
	m.add(t, l, keyedSpec{pid: 7, seq: 0}, rec("key-0", "p1"))
	m.add(t, l, keyedSpec{pid: 7, seq: 1}, rec("key-1", "p2"), rec("key-2", "p3"))
	overwrite(t, l, m, 80, 3, record.None) // supersedes both producer batches
	settle(t, l)
	mustCompact(t, l, time.Now().UnixMilli())
	hs, _ := readRecords(t, l)
	var pids []record.Header
	for _, h := range hs {
		if h.ProducerID == 7 {
			pids = append(pids, h)
		}
	}
	if len(pids) != 1 || pids[0].BaseOffset != 1 || pids[0].LastOffsetDelta != 1 || pids[0].NumRecords != 0 || pids[0].BaseSequence != 1 {
		t.Fatalf("producer batches after cleaning: %+v", pids)
	}
	// Rebuilt from the log alone (no snapshot), the producer is known.
	dir, cfg := l.Dir(), l.config()
	crash(l)
	snaps, _ := listSnapshots(dir)
	for _, off := range snaps {
		os.Remove(filepath.Join(dir, segmentName(off, snapshotSuffix)))
	}
	os.Remove(filepath.Join(dir, recoveryPointFile))
	l = mustOpen(t, dir, cfg)
	defer l.Close()
	if ps := l.Producers(); len(ps) != 1 || ps[0].ProducerID != 7 || ps[0].LastSequence != 2 {
		t.Fatalf("producers %+v", ps)
	}
	m.check(t, l, false)
}

func TestCompactRespectsLimits(t *testing.T) {
	t.Run("not compacted", func(t *testing.T) {
		cfg := compactConfig()
		cfg.Compact = false
		l := mustOpen(t, fastTempDir(t), cfg)
		defer l.Close()
		overwrite(t, l, newModel(), 100, 3, record.None)
		settle(t, l)
		if st := mustCompact(t, l, time.Now().UnixMilli()); st.SegmentsRead != 0 || l.CompactionDue(time.Now().UnixMilli()) {
			t.Fatalf("cleaned a delete-policy log: %+v", st)
		}
	})
	t.Run("high watermark", func(t *testing.T) {
		l := mustOpen(t, fastTempDir(t), compactConfig())
		defer l.Close()
		m := newModel()
		overwrite(t, l, m, 100, 3, record.None)
		settle(t, l)
		l.SetHighWatermark(0)
		if st := mustCompact(t, l, time.Now().UnixMilli()); st.SegmentsRead != 0 {
			t.Fatalf("cleaned above the high watermark: %+v", st)
		}
		hw := l.segs.Load().segs[3].base
		l.SetHighWatermark(hw)
		mustCompact(t, l, time.Now().UnixMilli())
		for _, s := range l.segs.Load().segs {
			if s.base >= hw && s.tmp != "" {
				t.Fatal("unreachable")
			}
		}
		_, recs := readRecords(t, l)
		n := 0
		for _, r := range recs {
			if r.off >= hw {
				n++
			}
		}
		if int64(n) != m.next-hw {
			t.Fatalf("records above the high watermark were cleaned: %d of %d left", n, m.next-hw)
		}
	})
	t.Run("min compaction lag", func(t *testing.T) {
		cfg := compactConfig()
		cfg.MinCompactionLagMs = 1000
		l := mustOpen(t, fastTempDir(t), cfg)
		defer l.Close()
		overwrite(t, l, newModel(), 100, 3, record.None)
		settle(t, l)
		ts := int64(1_700_000_000_000)
		if st := mustCompact(t, l, ts); st.SegmentsRead != 0 {
			t.Fatalf("cleaned segments younger than the lag: %+v", st)
		}
		if st := mustCompact(t, l, ts+1200); st.SegmentsWritten == 0 {
			t.Fatalf("old enough segments not cleaned: %+v", st)
		}
	})
	t.Run("recovery point", func(t *testing.T) {
		l := mustOpen(t, fastTempDir(t), compactConfig())
		defer l.Close()
		overwrite(t, l, newModel(), 100, 3, record.None)
		l.SetHighWatermark(l.LogEndOffset())
		l.flushMu.Lock()
		rp := l.flushed.diskRP
		l.flushMu.Unlock()
		mustCompact(t, l, time.Now().UnixMilli())
		for _, s := range l.segs.Load().segs {
			if s.base == rp.base {
				return // the segment recovery would resume in is still there
			}
		}
		t.Fatalf("segment %d of the recovery point was rewritten", rp.base)
	})
	t.Run("offset map bound", func(t *testing.T) {
		defer func(old int64) { cleanerMapBytes = old }(cleanerMapBytes)
		cleanerMapBytes = 1
		l := mustOpen(t, fastTempDir(t), compactConfig())
		defer l.Close()
		m := newModel()
		overwrite(t, l, m, 100, 5, record.None)
		settle(t, l)
		var passes int
		for ; passes < 100 && l.CompactionDue(time.Now().UnixMilli()); passes++ {
			st := mustCompact(t, l, time.Now().UnixMilli())
			if st.CleanedTo >= l.mu.active.base && passes == 0 {
				t.Fatalf("first pass cleaned everything with a one-byte map: %+v", st)
			}
		}
		if passes < 2 || l.CompactionDue(time.Now().UnixMilli()) {
			t.Fatalf("%d passes", passes)
		}
		m.check(t, l, false)
	})
}

func TestCompactionDueFollowsDirtyRatio(t *testing.T) {
	l := mustOpen(t, fastTempDir(t), compactConfig())
	defer l.Close()
	now := time.Now().UnixMilli()
	m := newModel()
	overwrite(t, l, m, 100, 3, record.None)
	settle(t, l)
	if r := l.DirtyRatio(now); r != 1 || !l.CompactionDue(now) {
		t.Fatalf("fresh log: ratio %v", r)
	}
	mustCompact(t, l, now)
	if r := l.DirtyRatio(now); r != 0 || l.CompactionDue(now) {
		t.Fatalf("after a pass: ratio %v", r)
	}
	overwrite(t, l, m, 30, 3, record.None)
	settle(t, l)
	if r := l.DirtyRatio(now); r <= 0 || r >= 1 {
		t.Fatalf("ratio %v", r)
	}
	l.SetConfig(func() Config { c := l.config(); c.MinCleanableDirtyRatio = 0.99; return c }())
	if l.CompactionDue(now) {
		t.Fatal("due below min.cleanable.dirty.ratio")
	}
}

// TestCompactCrashAtEachStage stops a pass at every stage of the swap, as
// a crash would, reopens the log and checks that it holds the old or the
// new segments and every key's latest record.
func TestCompactCrashAtEachStage(t *testing.T) {
	stages := []string{"cleaned", "swap", "deleted 0", "deleted 1", "deleted 2"}
	for _, stage := range stages {
		for _, codec := range []record.Codec{record.None, record.Zstd} {
			t.Run(fmt.Sprintf("%s/%d", stage, codec), func(t *testing.T) {
				dir := filepath.Join(fastTempDir(t), "p-0")
				cfg := compactConfig()
				cfg.SegmentBytes = 1500
				l := mustOpen(t, dir, cfg)
				m := newModel()
				overwrite(t, l, m, 150, 8, codec)
				m.add(t, l, keyedSpec{}, tombstone("key-3"))
				overwrite(t, l, m, 30, 2, codec)
				settle(t, l)
				// A first pass, so that the second merges cleaned segments.
				mustCompact(t, l, time.Now().UnixMilli())
				overwrite(t, l, m, 100, 5, codec)
				settle(t, l)
				hit := false
				l.compactHook = func(s string) error {
					if s == stage {
						hit = true
						return errors.New("crash")
					}
					return nil
				}
				if _, err := l.Compact(time.Now().UnixMilli()); err == nil || !hit {
					t.Fatalf("stage %q not reached: %v", stage, err)
				}
				crash(l)
				l = mustOpen(t, dir, cfg)
				defer l.Close()
				for _, e := range mustReadDir(t, dir) {
					if strings.HasSuffix(e, cleanedSuffix) || strings.HasSuffix(e, swapSuffix) || strings.HasSuffix(e, deletedSuffix) {
						t.Fatalf("%s left after recovery", e)
					}
				}
				m.check(t, l, false)
				settle(t, l)
				mustCompact(t, l, time.Now().UnixMilli())
				m.check(t, l, false)
			})
		}
	}
}

func mustReadDir(t testing.TB, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// TestCompactConcurrentReaders reads the whole log over and over while
// appends and compaction passes run (meant for -race). Every read must
// see valid batches in offset order, and every key's latest record as of
// the read's start.
func TestCompactConcurrentReaders(t *testing.T) {
	cfg := compactConfig()
	cfg.FileDeleteDelayMs = 2000
	l := mustOpen(t, fastTempDir(t), cfg)
	defer l.Close()
	var mu sync.Mutex
	m := newModel()
	overwrite(t, l, m, 50, 10, record.None)
	settle(t, l)
	var stop atomic.Bool
	var wg sync.WaitGroup
	var reads atomic.Int64
	errs := make(chan error, 8)
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				mu.Lock()
				want := make(map[string]logRec, len(m.latest))
				for k, v := range m.latest {
					want[k] = v
				}
				mu.Unlock()
				if err := readVerify(l, want); err != nil {
					errs <- err
					return
				}
				reads.Add(1)
			}
		}()
	}
	rng := rand.New(rand.NewPCG(1, 2))
	passes := 0
	for i := 0; i < 120; i++ {
		mu.Lock()
		for j := 0; j < 10; j++ {
			k := rng.IntN(10)
			m.add(t, l, keyedSpec{codec: record.Codec(rng.IntN(5))}, rec(fmt.Sprintf("key-%d", k), fmt.Sprintf("v%d-%d", i, j)))
		}
		l.SetHighWatermark(l.LogEndOffset()) // readers expect what the model has
		mu.Unlock()
		settle(t, l)
		st := mustCompact(t, l, time.Now().UnixMilli())
		if st.SegmentsWritten > 0 {
			passes++
		}
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("%d passes, %d whole-log reads", passes, reads.Load())
	if passes == 0 || reads.Load() == 0 {
		t.Fatalf("%d passes, %d reads", passes, reads.Load())
	}
	m.check(t, l, false)
}

// readVerify is readRecords for a goroutine that may not call t.Fatal.
func readVerify(l *Log, want map[string]logRec) error {
	last := map[string]int64{}
	off, prev := l.LogStartOffset(), int64(-1)
	for {
		r, err := l.Read(off, 4096, false)
		if err != nil {
			return fmt.Errorf("Read(%d): %w", off, err)
		}
		if r.Len == 0 {
			break
		}
		b := make([]byte, r.Len)
		_, err = r.File.ReadAt(b, r.Pos)
		r.Release()
		if err != nil {
			return fmt.Errorf("Read(%d): region: %w", off, err)
		}
		for len(b) > 0 {
			if _, err := checkBatchAs(b, 0, true); err != nil {
				return fmt.Errorf("Read(%d): %w", off, err)
			}
			h, _ := record.ParseHeader(b)
			if h.BaseOffset <= prev {
				return fmt.Errorf("Read(%d): batch %d after %d", off, h.BaseOffset, prev)
			}
			raw, err := h.Compression().Decompress(nil, b[record.HeaderLen:h.Size()], record.DefaultDecompressLimit)
			if err != nil {
				return err
			}
			for len(raw) > 0 {
				rec, n, err := record.ParseRecord(raw)
				if err != nil {
					return err
				}
				last[string(rec.Key)] = h.BaseOffset + int64(rec.OffsetDelta)
				raw = raw[n:]
			}
			prev = h.LastOffset()
			off = prev + 1
			b = b[h.Size():]
		}
	}
	for k, w := range want {
		if last[k] < w.off {
			return fmt.Errorf("key %q: last record read %d, want >= %d", k, last[k], w.off)
		}
	}
	return nil
}

// A crash that leaves a .swap output with none of the old segments
// touched must not lose data even when that output is damaged.
func TestRecoveryDropsDamagedSwap(t *testing.T) {
	dir := filepath.Join(fastTempDir(t), "p-0")
	cfg := compactConfig()
	l := mustOpen(t, dir, cfg)
	m := newModel()
	overwrite(t, l, m, 100, 4, record.None)
	settle(t, l)
	var swap string
	l.compactHook = func(s string) error {
		for _, e := range mustReadDir(t, dir) {
			if p := filepath.Join(dir, e); s == "swap" && strings.HasSuffix(e, logSuffix+swapSuffix) && fileSize(t, p) > 0 {
				swap = p
				return errors.New("crash")
			}
		}
		return nil
	}
	l.Compact(time.Now().UnixMilli())
	crash(l)
	if swap == "" {
		t.Fatal("no swap file")
	}
	b, _ := os.ReadFile(swap)
	b[len(b)/2] ^= 0xff
	os.WriteFile(swap, b, 0o644)
	l = mustOpen(t, dir, cfg)
	defer l.Close()
	m.check(t, l, false)
}

func TestCleanedBatchChecks(t *testing.T) {
	b := keyedBatch(t, keyedSpec{}, rec("a", "1"), rec("b", "2"), rec("c", "3"))
	f := &batchFilter{keys: map[string]int{"a": 0, "c": 0}, latest: []int64{5}, horizon: math.MaxInt64}
	h, _ := record.ParseHeader(b)
	var st CompactStats
	out, changed, err := f.filter(b, &h, &st)
	if err != nil || !changed {
		t.Fatal(changed, err)
	}
	if _, err := checkBatch(out, 0); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("a cleaned batch passes the produce checks: %v", err)
	}
	if _, err := checkBatchAs(out, 0, true); err != nil {
		t.Fatal(err)
	}
	oh, recs := decodeBatch(t, out)
	if oh.NumRecords != 1 || oh.LastOffsetDelta != 2 || recs[0].key != "b" || recs[0].off != 1 {
		t.Fatalf("%+v %+v", oh, recs)
	}
}

// BenchmarkCompact cleans a 32 MiB log of 10-record batches overwriting
// 100,000 keys (100-byte values) about three times each; the bytes per
// second are those of the log read.
func BenchmarkCompact(b *testing.B) {
	for _, codec := range []record.Codec{record.None, record.Zstd} {
		b.Run(fmt.Sprint("codec=", codec), func(b *testing.B) {
			value := bytes.Repeat([]byte("v"), 100)
			var size int64
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				cfg := compactConfig()
				cfg.SegmentBytes = 8 << 20
				cfg.IndexIntervalBytes = 4096
				cfg.SegmentIndexBytes = 1 << 20
				l := mustOpen(b, fastTempDir(b), cfg)
				rng := rand.New(rand.NewPCG(1, 2))
				for l.Size() < 32<<20 {
					recs := make([]kv, 10)
					for j := range recs {
						recs[j] = kv{[]byte(fmt.Sprintf("key-%06d", rng.IntN(100_000))), value}
					}
					appendOne(b, l, keyedBatch(b, keyedSpec{codec: codec}, recs...))
				}
				settle(b, l)
				size = l.Size()
				b.StartTimer()
				st := mustCompact(b, l, time.Now().UnixMilli())
				b.StopTimer()
				if i == 0 {
					b.ReportMetric(float64(st.BytesWritten)/float64(st.BytesRead), "out/in")
				}
				l.Close()
			}
			b.SetBytes(size)
		})
	}
}

// Retention may delete segments a pass is cleaning: the pass then drops
// its output for them and stops without error.
func TestCompactRacesRetention(t *testing.T) {
	cfg := compactConfig()
	cfg.FileDeleteDelayMs = 0
	dir := fastTempDir(t)
	l := mustOpen(t, dir, cfg)
	defer l.Close()
	m := newModel()
	overwrite(t, l, m, 100, 4, record.None)
	settle(t, l)
	cut := l.segs.Load().segs[3].base
	l.compactHook = func(s string) error {
		if s == "swap" && l.LogStartOffset() < cut {
			if _, err := l.DeleteRecordsBefore(cut); err != nil {
				t.Error(err)
			}
		}
		return nil
	}
	st, err := l.Compact(time.Now().UnixMilli())
	if err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() != cut || st.SegmentsReplaced != 0 {
		t.Fatalf("start %d, %+v", l.LogStartOffset(), st)
	}
	for _, e := range mustReadDir(t, dir) {
		if strings.HasSuffix(e, cleanedSuffix) || strings.HasSuffix(e, swapSuffix) {
			t.Fatalf("%s left behind", e)
		}
	}
	l.compactHook = nil
	st = mustCompact(t, l, time.Now().UnixMilli())
	if st.SegmentsWritten == 0 {
		t.Fatalf("%+v", st)
	}
	_, recs := readRecords(t, l)
	last := map[string]int64{}
	for _, r := range recs {
		last[r.key] = r.off
	}
	for k, want := range m.latest {
		if want.off >= cut && last[k] != want.off {
			t.Fatalf("key %q: %d, want %d", k, last[k], want.off)
		}
	}
}

// Close during a pass stops the pass, waits for it, and leaves a clean log.
func TestCompactStopsOnClose(t *testing.T) {
	dir := fastTempDir(t)
	cfg := compactConfig()
	l := mustOpen(t, dir, cfg)
	m := newModel()
	overwrite(t, l, m, 100, 4, record.None)
	settle(t, l)
	closed := make(chan error, 1)
	l.compactHook = func(s string) error {
		if s == "swap" && !l.closed.Load() {
			go func() { closed <- l.Close() }()
			for !l.closed.Load() {
				time.Sleep(time.Millisecond)
			}
		}
		return nil
	}
	if _, err := l.Compact(time.Now().UnixMilli()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Compact: %v", err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, cleanShutdownFile)); err != nil {
		t.Fatal("no clean shutdown")
	}
	l = mustOpen(t, dir, cfg)
	defer l.Close()
	for _, e := range mustReadDir(t, dir) {
		if strings.HasSuffix(e, cleanedSuffix) || strings.HasSuffix(e, swapSuffix) {
			t.Fatalf("%s left behind", e)
		}
	}
	m.check(t, l, false)
}

// TestKafkaDumpLogReadsCompactedSegments runs Apache Kafka's
// DumpLogSegments over a compacted partition (filtered and empty batches,
// delete horizons, merged segments); see TestKafkaDumpLogReadsOurSegments.
func TestKafkaDumpLogReadsCompactedSegments(t *testing.T) {
	cp := os.Getenv("SLUICE_KAFKA_CLASSPATH")
	if cp == "" {
		t.Skip("set SLUICE_KAFKA_CLASSPATH to Kafka's jars to run kafka-dump-log")
	}
	dir := filepath.Join(t.TempDir(), "t-0")
	l := mustOpen(t, dir, compactConfig())
	m := newModel()
	m.add(t, l, keyedSpec{pid: 9, seq: 0}, rec("key-0", "p"), rec("key-1", "p"))
	overwrite(t, l, m, 100, 6, record.LZ4)
	m.add(t, l, keyedSpec{codec: record.Gzip}, tombstone("key-2"), rec("key-3", "x"))
	overwrite(t, l, m, 60, 4, record.None)
	settle(t, l)
	mustCompact(t, l, time.Now().UnixMilli())
	overwrite(t, l, m, 40, 6, record.Snappy)
	settle(t, l)
	mustCompact(t, l, time.Now().UnixMilli())
	hs, _ := readRecords(t, l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	runKafkaDumpLog(t, cp, dir, len(hs))
}

// FuzzCleanerFilter feeds arbitrary records sections (in a batch whose
// header is otherwise sane) to the cleaner's filter: it must never panic,
// it keeps what it cannot decode as it is, and any batch it rewrites must
// pass recovery's checks and decode to the record count its header claims.
func FuzzCleanerFilter(f *testing.F) {
	seed := func(recs ...kv) []byte {
		return keyedBatch(f, keyedSpec{}, recs...)[record.HeaderLen:]
	}
	f.Add(seed(rec("a", "1"), rec("b", "2"), tombstone("c")), uint8(3), false)
	f.Add(seed(rec("a", "1"), keyless("x")), uint8(2), true)
	f.Add(seed(tombstone("b")), uint8(1), true)
	f.Add([]byte{}, uint8(0), false)
	f.Fuzz(func(t *testing.T, raw []byte, n uint8, horizon bool) {
		b := keyedBatch(t, keyedSpec{pid: 3}, rec("x", "y"))[:record.HeaderLen]
		b = append(b, raw...)
		be := binary.BigEndian
		be.PutUint32(b[record.PosLength:], uint32(len(b)-record.LogOverhead))
		be.PutUint32(b[record.PosNumRecords:], uint32(n))
		be.PutUint32(b[record.PosLastOffsetDelta:], uint32(max(int(n)-1, 0)+2))
		if horizon {
			be.PutUint16(b[record.PosAttributes:], record.AttrDeleteHorizon)
		}
		record.SetCRC(b)
		h, _ := record.ParseHeader(b)
		filter := &batchFilter{keys: map[string]int{"a": 0, "b": 1}, latest: []int64{1, 100},
			now: 1_700_000_000_000, deleteRetentionMs: 10, horizon: math.MaxInt64,
			lastOfProducer: map[int64]int64{3: h.LastOffset()}}
		var st CompactStats
		out, changed, err := filter.filter(b, &h, &st)
		if err != nil || out == nil {
			return
		}
		if !changed {
			if !bytes.Equal(out, b) {
				t.Fatal("unchanged batch differs")
			}
			return
		}
		if _, err := checkBatchAs(out, 0, true); err != nil {
			t.Fatalf("filter wrote a bad batch: %v", err)
		}
		oh, _ := record.ParseHeader(out)
		body := out[record.HeaderLen:]
		count := 0
		for ; len(body) > 0; count++ {
			_, k, err := record.ParseRecord(body)
			if err != nil {
				t.Fatalf("filter wrote a bad record: %v", err)
			}
			body = body[k:]
		}
		if count != int(oh.NumRecords) || oh.LastOffsetDelta != h.LastOffsetDelta || oh.BaseOffset != h.BaseOffset {
			t.Fatalf("header %+v for %d records, from %+v", oh, count, h)
		}
	})
}

// A batch whose records the cleaner cannot make sense of (here an offset
// delta beyond the batch's span, which a client could send) is kept whole,
// and the pass goes on.
func TestCompactKeepsUndecodableBatchWhole(t *testing.T) {
	l := mustOpen(t, fastTempDir(t), compactConfig())
	defer l.Close()
	m := newModel()
	m.add(t, l, keyedSpec{}, rec("a", "old"))
	bad := keyedBatch(t, keyedSpec{}, rec("a", "bogus"))
	// Rewrite the record's offset delta (the byte after its length,
	// attributes and timestamp delta) to 60, beyond lastOffsetDelta 0, and
	// fix the CRC.
	if bad[record.HeaderLen+3] != 0 {
		t.Fatal("unexpected layout")
	}
	bad[record.HeaderLen+3] = 120 // zig-zag 60
	record.SetCRC(bad)
	badAt := appendOne(t, l, bad).FirstOffset
	m.next++
	overwrite(t, l, m, 60, 3, record.None)
	m.add(t, l, keyedSpec{}, rec("a", "new"))
	overwrite(t, l, m, 60, 3, record.None)
	settle(t, l)
	mustCompact(t, l, time.Now().UnixMilli())
	var a []string
	for off := int64(0); off < l.LogEndOffset(); {
		r, err := l.Read(off, 1, true)
		if err != nil {
			t.Fatal(err)
		}
		b := readRegion(t, r)
		h, _ := record.ParseHeader(b)
		switch {
		case h.BaseOffset == badAt:
			if !bytes.Equal(b, bad) {
				t.Fatal("undecodable batch not kept whole")
			}
		default:
			_, recs := decodeBatch(t, b)
			for _, r := range recs {
				if r.key == "a" {
					a = append(a, string(r.value))
				}
			}
		}
		off = h.LastOffset() + 1
	}
	if len(a) != 1 || a[0] != "new" {
		t.Fatalf("records of key a: %q", a)
	}
}
