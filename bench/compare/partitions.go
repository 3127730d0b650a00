package compare

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sluice-broker/sluice/bench"
)

// `benchcompare partitions`: the partition-scale workload (issue 17,
// bench.RunPartitionScale) against one Kafka 4.4 broker and one Sluice
// broker, size by size, each on a fresh data directory: creation of N
// partitions over N/100 topics (one CreateTopics each), one record to
// each, memory, idle CPU, full Metadata, SIGTERM to exit and a cold
// start. `make bench-kafka` runs it at 1,000 partitions after its
// workloads; `make bench-kafka-partitions` at 1,000, 10,000 and (Sluice
// only) 50,000.

// PartitionsOptions configure a partition-scale comparison.
type PartitionsOptions struct {
	Sizes      []int         `json:"sizes"`       // partition counts, run in order
	KafkaSizes []int         `json:"kafka_sizes"` // the sizes Kafka also runs
	PerTopic   int           `json:"per_topic"`   // partitions per topic
	Timeout    time.Duration `json:"timeout_ns"`  // bound on each step
	KafkaHeap  string        `json:"kafka_heap"`
	Command    string        `json:"command"`

	KafkaLibs, Java, SluiceBin, WorkDir string `json:"-"`
	Markdown, JSON                      string `json:"-"`
	Section                             string `json:"-"` // name of the generated section
}

// PartitionsRun is one broker at one size.
type PartitionsRun struct {
	Broker    BrokerKind                  `json:"broker"`
	Size      int                         `json:"partitions"`
	LoadAvg   string                      `json:"loadavg_before"`
	LoadAfter string                      `json:"loadavg_after"`
	Result    *bench.PartitionScaleResult `json:"result,omitempty"`
	Err       string                      `json:"error,omitempty"`
}

// PartitionsReport is a whole partition-scale comparison.
type PartitionsReport struct {
	Options  PartitionsOptions `json:"options"`
	Started  time.Time         `json:"started"`
	Finished time.Time         `json:"finished"`
	Machine  MachineInfo       `json:"machine"`
	Runs     []PartitionsRun   `json:"runs"`
}

// PartitionsMain is `benchcompare partitions`.
func PartitionsMain(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("benchcompare partitions", flag.ContinueOnError)
	o := PartitionsOptions{}
	home, _ := os.UserHomeDir()
	sizes := fs.String("sizes", "1000", "partition counts, comma-separated, run in order")
	kafkaSizes := fs.String("kafka-sizes", "", "the sizes Kafka runs too (default: all of --sizes)")
	fs.IntVar(&o.PerTopic, "per-topic", 100, "partitions per topic (one CreateTopics each)")
	fs.DurationVar(&o.Timeout, "timeout", 10*time.Minute, "bound on each step of a run")
	fs.StringVar(&o.KafkaHeap, "kafka-heap", "1G", "Kafka's -Xms/-Xmx")
	fs.StringVar(&o.KafkaLibs, "kafka-libs", filepath.Join(home, ".cache", "sluice-bench", "kafka-"+KafkaVersion, "libs"), "directory of Apache Kafka's jars (bench/kafka.sh fills it)")
	fs.StringVar(&o.Java, "java", "java", "java binary for Kafka")
	fs.StringVar(&o.SluiceBin, "sluice-bin", "", "sluice binary (default: sluice beside this binary, else on $PATH)")
	fs.StringVar(&o.WorkDir, "work-dir", "", "where data directories go (default: a new temp dir, removed after)")
	fs.StringVar(&o.Markdown, "markdown", "", "update this BENCHMARKS.md's generated partition-scale section")
	fs.StringVar(&o.Section, "section", "partition-scale", "name of that section (its BEGIN/END markers)")
	fs.StringVar(&o.JSON, "json", "", "write the runs as JSON to this file")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	o.Command = "benchcompare partitions " + strings.Join(args, " ")
	var err error
	if o.Sizes, err = parseCounts(*sizes); err != nil {
		return err
	}
	o.KafkaSizes = o.Sizes
	if *kafkaSizes != "" {
		if o.KafkaSizes, err = parseCounts(*kafkaSizes); err != nil {
			return err
		}
	}
	rep, err := RunPartitions(ctx, o, os.Stderr)
	if rep == nil {
		return err
	}
	os.Stdout.WriteString(rep.Markdown())
	if o.JSON != "" {
		err = errors.Join(err, bench.WriteJSONFile(o.JSON, rep))
	}
	if o.Markdown != "" {
		err = errors.Join(err, rep.UpdateMarkdown(o.Markdown))
	}
	return err
}

