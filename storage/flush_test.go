package storage

import (
	"path/filepath"
	"testing"
	"time"
)

func TestFlushMessagesAdvancesRecoveryPoint(t *testing.T) {
	cfg := testConfig()
	cfg.FlushMessages = 5
	l := mustOpen(t, t.TempDir(), cfg)
	defer l.Close()
	appendN(t, l, 2, 2, 10) // 4 messages: no flush yet
	if got := flushedOffset(l); got != 0 {
		t.Fatalf("flushed to %d before flush.messages", got)
	}
	appendN(t, l, 1, 2, 10) // 6 messages
	if got := flushedOffset(l); got != 6 {
		t.Fatalf("flushed to %d, want 6", got)
	}
}

func TestFlushMsViaMaybeRoll(t *testing.T) {
	cfg := testConfig()
	cfg.FlushMs = 50
	l := mustOpen(t, t.TempDir(), cfg)
	defer l.Close()
	appendN(t, l, 1, 3, 10)
	if err := l.MaybeRoll(time.Now().UnixMilli() + 100); err != nil {
		t.Fatal(err)
	}
	if got := flushedOffset(l); got != 3 {
		t.Fatalf("flushed to %d, want 3", got)
	}
}

func TestExplicitFlushWritesCheckpoint(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, testConfig())
	defer l.Close()
	appendN(t, l, 3, 1, 10)
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	rp, ok, err := readRecoveryPoint(dir)
	if err != nil || !ok || rp.offset != 3 || rp.pos != l.Size() {
		t.Fatalf("recovery point %+v %v %v", rp, ok, err)
	}
	if hw, _ := readOffsetFile(dir, highWatermarkFile, -1); hw != l.HighWatermark() {
		t.Fatalf("hw checkpoint %d", hw)
	}
	if offs, _ := listSnapshots(dir); len(offs) == 0 || offs[len(offs)-1] != 3 {
		t.Fatalf("snapshots %v", offs)
	}
}

func flushedOffset(l *Log) int64 {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	return l.flushed.rp.offset
}

func TestRetentionEvictsProducers(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 600
	l := mustOpen(t, filepath.Join(t.TempDir(), "p-0"), cfg)
	defer l.Close()
	appendIdem(l, idemBatch(1, 0, 0, 2))
	for i := 0; i < 10; i++ {
		appendIdem(l, idemBatch(2, 0, int32(2*i), 2))
	}
	l.SetHighWatermark(l.LogEndOffset())
	if _, err := l.DeleteRecordsBefore(l.LogEndOffset() - 2); err != nil {
		t.Fatal(err)
	}
	ps := l.Producers()
	if len(ps) != 1 || ps[0].ProducerID != 2 {
		t.Fatalf("producers after retention: %+v", ps)
	}
}
