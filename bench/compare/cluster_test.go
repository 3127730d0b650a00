package compare

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/bench"
)

func TestSummarizeNearestRank(t *testing.T) {
	var vs []float64
	for i := 20; i >= 1; i-- { // unsorted on purpose
		vs = append(vs, float64(i))
	}
	st := Summarize(vs)
	if st.N != 20 || st.P50 != 10 || st.P99 != 20 || st.Median != 10.5 || st.Min != 1 || st.Max != 20 {
		t.Fatalf("Summarize(1..20) = %+v", st)
	}
	if vs[0] != 20 {
		t.Fatal("Summarize sorted its input in place")
	}
	if st := Summarize([]float64{7}); st.P50 != 7 || st.P99 != 7 || st.Median != 7 {
		t.Fatalf("one sample: %+v", st)
	}
	if st := Summarize(nil); st != (Stat{}) {
		t.Fatalf("no samples: %+v", st)
	}
	// 200 samples: p99 is the 198th, not the largest.
	vs = vs[:0]
	for i := 1; i <= 200; i++ {
		vs = append(vs, float64(i))
	}
	if st := Summarize(vs); st.P99 != 198 || st.P50 != 100 {
		t.Fatalf("Summarize(1..200) = %+v", st)
	}
}

func TestParseSizes(t *testing.T) {
	got, err := parseSizes("10000, 3000,500")
	if err != nil || len(got) != 3 || got[0] != 10000 || got[1] != 3000 || got[2] != 500 {
		t.Fatalf("parseSizes = %v, %v", got, err)
	}
	for _, bad := range []string{"", "0", "-5", "1500", "10k", "1e4", "200000", "10000,x"} {
		if _, err := parseSizes(bad); err == nil {
			t.Errorf("parseSizes(%q) accepted", bad)
		}
	}
}

func TestInSyncCountsLeadersAndFullISRs(t *testing.T) {
	m := kmsg.NewPtrMetadataResponse()
	part := func(p, leader int32, replicas, isr []int32, code int16) kmsg.MetadataResponseTopicPartition {
		x := kmsg.NewMetadataResponseTopicPartition()
		x.Partition, x.Leader, x.Replicas, x.ISR, x.ErrorCode = p, leader, replicas, isr, code
		return x
	}
	a := kmsg.NewMetadataResponseTopic()
	a.Topic = kmsg.StringPtr("a")
	a.Partitions = []kmsg.MetadataResponseTopicPartition{
		part(0, 1, []int32{1, 2, 3}, []int32{1, 2, 3}, 0), // led, in sync
		part(1, 2, []int32{2, 3, 1}, []int32{2, 3}, 0),    // led, a follower out
		part(2, -1, []int32{3, 1, 2}, []int32{3}, 5),      // LEADER_NOT_AVAILABLE
	}
	gone := kmsg.NewMetadataResponseTopic()
	gone.Topic, gone.ErrorCode = kmsg.StringPtr("gone"), 3 // UNKNOWN_TOPIC_OR_PARTITION: not counted
	m.Topics = []kmsg.MetadataResponseTopic{a, gone}
	states := topicStates(m)
	if _, ok := states["gone"]; ok {
		t.Fatal("a topic with an error counted")
	}
	if full, led, total := inSync(states); full != 1 || led != 2 || total != 3 {
		t.Fatalf("inSync = %d full, %d led, %d total; want 1, 2, 3", full, led, total)
	}
}

func TestClusterPropertiesCarryNodeAndQuorum(t *testing.T) {
	voters := "1@127.0.0.1:2001,2@127.0.0.1:2002,3@127.0.0.1:2003"
	k := KafkaClusterProperties(2, "127.0.0.1:1002", "127.0.0.1:2002", voters, "/d/2")
	for _, want := range []string{"node.id=2", "controller.quorum.voters=" + voters, "listeners=PLAINTEXT://127.0.0.1:1002,CONTROLLER://127.0.0.1:2002",
		"advertised.listeners=PLAINTEXT://127.0.0.1:1002", "log.dirs=/d/2", "offsets.topic.replication.factor=3", "num.io.threads=2"} {
		if !strings.Contains(k, want+"\n") {
			t.Errorf("Kafka properties lack %q", want)
		}
	}
	s := SluiceClusterProperties(3, "127.0.0.1:1003", "127.0.0.1:2003", voters, "/d/3")
	for _, want := range []string{"process.roles=broker,controller", "node.id=3", "controller.quorum.voters=" + voters, "log.dirs=/d/3", "controller.listener.names=CONTROLLER"} {
		if !strings.Contains(s, want+"\n") {
			t.Errorf("Sluice properties lack %q", want)
		}
	}
}

