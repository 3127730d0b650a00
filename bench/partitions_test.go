package bench

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-broker/sluice/internal/testbroker"
)

// TestPartitionScaleAgainstRunningBroker runs the partition-scale workload
// against a broker it did not start (this process's in-process broker, as
// --bootstrap and --pid would name one): every step but the stop and the
// cold start runs, and the figures are filled.
func TestPartitionScaleAgainstRunningBroker(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a broker")
	}
	tb := testbroker.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := RunPartitionScale(ctx, PartitionScaleConfig{
		Partitions: 60, Topics: 7, Bootstrap: tb.Addr, Pid: os.Getpid(),
		Idle: 100 * time.Millisecond, MetadataSamples: 3,
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.Create <= 0 || r.Write <= 0 || r.MetadataMedian <= 0 || r.MetadataPartitions < 60 || r.RSSBytes <= 0 || r.OpenFDs <= 0 || r.Mappings <= 0 {
		t.Fatalf("figures missing: %+v", r)
	}
	if r.Shutdown != 0 || r.ColdReadable != 0 {
		t.Fatalf("stopped a broker it did not start: %+v", r)
	}
}

// TestPartitionScaleStartsStopsAndRestartsSluice runs the whole workload
// on a `sluice serve` it starts from a freshly built binary: SIGTERM
// stops it, the cold start on the same data serves, and every
// partition's record is read back from the restarted broker.
func TestPartitionScaleStartsStopsAndRestartsSluice(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the sluice binary")
	}
	bin := filepath.Join(t.TempDir(), "sluice")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/sluice-broker/sluice/cmd/sluice").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := RunPartitionScale(ctx, PartitionScaleConfig{
		Partitions: 40, Topics: 4, Bootstrap: addr,
		Command: SluiceCommand(bin, addr, t.TempDir()),
		Idle:    100 * time.Millisecond, MetadataSamples: 3, Timeout: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.StartToServing <= 0 || r.Shutdown <= 0 || r.ColdServing <= 0 || r.ColdReadable < r.ColdServing || r.RSSAfterRestart <= 0 {
		t.Fatalf("figures missing: %+v", r)
	}
	t.Logf("%+v", r)
}
