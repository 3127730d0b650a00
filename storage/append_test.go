package storage

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluice-broker/sluice/record"
)

func TestAppendBatchedWithBadEntries(t *testing.T) {
	l := mustOpen(t, t.TempDir(), testConfig())
	defer l.Close()
	bad := buildBatch(spec(2, 10))
	bad[len(bad)-1] ^= 0xff
	two := append(buildBatch(spec(2, 10)), buildBatch(spec(3, 10))...)
	halfBad := append(buildBatch(spec(2, 10)), bad...)
	entries := []AppendEntry{
		{Records: buildBatch(spec(1, 10))},
		{Records: bad},
		{Records: two},
		{Records: halfBad},
		{Records: nil},
		{Records: buildBatch(spec(4, 10))},
	}
	if err := l.Append(entries, AppendOptions{LeaderEpoch: 7}); err != nil {
		t.Fatal(err)
	}
	want := []struct {
		first, last int64
		err         error
	}{{0, 0, nil}, {-1, -1, ErrCorruptMessage}, {1, 5, nil}, {-1, -1, ErrCorruptMessage}, {-1, -1, ErrCorruptMessage}, {6, 9, nil}}
	for i, w := range want {
		e := entries[i]
		if !errors.Is(e.Err, w.err) || (w.err == nil && (e.Result.FirstOffset != w.first || e.Result.LastOffset != w.last)) {
			t.Errorf("entry %d: got %+v err %v, want %+v", i, e.Result, e.Err, w)
		}
	}
	if l.LogEndOffset() != 10 {
		t.Fatalf("LEO %d", l.LogEndOffset())
	}
	l.SetHighWatermark(10)
	hs := readAll(t, l, false)
	if len(hs) != 4 {
		t.Fatalf("read %d batches", len(hs))
	}
	for _, h := range hs {
		if h.PartitionLeaderEpoch != 7 {
			t.Fatalf("leader epoch not rewritten: %+v", h)
		}
	}
	if !bytes.Equal(halfBad[:8], make([]byte, 8)) {
		t.Fatal("a rejected entry was rewritten")
	}
	if l.LatestEpoch() != 7 {
		t.Fatalf("latest epoch %d", l.LatestEpoch())
	}
}

func TestAppendSizeLimits(t *testing.T) {
	cfg := testConfig()
	cfg.MaxMessageBytes = 500
	cfg.SegmentBytes = 1000
	l := mustOpen(t, t.TempDir(), cfg)
	defer l.Close()
	big := buildBatch(spec(1, 600))
	three := append(append(buildBatch(spec(1, 300)), buildBatch(spec(1, 300))...), buildBatch(spec(1, 300))...)
	entries := []AppendEntry{{Records: big}, {Records: three}}
	l.Append(entries, AppendOptions{})
	if !errors.Is(entries[0].Err, ErrMessageTooLarge) {
		t.Errorf("big batch: %v", entries[0].Err)
	}
	if !errors.Is(entries[1].Err, ErrRecordListTooLarge) {
		t.Errorf("record set larger than a segment: %v", entries[1].Err)
	}
	if l.Size() != 0 {
		t.Fatal("bytes written")
	}
}

func TestControlBatchesOnlyFromBroker(t *testing.T) {
	l := mustOpen(t, t.TempDir(), testConfig())
	defer l.Close()
	s := spec(1, 4)
	s.attrs = record.AttrControl | record.AttrTransactional
	s.pid, s.epoch, s.seq = 1, 0, -1
	e := []AppendEntry{{Records: buildBatch(s)}}
	l.Append(e, AppendOptions{})
	if !errors.Is(e[0].Err, ErrInvalidRecord) {
		t.Fatalf("client control batch: %v", e[0].Err)
	}
	e = []AppendEntry{{Records: buildBatch(s)}}
	l.Append(e, AppendOptions{AllowControl: true})
	if e[0].Err != nil {
		t.Fatal(e[0].Err)
	}
}

func TestLogAppendTime(t *testing.T) {
	cfg := testConfig()
	cfg.TimestampType = LogAppendTime
	l := mustOpen(t, t.TempDir(), cfg)
	defer l.Close()
	b := buildBatch(spec(3, 10))
	e := []AppendEntry{{Records: b}}
	if err := l.Append(e, AppendOptions{NowMs: 1234}); err != nil || e[0].Err != nil {
		t.Fatal(err, e[0].Err)
	}
	if e[0].Result.LogAppendTime != 1234 {
		t.Fatalf("result %+v", e[0].Result)
	}
	l.SetHighWatermark(l.LogEndOffset())
	hs := readAll(t, l, false) // checks the CRC
	if hs[0].MaxTimestamp != 1234 || hs[0].Attributes&record.AttrLogAppendTime == 0 {
		t.Fatalf("%+v", hs[0])
	}
	if off, ts := l.MaxTimestamp(); off != 2 || ts != 1234 {
		t.Fatalf("MaxTimestamp %d %d", off, ts)
	}
}

