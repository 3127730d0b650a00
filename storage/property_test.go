package storage

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// propertyIters is the number of random operations per seed; set
// SLUICE_PROPERTY_ITERS (and SLUICE_PROPERTY_SEEDS) for longer runs.
func propertyIters() int {
	if n, err := strconv.Atoi(os.Getenv("SLUICE_PROPERTY_ITERS")); err == nil && n > 0 {
		return n
	}
	if testing.Short() {
		return 100
	}
	return 400
}

// TestPropertyAcknowledgedBatchesStayReadable runs random sequences of
// appends, reads, rolls, flushes, retention, DeleteRecordsBefore, clean
// restarts and crashes, and checks after each step that every acknowledged
// batch at or above the log start offset reads back byte-for-byte at its
// offset, and that the offsets agree with a model.
func TestPropertyAcknowledgedBatchesStayReadable(t *testing.T) {
	seeds := uint64(3)
	if n, err := strconv.Atoi(os.Getenv("SLUICE_PROPERTY_SEEDS")); err == nil && n > 0 {
		seeds = uint64(n)
	}
	for seed := uint64(1); seed <= seeds; seed++ {
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) { runProperty(t, seed) })
	}
}

type modelBatch struct {
	first, last int64
	bytes       []byte
}

func runProperty(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, seed*7919))
	dir := filepath.Join(fastTempDir(t), "p-0")
	cfg := testConfig()
	cfg.SegmentBytes = int64(3000 + rng.IntN(6000))
	cfg.IndexIntervalBytes = int32(rng.IntN(600))
	cfg.SegmentIndexBytes = int32(8 * (4 + rng.IntN(40)))
	cfg.RetentionMs = -1
	l := mustOpen(t, dir, cfg)
	defer func() { l.Close() }()
	var model []modelBatch
	next := int64(0)
	for step := 0; step < propertyIters(); step++ {
		switch op := rng.IntN(100); {
		case op < 55:
			n := 1 + rng.IntN(4)
			entries := make([]AppendEntry, n)
			for i := range entries {
				s := spec(1+rng.IntN(6), rng.IntN(400))
				s.fill = byte(rng.Uint32())
				s.ts += int64(step)
				entries[i].Records = buildBatch(s)
			}
			if err := l.Append(entries, AppendOptions{LeaderEpoch: int32(step / 50)}); err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				if e.Err != nil || e.Result.FirstOffset != next {
					t.Fatalf("step %d: append got %+v %v, want first %d", step, e.Result, e.Err, next)
				}
				next = e.Result.LastOffset + 1
				model = append(model, modelBatch{e.Result.FirstOffset, e.Result.LastOffset, e.Records})
			}
			l.SetHighWatermark(next - int64(rng.IntN(3)))
		case op < 65:
			l.mu.Lock()
			if l.mu.active.size.Load() > 0 {
				if err := l.rollLocked(l.mu.active.createdMs); err != nil {
					t.Fatal(err)
				}
			}
			l.mu.Unlock()
		case op < 70:
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
		case op < 77:
			l.SetConfig(withRetentionBytes(cfg, int64(rng.IntN(20000))))
			if _, err := l.EnforceRetention(0); err != nil {
				t.Fatal(err)
			}
			l.SetConfig(cfg)
		case op < 80:
			if _, err := l.DeleteRecordsBefore(l.LogStartOffset() + int64(rng.IntN(30))); err != nil && !errors.Is(err, ErrOffsetOutOfRange) {
				t.Fatal(err)
			}
		case op < 88:
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l = mustOpen(t, dir, cfg)
			l.SetHighWatermark(next)
		case op < 96:
			crash(l)
			l = mustOpen(t, dir, cfg)
			l.SetHighWatermark(next)
		default:
			checkAllReadable(t, l, model, next)
		}
		checkSample(t, l, model, next, rng)
	}
	checkAllReadable(t, l, model, next)
	l.Close()
	checkDumpLogInvariants(t, dir)
}

func withRetentionBytes(c Config, n int64) Config {
	c.RetentionBytes = n
	return c
}

func checkSample(t *testing.T, l *Log, model []modelBatch, next int64, rng *rand.Rand) {
	t.Helper()
	if l.LogEndOffset() != next {
		t.Fatalf("LEO %d, model %d", l.LogEndOffset(), next)
	}
	for i := 0; i < 3 && len(model) > 0; i++ {
		checkBatchAt(t, l, model[rng.IntN(len(model))])
	}
}

func checkAllReadable(t *testing.T, l *Log, model []modelBatch, next int64) {
	t.Helper()
	for _, m := range model {
		checkBatchAt(t, l, m)
	}
}

func checkBatchAt(t *testing.T, l *Log, m modelBatch) {
	t.Helper()
	start := l.LogStartOffset()
	if m.last < start {
		return // deleted by retention or DeleteRecordsBefore
	}
	off := max(m.first, start)
	r, err := l.Read(off, 1, true)
	if err != nil {
		t.Fatalf("Read(%d): %v (log start %d, LEO %d)", off, err, start, l.LogEndOffset())
	}
	if got := readRegion(t, r); !bytes.Equal(got, m.bytes) {
		t.Fatalf("Read(%d): batch bytes differ (got %d bytes, want %d)", off, len(got), len(m.bytes))
	}
}