// fakeClusterReport: two rounds; Sluice produces 3× Kafka's MB/s with RF=3
// and 2× with RF=1; kills take 10 s (Kafka) and 0.5 s (Sluice).
func fakeClusterReport() *ClusterReport {
	o := Options{Suite: SuiteCluster, Brokers: []BrokerKind{Kafka, Sluice}, Rounds: 2, Duration: 8 * time.Second, Warmup: time.Second}
	rep := &ClusterReport{Report: Report{Options: o, Started: time.Date(2026, 12, 5, 7, 40, 0, 0, time.UTC)},
		Cluster:    ClusterOptions{Nodes: 3, Rates: []float64{20000, 5000}, Kills: 4, Shutdowns: 2, Creates: 2, ScalePartitions: []int{10000, 3000}, ScaleIdle: Duration(20 * time.Second), ScaleLimit: Duration(4 * time.Minute)},
		LoadBefore: "1.00 2.00 3.00", LoadAfter: "4.00 5.00 6.00"}
	rep.Finished = rep.Started.Add(30 * time.Minute)
	rep.Machine = MachineInfo{CPUs: 2, Kernel: "Linux 6.18", Commit: strings.Repeat("b", 40)}
	rep.Workloads = ClusterWorkloads(o, []float64{20000, 5000})
	for round := 1; round <= 2; round++ {
		for _, w := range rep.Workloads {
			for _, b := range o.Brokers {
				mbps := 100.0 * float64(round)
				if w.Config.ReplicationFactor == 3 {
					mbps /= 2
				}
				if b == Sluice {
					mbps *= map[bool]float64{true: 3, false: 2}[w.Config.ReplicationFactor == 3]
				}
				res := &bench.Result{Config: w.Config, Produce: bench.Throughput{MBPerSec: mbps, RecordsPerSec: mbps * 1000, Bytes: int64(mbps * 8e6)},
					ProduceLatency: bench.LatencySummary{Count: 10, P50: 2, P99: 20}}
				rep.Runs = append(rep.Runs, RunRecord{Workload: w.Name, Broker: b, Round: round, Result: res, CPUSeconds: 4})
			}
		}
		rep.Faults = append(rep.Faults,
			FaultSamples{Figure: "kill", Broker: Kafka, Round: round, MS: []float64{10000, 11000}},
			FaultSamples{Figure: "kill", Broker: Sluice, Round: round, MS: []float64{500, 700}, Errors: []string{"kill 3: something odd"}},
			FaultSamples{Figure: "shutdown", Broker: Kafka, Round: round, MS: []float64{4000}},
			FaultSamples{Figure: "shutdown", Broker: Sluice, Round: round, MS: []float64{400}},
			FaultSamples{Figure: "metadata", Broker: Kafka, Round: round, MS: []float64{50}},
			FaultSamples{Figure: "metadata", Broker: Sluice, Round: round, MS: []float64{5}},
		)
	}
	rep.Scale = []ScaleResult{
		{Broker: Kafka, Partitions: 10000, Err: "after create: not within 4m0s"},
		{Broker: Kafka, Partitions: 3000, CreateSeconds: 1, IdleSeconds: 20, IdleCPU: []float64{0.3, 0.3, 0.3}, RSS: []int64{600e6, 610e6, 620e6}, ColdSeconds: 60},
		{Broker: Sluice, Partitions: 10000, CreateSeconds: 100, IdleSeconds: 20, IdleCPU: []float64{0.02, 0.02, 0.03}, RSS: []int64{300e6, 310e6, 320e6}, ColdSeconds: 90},
	}
	return rep
}

func TestClusterFigures(t *testing.T) {
	rep := fakeClusterReport()
	if got := rep.replicationRatios(16, Sluice); len(got) != 2 || got[0] != 0.75 || got[1] != 0.75 {
		t.Fatalf("Sluice replication ratios %v, want 0.75 per round", got)
	}
	if got := rep.replicationRatios(1, Kafka); len(got) != 2 || got[0] != 0.5 {
		t.Fatalf("Kafka replication ratios %v, want 0.5 per round", got)
	}
	ms, errs := rep.faultSamples("kill", Sluice)
	if len(ms) != 4 || len(errs) != 2 {
		t.Fatalf("pooled kills %v, errors %v", ms, errs)
	}
	rows := map[string]summaryRow{}
	for _, r := range rep.summaryRows() {
		rows[r.figure] = r
	}
	check := func(figure, kafka, sluice, ratio string) {
		t.Helper()
		r, ok := rows[figure]
		if !ok {
			t.Errorf("no row %q", figure)
			return
		}
		if r.kafka != kafka || r.sluice != sluice || r.ratio != ratio {
			t.Errorf("%s: Kafka %q, Sluice %q, ratio %q; want %q, %q, %q", figure, r.kafka, r.sluice, r.ratio, kafka, sluice, ratio)
		}
	}
	check("acks=all RF=3, 1 partition: produce MB/s", "75 <sub>50–100</sub>", "225 <sub>150–300</sub>", "3.00×")
	check("replication overhead, 16 partitions: RF=3 acks=all ÷ RF=1 acks=1 MB/s", "0.50", "0.75", "1.50×")
	check("SIGKILL of the leader → first acks=all produce on the new leader, p50 ms", "10k <sub>n=4</sub>", "500 <sub>n=4</sub>", "0.050×")
	check("SIGKILL of the leader → first acks=all produce on the new leader, p99 ms", "11k", "700", "0.064×")
	check("scale: partitions (RF=3, over 3 brokers)", "3000", "10000", "")
	check("scale: resident memory per broker, MB (median of the 3, min–max)", "610 <sub>600–620</sub>", "310 <sub>300–320</sub>", "–") // sizes differ: no ratio
}

