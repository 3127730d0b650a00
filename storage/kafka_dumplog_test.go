package storage

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-broker/sluice/record"
)

// TestKafkaDumpLogReadsOurSegments runs Apache Kafka's own DumpLogSegments
// (kafka-dump-log) over a closed partition with several segments, produced
// by idempotent and plain producers, and requires that every batch is
// valid and that both indexes pass its sanity check and verification.
// It needs Java and Kafka's jars:
//
//	SLUICE_KAFKA_CLASSPATH="$(find ~/.m2/repository -name '*.jar' | tr '\n' :)" \
//	    go test -run KafkaDumpLog ./storage/
func TestKafkaDumpLogReadsOurSegments(t *testing.T) {
	cp := os.Getenv("SLUICE_KAFKA_CLASSPATH")
	if cp == "" {
		t.Skip("set SLUICE_KAFKA_CLASSPATH to Kafka's jars to run kafka-dump-log")
	}
	dir := filepath.Join(t.TempDir(), "t-0")
	cfg := testConfig()
	cfg.SegmentBytes = 20000
	cfg.IndexIntervalBytes = 1000
	l := mustOpen(t, dir, cfg)
	for i := 0; i < 60; i++ {
		s := spec(1+i%4, 100+i*7%300)
		s.ts += int64(i * 5)
		if i%3 == 0 {
			s.pid, s.epoch, s.seq, s.records = 5, 0, int32(i/3*4), 4
		}
		appendOne(t, l, buildBatch(s))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	runKafkaDumpLog(t, cp, dir, 60)
}

// TestKafkaDumpLogReadsReplicaSegments runs kafka-dump-log over replica
// logs (see replicaDumpLogDirs). Same classpath as above.
func TestKafkaDumpLogReadsReplicaSegments(t *testing.T) {
	cp := os.Getenv("SLUICE_KAFKA_CLASSPATH")
	if cp == "" {
		t.Skip("set SLUICE_KAFKA_CLASSPATH to Kafka's jars to run kafka-dump-log")
	}
	dirs, batches := replicaDumpLogDirs(t)
	for i, dir := range dirs {
		runKafkaDumpLog(t, cp, dir, batches[i])
	}
}

// TestReplicaSegmentsPassDumpLogChecks makes storage's own version of those
// checks over the same logs, without Java.
func TestReplicaSegmentsPassDumpLogChecks(t *testing.T) {
	dirs, _ := replicaDumpLogDirs(t)
	for _, dir := range dirs {
		checkDumpLogInvariants(t, dir)
	}
}

// replicaDumpLogDirs builds two closed follower logs and returns their
// directories and batch counts: one that copied a leader, was truncated
// inside a sealed segment and inside a batch (cut segments are sealed and
// trimmed; the log goes on in a new segment) and caught up again; one
// restarted with TruncateFullyAndStartAt that then caught up.
func replicaDumpLogDirs(t *testing.T) ([]string, []int) {
	root := t.TempDir()
	cfg := testConfig()
	cfg.SegmentBytes = 20000
	cfg.IndexIntervalBytes = 1000
	leader := leaderWorkload(t, filepath.Join(root, "leader"), cfg, 80)
	defer leader.Close()
	f := mustOpen(t, filepath.Join(root, "t-0"), cfg)
	catchUp(t, leader, f, 7000)
	if err := f.TruncateTo(f.segs.Load().segs[1].base + 3); err != nil {
		t.Fatal(err)
	}
	catchUp(t, leader, f, 7000)
	if err := f.TruncateTo(f.LogEndOffset() - 2); err != nil {
		t.Fatal(err)
	}
	catchUp(t, leader, f, 1<<20)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	g := mustOpen(t, filepath.Join(root, "t-1"), cfg)
	if err := g.TruncateFullyAndStartAt(record.BaseOffset(fetch(t, leader, 100, 1))); err != nil {
		t.Fatal(err)
	}
	catchUp(t, leader, g, 5000)
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	return []string{f.Dir(), g.Dir()}, []int{80, len(splitBatches(t, logStream(t, g.Dir())))}
}

// runKafkaDumpLog runs DumpLogSegments over every segment of dir in each
// of its checking modes and requires wantBatches valid batches.
func runKafkaDumpLog(t *testing.T, cp, dir string, wantBatches int) {
	t.Helper()
	var files []string
	for _, pat := range []string{"*.log", "*.index", "*.timeindex"} {
		m, _ := filepath.Glob(filepath.Join(dir, pat))
		files = append(files, m...)
	}
	for _, mode := range []string{"--index-sanity-check", "--verify-index-only", "--deep-iteration"} {
		out, err := exec.Command("java", "-cp", cp, "org.apache.kafka.tools.DumpLogSegments",
			"--files", strings.Join(files, ","), mode).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", mode, err, out)
		}
		s := string(out)
		for _, bad := range []string{"isvalid: false", "Mismatches", "failed sanity", "Exception", "out of order", "not found"} {
			if strings.Contains(s, bad) {
				t.Fatalf("kafka-dump-log %s reports %q:\n%s", mode, bad, s)
			}
		}
		if mode == "--deep-iteration" && strings.Count(s, "isvalid: true") != wantBatches {
			t.Fatalf("expected %d valid batches:\n%s", wantBatches, s)
		}
	}
}

// TestKafkaDumpLogReadsTxnIndex writes a log with committed and aborted
// transactions over several segments, and requires that Kafka's
// DumpLogSegments reads every .txnindex file back as the entries the log
// holds, and every batch (control batches included) as valid. Same
// classpath as above.
func TestKafkaDumpLogReadsTxnIndex(t *testing.T) {
	cp := os.Getenv("SLUICE_KAFKA_CLASSPATH")
	if cp == "" {
		t.Skip("set SLUICE_KAFKA_CLASSPATH to Kafka's jars to run kafka-dump-log")
	}
	dir := filepath.Join(t.TempDir(), "t-0")
	l, batches := txnWorkload(t, dir)
	want := l.AbortedTxns(nil, 0, 1<<40)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.txnindex"))
	if len(files) < 2 {
		t.Fatalf("%d .txnindex files, want several", len(files))
	}
	out, err := exec.Command("java", "-cp", cp, "org.apache.kafka.tools.DumpLogSegments",
		"--files", strings.Join(files, ",")).CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var got []AbortedTxn
	for _, line := range strings.Split(string(out), "\n") {
		var a AbortedTxn
		var version int
		if n, _ := fmt.Sscanf(line, "version: %d producerId: %d firstOffset: %d lastOffset: %d lastStableOffset: %d",
			&version, &a.ProducerID, &a.FirstOffset, &a.LastOffset, &a.LastStableOffset); n == 5 {
			got = append(got, a)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("kafka-dump-log read %v, want %v\n%s", got, want, out)
	}
	runKafkaDumpLog(t, cp, dir, batches)
}
