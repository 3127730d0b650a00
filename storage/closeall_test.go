package storage

import (
	"bytes"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// dirContents maps each file name in dir to its bytes. Of the producer
// snapshots only the newest is kept: which older one survives depends on
// when the background flushes after rolls ran.
func dirContents(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string][]byte{}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		m[e.Name()] = b
	}
	snaps, err := listSnapshots(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, off := range snaps[:max(len(snaps)-1, 0)] {
		delete(m, segmentName(off, snapshotSuffix))
	}
	return m
}

// fillLog writes the same history into a log: several segments, indexed
// batches, an idempotent producer and a high watermark below the end.
func fillLog(t *testing.T, dir string, cfg Config) *Log {
	l := mustOpen(t, dir, cfg)
	appendN(t, l, 30, 3, 90)
	for i := range 4 {
		s := spec(2, 50)
		s.pid, s.epoch, s.seq = 7, 0, int32(2*i)
		appendOne(t, l, buildBatch(s))
	}
	l.SetHighWatermark(l.LogEndOffset() - 5)
	return l
}

// TestCloseAllLeavesEachLogAsCloseDoes: logs closed together are, file for
// file and byte for byte, what Close leaves, and reopen without recovery.
func TestCloseAllLeavesEachLogAsCloseDoes(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 2000
	cfg.IndexIntervalBytes = 300
	root := t.TempDir()
	var together []*Log
	for i := range 5 {
		l := fillLog(t, filepath.Join(root, "alone", string(rune('a'+i))), cfg)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		together = append(together, fillLog(t, filepath.Join(root, "together", string(rune('a'+i))), cfg))
	}
	together[2].Close() // already closed: CloseAll leaves it be
	if err := CloseAll(together, 3); err != nil {
		t.Fatal(err)
	}
	rec, err := TakeCleanShutdown(filepath.Join(root, "together"))
	if err != nil {
		t.Fatal(err)
	}
	if rec.Len() != 4 {
		t.Fatalf("the data directory's record names %d logs, want the 4 CloseAll closed", rec.Len())
	}
	for i := range 5 {
		name := string(rune('a' + i))
		want := dirContents(t, filepath.Join(root, "alone", name))
		got := dirContents(t, filepath.Join(root, "together", name))
		if i != 2 { // CloseAll vouches for its logs in the data directory's record
			delete(want, cleanShutdownFile)
		}
		if !slices.Equal(slices.Sorted(maps.Keys(want)), slices.Sorted(maps.Keys(got))) {
			t.Fatalf("log %s: files %v, Close leaves %v", name, slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
		}
		for f, b := range want {
			if !bytes.Equal(got[f], b) {
				t.Fatalf("log %s: %s differs from what Close leaves", name, f)
			}
		}
		if _, ok := got[cleanShutdownFile]; ok != (i == 2) {
			t.Fatalf("log %s: a clean-shutdown marker of its own: %v", name, ok)
		}
		dir := filepath.Join(root, "together", name)
		l, err := rec.Open(dir, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if l.Recovered() {
			t.Fatalf("log %s was recovered, not opened as cleanly closed", name)
		}
		if hw, leo := l.HighWatermark(), l.LogEndOffset(); hw != leo-5 || len(readAll(t, l, true)) != 34 {
			t.Fatalf("log %s reopened: hw %d leo %d, %d batches", name, hw, leo, len(readAll(t, l, true)))
		}
		l.Close()
	}
}

// TestCloseAllNoMarkerAfterStickyError: a log whose writes failed is not
// vouched for by a clean-shutdown marker; the others still are.
func TestCloseAllNoMarkerAfterStickyError(t *testing.T) {
	root := t.TempDir()
	bad := fillLog(t, filepath.Join(root, "bad"), testConfig())
	good := fillLog(t, filepath.Join(root, "good"), testConfig())
	bad.setErr(errors.New("injected write failure"))
	if err := CloseAll([]*Log{bad, good}, 2); err == nil {
		t.Fatal("CloseAll hid the sticky error")
	}
	rec, err := TakeCleanShutdown(root)
	if err != nil {
		t.Fatal(err)
	}
	if rec.take(filepath.Join(root, "bad")) {
		t.Fatal("a failed log is named clean")
	}
	if !rec.take(filepath.Join(root, "good")) {
		t.Fatal("a healthy log is not named clean")
	}
}
