package storage

import (
	"os"
	"strings"
	"testing"
	"time"
)

// TestCloseRunsPendingRemovals checks that Close removes the files of
// segments deleted earlier instead of leaving their timers to run after it
// returns (file.delete.delay.ms of an hour here): nothing reads a closed
// log's files, and a removal that outlived Close would race with whatever
// reuses the directory.
func TestCloseRunsPendingRemovals(t *testing.T) {
	cfg := testConfig()
	cfg.RetentionBytes = 0
	cfg.FileDeleteDelayMs = time.Hour.Milliseconds()
	l, dir := retentionLog(t, cfg)
	if n, err := l.EnforceRetention(time.Now().UnixMilli()); n == 0 || err != nil {
		t.Fatalf("deleted %d: %v", n, err)
	}
	if got := deletedFiles(t, dir); len(got) == 0 {
		t.Fatal("no segment renamed to .deleted")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got := deletedFiles(t, dir); len(got) != 0 {
		t.Fatalf("left after Close: %v", got)
	}
	if len(l.removals.pending) != 0 {
		t.Fatalf("%d removals still scheduled", len(l.removals.pending))
	}
}

func deletedFiles(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), deletedSuffix) {
			names = append(names, e.Name())
		}
	}
	return names
}
