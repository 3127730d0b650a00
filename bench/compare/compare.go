package compare

import (
	"github.com/sluice-broker/sluice/bench"

	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Suite is a set of workloads and brokers compared together.
type Suite string

const (
	// SuiteKafka is Sluice against Apache Kafka (and kfake where it makes
	// sense): `make bench-kafka`.
	SuiteKafka Suite = "kafka"
	// SuiteKfake is the issue 3 figure, Sluice against kfake with one
	// franz-go producer and consumer: `make bench-kfake`.
	SuiteKfake Suite = "kfake"
)

// Workload is one row group of the comparison.
type Workload struct {
	Name     string       `json:"name"`
	Title    string       `json:"title"`
	Config   bench.Config `json:"config"`
	Brokers  []BrokerKind `json:"brokers"` // which of the run's brokers it is run against
	ZeroCopy bool         `json:"zero_copy"`
	Metrics  []string     `json:"metrics"` // keys of metricDefs reported for it
}

// Options configure a comparison.
type Options struct {
	Suite          Suite         `json:"suite"`
	Brokers        []BrokerKind  `json:"brokers"`
	Rounds         int           `json:"rounds"`
	Quick          bool          `json:"quick"`
	Duration       time.Duration `json:"duration_ns"`
	Warmup         time.Duration `json:"warmup_ns"`
	CatchUpRecords int64         `json:"catch_up_records"`
	Only           []string      `json:"only,omitempty"`
	ZeroCopy       bool          `json:"zero_copy"`
	Limits         bool          `json:"limits"`
	Nice           int           `json:"nice"` // scheduling priority of the runner and the brokers
	// FillPageCache: before every run the page cache is filled with a
	// ballast file's clean pages (bench.Ballast), a long-running host's
	// steady state, so writes reclaim pages instead of faulting in fresh ones.
	FillPageCache bool `json:"fill_page_cache"`

	KafkaLibs string `json:"-"`
	Java      string `json:"-"`
	SluiceBin string `json:"-"`
	// SluiceConfig is configuration (server.properties lines) every Sluice
	// broker of the run gets, to compare a setting against the defaults.
	SluiceConfig string `json:"sluice_config,omitempty"`
	WorkDir      string `json:"-"`
	Markdown     string `json:"-"`
	ChartDir     string `json:"-"`
	JSON         string `json:"-"`
	Command      string `json:"command"` // as given, for the report
	Verbose      bool   `json:"-"`
}

// RunRecord is one workload run against one broker in one round.
type RunRecord struct {
	Workload   string                `json:"workload"`
	Broker     BrokerKind            `json:"broker"`
	Round      int                   `json:"round"`
	Result     *bench.Result         `json:"result,omitempty"`
	CPUSeconds float64               `json:"broker_cpu_seconds"` // during the measured run (catch-up: its read phase)
	ClientCPU  float64               `json:"client_cpu_seconds"` // the load generator's (this process's), same span
	PeakRSS    int64                 `json:"broker_peak_rss_bytes"`
	ZeroCopy   *bench.ZeroCopyReport `json:"zero_copy,omitempty"`
	// PageCacheFilled: the run started with the page cache full (Options.FillPageCache).
	PageCacheFilled bool   `json:"page_cache_filled,omitempty"`
	Err             string `json:"error,omitempty"`
}

// Report is a whole comparison.
type Report struct {
	Options   Options       `json:"options"`
	Started   time.Time     `json:"started"`
	Finished  time.Time     `json:"finished"`
	Machine   MachineInfo   `json:"machine"`
	Limits    *bench.Limits `json:"limits,omitempty"`
	Workloads []Workload    `json:"workloads"`
	Runs      []RunRecord   `json:"runs"`
	Notes     []string      `json:"notes,omitempty"`
}

// Workloads returns the suite's workloads for the options.
func Workloads(o Options) []Workload {
	base := bench.DefaultConfig()
	base.Duration = o.Duration
	base.Progress = 0
	if o.Verbose {
		base.Progress = 2 * time.Second
	}
	with := func(f func(*bench.Config)) bench.Config {
		c := base
		f(&c)
		return c
	}
	all := o.Brokers
	txnMetrics := []string{"produce_mbps", "commit_p50", "commit_p99", "cpu_s", "client_cpu_s", "rss_mb"}
	produceMetrics := []string{"produce_mbps", "produce_rps", "ack_p50", "ack_p99", "cpu_s", "cpu_per_gb", "client_cpu_s", "recs_per_produce", "rss_mb"}
	var ws []Workload
	switch o.Suite {
	case SuiteKafka:
		for _, parts := range []int{1, 16} {
			for _, acks := range []string{"1", "all"} {
				ws = append(ws, Workload{
					Name:  fmt.Sprintf("produce-%dp-acks%s", parts, acks),
					Title: fmt.Sprintf("Max-throughput produce, %d partition%s, acks=%s", parts, plural(parts), acks),
					Config: with(func(c *bench.Config) {
						c.Partitions, c.Consumers, c.Acks = parts, 0, acks
					}),
					Brokers: all, Metrics: produceMetrics,
				})
			}
		}
		ws = append(ws, rawProduceWorkloads(with, all)...)
		ws = append(ws,
			Workload{
				Name:  "catch-up",
				Title: "Catch-up consume of page-cached data, franz-go consumer, 4 partitions",
				Config: with(func(c *bench.Config) {
					c.Mode, c.Partitions, c.Records, c.Acks = bench.ModeCatchUp, 4, o.CatchUpRecords, "1"
				}),
				Brokers: all, ZeroCopy: true,
				Metrics: []string{"consume_mbps", "consume_rps", "zc_fraction", "cpu_s", "cpu_per_gb", "client_cpu_s", "rss_mb"},
			},
			Workload{
				Name:  "raw-fetch",
				Title: "Catch-up consume, raw fetch loop (records not decoded), 4 partitions",
				Config: with(func(c *bench.Config) {
					c.Mode, c.Partitions, c.Records, c.Acks = bench.ModeRawFetch, 4, o.CatchUpRecords, "1"
				}),
				Brokers: all, ZeroCopy: true,
				Metrics: []string{"consume_mbps", "consume_rps", "resp_bytes_per_rec", "sendfile_fraction", "zc_fraction", "cpu_s", "cpu_per_gb", "cpu_per_mrec", "client_cpu_s"},
			},
			Workload{
				Name:  "latency-20MBps",
				Title: "Fixed rate 20,000 records/s (~20 MB/s), 1 producer, 1 consumer, 4 partitions, acks=all",
				Config: with(func(c *bench.Config) {
					c.Partitions, c.Rate = 4, 20000
				}),
				Brokers: all,
				Metrics: []string{"ack_p50", "ack_p99", "ack_p999", "e2e_p50", "e2e_p99", "e2e_p999", "broker_p50", "broker_p99", "broker_p999", "cpu_s", "client_cpu_s", "recs_per_produce", "recs_per_fetch", "rss_mb"},
			},
			Workload{
				Name:  "many-producers",
				Title: "100 producer clients at 50 records/s each, 1 consumer, 4 partitions, acks=all",
				Config: with(func(c *bench.Config) {
					c.Partitions, c.Producers, c.Rate = 4, 100, 5000
				}),
				Brokers: all,
				Metrics: []string{"produce_rps", "ack_p50", "ack_p99", "e2e_p99", "cpu_s", "client_cpu_s", "recs_per_produce", "recs_per_fetch", "rss_mb"},
			},
		)
		ws = append(ws, Workload{
			Name:  "catch-up-txn",
			Title: "Catch-up consume at read_committed of transactionally written data (1,000 records per transaction), franz-go consumer, 4 partitions",
			Config: with(func(c *bench.Config) {
				c.Mode, c.Partitions, c.Records, c.TxnRecords = bench.ModeCatchUp, 4, o.CatchUpRecords, 1000
			}),
			Brokers: all,
			Metrics: []string{"consume_mbps", "consume_rps", "cpu_s", "cpu_per_gb", "client_cpu_s", "rss_mb"},
		})
		for _, n := range []int{100, 1000} {
			ws = append(ws, Workload{
				Name:  fmt.Sprintf("txn-%d", n),
				Title: fmt.Sprintf("Transactional produce, 1 producer, %d records of 1 KiB per transaction, 4 partitions", n),
				Config: with(func(c *bench.Config) {
					c.Partitions, c.Consumers, c.TxnRecords = 4, 0, n
				}),
				Brokers: all, Metrics: txnMetrics,
			})
		}
	case SuiteKfake:
		ws = []Workload{
			{
				Name:    "i3-produce",
				Title:   "One franz-go producer, max rate, 4 partitions, acks=all",
				Config:  with(func(c *bench.Config) { c.Partitions, c.Consumers = 4, 0 }),
				Brokers: all, Metrics: []string{"produce_mbps", "produce_rps", "cpu_s", "cpu_per_gb", "client_cpu_s", "rss_mb"},
			},
			{
				Name:  "i3-consume",
				Title: "One franz-go consumer reading back 4 partitions",
				Config: with(func(c *bench.Config) {
					c.Mode, c.Partitions, c.Records = bench.ModeCatchUp, 4, o.CatchUpRecords
				}),
				Brokers: all, ZeroCopy: true, Metrics: []string{"consume_mbps", "consume_rps", "zc_fraction", "cpu_s", "cpu_per_gb", "client_cpu_s"},
			},
			{
				Name:    "i3-latency",
				Title:   "One producer and one consumer at 2,000 records/s, 4 partitions, acks=all",
				Config:  with(func(c *bench.Config) { c.Partitions, c.Rate = 4, 2000 }),
				Brokers: all, Metrics: []string{"ack_p50", "ack_p99", "e2e_p50", "e2e_p99", "cpu_s", "rss_mb"},
			},
		}
	}
	if len(o.Only) == 0 {
		return ws
	}
	var out []Workload
	for _, w := range ws {
		for _, name := range o.Only {
			if w.Name == name {
				out = append(out, w)
			}
		}
	}
	return out
}

// rawProduceMetrics are the figures of the raw-produce workloads: the
// broker's throughput and cost with the client nearly out of the way.
var rawProduceMetrics = []string{"produce_mbps", "produce_rps", "ack_p50", "ack_p99", "cpu_s", "cpu_per_gb", "client_cpu_s", "client_cpu_share", "rss_mb"}

// rawProduceWorkloads are the raw-produce workloads (bench/rawproduce.go):
// 4 connections with 8 requests in flight each, 64 KiB batches, at 1 and
// 16 partitions and both acks; and 100 connections each sending one
// 100-byte record at a time (many small producers, linger 0), where
// batched appends matter.
func rawProduceWorkloads(with func(func(*bench.Config)) bench.Config, brokers []BrokerKind) []Workload {
	var ws []Workload
	for _, parts := range []int{1, 16} {
		for _, acks := range []string{"1", "all"} {
			ws = append(ws, Workload{
				Name:  fmt.Sprintf("raw-produce-%dp-acks%s", parts, acks),
				Title: fmt.Sprintf("Raw produce (batches built once, 4 connections × 8 in flight), %d partition%s, acks=%s", parts, plural(parts), acks),
				Config: with(func(c *bench.Config) {
					c.Mode, c.Partitions, c.Consumers, c.Acks = bench.ModeRawProduce, parts, 0, acks
					c.Producers, c.RawInFlight = 4, 8
				}),
				Brokers: brokers, Metrics: rawProduceMetrics,
			})
		}
	}
	return append(ws, Workload{
		Name:  "raw-produce-100conn-100B",
		Title: "Many small producers: 100 connections, one 100-byte record per request, 1 in flight each, 4 partitions, acks=1",
		Config: with(func(c *bench.Config) {
			c.Mode, c.Partitions, c.Consumers, c.Acks = bench.ModeRawProduce, 4, 0, "1"
			c.Producers, c.RawInFlight, c.RecordSize, c.RawBatchRecords = 100, 1, 100, 1
		}),
		Brokers: brokers, Metrics: rawProduceMetrics,
	})
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// Main is `benchcompare kafka` and `benchcompare kfake`: runs suite and
// writes what the flags ask for.
func Main(ctx context.Context, args []string, suite Suite) error {
	name := string(suite)
	fs := flag.NewFlagSet("benchcompare "+name, flag.ContinueOnError)
	o := Options{Suite: suite}
	brokers := "kafka,sluice,kfake"
	if suite == SuiteKfake {
		brokers = "sluice,kfake"
	}
	home, _ := os.UserHomeDir()
	fs.StringVar(&brokers, "brokers", brokers, "brokers to compare, in the order they alternate (kafka, sluice, kfake)")
	fs.IntVar(&o.Rounds, "rounds", 3, "rounds; every workload runs once per broker per round, on a fresh broker and data dir")
	fs.BoolVar(&o.Quick, "quick", false, "smoke run: 1 round, 5 s runs, smaller catch-up data")
	fs.DurationVar(&o.Duration, "duration", 10*time.Second, "length of each timed run")
	fs.DurationVar(&o.Warmup, "warmup", 5*time.Second, "warm-up produce on each fresh broker before it is measured (JIT for Kafka)")
	fs.Int64Var(&o.CatchUpRecords, "catch-up-records", 1_000_000, "records (1 KiB) written then read back by the catch-up workloads")
	only := fs.String("only", "", "comma-separated workload names to run (default all)")
	merge := fs.String("merge", "", "a saved --json report: keep its runs of the workloads not run now (re-run a few noisy workloads)")
	fs.BoolVar(&o.ZeroCopy, "zcprobe", true, "measure brokers' zero-copy fraction with eBPF during reads (needs root; skipped with a note otherwise)")
	defNice := 0
	if os.Geteuid() == 0 {
		defNice = -10
	}
	fs.IntVar(&o.Nice, "nice", defNice, "run the runner and brokers at this nice level (negative needs root; 0 leaves it)")
	fs.BoolVar(&o.Limits, "limits", true, "measure the machine's loopback sendfile and sequential write limits")
	fs.BoolVar(&o.FillPageCache, "fill-page-cache", true, "fill the page cache with a ballast file's clean pages before every run (a long-running host's state; needs free disk about the size of memory)")
	fs.StringVar(&o.KafkaLibs, "kafka-libs", filepath.Join(home, ".cache", "sluice-bench", "kafka-"+KafkaVersion, "libs"), "directory of Apache Kafka's jars (bench/kafka.sh fills it)")
	fs.StringVar(&o.Java, "java", "java", "java binary for Kafka")
	fs.StringVar(&o.SluiceBin, "sluice-bin", "", "sluice binary to run Sluice with (default: sluice beside this binary, else on $PATH)")
	fs.StringVar(&o.WorkDir, "work-dir", "", "where broker data dirs and logs go (default: a new temp dir)")
	sluiceConfig := fs.String("sluice-config", "", "a properties file every Sluice broker also reads (compare a setting; recorded in the report)")
	fs.StringVar(&o.Markdown, "markdown", "", "update this BENCHMARKS.md's generated section")
	fs.StringVar(&o.ChartDir, "charts", "", "write SVG charts into this directory")
	fs.StringVar(&o.JSON, "json", "", "write every run as JSON to this file")
	fs.BoolVar(&o.Verbose, "v", false, "print live progress of each run")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	o.Command = "benchcompare " + name + " " + strings.Join(args, " ")
	if *sluiceConfig != "" {
		text, err := os.ReadFile(*sluiceConfig)
		if err != nil {
			return err
		}
		o.SluiceConfig = string(text)
	}
	if o.Quick {
		if !flagSet(fs, "rounds") {
			o.Rounds = 1
		}
		if !flagSet(fs, "duration") {
			o.Duration = 5 * time.Second
		}
		if !flagSet(fs, "warmup") {
			o.Warmup = 2 * time.Second
		}
		if !flagSet(fs, "catch-up-records") {
			o.CatchUpRecords = 200_000
		}
	}
	for _, b := range bench.SplitList(brokers) {
		o.Brokers = append(o.Brokers, BrokerKind(b))
	}
	o.Only = bench.SplitList(*only)
	rep, err := Run(ctx, o, os.Stderr)
	if rep == nil {
		return err
	}
	if *merge != "" {
		if rep, err = mergeInto(*merge, rep); err != nil {
			return err
		}
	}
	rep.WriteSummary(os.Stdout)
	if o.JSON != "" {
		if jerr := bench.WriteJSONFile(o.JSON, rep); jerr != nil {
			return jerr
		}
	}
	if o.ChartDir != "" {
		if cerr := rep.WriteCharts(o.ChartDir); cerr != nil {
			return cerr
		}
	}
	if o.Markdown != "" {
		if merr := rep.UpdateMarkdown(o.Markdown, o.ChartDir); merr != nil {
			return merr
		}
	}
	return err
}

func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// Compare runs every workload against every broker, alternating brokers,
// for o.Rounds rounds. Progress goes to log.
func Run(ctx context.Context, o Options, log io.Writer) (*Report, error) {
	if o.Rounds < 1 {
		return nil, errors.New("--rounds must be at least 1")
	}
	rep := &Report{Options: o, Started: time.Now(), Machine: DescribeMachine(o.Java)}
	env := brokerEnv{sluice: o.SluiceBin, java: o.Java, kafkaLibs: o.KafkaLibs, workDir: o.WorkDir}
	if o.SluiceConfig != "" {
		env.extraProps = func(kind BrokerKind, _, _ int) string {
			if kind != Sluice {
				return ""
			}
			return o.SluiceConfig
		}
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	env.self = self
	if env.sluice == "" {
		if env.sluice, err = findSluice(self); err != nil && containsKind(o.Brokers, Sluice) {
			return nil, err
		}
	}
	if env.workDir == "" {
		d, err := os.MkdirTemp("", "sluice-bench-")
		if err != nil {
			return nil, err
		}
		env.workDir = d
		defer func() {
			for _, r := range rep.Runs {
				if r.Err != "" {
					fmt.Fprintln(log, "bench: some runs failed; broker logs kept in", filepath.Join(d, "logs"))
					return
				}
			}
			os.RemoveAll(d)
		}()
	}
	env.logDir = filepath.Join(env.workDir, "logs")
	if err := os.MkdirAll(env.logDir, 0o755); err != nil {
		return nil, err
	}
	var brokers []BrokerKind
	for _, b := range o.Brokers {
		if b == Kafka {
			if err := checkKafka(o); err != nil {
				rep.Notes = append(rep.Notes, "Kafka not run: "+err.Error())
				fmt.Fprintln(log, "bench: Kafka not run:", err)
				continue
			}
		}
		brokers = append(brokers, b)
	}
	o.Brokers = brokers
	rep.Workloads = Workloads(o)
	if o.ZeroCopy && os.Geteuid() != 0 {
		rep.Notes = append(rep.Notes, "zero-copy fraction not measured: zcprobe needs root")
		o.ZeroCopy = false
	}
	if o.Nice != 0 {
		// Brokers and clients inherit it: other work on a shared machine
		// then disturbs the measurement less.
		if err := setNice(o.Nice); err != nil {
			rep.Notes = append(rep.Notes, fmt.Sprintf("could not set nice %d: %v", o.Nice, err))
			o.Nice = 0
			rep.Options.Nice = 0
		}
	}
	fill := func() bool { return false }
	if o.FillPageCache {
		var stop func()
		fill, stop = pageCacheFiller(&env, rep, log)
		defer stop()
	}
	measureLimits := func() {
		if !o.Limits {
			return
		}
		fill()
		fmt.Fprintln(log, "bench: measuring machine limits (sequential write, loopback sendfile)…")
		size, d := int64(512<<20), 4*time.Second
		if o.Quick {
			size, d = 256<<20, 2*time.Second
		}
		l, err := bench.MeasureLimits(env.workDir, size, d)
		if err != nil {
			rep.Notes = append(rep.Notes, "machine limits not measured: "+err.Error())
			return
		}
		fmt.Fprintf(log, "bench: loopback sendfile %.0f MB/s (%.3f CPU-s/GB), sequential write %.0f MB/s (%.0f MB/s with fdatasync), receive + write %.0f MB/s (%.3f CPU-s/GB)\n",
			l.SendfileMBps, l.SendfileCPUPerGB, l.WriteMBps, l.WriteSyncMBps, l.ReceiveWriteMBps, l.ReceiveWriteCPUPerGB)
		if rep.Limits == nil {
			rep.Limits = &l
			return
		}
		mergeLimits(rep.Limits, &l)
	}
	measureLimits()
	for round := 1; round <= o.Rounds; round++ {
		for _, w := range rep.Workloads {
			for _, b := range w.Brokers {
				if !containsKind(o.Brokers, b) {
					continue
				}
				if ctx.Err() != nil {
					rep.Finished = time.Now()
					return rep, ctx.Err()
				}
				filled := fill()
				rec := runOne(ctx, &env, o, w, b, round, log)
				rec.PageCacheFilled = filled
				rep.Runs = append(rep.Runs, rec)
				fmt.Fprintf(log, "bench: round %d/%d %-16s %-7s %s\n", round, o.Rounds, w.Name, b, rec.brief(w))
			}
		}
	}
	measureLimits()
	rep.Finished = time.Now()
	return rep, nil
}

// Page-cache ballast sizing: the free memory a top-up leaves (room for a
// broker's start before reclaim begins) and the disk it leaves free for the
// brokers' data.
const (
	ballastKeepFree = 512 << 20
	ballastKeepDisk = 24 << 30
)

// pageCacheFiller makes the ballast in env's work directory and returns a
// function that tops it up (true if the page cache is full after it) and
// one that removes it. Without room for it, a note says so and fill does
// nothing.
func pageCacheFiller(env *brokerEnv, rep *Report, log io.Writer) (fill func() bool, stop func()) {
	b, err := bench.NewBallast(env.workDir, 0, ballastKeepDisk)
	if err != nil {
		rep.Notes = append(rep.Notes, "page cache not filled: "+err.Error())
		fmt.Fprintln(log, "bench: page cache not filled:", err)
		return func() bool { return false }, func() {}
	}
	first := true
	fill = func() bool {
		n, took, err := b.Fill(ballastKeepFree)
		if err != nil {
			fmt.Fprintln(log, "bench: page-cache ballast:", err)
			return false
		}
		if first && n > 0 {
			first = false
			rep.Notes = append(rep.Notes, fmt.Sprintf("page cache filled by a %.1f GiB ballast file; its first fill wrote %.1f GB of fresh page-cache pages at %.0f MB/s (write-back included)",
				float64(b.Size())/(1<<30), float64(n)/1e9, float64(n)/1e6/took.Seconds()))
		}
		if n > 0 {
			fmt.Fprintf(log, "bench: page cache topped up: %.1f GB in %.1f s\n", float64(n)/1e9, took.Seconds())
		}
		return true
	}
	return fill, func() { b.Close() }
}

func containsKind(ks []BrokerKind, k BrokerKind) bool {
	for _, x := range ks {
		if x == k {
			return true
		}
	}
	return false
}

func checkKafka(o Options) error {
	if _, err := exec.LookPath(o.Java); err != nil {
		return fmt.Errorf("no java: %w", err)
	}
	jars, _ := filepath.Glob(filepath.Join(o.KafkaLibs, "kafka_2.13-*.jar"))
	if len(jars) == 0 {
		return fmt.Errorf("no Kafka jars in %s (bench/kafka.sh fetches them)", o.KafkaLibs)
	}
	return nil
}

// runOne starts a fresh broker, warms it up, runs w and stops it.
func runOne(ctx context.Context, env *brokerEnv, o Options, w Workload, kind BrokerKind, round int, log io.Writer) RunRecord {
	rec := RunRecord{Workload: w.Name, Broker: kind, Round: round}
	b, err := env.startBroker(ctx, kind, fmt.Sprintf("%s-r%d", w.Name, round))
	if err != nil {
		rec.Err = err.Error()
		return rec
	}
	defer b.stop()
	if o.Warmup > 0 {
		wc := bench.DefaultConfig()
		wc.Brokers, wc.Topic, wc.Consumers, wc.Acks = []string{b.addr}, "warmup", 0, "1"
		wc.Duration, wc.Progress = o.Warmup, 0
		if _, err := bench.Run(ctx, wc, nil); err != nil {
			rec.Err = "warm-up: " + err.Error()
			return rec
		}
	}
	before, err := ReadProcStats(b.pid())
	if err != nil {
		rec.Err = err.Error()
		return rec
	}
	selfBefore, _ := ReadProcStats(os.Getpid())
	var probe *bench.ZeroCopyProbe
	if o.ZeroCopy && w.ZeroCopy {
		if probe, err = bench.StartZeroCopyProbe(b.addr, b.pid()); err != nil {
			fmt.Fprintln(log, "bench: zcprobe:", err)
			probe = nil
		} else {
			defer probe.Close()
		}
	}
	cfg := w.Config
	cfg.Brokers = []string{b.addr}
	cfg.Topic = "bench-" + w.Name
	cfg.BrokerMetrics = b.metrics
	hooks := bench.Hooks{BeforeRead: func() {
		// A catch-up run's cost is its read phase's: start counting anew.
		if st, err := ReadProcStats(b.pid()); err == nil {
			before = st
		}
		selfBefore, _ = ReadProcStats(os.Getpid())
		if probe != nil {
			probe.Reset()
		}
	}}
	res, err := bench.RunWith(ctx, cfg, log, hooks)
	rec.Result = res
	if err != nil {
		rec.Err = err.Error()
	}
	if probe != nil {
		zc := probe.Read()
		rec.ZeroCopy = &zc
	}
	if after, err := ReadProcStats(b.pid()); err == nil {
		rec.CPUSeconds = (after.CPU - before.CPU).Seconds()
		rec.PeakRSS = after.PeakRSS
	}
	if selfAfter, err := ReadProcStats(os.Getpid()); err == nil {
		rec.ClientCPU = (selfAfter.CPU - selfBefore.CPU).Seconds()
	}
	return rec
}

// brief is a one-line summary of a run for the log.
func (r RunRecord) brief(w Workload) string {
	if r.Result == nil {
		return "FAILED: " + r.Err
	}
	var parts []string
	for _, k := range w.Metrics {
		if v, ok := metricDefs[k].get(&r, nil); ok {
			parts = append(parts, fmt.Sprintf("%s %s", metricDefs[k].short, fmtValue(v)))
		}
	}
	s := strings.Join(parts, ", ")
	if r.Err != "" {
		s += " (error: " + r.Err + ")"
	}
	return s
}

// metricDef is one reported figure.
type metricDef struct {
	label  string // for tables
	short  string // for logs
	unit   string
	higher bool // higher is better
	get    func(r *RunRecord, l *bench.Limits) (float64, bool)
}

func latencyMetric(label, short string, pick func(*bench.Result) bench.LatencySummary, pct string) metricDef {
	return metricDef{label: label, short: short, unit: "ms", get: func(r *RunRecord, _ *bench.Limits) (float64, bool) {
		if r.Result == nil {
			return 0, false
		}
		s := pick(r.Result)
		if s.Count == 0 {
			return 0, false
		}
		return s.Percentile(pct)
	}}
}

func ack(r *bench.Result) bench.LatencySummary    { return r.ProduceLatency }
func e2e(r *bench.Result) bench.LatencySummary    { return r.EndToEnd }
func commit(r *bench.Result) bench.LatencySummary { return r.CommitLatency }
func brokerProduce(r *bench.Result) bench.LatencySummary {
	return r.BrokerLatency["Produce"]
}

var metricDefs = map[string]metricDef{
	"produce_mbps": {label: "produce MB/s", short: "produce MB/s", unit: "MB/s", higher: true, get: func(r *RunRecord, _ *bench.Limits) (float64, bool) {
		return resultValue(r, func(res *bench.Result) float64 { return res.Produce.MBPerSec })
	}},
	"produce_rps": {label: "produce records/s", short: "rec/s", unit: "records/s", higher: true, get: func(r *RunRecord, _ *bench.Limits) (float64, bool) {
		return resultValue(r, func(res *bench.Result) float64 { return res.Produce.RecordsPerSec })
	}},
	"consume_mbps": {label: "consume MB/s", short: "consume MB/s", unit: "MB/s", higher: true, get: func(r *RunRecord, _ *bench.Limits) (float64, bool) {
		return resultValue(r, func(res *bench.Result) float64 { return res.Consume.MBPerSec })
	}},
	"consume_rps": {label: "consume records/s", short: "consume rec/s", unit: "records/s", higher: true, get: func(r *RunRecord, _ *bench.Limits) (float64, bool) {
		return resultValue(r, func(res *bench.Result) float64 { return res.Consume.RecordsPerSec })
	}},
	"sendfile_fraction": {label: "fraction of loopback sendfile", short: "of sendfile", unit: "", higher: true, get: func(r *RunRecord, l *bench.Limits) (float64, bool) {
		if l == nil || l.SendfileMBps == 0 {
			return 0, false
		}
		return resultValue(r, func(res *bench.Result) float64 { return res.Consume.MBPerSec / l.SendfileMBps })
	}},
	"ack_p50":  latencyMetric("produce-ack p50 ms", "ack p50", ack, "p50"),
	"ack_p99":  latencyMetric("produce-ack p99 ms", "ack p99", ack, "p99"),
	"ack_p999": latencyMetric("produce-ack p99.9 ms", "ack p99.9", ack, "p99.9"),
	"e2e_p50":  latencyMetric("end-to-end p50 ms", "e2e p50", e2e, "p50"),
	"e2e_p99":  latencyMetric("end-to-end p99 ms", "e2e p99", e2e, "p99"),
	"e2e_p999": latencyMetric("end-to-end p99.9 ms", "e2e p99.9", e2e, "p99.9"),
	// Broker-side produce latency (Sluice only: its /debug/latency).
	"broker_p50":  latencyMetric("broker-side produce p50 ms", "broker p50", brokerProduce, "p50"),
	"broker_p99":  latencyMetric("broker-side produce p99 ms", "broker p99", brokerProduce, "p99"),
	"broker_p999": latencyMetric("broker-side produce p99.9 ms", "broker p99.9", brokerProduce, "p99.9"),
	"commit_p50":  latencyMetric("commit p50 ms", "commit p50", commit, "p50"),
	"commit_p99":  latencyMetric("commit p99 ms", "commit p99", commit, "p99"),
	"cpu_s": {label: "broker CPU s", short: "cpu s", unit: "s", get: func(r *RunRecord, _ *bench.Limits) (float64, bool) {
		return r.CPUSeconds, r.Result != nil && r.CPUSeconds > 0
	}},
	"cpu_per_gb": {label: "broker CPU s per GB moved", short: "cpu s/GB", unit: "s/GB", get: func(r *RunRecord, _ *bench.Limits) (float64, bool) {
		if r.Result == nil || r.CPUSeconds <= 0 {
			return 0, false
		}
		// Bytes the broker took in and gave out over the span CPUSeconds
		// covers (catch-up runs: the read phase).
		b := r.Result.Produce.Bytes + r.Result.Consume.Bytes
		if m := r.Result.Config.Mode; m == bench.ModeCatchUp || m == bench.ModeRawFetch {
			b = r.Result.Consume.Bytes
		}
		gb := float64(b) / 1e9
		if gb == 0 {
			return 0, false
		}
		return r.CPUSeconds / gb, true
	}},
	// Kafka answers a partition's max bytes exactly, cutting the last
	// batch (the client drops it and fetches it again), Sluice stops at the
	// last whole batch: response bytes count Kafka's resent tails, records
	// do not. These two compare the brokers on what the consumer got.
	"resp_bytes_per_rec": {label: "response bytes per record", short: "bytes/rec", unit: "bytes", get: func(r *RunRecord, _ *bench.Limits) (float64, bool) {
		if r.Result == nil || r.Result.Consume.Records == 0 {
			return 0, false
		}
		return float64(r.Result.Consume.Bytes) / float64(r.Result.Consume.Records), true
	}},
	"cpu_per_mrec": {label: "broker CPU s per million records", short: "cpu s/Mrec", unit: "s/Mrec", get: func(r *RunRecord, _ *bench.Limits) (float64, bool) {
		if r.Result == nil || r.CPUSeconds <= 0 || r.Result.Consume.Records == 0 {
			return 0, false
		}
		return r.CPUSeconds / (float64(r.Result.Consume.Records) / 1e6), true
	}},
	"client_cpu_s": {label: "load generator CPU s", short: "client cpu s", unit: "s", get: func(r *RunRecord, _ *bench.Limits) (float64, bool) {
		return r.ClientCPU, r.Result != nil && r.ClientCPU > 0
	}},
	"recs_per_produce": {label: "records per produce request", short: "rec/produce", unit: "", higher: true, get: func(r *RunRecord, _ *bench.Limits) (float64, bool) {
		if r.Result == nil || r.Result.ProduceRequests == 0 {
			return 0, false
		}
		return float64(r.Result.Produce.Records) / float64(r.Result.ProduceRequests), true
	}},
	"recs_per_fetch": {label: "records per fetch request", short: "rec/fetch", unit: "", higher: true, get: func(r *RunRecord, _ *bench.Limits) (float64, bool) {
		if r.Result == nil || r.Result.FetchRequests == 0 {
			return 0, false
		}
		return float64(r.Result.Consume.Records) / float64(r.Result.FetchRequests), true
	}},
	"client_cpu_share": {label: "load generator share of CPU used", short: "client share", unit: "", get: func(r *RunRecord, _ *bench.Limits) (float64, bool) {
		if r.Result == nil || r.ClientCPU <= 0 || r.CPUSeconds <= 0 {
			return 0, false
		}
		return r.ClientCPU / (r.ClientCPU + r.CPUSeconds), true
	}},
	"rss_mb": {label: "broker peak RSS MB", short: "rss MB", unit: "MB", get: func(r *RunRecord, _ *bench.Limits) (float64, bool) {
		return float64(r.PeakRSS) / 1e6, r.PeakRSS > 0
	}},
	"zc_fraction": {label: "zero-copy fraction", short: "zero-copy", unit: "", higher: true, get: func(r *RunRecord, _ *bench.Limits) (float64, bool) {
		if r.ZeroCopy == nil || r.ZeroCopy.ZeroCopyBytes+r.ZeroCopy.CopiedBytes == 0 {
			return 0, false
		}
		return r.ZeroCopy.Fraction, true
	}},
}

func resultValue(r *RunRecord, f func(*bench.Result) float64) (float64, bool) {
	if r.Result == nil || r.Err != "" {
		return 0, false
	}
	return f(r.Result), true
}

// Median is the median over rounds of metric for (workload, broker), and
// how many runs it is over.
func (rep *Report) Median(workload string, b BrokerKind, metric string) (float64, int) {
	def, ok := metricDefs[metric]
	if !ok {
		return 0, 0
	}
	var vs []float64
	for i := range rep.Runs {
		r := &rep.Runs[i]
		if r.Workload != workload || r.Broker != b {
			continue
		}
		if v, ok := def.get(r, rep.Limits); ok {
			vs = append(vs, v)
		}
	}
	return median(vs), len(vs)
}

func median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := append([]float64(nil), vs...)
	sort.Float64s(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else {
		return (s[n/2-1] + s[n/2]) / 2
	}
}

// ReportMain is `benchcompare report`: re-renders BENCHMARKS.md's section
// and the charts from a saved --json report, without running anything.
func ReportMain(args []string) error {
	fs := flag.NewFlagSet("benchcompare report", flag.ContinueOnError)
	in := fs.String("json", "", "report written by benchcompare kafka|kfake --json")
	md := fs.String("markdown", "", "update this BENCHMARKS.md's generated section")
	charts := fs.String("charts", "", "write SVG charts into this directory")
	merge := fs.String("merge", "", "a saved report: keep its runs of the workloads --json does not have (as benchcompare kafka --merge)")
	out := fs.String("out", "", "write the (merged) report as JSON to this file")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	rep, err := loadReport(*in)
	if err != nil {
		return err
	}
	if rep.Options.Suite == SuiteCluster {
		return reportCluster(*in, *md, *charts)
	}
	if *merge != "" {
		if rep, err = mergeInto(*merge, rep); err != nil {
			return err
		}
	}
	if *out != "" {
		if err := bench.WriteJSONFile(*out, rep); err != nil {
			return err
		}
	}
	rep.WriteSummary(os.Stdout)
	if *charts != "" {
		if err := rep.WriteCharts(*charts); err != nil {
			return err
		}
	}
	if *md != "" {
		return rep.UpdateMarkdown(*md, *charts)
	}
	return nil
}

// mergeInto loads the report saved at path and replaces its runs of the
// workloads in fresh with fresh's, noting it. Machine limits stay the old
// report's (the best of both is kept).
func mergeInto(path string, fresh *Report) (*Report, error) {
	old, err := loadReport(path)
	if err != nil {
		return nil, err
	}
	if old.Options.Suite != fresh.Options.Suite {
		return nil, fmt.Errorf("--merge: %s is a %s report, this is %s", path, old.Options.Suite, fresh.Options.Suite)
	}
	redone := map[string]bool{}
	var names []string
	for _, w := range fresh.Workloads {
		redone[w.Name] = true
		names = append(names, w.Name)
	}
	runs := fresh.Runs
	for _, r := range old.Runs {
		if !redone[r.Workload] {
			runs = append(runs, r)
		}
	}
	old.Runs = runs
	old.Workloads = mergeWorkloads(old.Workloads, fresh.Workloads, fresh.Options)
	if fresh.Limits != nil && old.Limits != nil {
		mergeLimits(old.Limits, fresh.Limits)
	}
	old.Notes = append(old.Notes, fresh.Notes...)
	old.Notes = append(old.Notes, fmt.Sprintf("%s re-run on %s at commit %s, %d round(s) of %v (`%s`); the other workloads are from the run above.",
		strings.Join(names, ", "), fresh.Started.UTC().Format("2006-01-02 15:04 MST"), shortCommit(fresh.Machine.Commit),
		fresh.Options.Rounds, fresh.Options.Duration, strings.TrimSpace(fresh.Options.Command)))
	old.Finished = old.Finished.Add(fresh.Finished.Sub(fresh.Started))
	return old, nil
}

// mergeWorkloads is the old report's workloads with fresh's definitions of
// those re-run and fresh's new ones added (a workload the old report did
// not have would otherwise have runs but no table), in the suite's order.
func mergeWorkloads(old, fresh []Workload, o Options) []Workload {
	byName := map[string]Workload{}
	var out []Workload
	for _, w := range old {
		byName[w.Name] = w
	}
	for _, w := range fresh {
		byName[w.Name] = w
	}
	rank := map[string]int{}
	for i, w := range Workloads(Options{Suite: o.Suite, Brokers: o.Brokers}) {
		rank[w.Name] = i
	}
	for _, w := range byName {
		out = append(out, w)
	}
	sort.SliceStable(out, func(i, j int) bool {
		ri, iok := rank[out[i].Name]
		rj, jok := rank[out[j].Name]
		switch {
		case iok && jok:
			return ri < rj
		case iok != jok:
			return iok // known workloads first
		}
		return out[i].Name < out[j].Name
	})
	return out
}

func loadReport(path string) (*Report, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rep Report
	if err := json.Unmarshal(raw, &rep); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &rep, nil
}

// findSluice is the sluice binary beside self (make builds both into bin/),
// else the one on $PATH.
func findSluice(self string) (string, error) {
	beside := filepath.Join(filepath.Dir(self), "sluice")
	if _, err := os.Stat(beside); err == nil {
		return beside, nil
	}
	p, err := exec.LookPath("sluice")
	if err != nil {
		return "", fmt.Errorf("no sluice binary beside %s or on $PATH: give --sluice-bin", self)
	}
	return p, nil
}

// mergeLimits keeps the best of two measurements of the machine's limits:
// the highest throughputs and the lowest CPU figures (a limit is what the
// machine can do; noise only makes it look worse).
func mergeLimits(dst, src *bench.Limits) {
	dst.SendfileMBps = max(dst.SendfileMBps, src.SendfileMBps)
	dst.WriteMBps = max(dst.WriteMBps, src.WriteMBps)
	dst.WriteSyncMBps = max(dst.WriteSyncMBps, src.WriteSyncMBps)
	dst.ReceiveWriteMBps = max(dst.ReceiveWriteMBps, src.ReceiveWriteMBps)
	dst.SendfileCPUPerGB = minPositive(dst.SendfileCPUPerGB, src.SendfileCPUPerGB)
	dst.ReceiveWriteCPUPerGB = minPositive(dst.ReceiveWriteCPUPerGB, src.ReceiveWriteCPUPerGB)
}

// minPositive is the smaller of a and b, ignoring a zero (not measured).
func minPositive(a, b float64) float64 {
	switch {
	case a <= 0:
		return b
	case b <= 0:
		return a
	}
	return min(a, b)
}