// parseCounts parses "1000,10000" into positive counts.
func parseCounts(s string) ([]int, error) {
	var out []int
	for _, f := range bench.SplitList(s) {
		var n int
		if _, err := fmt.Sscan(f, &n); err != nil || n < 1 || n > 1_000_000 {
			return nil, fmt.Errorf("partition count %q: want 1 to 1,000,000", f)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, errors.New("no partition counts")
	}
	return out, nil
}

// RunPartitions runs every size against Kafka (where it is among the
// Kafka sizes and Kafka can run) and then Sluice.
func RunPartitions(ctx context.Context, o PartitionsOptions, log io.Writer) (*PartitionsReport, error) {
	rep := &PartitionsReport{Options: o, Started: time.Now(), Machine: DescribeMachine(o.Java)}
	work := o.WorkDir
	if work == "" {
		d, err := os.MkdirTemp("", "sluice-bench-partitions-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		work = d
	}
	sluiceBin := o.SluiceBin
	if sluiceBin == "" {
		self, err := os.Executable()
		if err != nil {
			return nil, err
		}
		if sluiceBin, err = findSluice(self); err != nil {
			return nil, err
		}
	}
	kafkaErr := checkKafka(Options{Java: o.Java, KafkaLibs: o.KafkaLibs})
	if kafkaErr != nil {
		fmt.Fprintln(log, "bench: Kafka not run:", kafkaErr)
	}
	for _, n := range o.Sizes {
		kinds := []BrokerKind{Sluice}
		if kafkaErr == nil && containsInt(o.KafkaSizes, n) {
			kinds = []BrokerKind{Kafka, Sluice}
		}
		for _, kind := range kinds {
			if ctx.Err() != nil {
				return rep, ctx.Err()
			}
			run := runPartitionsOne(ctx, o, kind, n, sluiceBin, filepath.Join(work, fmt.Sprintf("%s-%d", kind, n)), log)
			rep.Runs = append(rep.Runs, run)
		}
	}
	rep.Finished = time.Now()
	return rep, nil
}

func containsInt(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// runPartitionsOne runs the workload once against a fresh broker of kind
// on dir, which it removes afterwards.
func runPartitionsOne(ctx context.Context, o PartitionsOptions, kind BrokerKind, n int, sluiceBin, dir string, log io.Writer) PartitionsRun {
	run := PartitionsRun{Broker: kind, Size: n, LoadAvg: loadAvg()}
	defer os.RemoveAll(dir)
	fmt.Fprintf(log, "bench: partitions %s %d (load %s)…\n", kind, n, run.LoadAvg)
	cfg := bench.PartitionScaleConfig{Partitions: n, Topics: max(1, n/max(1, o.PerTopic)), Timeout: o.Timeout}
	port, err := freePort()
	if err == nil {
		cfg.Bootstrap = fmt.Sprintf("127.0.0.1:%d", port)
		err = os.MkdirAll(dir, 0o755)
	}
	if err == nil && kind == Kafka {
		var cport int
		if cport, err = freePort(); err == nil {
			cfg.Command, err = bench.KafkaCommand(o.Java, o.KafkaLibs, dir, port, cport, o.KafkaHeap)
		}
	} else if err == nil {
		cfg.Command = bench.SluiceCommand(sluiceBin, cfg.Bootstrap, filepath.Join(dir, "data"))
	}
	if err != nil {
		run.Err = err.Error()
		return run
	}
	run.Result, err = bench.RunPartitionScale(ctx, cfg)
	if err != nil {
		run.Err = err.Error()
	}
	run.LoadAfter = loadAvg()
	if run.Result != nil {
		run.Result.WriteText(log)
	}
	return run
}

// UpdateMarkdown rewrites the report's generated section of path.
func (rep *PartitionsReport) UpdateMarkdown(path string) error {
	old, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	name := rep.Options.Section
	begin := "<!-- BEGIN " + name + ": generated by `benchcompare partitions`; edits here are overwritten -->"
	end := "<!-- END " + name + " -->"
	return os.WriteFile(path, []byte(replaceSection(string(old), begin, end, rep.Markdown())), 0o644)
}

// Markdown renders the runs: one table per size, Sluice beside Kafka and
// their ratio.
func (rep *PartitionsReport) Markdown() string {
	var b strings.Builder
	m := rep.Machine
	fmt.Fprintf(&b, "_Measured %s at commit `%s` on %d CPUs (%s), Apache Kafka %s on %s; `%s`._\n\n",
		rep.Started.UTC().Format("2006-01-02 15:04 MST"), shortCommit(m.Commit), m.CPUs, orUnknown(m.CPUModel),
		m.Kafka, orUnknown(m.JavaVersion), strings.TrimSpace(rep.Options.Command))
	for _, n := range rep.Options.Sizes {
		s, k := rep.run(Sluice, n), rep.run(Kafka, n)
		fmt.Fprintf(&b, "**%d partitions** (%d per topic). Load average (1, 5, 15 min) before each run: %s.\n\n",
			n, rep.Options.PerTopic, rep.loads(n))
		header := []string{"figure", "Sluice"}
		if k != nil {
			header = append(header, "Kafka "+m.Kafka, "Sluice ÷ Kafka")
		}
		writeTable(&b, header, partitionRows(s, k))
		b.WriteString("\n")
	}
	return b.String()
}

func (rep *PartitionsReport) run(kind BrokerKind, n int) *PartitionsRun {
	for i := range rep.Runs {
		if r := &rep.Runs[i]; r.Broker == kind && r.Size == n {
			return r
		}
	}
	return nil
}

func (rep *PartitionsReport) loads(n int) string {
	var parts []string
	for _, r := range rep.Runs {
		if r.Size == n {
			parts = append(parts, fmt.Sprintf("%s %s", r.Broker, orUnknown(r.LoadAvg)))
		}
	}
	return strings.Join(parts, "; ")
}

// partitionFigure is one row: how to show a figure and the value its ratio
// is taken of (ok false: not measured).
type partitionFigure struct {
	name string
	val  func(*bench.PartitionScaleResult) (shown string, v float64, ok bool)
}

func secs(d func(*bench.PartitionScaleResult) time.Duration) func(*bench.PartitionScaleResult) (string, float64, bool) {
	return func(r *bench.PartitionScaleResult) (string, float64, bool) {
		v := d(r)
		if v <= 0 {
			return "–", 0, false
		}
		switch {
		case v < time.Millisecond:
			return fmt.Sprintf("%.3g µs", float64(v)/1e3), v.Seconds(), true
		case v < time.Second:
			return fmt.Sprintf("%.3g ms", float64(v)/1e6), v.Seconds(), true
		}
		return fmt.Sprintf("%.3g s", v.Seconds()), v.Seconds(), true
	}
}

func megabytes(f func(*bench.PartitionScaleResult) int64) func(*bench.PartitionScaleResult) (string, float64, bool) {
	return func(r *bench.PartitionScaleResult) (string, float64, bool) {
		v := f(r)
		if v < 0 {
			return "–", 0, false
		}
		return fmt.Sprintf("%.0f MB", float64(v)/1e6), float64(v), true
	}
}

var partitionFigures = []partitionFigure{
	{"start to serving (empty)", secs(func(r *bench.PartitionScaleResult) time.Duration { return r.StartToServing })},
	{"create (one CreateTopics per topic)", secs(func(r *bench.PartitionScaleResult) time.Duration { return r.Create })},
	{"write one record to each", secs(func(r *bench.PartitionScaleResult) time.Duration { return r.Write })},
	{"resident memory", megabytes(func(r *bench.PartitionScaleResult) int64 { return r.RSSBytes })},
	{"idle CPU (cores)", func(r *bench.PartitionScaleResult) (string, float64, bool) {
		return fmt.Sprintf("%.3f", r.IdleCPU), r.IdleCPU, r.IdleCPU > 0
	}},
	{"full Metadata, median", secs(func(r *bench.PartitionScaleResult) time.Duration { return r.MetadataMedian })},
	{"SIGTERM to exit", secs(func(r *bench.PartitionScaleResult) time.Duration { return r.Shutdown })},
	{"cold start to serving", secs(func(r *bench.PartitionScaleResult) time.Duration { return r.ColdServing })},
	{"cold start to every partition read", secs(func(r *bench.PartitionScaleResult) time.Duration { return r.ColdReadable })},
	{"resident memory after the cold start", megabytes(func(r *bench.PartitionScaleResult) int64 { return r.RSSAfterRestart })},
}

// partitionRows renders the figures of s (and k, with the ratio s ÷ k).
func partitionRows(s, k *PartitionsRun) [][]string {
	var rows [][]string
	for _, f := range partitionFigures {
		row := []string{f.name, figureCell(s, f)}
		if k != nil {
			row = append(row, figureCell(k, f), ratioCell(s, k, f))
		}
		rows = append(rows, row)
	}
	if errs := runErrors(s, k); errs != "" {
		rows = append(rows, []string{"error", errs})
	}
	return rows
}

func figureCell(r *PartitionsRun, f partitionFigure) string {
	if r == nil || r.Result == nil {
		return "–"
	}
	shown, _, _ := f.val(r.Result)
	return shown
}

func ratioCell(s, k *PartitionsRun, f partitionFigure) string {
	if s == nil || k == nil || s.Result == nil || k.Result == nil {
		return ""
	}
	_, sv, sok := f.val(s.Result)
	_, kv, kok := f.val(k.Result)
	if !sok || !kok || kv == 0 {
		return ""
	}
	return fmt.Sprintf("%.2g×", sv/kv)
}

func runErrors(rs ...*PartitionsRun) string {
	var out []string
	for _, r := range rs {
		if r != nil && r.Err != "" {
			out = append(out, fmt.Sprintf("%s: %s", r.Broker, firstLine(r.Err)))
		}
	}
	return strings.Join(out, "; ")
}
