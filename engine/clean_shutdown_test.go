package engine_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-broker/sluice/engine"
	"github.com/sluice-broker/sluice/internal/testbroker"
)

// partitionsRecovered counts the hosted partitions whose log was
// recovered at open, and the partition directories holding a
// clean-shutdown marker of their own.
func partitionsRecovered(t *testing.T, tb *testbroker.Broker) (recovered, markers int) {
	t.Helper()
	for _, tp := range tb.Broker.Topics() {
		for _, p := range tp.Partitions() {
			l := engine.PartitionLog(p)
			if l.Recovered() {
				recovered++
			}
			if _, err := os.Stat(filepath.Join(l.Dir(), ".clean-shutdown")); err == nil {
				markers++
			}
		}
	}
	return recovered, markers
}

// TestCleanRestartRecoversNothing: a clean shutdown vouches for every
// partition with one record in the data directory, not a marker in each
// partition directory, and the next start recovers none of them. A data
// directory of the earlier layout (a marker per partition, no record)
// opens without recovery as well, and its markers are gone afterwards.
func TestCleanRestartRecoversNothing(t *testing.T) {
	tb := testbroker.Start(t)
	const topics, parts = 3, 4
	for i := range topics {
		createTopic(t, tb, fmt.Sprintf("clean-%d", i), parts)
	}
	cl := tb.Client(t)
	for i := range topics {
		r := &kgo.Record{Topic: fmt.Sprintf("clean-%d", i), Partition: 1, Value: []byte("v")}
		if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cl.Close()
	tb.Restart(t)
	if rec, markers := partitionsRecovered(t, tb); rec != 0 || markers != 0 {
		t.Fatalf("after a clean restart: %d partitions recovered, %d markers of their own", rec, markers)
	}

	var dirs []string
	for _, tp := range tb.Broker.Topics() {
		for _, p := range tp.Partitions() {
			dirs = append(dirs, engine.PartitionLog(p).Dir())
		}
	}
	tb.Stop(t) // then rewrite the data directory in the earlier layout
	if err := os.Remove(filepath.Join(tb.Config.DataDir, ".clean-shutdown")); err != nil {
		t.Fatalf("no clean-shutdown record: %v", err)
	}
	for _, dir := range dirs {
		if err := os.WriteFile(filepath.Join(dir, ".clean-shutdown"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tb.Restart(t)
	if rec, markers := partitionsRecovered(t, tb); rec != 0 || markers != 0 {
		t.Fatalf("after a restart from per-partition markers: %d recovered, %d markers left", rec, markers)
	}
}
