package compare

import (
	"encoding/xml"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-broker/sluice/bench"
)

func TestSVGIsWellFormed(t *testing.T) {
	for _, c := range []Chart{
		{Title: "bars & <things>", Unit: "MB/s", Categories: []string{"a", "b"},
			Series: []Series{{Name: "Kafka", Values: []float64{100, 250}}, {Name: "Sluice", Values: []float64{400, math.NaN()}}}},
		{Title: "log lines", Unit: "ms", Log: true, Lines: true, Categories: []string{"p50", "p99", "max"},
			Series: []Series{{Name: "Kafka", Values: []float64{0.5, 12, 300}}, {Name: "Sluice", Values: []float64{0.1, 0, 2}}}},
		{Title: "empty"},
	} {
		svg := c.SVG()
		d := xml.NewDecoder(strings.NewReader(svg))
		for {
			_, err := d.Token()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s: not well-formed XML: %v\n%s", c.Title, err, svg)
			}
		}
		if strings.Contains(svg, "NaN") || strings.Contains(svg, "Inf") {
			t.Fatalf("%s: NaN or Inf leaked into the SVG", c.Title)
		}
		for _, s := range c.Series {
			if !strings.Contains(svg, s.Name) {
				t.Errorf("%s: legend lacks %s", c.Title, s.Name)
			}
		}
	}
}

func TestNiceStepAndTicks(t *testing.T) {
	for in, want := range map[float64]float64{0.7: 1, 3: 5, 12: 20, 180: 200, 4000: 5000} {
		if got := niceStep(in); got != want {
			t.Errorf("niceStep(%v) = %v, want %v", in, got, want)
		}
	}
	lo, hi := Chart{Log: true, Series: []Series{{Values: []float64{0.3, 45}}}}.valueRange()
	if lo != 0.1 || hi != 100 {
		t.Errorf("log range %v..%v, want 0.1..100", lo, hi)
	}
}

func TestMedian(t *testing.T) {
	if median([]float64{3, 1, 2}) != 2 || median([]float64{4, 1, 3, 2}) != 2.5 || median(nil) != 0 {
		t.Fatal("median")
	}
}

