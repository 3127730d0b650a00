package storage

import (
	"os"
	"path/filepath"
	"testing"
)

func TestEpochCacheEndOffsets(t *testing.T) {
	c := &epochCache{dir: t.TempDir()}
	if e, o := c.endOffsetFor(0, 10); e != -1 || o != -1 {
		t.Fatal("empty cache")
	}
	c.assign(2, 0)
	c.assign(4, 10)
	c.assign(3, 20) // older epoch: ignored
	c.assign(7, 30)
	for _, tt := range []struct {
		epoch, want int32
		end         int64
	}{
		{7, 7, 100}, {8, -1, -1}, {5, 4, 30}, {4, 4, 30}, {3, 2, 10}, {2, 2, 10}, {1, 1, 0}, {-1, -1, -1},
	} {
		if e, o := c.endOffsetFor(tt.epoch, 100); e != tt.want || o != tt.end {
			t.Errorf("endOffsetFor(%d) = %d,%d want %d,%d", tt.epoch, e, o, tt.want, tt.end)
		}
	}
	c.truncateFromStart(15)
	if got := c.snapshot(); len(got) != 2 || got[0][0] != 4 || got[0][1] != 15 {
		t.Fatalf("after truncateFromStart: %v", got)
	}
	c.truncateFromEnd(30)
	if c.latest() != 4 {
		t.Fatalf("latest %d", c.latest())
	}
}

func TestLeaderEpochCheckpointFile(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, testConfig())
	for i, epoch := range []int32{0, 0, 3, 3, 5} {
		e := []AppendEntry{{Records: buildBatch(spec(2, 10))}}
		if err := l.Append(e, AppendOptions{LeaderEpoch: epoch}); err != nil || e[0].Err != nil {
			t.Fatal(i, err, e[0].Err)
		}
	}
	if err := l.Flush(); err != nil { // appends leave the file to the flush
		t.Fatal(err)
	}
	got, _ := os.ReadFile(filepath.Join(dir, epochFile))
	if want := "0\n3\n0 0\n3 4\n5 8\n"; string(got) != want {
		t.Fatalf("checkpoint %q, want %q", got, want)
	}
	crash(l)
	l = mustOpen(t, dir, testConfig())
	defer l.Close()
	if l.LatestEpoch() != 5 {
		t.Fatalf("latest %d", l.LatestEpoch())
	}
	if e, o := l.EndOffsetForEpoch(3); e != 3 || o != 8 {
		t.Fatalf("EndOffsetForEpoch(3) = %d %d", e, o)
	}
	if e, o := l.EndOffsetForEpoch(5); e != 5 || o != 10 {
		t.Fatalf("EndOffsetForEpoch(5) = %d %d", e, o)
	}
}

// TestEpochsOfUnflushedAppendsAreRecoveredFromBatches: appends do not
// write the leader-epoch file (it cost two fsyncs per new epoch, so the
// first write to each of thousands of partitions); after a crash before
// any flush, recovery assigns the epochs again from the batches it scans,
// and the recovered history is saved.
func TestEpochsOfUnflushedAppendsAreRecoveredFromBatches(t *testing.T) {
	dir := filepath.Join(fastTempDir(t), "p-0")
	l := mustOpen(t, dir, testConfig())
	for _, epoch := range []int32{0, 2, 2, 7} {
		e := []AppendEntry{{Records: buildBatch(spec(2, 10))}}
		if err := l.Append(e, AppendOptions{LeaderEpoch: epoch}); err != nil || e[0].Err != nil {
			t.Fatal(err, e[0].Err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, epochFile)); err == nil {
		t.Fatal("an append wrote the epoch file")
	}
	crash(l)
	l = mustOpen(t, dir, testConfig())
	if l.LatestEpoch() != 7 {
		t.Fatalf("latest epoch %d after recovery", l.LatestEpoch())
	}
	if e, o := l.EndOffsetForEpoch(2); e != 2 || o != 6 {
		t.Fatalf("EndOffsetForEpoch(2) = %d %d", e, o)
	}
	got, _ := os.ReadFile(filepath.Join(dir, epochFile))
	if want := "0\n3\n0 0\n2 2\n7 6\n"; string(got) != want {
		t.Fatalf("checkpoint after recovery %q, want %q", got, want)
	}
	l.Close()
}

func TestEpochsTruncatedWithTornTail(t *testing.T) {
	dir := filepath.Join(fastTempDir(t), "p-0")
	l := mustOpen(t, dir, testConfig())
	appendOne(t, l, buildBatch(spec(2, 10)))
	e := []AppendEntry{{Records: buildBatch(spec(2, 10))}}
	l.Append(e, AppendOptions{LeaderEpoch: 9})
	crash(l)
	path := filepath.Join(dir, segmentName(0, logSuffix))
	os.Truncate(path, fileSize(t, path)-1) // the epoch-9 batch is torn
	l = mustOpen(t, dir, testConfig())
	defer l.Close()
	if l.LatestEpoch() != 0 || l.LogEndOffset() != 2 {
		t.Fatalf("latest epoch %d LEO %d", l.LatestEpoch(), l.LogEndOffset())
	}
}
