package bench

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"encoding/xml"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestRecorderPercentiles(t *testing.T) {
	r := NewRecorder()
	for i := 1; i <= 1000; i++ {
		r.Record(time.Duration(i) * time.Millisecond)
	}
	s := r.Summary()
	if s.Count != 1000 {
		t.Fatalf("count %d", s.Count)
	}
	near := func(name string, got, want float64) {
		t.Helper()
		if math.Abs(got-want)/want > 0.01 {
			t.Errorf("%s = %v, want ≈ %v", name, got, want)
		}
	}
	near("p50", s.P50, 500)
	near("p90", s.P90, 900)
	near("p99", s.P99, 990)
	near("p99.9", s.P999, 999)
	near("max", s.Max, 1000)
	near("mean", s.Mean, 500.5)
	if v, ok := s.Percentile("p99.9"); !ok || v != s.P999 {
		t.Errorf("Percentile(p99.9) = %v, %v", v, ok)
	}
	if _, ok := s.Percentile("p42"); ok {
		t.Error("Percentile(p42) should not exist")
	}
}

func TestRecorderClampsOutOfRange(t *testing.T) {
	r := NewRecorder()
	r.Record(-time.Second)
	r.Record(time.Hour)
	s := r.Summary()
	if s.Count != 2 || s.Max < 299_000 {
		t.Fatalf("summary %+v: want both recorded, max clamped to 5 min", s)
	}
	if (NewRecorder().Summary() != LatencySummary{}) {
		t.Fatal("empty recorder should summarize to zero")
	}
}

func TestPayloadsStampAndIncompressible(t *testing.T) {
	p := newPayloads(1024, 77, false, 1)
	at := time.Unix(1700000000, 123456789)
	a, b := p.next(at), p.next(at)
	if len(a) != 1024 {
		t.Fatalf("len %d", len(a))
	}
	got, ok := sentAt(a, 77)
	if !ok || !got.Equal(at) {
		t.Fatalf("sentAt = %v, %v; want %v", got, ok, at)
	}
	if _, ok := sentAt(a, 78); ok {
		t.Fatal("value of another run accepted")
	}
	if _, ok := sentAt(a[:10], 77); ok {
		t.Fatal("short value accepted")
	}
	if bytes.Equal(a[headerSize:], b[headerSize:]) {
		t.Fatal("two values share their random bytes")
	}
	c := newPayloads(1024, 77, true, 1).next(at)
	if !bytes.Contains(c, []byte("quick brown fox")) {
		t.Fatal("compressible payload is not text")
	}
}

// batch builds a record-batch header (the fields skipBatches reads) with
// body bytes of padding.
func batch(base int64, lastDelta int32, body int) []byte {
	b := make([]byte, 61+body)
	binary.BigEndian.PutUint64(b[0:8], uint64(base))
	binary.BigEndian.PutUint32(b[8:12], uint32(len(b)-12))
	binary.BigEndian.PutUint32(b[23:27], uint32(lastDelta))
	return b
}

func TestSkipBatches(t *testing.T) {
	var buf []byte
	buf = append(buf, batch(100, 9, 50)...) // 100..109
	buf = append(buf, batch(110, 4, 10)...) // 110..114
	partial := batch(115, 3, 100)           // cut off below
	buf = append(buf, partial[:40]...)
	next, n := skipBatches(buf, 100)
	if next != 115 || n != 15 {
		t.Fatalf("next %d, records %d; want 115, 15", next, n)
	}
	// Fetching from the middle of a batch: its earlier records are not new.
	next, n = skipBatches(batch(100, 9, 0), 105)
	if next != 110 || n != 5 {
		t.Fatalf("mid-batch: next %d, records %d; want 110, 5", next, n)
	}
	if next, n = skipBatches(nil, 7); next != 7 || n != 0 {
		t.Fatalf("empty: %d, %d", next, n)
	}
}

func TestSkipTags(t *testing.T) {
	// Two tags: (0, "ab") and (1, ""), then the body.
	in := []byte{2, 0, 2, 'a', 'b', 1, 0, 'X'}
	out, err := skipTags(in)
	if err != nil || string(out) != "X" {
		t.Fatalf("skipTags = %q, %v", out, err)
	}
	if _, err := skipTags([]byte{1, 0, 5, 'a'}); err == nil {
		t.Fatal("truncated tag accepted")
	}
}