func TestReadProcStatsSelf(t *testing.T) {
	st, err := ReadProcStats(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if st.PeakRSS <= 0 || st.RSS <= 0 || st.Threads <= 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestKafkaServerProperties(t *testing.T) {
	p := KafkaServerProperties(9092, 9093, "/data/kraft")
	for _, want := range []string{
		"process.roles=broker,controller", "node.id=1", "controller.quorum.voters=1@127.0.0.1:9093",
		"listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093", "log.dirs=/data/kraft",
		"num.network.threads=2", "num.io.threads=2",
	} {
		if !strings.Contains(p, want+"\n") {
			t.Errorf("server.properties lacks %q", want)
		}
	}
	if id := kafkaClusterID(); len(id) != 22 || id[0] == '-' {
		t.Errorf("cluster id %q", id)
	}
}

func fakeReport() *Report {
	o := Options{Suite: SuiteKafka, Brokers: []BrokerKind{Kafka, Sluice, Kfake}, Rounds: 2, Duration: 10 * time.Second, CatchUpRecords: 1000, Warmup: time.Second}
	rep := &Report{Options: o, Started: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Limits: &bench.Limits{SendfileMBps: 4000, WriteMBps: 2000, WriteSyncMBps: 900}}
	rep.Finished = rep.Started.Add(time.Minute)
	rep.Machine = MachineInfo{CPUs: 2, Kernel: "Linux 6.1", Commit: strings.Repeat("a", 40)}
	rep.Workloads = Workloads(o)
	for round := 1; round <= 2; round++ {
		for _, w := range rep.Workloads {
			for _, b := range o.Brokers {
				scale := map[BrokerKind]float64{Kafka: 1, Sluice: 4, Kfake: 0.5}[b]
				lat := map[BrokerKind]float64{Kafka: 10, Sluice: 1, Kfake: 5}[b]
				res := &bench.Result{Config: w.Config,
					Produce:        bench.Throughput{MBPerSec: 100 * scale * float64(round), RecordsPerSec: 1e5 * scale},
					Consume:        bench.Throughput{MBPerSec: 1000 * scale, RecordsPerSec: 1e6 * scale},
					ProduceLatency: bench.LatencySummary{Count: 10, P50: lat / 4, P90: lat / 2, P99: lat, P999: 2 * lat, Max: 3 * lat},
					EndToEnd:       bench.LatencySummary{Count: 10, P50: lat / 3, P90: lat / 2, P99: 1.5 * lat, P999: 2 * lat, Max: 4 * lat},
				}
				rec := RunRecord{Workload: w.Name, Broker: b, Round: round, Result: res, CPUSeconds: 5 / scale, PeakRSS: int64(1e9 / scale / scale)}
				if w.ZeroCopy {
					rec.ZeroCopy = &bench.ZeroCopyReport{ZeroCopyBytes: 999, CopiedBytes: 1, Fraction: 0.999}
				}
				rep.Runs = append(rep.Runs, rec)
			}
		}
	}
	return rep
}

func TestReportMediansRatiosTargets(t *testing.T) {
	rep := fakeReport()
	if v, n := rep.Median("produce-1p-acks1", Sluice, "produce_mbps"); n != 2 || v != 600 {
		t.Fatalf("median %v over %d runs, want 600 over 2", v, n)
	}
	if r := rep.ratio("produce-1p-acks1", "produce_mbps", Kafka); r != 4 {
		t.Fatalf("ratio %v", r)
	}
	verdicts := map[string]string{}
	for _, tg := range rep.Targets() {
		verdicts[tg.Name] = tg.Verdict
	}
	if v := verdicts["Sluice/Kafka produce MB/s, produce-16p-acksall"]; v != "met" {
		t.Errorf("produce target: %q", v)
	}
	if v := verdicts["Sluice/Kafka broker peak RSS (largest over workloads)"]; v != "met" {
		t.Errorf("RSS target (1/16 of Kafka's): %q", v)
	}
	if v := verdicts["Sluice raw fetch ÷ loopback sendfile"]; !strings.HasPrefix(v, "met") {
		t.Errorf("raw fetch target (4000/4000): %q", v)
	}
	if v := verdicts["Sluice/Kafka end-to-end p99 at 20 MB/s"]; v != "met" {
		t.Errorf("e2e target: %q", v)
	}
	if len(rep.kafkaAhead()) != 0 {
		t.Errorf("Kafka ahead on %v", rep.kafkaAhead())
	}
}

func TestUpdateMarkdownKeepsOtherSections(t *testing.T) {
	dir := t.TempDir()
	md := filepath.Join(dir, "BENCHMARKS.md")
	charts := filepath.Join(dir, "docs", "bench")
	rep := fakeReport()
	if err := rep.WriteCharts(charts); err != nil {
		t.Fatal(err)
	}
	if err := rep.UpdateMarkdown(md, charts); err != nil {
		t.Fatal(err)
	}
	// Someone else adds a section and a hand-written note.
	raw, _ := os.ReadFile(md)
	_, end := markers(SuiteKafka)
	edited := strings.Replace(string(raw), end, end+"\n\nHand-written analysis.\n", 1) + "\n## Storage\n\nStorage numbers.\n"
	if err := os.WriteFile(md, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	rep.Runs[0].Result.Produce.MBPerSec = 12345 // a new run
	if err := rep.UpdateMarkdown(md, charts); err != nil {
		t.Fatal(err)
	}
	raw, _ = os.ReadFile(md)
	s := string(raw)
	for _, want := range []string{"Hand-written analysis.", "## Storage\n\nStorage numbers.", "## Sluice vs kfake", "| produce MB/s |", "4.00×", "![", "docs/bench/kafka-produce.svg", "### Targets", "### Zero-copy"} {
		if !strings.Contains(s, want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
	begin, _ := markers(SuiteKafka)
	if strings.Count(s, begin) != 1 {
		t.Error("generated section duplicated")
	}
	for _, c := range rep.charts() {
		if _, err := os.Stat(filepath.Join(charts, c.file)); err != nil {
			t.Errorf("chart %s not written", c.file)
		}
	}
}

func TestMergeReplacesRerunWorkloads(t *testing.T) {
	old := fakeReport()
	path := filepath.Join(t.TempDir(), "old.json")
	if err := bench.WriteJSONFile(path, old); err != nil {
		t.Fatal(err)
	}
	fresh := fakeReport()
	fresh.Workloads = []Workload{fresh.Workloads[0]}
	var runs []RunRecord
	for _, r := range fresh.Runs {
		if r.Workload == fresh.Workloads[0].Name {
			r.Result.Produce.MBPerSec = 7
			runs = append(runs, r)
		}
	}
	fresh.Runs = runs
	merged, err := mergeInto(path, fresh)
	if err != nil {
		t.Fatal(err)
	}
	if len(merged.Runs) != len(old.Runs) || len(merged.Workloads) != len(old.Workloads) {
		t.Fatalf("merged %d runs of %d workloads, want %d of %d", len(merged.Runs), len(merged.Workloads), len(old.Runs), len(old.Workloads))
	}
	if v, _ := merged.Median(fresh.Workloads[0].Name, Sluice, "produce_mbps"); v != 7 {
		t.Fatalf("re-run workload median %v, want the fresh 7", v)
	}
	if v, _ := merged.Median("catch-up", Sluice, "consume_mbps"); v != 4000 {
		t.Fatalf("kept workload median %v, want 4000", v)
	}
	if len(merged.Notes) == 0 || !strings.Contains(merged.Notes[len(merged.Notes)-1], "re-run") {
		t.Fatalf("notes %v", merged.Notes)
	}
}

// TestMergeAddsNewWorkloads: re-running workloads the saved report did
// not have (new ones) into it with --merge gives them tables: they join
// its workloads, in the suite's order, and re-run ones take the fresh
// definition.
func TestMergeAddsNewWorkloads(t *testing.T) {
	o := Options{Suite: SuiteKafka, Brokers: []BrokerKind{Kafka, Sluice}}
	all := Workloads(o)
	old := []Workload{all[0], all[len(all)-1]}
	old[1].Metrics = []string{"stale"}
	fresh := []Workload{all[len(all)-1], all[4]} // re-run one, add one
	got := mergeWorkloads(old, fresh, o)
	if len(got) != 3 || got[0].Name != all[0].Name || got[1].Name != all[4].Name || got[2].Name != all[len(all)-1].Name {
		t.Fatalf("merged workloads %v", workloadNames(got))
	}
	if got[2].Metrics[0] == "stale" {
		t.Fatal("a re-run workload kept its old definition")
	}
}

func workloadNames(ws []Workload) []string {
	var out []string
	for _, w := range ws {
		out = append(out, w.Name)
	}
	return out
}

// TestRawFetchPerRecordFigures: the raw fetch is compared per record as
// well as per byte, since Kafka's responses also carry the cut batches it
// sends again.
func TestRawFetchPerRecordFigures(t *testing.T) {
	rep := fakeReport()
	for i := range rep.Runs {
		r := &rep.Runs[i]
		if r.Workload != "raw-fetch" {
			continue
		}
		bytesPerRec := map[BrokerKind]int64{Kafka: 1085, Sluice: 1034, Kfake: 1034}[r.Broker]
		r.Result.Consume.Records = 4_000_000
		r.Result.Consume.Bytes = 4_000_000 * bytesPerRec
		r.CPUSeconds = map[BrokerKind]float64{Kafka: 1.2, Sluice: 0.2, Kfake: 1}[r.Broker]
	}
	if v, n := rep.Median("raw-fetch", Kafka, "resp_bytes_per_rec"); n != 2 || v != 1085 {
		t.Fatalf("Kafka's response bytes per record %v over %d runs, want 1085", v, n)
	}
	if v, _ := rep.Median("raw-fetch", Sluice, "cpu_per_mrec"); v != 0.05 {
		t.Fatalf("Sluice's CPU per million records %v, want 0.05", v)
	}
	verdicts := map[string]string{}
	for _, tg := range rep.Targets() {
		verdicts[tg.Name] = tg.Verdict + " " + tg.Measured
	}
	if v := verdicts["Sluice/Kafka broker CPU per record, raw-fetch"]; v != "met 0.167×" {
		t.Errorf("per-record CPU target: %q", v)
	}
	if v := verdicts["Sluice/Kafka catch-up consume records/s (raw fetch)"]; !strings.HasPrefix(v, "met") {
		t.Errorf("records/s target: %q", v)
	}
}
