package storage

import (
	"errors"
	"math"
	"path/filepath"
	"testing"

	"github.com/sluice-broker/sluice/record"
)

func idemBatch(pid int64, epoch int16, seq int32, records int) []byte {
	s := spec(records, 10)
	s.pid, s.epoch, s.seq = pid, epoch, seq
	return buildBatch(s)
}

func appendIdem(l *Log, b []byte) (AppendResult, error) {
	e := []AppendEntry{{Records: b}}
	if err := l.Append(e, AppendOptions{}); err != nil {
		return AppendResult{}, err
	}
	return e[0].Result, e[0].Err
}

func TestIdempotentProducer(t *testing.T) {
	l := mustOpen(t, t.TempDir(), testConfig())
	defer l.Close()
	steps := []struct {
		name      string
		pid       int64
		epoch     int16
		seq       int32
		records   int
		wantErr   error
		wantFirst int64
		dup       bool
	}{
		{"first batch", 1, 0, 0, 3, nil, 0, false},    // seq 0-2, offsets 0-2
		{"next", 1, 0, 3, 2, nil, 3, false},           // seq 3-4, offsets 3-4
		{"retry of first", 1, 0, 0, 3, nil, 0, true},  // duplicate
		{"retry of second", 1, 0, 3, 2, nil, 3, true}, // duplicate
		{"gap", 1, 0, 6, 1, ErrOutOfOrderSequence, 0, false},
		{"unknown pid, any seq (Kafka 3.x)", 2, 0, 17, 1, nil, 5, false},
		{"new epoch not at 0", 1, 1, 5, 1, ErrOutOfOrderSequence, 0, false},
		{"new epoch at 0", 1, 1, 0, 1, nil, 6, false},
		{"fenced epoch", 1, 0, 5, 1, ErrInvalidProducerEpoch, 0, false},
		{"old batch of new epoch retried", 1, 1, 0, 1, nil, 6, true},
		{"in sequence", 1, 1, 1, 1, nil, 7, false},
	}
	for _, s := range steps {
		r, err := appendIdem(l, idemBatch(s.pid, s.epoch, s.seq, s.records))
		if !errors.Is(err, s.wantErr) {
			t.Fatalf("%s: err %v, want %v", s.name, err, s.wantErr)
		}
		if err == nil && (r.FirstOffset != s.wantFirst || r.Duplicate != s.dup) {
			t.Fatalf("%s: got %+v, want first %d dup %v", s.name, r, s.wantFirst, s.dup)
		}
	}
	if l.LogEndOffset() != 8 {
		t.Fatalf("LEO %d", l.LogEndOffset())
	}
	ps := l.Producers()
	if len(ps) != 2 || ps[0].ProducerID != 1 || ps[0].ProducerEpoch != 1 || ps[0].LastSequence != 1 ||
		ps[1].ProducerID != 2 || ps[1].LastSequence != 17 || ps[0].CurrentTxnStartOffset != -1 {
		t.Fatalf("producers %+v", ps)
	}
}

func TestIdempotentDuplicateWindowIsFive(t *testing.T) {
	l := mustOpen(t, t.TempDir(), testConfig())
	defer l.Close()
	for i := int32(0); i < 7; i++ {
		if _, err := appendIdem(l, idemBatch(9, 0, i, 1)); err != nil {
			t.Fatal(err)
		}
	}
	if r, err := appendIdem(l, idemBatch(9, 0, 2, 1)); err != nil || !r.Duplicate || r.FirstOffset != 2 {
		t.Fatalf("5th newest batch: %+v %v", r, err)
	}
	if _, err := appendIdem(l, idemBatch(9, 0, 1, 1)); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("6th newest batch: %v", err)
	}
}

func TestSequenceWrapAtMaxInt32(t *testing.T) {
	l := mustOpen(t, t.TempDir(), testConfig())
	defer l.Close()
	if _, err := appendIdem(l, idemBatch(3, 0, math.MaxInt32-1, 2)); err != nil {
		t.Fatal(err)
	}
	if _, err := appendIdem(l, idemBatch(3, 0, 0, 1)); err != nil {
		t.Fatalf("wrapped sequence: %v", err)
	}
}

func TestRejectedRecordSetLeavesNoProducerState(t *testing.T) {
	l := mustOpen(t, t.TempDir(), testConfig())
	defer l.Close()
	appendIdem(l, idemBatch(4, 0, 0, 1))
	// Two batches: the first in sequence, the second with a gap.
	set := append(idemBatch(4, 0, 1, 1), idemBatch(4, 0, 5, 1)...)
	if _, err := appendIdem(l, set); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatal(err)
	}
	if _, err := appendIdem(l, idemBatch(4, 0, 1, 1)); err != nil {
		t.Fatalf("state kept from a rejected set: %v", err)
	}
}

// TestProducerStateSurvivesRestart covers a clean restart (snapshot at the
// log end), a crash with a snapshot behind the tail (replay) and a crash
// with no snapshot at all (full rebuild from the log).
func TestProducerStateSurvivesRestart(t *testing.T) {
	for _, mode := range []string{"clean", "flushed-crash", "crash"} {
		t.Run(mode, func(t *testing.T) {
			dir := filepath.Join(fastTempDir(t), "p-0")
			cfg := testConfig()
			cfg.SegmentBytes = 600
			l := mustOpen(t, dir, cfg)
			for i := int32(0); i < 10; i++ {
				if i == 5 && mode == "flushed-crash" {
					l.Flush()
				}
				if _, err := appendIdem(l, idemBatch(int64(i%2), 0, i/2*2, 2)); err != nil {
					t.Fatal(err)
				}
			}
			if mode == "clean" {
				l.Close()
			} else {
				crash(l)
			}
			if mode == "crash" {
				removeAllSnapshots(t, dir)
			}
			l = mustOpen(t, dir, cfg)
			defer l.Close()
			r, err := appendIdem(l, idemBatch(1, 0, 8, 2)) // last batch of pid 1: duplicate
			if err != nil || !r.Duplicate || r.FirstOffset != 18 {
				t.Fatalf("duplicate after restart: %+v %v", r, err)
			}
			if _, err := appendIdem(l, idemBatch(0, 0, 11, 1)); !errors.Is(err, ErrOutOfOrderSequence) {
				t.Fatalf("gap after restart: %v", err)
			}
			if _, err := appendIdem(l, idemBatch(0, 0, 10, 1)); err != nil {
				t.Fatalf("next after restart: %v", err)
			}
		})
	}
}

func removeAllSnapshots(t *testing.T, dir string) {
	offs, _ := listSnapshots(dir)
	for _, off := range offs {
		if err := removeFile(filepath.Join(dir, segmentName(off, snapshotSuffix))); err != nil {
			t.Fatal(err)
		}
	}
}

func TestSnapshotEncoding(t *testing.T) {
	p := newProducerState()
	p.mu.Lock()
	h := record.Header{ProducerID: 5, ProducerEpoch: 2, BaseSequence: 10, LastOffsetDelta: 3, BaseOffset: 100, MaxTimestamp: 77, NumRecords: 4}
	p.update(&h)
	p.mu.Unlock()
	b := p.encode()
	m, err := decodeSnapshot(b)
	if err != nil || len(m) != 1 || m[5].batches[0] != (batchMeta{10, 13, 100, 103}) || m[5].lastTimestamp != 77 {
		t.Fatalf("%v %+v", err, m[5])
	}
	b[len(b)-6] ^= 1
	if _, err := decodeSnapshot(b); err == nil {
		t.Fatal("corrupt snapshot accepted")
	}
}
