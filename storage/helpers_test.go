package storage

import (
	"encoding/binary"
	"hash/crc32"
	"os"
	"testing"

	"github.com/sluice-broker/sluice/record"
)

// batchSpec describes a RecordBatch v2 for tests.
type batchSpec struct {
	records   int
	valueSize int
	ts        int64 // first timestamp; record i gets ts+i
	pid       int64 // -1 for none
	epoch     int16
	seq       int32
	attrs     int16
	fill      byte
}

func spec(records, valueSize int) batchSpec {
	return batchSpec{records: records, valueSize: valueSize, ts: 1_700_000_000_000, pid: -1, epoch: -1, seq: -1}
}

// buildBatch encodes a valid, uncompressed RecordBatch v2 with baseOffset 0.
func buildBatch(s batchSpec) []byte {
	var recs []byte
	value := make([]byte, s.valueSize)
	for i := range value {
		value[i] = s.fill + byte(i)
	}
	for i := 0; i < s.records; i++ {
		var body []byte
		body = append(body, 0)                     // attributes
		body = binary.AppendVarint(body, int64(i)) // timestamp delta
		body = binary.AppendVarint(body, int64(i)) // offset delta
		body = binary.AppendVarint(body, -1)       // null key
		body = binary.AppendVarint(body, int64(len(value)))
		body = append(body, value...)
		body = binary.AppendVarint(body, 0) // headers
		recs = binary.AppendVarint(recs, int64(len(body)))
		recs = append(recs, body...)
	}
	be := binary.BigEndian
	b := make([]byte, record.HeaderLen, record.HeaderLen+len(recs))
	be.PutUint64(b[record.PosBaseOffset:], 0)
	be.PutUint32(b[record.PosLength:], uint32(record.HeaderLen-record.LogOverhead+len(recs)))
	be.PutUint32(b[record.PosLeaderEpoch:], 0xffffffff)
	b[record.PosMagic] = 2
	be.PutUint16(b[record.PosAttributes:], uint16(s.attrs))
	be.PutUint32(b[record.PosLastOffsetDelta:], uint32(s.records-1))
	be.PutUint64(b[record.PosFirstTimestamp:], uint64(s.ts))
	be.PutUint64(b[record.PosMaxTimestamp:], uint64(s.ts+int64(s.records)-1))
	be.PutUint64(b[record.PosProducerID:], uint64(s.pid))
	be.PutUint16(b[record.PosProducerEpoch:], uint16(s.epoch))
	be.PutUint32(b[record.PosBaseSequence:], uint32(s.seq))
	be.PutUint32(b[record.PosNumRecords:], uint32(s.records))
	b = append(b, recs...)
	be.PutUint32(b[record.PosCRC:], crc32.Checksum(b[record.PosAttributes:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

func testConfig() Config {
	c := DefaultConfig()
	c.FileDeleteDelayMs = 0
	return c
}

func mustOpen(t testing.TB, dir string, cfg Config) *Log {
	t.Helper()
	l, err := Open(dir, cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return l
}

// appendOne appends one record set and returns its result.
func appendOne(t testing.TB, l *Log, b []byte) AppendResult {
	t.Helper()
	e := []AppendEntry{{Records: b}}
	if err := l.Append(e, AppendOptions{}); err != nil {
		t.Fatalf("Append: %v", err)
	}
	if e[0].Err != nil {
		t.Fatalf("Append entry: %v", e[0].Err)
	}
	return e[0].Result
}

// readRegion returns the bytes a Region refers to and releases it.
func readRegion(t testing.TB, r Region) []byte {
	t.Helper()
	defer r.Release()
	return peekRegion(t, r)
}

// peekRegion reads a Region's bytes and keeps it (the caller releases it).
func peekRegion(t testing.TB, r Region) []byte {
	t.Helper()
	if r.Len == 0 {
		return nil
	}
	b := make([]byte, r.Len)
	if _, err := r.File.ReadAt(b, r.Pos); err != nil {
		t.Fatalf("ReadAt: %v", err)
	}
	return b
}

// splitBatches splits a record set into its batches' headers.
func splitBatches(t testing.TB, b []byte) []record.Header {
	t.Helper()
	var hs []record.Header
	for len(b) > 0 {
		h, err := record.ParseHeader(b)
		if err != nil {
			t.Fatalf("parse header: %v", err)
		}
		if _, err := checkBatch(b, 0); err != nil {
			t.Fatalf("read back bad batch at offset %d: %v", h.BaseOffset, err)
		}
		hs = append(hs, h)
		b = b[h.Size():]
	}
	return hs
}

func fileSize(t testing.TB, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// crash simulates a process crash: descriptors are closed and mappings
// dropped without flushing, trimming indexes or writing the clean-shutdown
// marker. The page cache (and so every written byte) survives, as it does
// when only the process dies.
func crash(l *Log) {
	l.closed.Store(true)
	l.flushMu.Lock() // let a background flush finish
	defer l.flushMu.Unlock()
	for _, s := range l.segs.Load().segs {
		if !s.deleted.Load() {
			s.close()
		}
	}
}

// appendN appends n single-batch record sets of records each and returns
// the batches as written (with offsets assigned).
func appendN(t testing.TB, l *Log, n, records, valueSize int) [][]byte {
	t.Helper()
	var out [][]byte
	for i := 0; i < n; i++ {
		s := spec(records, valueSize)
		s.fill = byte(i)
		s.ts += int64(i) * 10
		b := buildBatch(s)
		appendOne(t, l, b)
		out = append(out, b)
	}
	return out
}

// readAll reads every committed batch from the log start, following Read's
// regions, and returns their headers.
func readAll(t testing.TB, l *Log, uncommitted bool) []record.Header {
	t.Helper()
	var hs []record.Header
	off := l.LogStartOffset()
	for {
		r, err := l.Read(off, 1<<20, uncommitted)
		if err != nil {
			t.Fatalf("Read(%d): %v", off, err)
		}
		if r.Len == 0 {
			return hs
		}
		got := splitBatches(t, readRegion(t, r))
		hs = append(hs, got...)
		off = got[len(got)-1].LastOffset() + 1
	}
}

// fastTempDir is a temporary directory on tmpfs when there is one. The
// crash tests open hundreds of logs, and each Open after a crash fsyncs
// its checkpoints; on tmpfs those are free, while the code paths are the
// same as on disk.
func fastTempDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("/dev/shm", "sluice-storage-test-")
	if err != nil {
		return t.TempDir()
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func removeFile(path string) error { return os.Remove(path) }

// setSequenceForTest changes a batch's base sequence and fixes its CRC.
func setSequenceForTest(b []byte, seq int32) {
	binary.BigEndian.PutUint32(b[record.PosBaseSequence:], uint32(seq))
	binary.BigEndian.PutUint32(b[record.PosCRC:], crc32.Checksum(b[record.PosAttributes:], crc32.MakeTable(crc32.Castagnoli)))
}
