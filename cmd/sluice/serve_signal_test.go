package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestStopDuringStartIsClean: SIGTERM sent while a broker is still
// opening its 2,000 partitions (its port already accepts connections) used
// to kill the process at once, as the signal was caught only once the
// start was over, leaving every log to a full recovery at the next start.
// Now the process finishes starting, shuts down cleanly and exits 0, and
// every partition keeps its clean-shutdown marker.
func TestStopDuringStartIsClean(t *testing.T) {
	dir, addr := t.TempDir(), freeAddr(t)
	p := startProc(t, dir, addr)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := 0; i < 20; i++ {
		if _, err := adm.CreateTopic(ctx, 100, 1, nil, fmt.Sprintf("many-%02d", i)); err != nil {
			t.Fatal(err)
		}
	}
	cl.Close()
	stopAndWait(t, p.cmd, p.exited)

	cmd := exec.Command(binPath, "serve", "--listen", addr, "--data-dir", dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	for { // the listener is open before the partitions are
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("exited at start: %v", err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	stopAndWait(t, cmd, exited)
	// The data dir's clean-shutdown record (storage/cleanshutdown.go: a
	// version line, a count, then one partition directory per line)
	// names every partition.
	record, err := os.ReadFile(filepath.Join(dir, ".clean-shutdown"))
	if err != nil {
		t.Fatalf("no clean-shutdown record: %v", err)
	}
	closed := map[string]bool{}
	for _, line := range strings.Split(string(record), "\n") {
		closed[line] = true
	}
	for i := 0; i < 20; i++ {
		for part := 0; part < 100; part++ {
			if name := fmt.Sprintf("many-%02d-%d", i, part); !closed[name] {
				t.Fatalf("partition %d of many-%02d not closed cleanly (not in the record)", part, i)
			}
		}
	}
}

// stopAndWait sends SIGTERM and waits for a clean exit.
func stopAndWait(t *testing.T, cmd *exec.Cmd, exited chan error) {
	t.Helper()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("no exit a minute after SIGTERM")
	}
}