func TestRollOnSegmentBytesAndIndexFull(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 4096
	cfg.IndexIntervalBytes = 0 // every batch indexed
	cfg.SegmentIndexBytes = 8 * 5
	dir := t.TempDir()
	l := mustOpen(t, dir, cfg)
	batches := appendN(t, l, 40, 2, 200)
	segs := l.segs.Load().segs
	if len(segs) < 5 {
		t.Fatalf("only %d segments", len(segs))
	}
	for _, s := range segs {
		if s.size.Load() > cfg.SegmentBytes {
			t.Fatalf("segment %d has %d bytes", s.base, s.size.Load())
		}
	}
	l.SetHighWatermark(l.LogEndOffset())
	if hs := readAll(t, l, false); len(hs) != len(batches) {
		t.Fatalf("read %d of %d", len(hs), len(batches))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// Index files are trimmed to their entries on roll and close.
	for _, s := range segs {
		if n := fileSize(t, s.path(indexSuffix)); n%offsetEntrySize != 0 || n > int64(cfg.SegmentIndexBytes) {
			t.Fatalf("%s: %d bytes", s.path(indexSuffix), n)
		}
		if n := fileSize(t, s.path(timeIndexSuffix)); n%timeEntrySize != 0 {
			t.Fatalf("%s: %d bytes", s.path(timeIndexSuffix), n)
		}
	}
	checkDumpLogInvariants(t, dir)
}

func TestSegmentMsRoll(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentMs = 1000
	l := mustOpen(t, t.TempDir(), cfg)
	defer l.Close()
	appendN(t, l, 1, 1, 10)
	now := l.mu.active.createdMs
	if err := l.MaybeRoll(now + 10); err != nil || len(l.segs.Load().segs) != 1 {
		t.Fatalf("rolled early: %v", err)
	}
	if err := l.MaybeRoll(now + 1000); err != nil || len(l.segs.Load().segs) != 2 {
		t.Fatalf("no roll: %v", err)
	}
	if err := l.MaybeRoll(now + 5000); err != nil || len(l.segs.Load().segs) != 2 {
		t.Fatalf("rolled an empty segment: %v", err)
	}
}

func TestStickyWriteError(t *testing.T) {
	l := mustOpen(t, t.TempDir(), testConfig())
	appendN(t, l, 2, 1, 10)
	// Swap the active file for a read-only descriptor so the next pwritev fails.
	s := l.mu.active
	ro, err := os.Open(s.path(logSuffix))
	if err != nil {
		t.Fatal(err)
	}
	rw := s.fd.f.Swap(newLogFile(ro))
	e := []AppendEntry{{Records: buildBatch(spec(1, 10))}}
	if err := l.Append(e, AppendOptions{}); err == nil || e[0].Err == nil {
		t.Fatal("write to a read-only file succeeded")
	}
	s.fd.f.Store(rw)
	ro.Close()
	e = []AppendEntry{{Records: buildBatch(spec(1, 10))}}
	if err := l.Append(e, AppendOptions{}); err == nil || e[0].Err == nil {
		t.Fatal("append after a failed write succeeded")
	}
	if l.LogEndOffset() != 2 {
		t.Fatalf("LEO %d", l.LogEndOffset())
	}
	l.Close()
}

func TestAppendAfterClose(t *testing.T) {
	l := mustOpen(t, t.TempDir(), testConfig())
	l.Close()
	e := []AppendEntry{{Records: buildBatch(spec(1, 10))}}
	if err := l.Append(e, AppendOptions{}); !errors.Is(err, ErrClosed) || !errors.Is(e[0].Err, ErrClosed) {
		t.Fatal(err)
	}
	if _, err := l.Read(0, 100, true); !errors.Is(err, ErrClosed) {
		t.Fatal(err)
	}
}

func TestDeleteRemovesDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "t-0")
	l := mustOpen(t, dir, testConfig())
	appendN(t, l, 3, 1, 10)
	if err := l.Delete(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("dir still there: %v", err)
	}
}
