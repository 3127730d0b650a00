package storage

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func retentionLog(t *testing.T, cfg Config) (*Log, string) {
	t.Helper()
	dir := t.TempDir()
	cfg.SegmentBytes = 1000
	l := mustOpen(t, dir, cfg)
	appendN(t, l, 30, 2, 100) // ~7 segments, batch i has timestamp base+10i
	l.SetHighWatermark(l.LogEndOffset())
	return l, dir
}

func TestRetentionBytes(t *testing.T) {
	cfg := testConfig()
	cfg.RetentionMs = -1
	cfg.RetentionBytes = 2500
	l, _ := retentionLog(t, cfg)
	defer l.Close()
	before := len(l.segs.Load().segs)
	n, err := l.EnforceRetention(time.Now().UnixMilli())
	if err != nil || n == 0 {
		t.Fatalf("deleted %d: %v", n, err)
	}
	segs := l.segs.Load().segs
	if len(segs) != before-n || l.Size() < 2500-1000 || l.Size()-segs[0].size.Load() >= 2500 {
		t.Fatalf("size %d after deleting %d of %d", l.Size(), n, before)
	}
	if l.LogStartOffset() != segs[0].base {
		t.Fatalf("log start %d, first segment %d", l.LogStartOffset(), segs[0].base)
	}
	if _, err := l.Read(0, 100, false); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below log start: %v", err)
	}
	if hs := readAll(t, l, false); hs[len(hs)-1].LastOffset() != 59 {
		t.Fatal("lost the tail")
	}
}

func TestRetentionMs(t *testing.T) {
	cfg := testConfig()
	cfg.RetentionMs = 100
	l, _ := retentionLog(t, cfg)
	defer l.Close()
	base := spec(1, 1).ts
	// Batches up to i=11 (ts base+110) are in the first segments; with now =
	// base+215, segments whose largest timestamp < base+115 go.
	n, err := l.EnforceRetention(base + 215)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range l.segs.Load().segs[:len(l.segs.Load().segs)-1] {
		if s.maxTs.Load() < base+115 {
			t.Fatalf("segment %d with max ts %d kept", s.base, s.maxTs.Load()-base)
		}
	}
	if n == 0 {
		t.Fatal("nothing deleted")
	}
	// Never the active segment, even when everything is old.
	if _, err := l.EnforceRetention(base + 1e9); err != nil {
		t.Fatal(err)
	}
	if segs := l.segs.Load().segs; len(segs) != 1 || l.LogStartOffset() != segs[0].base {
		t.Fatalf("%d segments left, start %d", len(segs), l.LogStartOffset())
	}
}

func TestRetentionStopsAtHighWatermark(t *testing.T) {
	cfg := testConfig()
	cfg.RetentionBytes = 0
	l, _ := retentionLog(t, cfg)
	defer l.Close()
	l.SetHighWatermark(0)
	if n, _ := l.EnforceRetention(time.Now().UnixMilli()); n != 0 {
		t.Fatalf("deleted %d segments above the high watermark", n)
	}
}

func TestDeleteRecordsBefore(t *testing.T) {
	cfg := testConfig()
	cfg.RetentionMs, cfg.RetentionBytes = -1, -1
	l, dir := retentionLog(t, cfg)
	if _, err := l.DeleteRecordsBefore(l.LogEndOffset() + 1); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("beyond HW: %v", err)
	}
	start, err := l.DeleteRecordsBefore(25)
	if err != nil || start != 25 {
		t.Fatalf("start %d: %v", start, err)
	}
	if first := l.segs.Load().segs[0]; first.base > 25 || len(l.segs.Load().segs) < 2 {
		t.Fatalf("first segment %d", first.base)
	}
	if l.segs.Load().segs[1].base <= 25 {
		t.Fatal("segment wholly below the log start kept")
	}
	if _, err := l.Read(24, 100, false); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below start: %v", err)
	}
	r, err := l.Read(25, 1, false) // in the middle of batch [24,25]: whole batch
	if err != nil || splitBatches(t, readRegion(t, r))[0].BaseOffset != 24 {
		t.Fatalf("%v", err)
	}
	if start, _ := l.DeleteRecordsBefore(10); start != 25 {
		t.Fatal("log start moved back")
	}
	crash(l) // the log start offset is durable without a clean close
	l = mustOpen(t, dir, cfg)
	defer l.Close()
	if l.LogStartOffset() != 25 {
		t.Fatalf("log start after reopen %d", l.LogStartOffset())
	}
}

// TestDeletedSegmentRegionStaysValid checks that a Region handed out before
// retention deletes its segment still reads the same bytes while its files
// wait file.delete.delay.ms for removal, and after they are removed, until
// it is released.
func TestDeletedSegmentRegionStaysValid(t *testing.T) {
	cfg := testConfig()
	cfg.RetentionBytes = 0
	cfg.FileDeleteDelayMs = 1500
	l, dir := retentionLog(t, cfg)
	defer l.Close()
	r, err := l.Read(0, 1<<20, false)
	if err != nil {
		t.Fatal(err)
	}
	before := peekRegion(t, r)
	if n, _ := l.EnforceRetention(time.Now().UnixMilli()); n == 0 {
		t.Fatal("nothing deleted")
	}
	if _, err := os.Stat(filepath.Join(dir, segmentName(0, logSuffix+deletedSuffix))); err != nil {
		t.Fatalf("not renamed to .deleted: %v", err)
	}
	if after := peekRegion(t, r); string(after) != string(before) {
		t.Fatal("region changed after delete")
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		_, err := os.Stat(filepath.Join(dir, segmentName(0, logSuffix+deletedSuffix)))
		if os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("deleted file still there: %v", err)
		}
	}
	if after := readRegion(t, r); string(after) != string(before) {
		t.Fatal("region changed after its file was removed")
	}
}