func TestClusterMarkdownSectionAndCharts(t *testing.T) {
	dir := t.TempDir()
	md := filepath.Join(dir, "BENCHMARKS.md")
	charts := filepath.Join(dir, "docs", "bench")
	before := "# Benchmarks\n\n## Three-node cluster\n\n" + clusterBegin + "\nold\n" + clusterEnd + "\n\nHand-written notes.\n\n## Storage\n\nkept\n"
	if err := os.WriteFile(md, []byte(before), 0o644); err != nil {
		t.Fatal(err)
	}
	rep := fakeClusterReport()
	if err := rep.WriteClusterCharts(charts); err != nil {
		t.Fatal(err)
	}
	for range 2 { // rewriting is idempotent
		if err := rep.UpdateClusterMarkdown(md, charts); err != nil {
			t.Fatal(err)
		}
	}
	raw, _ := os.ReadFile(md)
	s := string(raw)
	for _, want := range []string{"Hand-written notes.", "## Storage\n\nkept", "### Figures", "| Sluice ÷ Kafka |", "load average (1, 5, 15 min) 1.00 2.00 3.00 before the run",
		"#### Max-throughput produce, RF=3, min.insync.replicas=2, acks=all, 16 partitions", "--replication-factor 3 --min-insync-replicas 2",
		"failed: after create: not within 4m0s", "target 20k, 16 partitions: Kafka 4.4.0 75k (lowest round 50k), Sluice 225k", "produce-ack p99 ms at 5.12 MB/s", "round 1, kill on Sluice: kill 3: something odd", "docs/bench/cluster-produce.svg", "docs/bench/cluster-faults.svg"} {
		if !strings.Contains(s, want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
	if strings.Contains(s, "\nold\n") || strings.Count(s, clusterBegin) != 1 {
		t.Error("old generated text kept or section duplicated")
	}
	for _, c := range rep.clusterCharts() {
		raw, err := os.ReadFile(filepath.Join(charts, c.file))
		if err != nil {
			t.Fatalf("chart %s: %v", c.file, err)
		}
		d := xml.NewDecoder(strings.NewReader(string(raw)))
		for {
			if _, err := d.Token(); err == io.EOF {
				break
			} else if err != nil {
				t.Fatalf("%s: not well-formed: %v", c.file, err)
			}
		}
	}
}

func TestClusterReportJSONRoundTrip(t *testing.T) {
	rep := fakeClusterReport()
	raw, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var back ClusterReport
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	if time.Duration(back.Cluster.ScaleLimit) != 4*time.Minute || len(back.Faults) != len(rep.Faults) || len(back.Runs) != len(rep.Runs) || back.Scale[2].RSS[1] != 310e6 {
		t.Fatalf("round trip lost data: %+v", back.Cluster)
	}
	if !strings.Contains(string(raw), `"scale_limit":"4m0s"`) {
		t.Fatalf("durations not written as text: %s", raw)
	}
}

// TestSetNiceReachesAllThreadsAndChildren: every thread of the process,
// and a child started afterwards, runs at the level set (setpriority
// alone changes only the calling thread).
func TestSetNiceReachesAllThreadsAndChildren(t *testing.T) {
	cur, err := threadNice(0)
	if err != nil {
		t.Fatal(err)
	}
	want := min(cur+1, 19)
	if err := setNice(want); err != nil {
		t.Fatal(err)
	}
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Skip("no /proc/self/task")
	}
	for _, task := range tasks {
		tid, _ := strconv.Atoi(task.Name())
		if n, err := threadNice(tid); err == nil && n != want {
			t.Errorf("thread %d at nice %d, want %d", tid, n, want)
		}
	}
	cmd := exec.Command("sleep", "5")
	if err := cmd.Start(); err != nil {
		t.Skip("no sleep binary:", err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	// Field 19 is nice; count from the ')' that closes the command name.
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	if got, _ := strconv.Atoi(f[16]); got != want {
		t.Errorf("child at nice %d, want %d", got, want)
	}
}