func TestConfigValidate(t *testing.T) {
	ok := DefaultConfig()
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(*Config){
		"record size":  func(c *Config) { c.RecordSize = 8 },
		"acks":         func(c *Config) { c.Acks = "2" },
		"compression":  func(c *Config) { c.Compression = "brotli" },
		"mode":         func(c *Config) { c.Mode = "sideways" },
		"no consumers": func(c *Config) { c.Mode, c.Consumers = ModeCatchUp, 0 },
		"no end":       func(c *Config) { c.Duration, c.Records = 0, 0 },
		"partitions":   func(c *Config) { c.Partitions = 0 },
	} {
		c := DefaultConfig()
		mut(&c)
		if c.Validate() == nil {
			t.Errorf("%s: invalid config accepted", name)
		}
	}
}

func TestResultJSONRoundTrip(t *testing.T) {
	res := &Result{Config: DefaultConfig(), Produce: newThroughput(2000, 2_048_000, 2*time.Second)}
	res.ProduceLatency = LatencySummary{Count: 2000, P50: 1.5, P99: 4}
	path := filepath.Join(t.TempDir(), "r.json")
	if err := WriteJSONFile(path, res); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(path)
	var back Result
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	if back.Produce.RecordsPerSec != 1000 || back.Produce.MBPerSec != 1.024 || back.ProduceLatency.P99 != 4 {
		t.Fatalf("round trip lost data: %+v", back.Produce)
	}
	if !strings.Contains(string(raw), `"p99_9_ms"`) {
		t.Fatal("JSON field names changed")
	}
	var text bytes.Buffer
	res.WriteText(&text)
	if !strings.Contains(text.String(), "1000 records/s") {
		t.Fatalf("text report: %s", text.String())
	}
}

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

func TestMachineLimitsSmall(t *testing.T) {
	dir := t.TempDir()
	w, ws, err := SequentialWrite(dir, 8<<20, time.Second)
	if err != nil || w <= 0 || ws <= 0 {
		t.Fatalf("write: %v %v %v", w, ws, err)
	}
	s, err := SendfileLoopback(dir, 8<<20, 200*time.Millisecond)
	if err != nil || s <= 0 {
		t.Fatalf("sendfile: %v %v", s, err)
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

// fakeReport is a Kafka-suite report with two rounds of made-up figures.
func fakeReport() *Report {
	o := CompareOptions{Suite: SuiteKafka, Brokers: []BrokerKind{Kafka, Sluice, Kfake}, Rounds: 2, Duration: 10 * time.Second, CatchUpRecords: 1000, Warmup: time.Second}
	rep := &Report{Options: o, Started: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Limits: &Limits{SendfileMBps: 4000, WriteMBps: 2000, WriteSyncMBps: 900}}
	rep.Finished = rep.Started.Add(time.Minute)
	rep.Machine = MachineInfo{CPUs: 2, Kernel: "Linux 6.1", Commit: strings.Repeat("a", 40)}
	rep.Workloads = Workloads(o)
	for round := 1; round <= 2; round++ {
		for _, w := range rep.Workloads {
			for _, b := range o.Brokers {
				scale := map[BrokerKind]float64{Kafka: 1, Sluice: 4, Kfake: 0.5}[b]
				lat := map[BrokerKind]float64{Kafka: 10, Sluice: 1, Kfake: 5}[b]
				res := &Result{Config: w.Config,
					Produce:        Throughput{MBPerSec: 100 * scale * float64(round), RecordsPerSec: 1e5 * scale},
					Consume:        Throughput{MBPerSec: 1000 * scale, RecordsPerSec: 1e6 * scale},
					ProduceLatency: LatencySummary{Count: 10, P50: lat / 4, P90: lat / 2, P99: lat, P999: 2 * lat, Max: 3 * lat},
					EndToEnd:       LatencySummary{Count: 10, P50: lat / 3, P90: lat / 2, P99: 1.5 * lat, P999: 2 * lat, Max: 4 * lat},
				}
				rec := RunRecord{Workload: w.Name, Broker: b, Round: round, Result: res, CPUSeconds: 5 / scale, PeakRSS: int64(1e9 / scale / scale)}
				if w.ZeroCopy {
					rec.ZeroCopy = &ZeroCopyReport{ZeroCopyBytes: 999, CopiedBytes: 1, Fraction: 0.999}
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
	if err := WriteJSONFile(path, old); err != nil {
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
