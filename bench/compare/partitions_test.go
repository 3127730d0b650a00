package compare

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-broker/sluice/bench"
)

// TestPartitionsMarkdownRatiosAndSection: the partition-scale section
// shows each size's figures for both brokers with Sluice ÷ Kafka, leaves
// out the ratio where a figure was not measured or where Kafka did not
// run, and rewrites only its own marked section of BENCHMARKS.md.
func TestPartitionsMarkdownRatiosAndSection(t *testing.T) {
	res := func(create time.Duration, rss int64) *bench.PartitionScaleResult {
		return &bench.PartitionScaleResult{Create: create, RSSBytes: rss, RSSAfterRestart: -1, MetadataMedian: time.Millisecond}
	}
	rep := &PartitionsReport{
		Options: PartitionsOptions{Sizes: []int{1000, 50000}, PerTopic: 100, Section: "partition-scale", Command: "benchcompare partitions --sizes 1000,50000"},
		Machine: MachineInfo{CPUs: 2, Kafka: KafkaVersion},
		Runs: []PartitionsRun{
			{Broker: Kafka, Size: 1000, LoadAvg: "1.00 2.00 3.00", Result: res(4*time.Second, 400e6)},
			{Broker: Sluice, Size: 1000, LoadAvg: "1.50 2.00 3.00", Result: res(time.Second, 40e6)},
			{Broker: Sluice, Size: 50000, Result: res(20*time.Second, 250e6), Err: "cold start: timed out"},
		},
	}
	md := rep.Markdown()
	for _, want := range []string{
		"| create (one CreateTopics per topic) | 1 s | 4 s | 0.25× |",
		"| resident memory | 40 MB | 400 MB | 0.1× |",
		"| resident memory after the cold start | – | – |  |",
		"kafka 1.00 2.00 3.00; sluice 1.50 2.00 3.00",
		"| create (one CreateTopics per topic) | 20 s |",
		"| error | sluice: cold start: timed out |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	path := filepath.Join(t.TempDir(), "BENCHMARKS.md")
	if err := os.WriteFile(path, []byte("# Benchmarks\n\nhand-written\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second run replaces the first's section
		if err := rep.UpdateMarkdown(path); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := os.ReadFile(path)
	if s := string(b); !strings.HasPrefix(s, "# Benchmarks\n\nhand-written\n") || strings.Count(s, "<!-- BEGIN partition-scale:") != 1 || strings.Count(s, "| resident memory |") != 2 {
		t.Fatalf("BENCHMARKS.md after two updates:\n%s", s)
	}
}

func TestParseCounts(t *testing.T) {
	if got, err := parseCounts("1000, 10000"); err != nil || len(got) != 2 || got[1] != 10000 {
		t.Fatalf("parseCounts: %v %v", got, err)
	}
	for _, bad := range []string{"", "0", "x", "2000000"} {
		if _, err := parseCounts(bad); err == nil {
			t.Errorf("parseCounts(%q) accepted", bad)
		}
	}
}
