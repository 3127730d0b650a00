package storage

import (
	"os"
	"path/filepath"
	"testing"
)

// closedTogether fills logs a and b under a fresh data directory and
// closes them with CloseAll.
func closedTogether(t *testing.T) string {
	root := t.TempDir()
	var logs []*Log
	for _, name := range []string{"a-0", "b-0"} {
		logs = append(logs, fillLog(t, filepath.Join(root, name), testConfig()))
	}
	if err := CloseAll(logs, 2); err != nil {
		t.Fatal(err)
	}
	return root
}

func mustOpenThrough(t *testing.T, rec *CleanShutdown, dir string) *Log {
	t.Helper()
	l, err := rec.Open(dir, testConfig())
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestCleanShutdownRecordCountsOnce: CloseAll leaves one record in the
// data directory and no marker per log; taking it removes it (so a crash
// from then on recovers), each log it names opens without recovery once,
// and a log that crashed after that open recovers at its next open.
func TestCleanShutdownRecordCountsOnce(t *testing.T) {
	root := closedTogether(t)
	for _, name := range []string{"a-0", "b-0"} {
		if _, err := os.Stat(filepath.Join(root, name, cleanShutdownFile)); !os.IsNotExist(err) {
			t.Fatalf("%s has a marker of its own: %v", name, err)
		}
	}
	rec, err := TakeCleanShutdown(root)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, dirCleanShutdownFile)); !os.IsNotExist(err) {
		t.Fatalf("the record survives being taken: %v", err)
	}
	a := mustOpenThrough(t, rec, filepath.Join(root, "a-0"))
	if a.Recovered() {
		t.Fatal("a log the record names was recovered")
	}
	end := a.LogEndOffset()
	appendN(t, a, 2, 1, 10)
	crash(a)
	a = mustOpenThrough(t, rec, filepath.Join(root, "a-0"))
	if !a.Recovered() || a.LogEndOffset() != end+2 {
		t.Fatalf("after a crash: recovered %v, end %d, want recovered to %d", a.Recovered(), a.LogEndOffset(), end+2)
	}
	a.Close()
	again, err := TakeCleanShutdown(root) // a crash after the first take: no record
	if err != nil {
		t.Fatal(err)
	}
	if b := mustOpenThrough(t, again, filepath.Join(root, "b-0")); !b.Recovered() {
		t.Fatal("a log opened after a crash that followed the take was not recovered")
	} else {
		b.Close()
	}
}

// TestCleanShutdownRecordTornNamesNothing: a record cut short (a crash
// while it was written) vouches for no log.
func TestCleanShutdownRecordTornNamesNothing(t *testing.T) {
	root := closedTogether(t)
	path := filepath.Join(root, dirCleanShutdownFile)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, torn := range [][]byte{nil, data[:len(data)-4], data[:len(data)-2], []byte("0\n3\na-0\nb-0\n")} {
		if err := os.WriteFile(path, torn, 0o644); err != nil {
			t.Fatal(err)
		}
		rec, err := TakeCleanShutdown(root)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Len() != 0 {
			t.Fatalf("record %q names %d logs", torn, rec.Len())
		}
	}
}

// TestNewDirectoryLogIsStable: a log opened in a directory Open just made
// (loadNew) starts with no open transaction, so its last stable offset
// follows the high watermark. (loadNew once left the first unstable
// offset at its zero value, and every new partition answered a last
// stable offset of 0.)
func TestNewDirectoryLogIsStable(t *testing.T) {
	l := mustOpen(t, filepath.Join(t.TempDir(), "new-0"), testConfig())
	defer l.Close()
	appendN(t, l, 3, 1, 10)
	l.SetHighWatermark(l.LogEndOffset())
	if lso, hw := l.LastStableOffset(), l.HighWatermark(); lso != hw || hw != 3 {
		t.Fatalf("last stable offset %d, high watermark %d, want both 3", lso, hw)
	}
}
