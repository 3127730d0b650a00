package compare

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sys/unix"

	"github.com/sluice-broker/sluice/bench"
)

// SuiteCluster is three Sluice nodes against three Kafka nodes:
// `make bench-kafka-cluster` (`benchcompare kafka-cluster`).
const SuiteCluster Suite = "kafka-cluster"

// ClusterOptions are the three-node run's own settings (the shared ones,
// rounds, durations, brokers, are in Options).
type ClusterOptions struct {
	Nodes           int       `json:"nodes"`
	Rates           []float64 `json:"rates"` // records/s of the fixed-rate workloads
	Kills           int       `json:"kills"`
	Shutdowns       int       `json:"shutdowns"`
	Creates         int       `json:"creates"`
	ScalePartitions []int     `json:"scale_partitions"` // tried in order until one works, per broker
	KafkaScaleSizes []int     `json:"kafka_scale_partitions"`
	ScaleIdle       Duration  `json:"scale_idle"`
	ScaleLimit      Duration  `json:"scale_limit"` // bound on each scale step (create, in sync, stop, cold start)
	KafkaScaleLimit Duration  `json:"kafka_scale_limit"`
	Phases          []string  `json:"phases"`
}

// Duration is a time.Duration that reads and writes as "1m30s" in JSON.
type Duration time.Duration

func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	*d = Duration(v)
	return err
}

// FaultSamples are one fault figure's samples against one broker in one round.
type FaultSamples struct {
	Figure string     `json:"figure"` // kill, shutdown, metadata
	Broker BrokerKind `json:"broker"`
	Round  int        `json:"round"`
	MS     []float64  `json:"ms"`
	Errors []string   `json:"errors,omitempty"`
}

// ScaleResult is the many-partitions step against one broker at one size.
type ScaleResult struct {
	Broker         BrokerKind `json:"broker"`
	Partitions     int        `json:"partitions"`
	CreateSeconds  float64    `json:"create_seconds"`   // CreateTopics calls, 1,000 partitions each
	InSyncSeconds  float64    `json:"in_sync_seconds"`  // after the last create, until every ISR is full
	IdleSeconds    float64    `json:"idle_seconds"`     // the idle window CPU is measured over
	IdleCPU        []float64  `json:"idle_cpu_cores"`   // per node, CPU seconds ÷ IdleSeconds
	RSS            []int64    `json:"rss_bytes"`        // per node, VmRSS at the end of the idle window
	StopSeconds    float64    `json:"stop_seconds"`     // SIGTERM of all nodes at once to the last exit
	ColdLedSeconds float64    `json:"cold_led_seconds"` // start of all nodes to every partition led
	ColdSeconds    float64    `json:"cold_in_sync_seconds"`
	ColdRSS        []int64    `json:"cold_rss_bytes"` // per node, once in sync after the cold start
	Err            string     `json:"error,omitempty"`
}

// ClusterReport is a whole three-node comparison. Report holds the
// throughput runs (RunRecord's CPU is the sum over the nodes).
type ClusterReport struct {
	Report
	Cluster    ClusterOptions `json:"cluster"`
	LoadBefore string         `json:"loadavg_before"`
	LoadAfter  string         `json:"loadavg_after"`
	// LoadSamples is the load average as each round and scale step began.
	LoadSamples []string       `json:"loadavg_samples,omitempty"`
	Faults      []FaultSamples `json:"faults"`
	Scale       []ScaleResult  `json:"scale"`
}

const (
	phaseThroughput = "throughput"
	phaseFaults     = "faults"
	phaseScale      = "scale"
)

// ClusterWorkloads are the throughput workloads of the three-node run.
func ClusterWorkloads(o Options, rates []float64) []Workload {
	base := bench.DefaultConfig()
	base.Duration, base.Progress, base.Consumers = o.Duration, 0, 0
	maxMetrics := []string{"produce_mbps", "produce_rps", "cpu_per_gb", "cpu_s", "ack_p50", "ack_p99", "client_cpu_s"}
	var ws []Workload
	for _, parts := range []int{1, 16} {
		all := base
		all.Partitions, all.ReplicationFactor, all.MinInsyncReplicas, all.Acks = parts, 3, 2, "all"
		one := base
		one.Partitions, one.ReplicationFactor, one.Acks = parts, 1, "1"
		ws = append(ws,
			Workload{Name: fmt.Sprintf("rf3-%dp-max", parts), Title: fmt.Sprintf("Max-throughput produce, RF=3, min.insync.replicas=2, acks=all, %d partition%s", parts, plural(parts)),
				Config: all, Brokers: o.Brokers, Metrics: maxMetrics},
			Workload{Name: fmt.Sprintf("rf1-%dp-max", parts), Title: fmt.Sprintf("Max-throughput produce, RF=1, acks=1, %d partition%s (replication's baseline)", parts, plural(parts)),
				Config: one, Brokers: o.Brokers, Metrics: maxMetrics},
		)
		for _, rate := range rates {
			fixed := all
			fixed.Rate = rate
			ws = append(ws, Workload{Name: fixedName(parts, rate), Title: fmt.Sprintf("Fixed rate %s records/s (~%s MB/s), RF=3, acks=all, %d partition%s", fmtValue(rate), fmtValue(rate*1024/1e6), parts, plural(parts)),
				Config: fixed, Brokers: o.Brokers, Metrics: []string{"produce_rps", "ack_p50", "ack_p99", "ack_p999", "cpu_s", "cpu_per_gb"}})
		}
	}
	if len(o.Only) == 0 {
		return ws
	}
	var out []Workload
	for _, w := range ws {
		for _, n := range o.Only {
			if w.Name == n {
				out = append(out, w)
			}
		}
	}
	return out
}

// fixedName names the fixed-rate workload of parts partitions at rate records/s.
func fixedName(parts int, rate float64) string {
	return fmt.Sprintf("rf3-%dp-rate%.0f", parts, rate)
}

// ClusterMain is `benchcompare kafka-cluster`.
func ClusterMain(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("benchcompare kafka-cluster", flag.ContinueOnError)
	o := Options{Suite: SuiteCluster}
	co := ClusterOptions{Nodes: 3}
	brokers := "kafka,sluice"
	home, _ := os.UserHomeDir()
	fs.StringVar(&brokers, "brokers", brokers, "systems to compare, in the order they alternate (kafka, sluice)")
	fs.IntVar(&o.Rounds, "rounds", 3, "rounds; each starts a fresh cluster of each system on fresh data dirs")
	fs.BoolVar(&o.Quick, "quick", false, "smoke run: 1 round, 3 s runs, 2 kills, 1 shutdown, 3 creates, 1,000 partitions")
	fs.DurationVar(&o.Duration, "duration", 8*time.Second, "length of each timed produce run")
	fs.DurationVar(&o.Warmup, "warmup", 5*time.Second, "warm-up produce on each fresh cluster (JIT for Kafka)")
	rates := fs.String("rates", "20000,5000", "records/s (1 KiB) of the fixed-rate latency workloads, one workload each")
	fs.IntVar(&co.Kills, "kills", 20, "leader SIGKILLs in all, spread over the rounds")
	fs.IntVar(&co.Shutdowns, "shutdowns", 6, "controlled shutdowns (SIGTERM of a leader) in all, spread over the rounds")
	fs.IntVar(&co.Creates, "creates", 20, "CreateTopics timed to metadata on every broker, in all, spread over the rounds")
	scale := fs.String("scale-partitions", "10000", "partitions (RF=3) of the scale step; a comma list is tried in order until one works")
	kafkaScale := fs.String("kafka-scale-partitions", "", "sizes for Kafka's scale step if not those of --scale-partitions")
	idle := fs.Duration("scale-idle", 20*time.Second, "idle window over which the scale step measures CPU")
	limit := fs.Duration("scale-limit", 4*time.Minute, "bound on each step of the scale phase")
	kafkaLimit := fs.Duration("kafka-scale-limit", 0, "bound on each step of Kafka's scale phase (default --scale-limit)")
	phases := fs.String("phases", "throughput,faults,scale", "phases to run")
	only := fs.String("only", "", "comma-separated throughput workloads to run (default all)")
	defNice := 0
	if os.Geteuid() == 0 {
		defNice = -10
	}
	fs.IntVar(&o.Nice, "nice", defNice, "run the runner and brokers at this nice level (negative needs root; 0 leaves it)")
	fs.StringVar(&o.KafkaLibs, "kafka-libs", filepath.Join(home, ".cache", "sluice-bench", "kafka-"+KafkaVersion, "libs"), "directory of Apache Kafka's jars (bench/kafka.sh fills it)")
	fs.StringVar(&o.Java, "java", "java", "java binary for Kafka")
	fs.StringVar(&o.SluiceBin, "sluice-bin", "", "sluice binary (default: sluice beside this binary, else on $PATH)")
	fs.StringVar(&o.WorkDir, "work-dir", "", "where data dirs and logs go (default: a new temp dir)")
	fs.StringVar(&o.Markdown, "markdown", "", "update this BENCHMARKS.md's three-node section")
	fs.StringVar(&o.ChartDir, "charts", "", "write SVG charts into this directory")
	fs.StringVar(&o.JSON, "json", "", "write the report as JSON to this file")
	fs.BoolVar(&o.Verbose, "v", false, "print more progress")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	o.Command = "benchcompare kafka-cluster " + strings.Join(args, " ")
	if o.Quick {
		set := func(name string, f func()) {
			if !flagSet(fs, name) {
				f()
			}
		}
		set("rounds", func() { o.Rounds = 1 })
		set("duration", func() { o.Duration = 3 * time.Second })
		set("warmup", func() { o.Warmup = 2 * time.Second })
		set("kills", func() { co.Kills = 2 })
		set("shutdowns", func() { co.Shutdowns = 1 })
		set("creates", func() { co.Creates = 3 })
		set("scale-partitions", func() { *scale = "1000" })
		set("scale-idle", func() { *idle = 5 * time.Second })
	}
	co.ScaleIdle, co.ScaleLimit, co.KafkaScaleLimit = Duration(*idle), Duration(*limit), Duration(*kafkaLimit)
	if *kafkaLimit == 0 {
		co.KafkaScaleLimit = co.ScaleLimit
	}
	co.Phases = bench.SplitList(*phases)
	for _, r := range bench.SplitList(*rates) {
		v, err := strconv.ParseFloat(r, 64)
		if err != nil || v <= 0 || v > 1e7 {
			return fmt.Errorf("--rates: bad rate %q", r)
		}
		co.Rates = append(co.Rates, v)
	}
	sizes, err := parseSizes(*scale)
	if err != nil {
		return err
	}
	co.ScalePartitions = sizes
	kafkaSizes := sizes
	if *kafkaScale != "" {
		if kafkaSizes, err = parseSizes(*kafkaScale); err != nil {
			return err
		}
	}
	co.KafkaScaleSizes = kafkaSizes
	for _, b := range bench.SplitList(brokers) {
		if k := BrokerKind(b); k == Kafka || k == Sluice {
			o.Brokers = append(o.Brokers, k)
		} else {
			return fmt.Errorf("--brokers: no three-node mode for %q", b)
		}
	}
	o.Only = bench.SplitList(*only)
	rep, err := RunCluster(ctx, o, co, os.Stderr)
	if rep == nil {
		return err
	}
	rep.WriteClusterSummary(os.Stdout)
	if o.JSON != "" {
		if jerr := bench.WriteJSONFile(o.JSON, rep); jerr != nil {
			return jerr
		}
	}
	if o.ChartDir != "" {
		if cerr := rep.WriteClusterCharts(o.ChartDir); cerr != nil {
			return cerr
		}
	}
	if o.Markdown != "" {
		if merr := rep.UpdateClusterMarkdown(o.Markdown, o.ChartDir); merr != nil {
			return merr
		}
	}
	return err
}

// parseSizes parses "10000,3000" into partition counts, each a positive
// multiple of 1,000 or below 1,000 (topics hold 1,000 partitions each).
func parseSizes(s string) ([]int, error) {
	var out []int
	for _, f := range bench.SplitList(s) {
		var n int
		if _, err := fmt.Sscanf(f, "%d", &n); err != nil || n < 1 || n > 100_000 || fmt.Sprint(n) != f {
			return nil, fmt.Errorf("scale size %q: want a partition count between 1 and 100000", f)
		}
		if n > scaleTopicSize && n%scaleTopicSize != 0 {
			return nil, fmt.Errorf("scale size %d: above %d it must be a multiple of %d", n, scaleTopicSize, scaleTopicSize)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, errors.New("no scale size")
	}
	return out, nil
}

// scaleTopicSize is how many partitions each topic of the scale step has
// (KRaft refuses single CreateTopics of more than 10,000 records).
const scaleTopicSize = 1000

// RunCluster runs the three-node comparison.
func RunCluster(ctx context.Context, o Options, co ClusterOptions, log io.Writer) (*ClusterReport, error) {
	if o.Rounds < 1 {
		return nil, errors.New("--rounds must be at least 1")
	}
	rep := &ClusterReport{Report: Report{Options: o, Started: time.Now(), Machine: DescribeMachine(o.Java)}, Cluster: co, LoadBefore: loadAvg()}
	env, cleanup, err := newEnv(&rep.Report, o, log)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	raiseFileLimit(&rep.Notes)
	var systems []BrokerKind
	for _, b := range o.Brokers {
		if b == Kafka {
			if err := checkKafka(o); err != nil {
				rep.Notes = append(rep.Notes, "Kafka not run: "+err.Error())
				continue
			}
		}
		systems = append(systems, b)
	}
	rep.Options.Brokers = systems
	o.Brokers = systems
	has := func(p string) bool {
		for _, x := range co.Phases {
			if x == p {
				return true
			}
		}
		return false
	}
	if has(phaseThroughput) {
		rep.Workloads = ClusterWorkloads(o, co.Rates)
	}
	if o.Nice != 0 {
		if err := setNice(o.Nice); err != nil {
			rep.Notes = append(rep.Notes, fmt.Sprintf("could not set nice %d: %v", o.Nice, err))
			rep.Options.Nice = 0
		}
	}
	finish := func() (*ClusterReport, error) {
		rep.Finished = time.Now()
		rep.LoadAfter = loadAvg()
		return rep, ctx.Err()
	}
	if has(phaseThroughput) || has(phaseFaults) {
		for round := 1; round <= o.Rounds; round++ {
			for _, b := range systems {
				if ctx.Err() != nil {
					return finish()
				}
				rep.LoadSamples = append(rep.LoadSamples, fmt.Sprintf("round %d %s: %s", round, b, loadAvg()))
				runClusterRound(ctx, env, o, co, rep, b, round, has(phaseFaults), log)
				rep.checkpoint(o.JSON, log)
			}
		}
	}
	if has(phaseScale) {
		// Sluice first: its figure is the one asked for; Kafka's is "if it
		// can take it here", and the slower to find out.
		order := append([]BrokerKind(nil), systems...)
		sort.SliceStable(order, func(i, j int) bool { return order[i] == Sluice && order[j] != Sluice })
		for _, b := range order {
			sizes := co.ScalePartitions
			if b == Kafka {
				sizes = co.KafkaScaleSizes
			}
			for _, n := range sizes {
				if ctx.Err() != nil {
					return finish()
				}
				fmt.Fprintf(log, "bench: scale %s, %d partitions RF=3…\n", b, n)
				rep.LoadSamples = append(rep.LoadSamples, fmt.Sprintf("scale %s %d: %s", b, n, loadAvg()))
				sr := runScale(ctx, env, b, co, n, log)
				rep.Scale = append(rep.Scale, sr)
				rep.checkpoint(o.JSON, log)
				fmt.Fprintf(log, "bench: scale %s %d: %s\n", b, n, sr.brief())
				if sr.Err == "" {
					break
				}
			}
		}
	}
	return finish()
}

// checkpoint writes the report so far to path (if any), so that a run cut
// short keeps what it measured.
func (rep *ClusterReport) checkpoint(path string, log io.Writer) {
	if path == "" {
		return
	}
	rep.Finished, rep.LoadAfter = time.Now(), loadAvg()
	if err := bench.WriteJSONFile(path, rep); err != nil {
		fmt.Fprintln(log, "bench: checkpoint:", err)
	}
}

// newEnv sets up where brokers run; cleanup removes the work dir unless
// something failed (then the logs are kept).
func newEnv(rep *Report, o Options, log io.Writer) (*brokerEnv, func(), error) {
	env := &brokerEnv{sluice: o.SluiceBin, java: o.Java, kafkaLibs: o.KafkaLibs, workDir: o.WorkDir}
	self, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	env.self = self
	if env.sluice == "" {
		if env.sluice, err = findSluice(self); err != nil && containsKind(o.Brokers, Sluice) {
			return nil, nil, err
		}
	}
	cleanup := func() {}
	if env.workDir == "" {
		d, err := os.MkdirTemp("", "sluice-bench-cluster-")
		if err != nil {
			return nil, nil, err
		}
		env.workDir = d
		cleanup = func() {
			if failed(rep) {
				fmt.Fprintln(log, "bench: some steps failed; broker logs kept in", filepath.Join(d, "logs"))
				return
			}
			os.RemoveAll(d)
		}
	}
	env.logDir = filepath.Join(env.workDir, "logs")
	if err := os.MkdirAll(env.logDir, 0o755); err != nil {
		return nil, nil, err
	}
	return env, cleanup, nil
}

func failed(rep *Report) bool {
	for _, r := range rep.Runs {
		if r.Err != "" {
			return true
		}
	}
	for _, n := range rep.Notes {
		if strings.Contains(n, "failed") {
			return true
		}
	}
	return false
}

// raiseFileLimit lifts RLIMIT_NOFILE to its hard limit (brokers inherit
// it): thousands of partitions hold thousands of files open.
func raiseFileLimit(notes *[]string) {
	var l unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &l) != nil {
		return
	}
	want := l
	want.Cur = max(l.Max, 1<<20)
	want.Max = want.Cur
	if unix.Setrlimit(unix.RLIMIT_NOFILE, &want) == nil {
		return
	}
	want = l
	want.Cur = l.Max
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &want); err != nil {
		*notes = append(*notes, fmt.Sprintf("open-file limit left at %d: %v", l.Cur, err))
	}
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// runClusterRound starts a fresh cluster of kind, runs the throughput
// workloads on it, then (with faults) this round's share of the fault
// figures, and destroys it.
func runClusterRound(ctx context.Context, env *brokerEnv, o Options, co ClusterOptions, rep *ClusterReport, kind BrokerKind, round int, faults bool, log io.Writer) {
	fmt.Fprintf(log, "bench: round %d/%d: starting a %d-node %s cluster…\n", round, o.Rounds, co.Nodes, kind)
	start := time.Now()
	c, err := env.startCluster(ctx, kind, co.Nodes, fmt.Sprintf("r%d", round))
	if err != nil {
		for _, w := range rep.Workloads {
			rep.Runs = append(rep.Runs, RunRecord{Workload: w.Name, Broker: kind, Round: round, Err: err.Error()})
		}
		rep.Notes = append(rep.Notes, fmt.Sprintf("round %d: %s cluster failed to start: %v", round, kind.Title(), err))
		return
	}
	defer c.destroy()
	fmt.Fprintf(log, "bench: %s cluster up in %v\n", kind, time.Since(start).Round(time.Millisecond))
	if len(rep.Workloads) > 0 && o.Warmup > 0 {
		wc := bench.DefaultConfig()
		wc.Brokers, wc.Topic, wc.Consumers, wc.Acks = c.bootstrap(), "warmup", 0, "all"
		wc.ReplicationFactor, wc.MinInsyncReplicas = 3, 2
		wc.Duration, wc.Progress = o.Warmup, 0
		if _, err := bench.Run(ctx, wc, nil); err != nil {
			rep.Notes = append(rep.Notes, fmt.Sprintf("round %d: %s warm-up failed: %v", round, kind.Title(), err))
		}
	}
	for _, w := range rep.Workloads {
		if ctx.Err() != nil {
			return
		}
		rec := runOnCluster(ctx, c, w, round)
		rep.Runs = append(rep.Runs, rec)
		fmt.Fprintf(log, "bench: round %d/%d %-14s %-7s %s\n", round, o.Rounds, w.Name, kind, rec.brief(w))
	}
	if !faults {
		return
	}
	share := func(total int) int { // this round's part of total
		n := total / o.Rounds
		if round <= total%o.Rounds {
			n++
		}
		return n
	}
	for _, f := range []struct {
		name string
		n    int
		run  func(context.Context, *benchCluster, int, int) FaultSamples
	}{
		{"metadata", share(co.Creates), measureMetadata},
		{"kill", share(co.Kills), measureKills},
		{"shutdown", share(co.Shutdowns), measureShutdowns},
	} {
		if f.n == 0 || ctx.Err() != nil {
			continue
		}
		began := time.Now()
		s := f.run(ctx, c, round, f.n)
		s.Figure, s.Broker, s.Round = f.name, kind, round
		rep.Faults = append(rep.Faults, s)
		st := Summarize(s.MS)
		fmt.Fprintf(log, "bench: round %d/%d %-9s %-7s n=%d p50 %s ms, p99 %s ms, max %s ms, %d errors (took %v)\n",
			round, o.Rounds, f.name, kind, st.N, fmtValue(st.P50), fmtValue(st.P99), fmtValue(st.Max), len(s.Errors), time.Since(began).Round(time.Second))
		for _, e := range s.Errors {
			fmt.Fprintf(log, "bench:   %s\n", e)
		}
	}
}

// runOnCluster runs one throughput workload; CPU is the sum over the nodes.
func runOnCluster(ctx context.Context, c *benchCluster, w Workload, round int) RunRecord {
	rec := RunRecord{Workload: w.Name, Broker: c.kind, Round: round}
	pids := c.pids()
	before := make([]ProcStats, len(pids))
	for i, p := range pids {
		before[i], _ = ReadProcStats(p)
	}
	selfBefore, _ := ReadProcStats(os.Getpid())
	cfg := w.Config
	cfg.Brokers = c.bootstrap()
	cfg.Topic = fmt.Sprintf("bench-%s-r%d", w.Name, round)
	// The topic is created before the clock starts, inside the run; count
	// CPU from the moment the produce starts is not possible from outside,
	// so creation (a few ms of work) is included.
	res, err := bench.RunWith(ctx, cfg, nil, bench.Hooks{})
	rec.Result = res
	if err != nil {
		rec.Err = err.Error()
	}
	for i, p := range pids {
		if after, err := ReadProcStats(p); err == nil {
			rec.CPUSeconds += (after.CPU - before[i].CPU).Seconds()
			rec.PeakRSS = max(rec.PeakRSS, after.PeakRSS)
		}
	}
	if selfAfter, err := ReadProcStats(os.Getpid()); err == nil {
		rec.ClientCPU = (selfAfter.CPU - selfBefore.CPU).Seconds()
	}
	return rec
}

// faultTopic creates a 1-partition RF=3 topic with min.insync.replicas=2
// and waits until its ISR is full.
func faultTopic(ctx context.Context, c *benchCluster, adm *kadm.Client, name string) error {
	v := "2"
	if err := createTopicRetry(ctx, adm, name, 1, 3, map[string]*string{"min.insync.replicas": &v}, time.Minute); err != nil {
		return err
	}
	return c.waitInSync(ctx, []string{name}, 1, time.Minute, 50*time.Millisecond)
}

// createTopicRetry creates a topic, retrying retriable errors until limit;
// an existing topic counts as created (an earlier try may have landed).
func createTopicRetry(ctx context.Context, adm *kadm.Client, name string, parts int32, rf int16, configs map[string]*string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		rctx, cancel := context.WithTimeout(ctx, limit)
		resp, err := adm.CreateTopic(rctx, parts, rf, configs, name)
		cancel()
		if err == nil {
			err = resp.Err
		}
		if err == nil || errors.Is(err, kerr.TopicAlreadyExists) {
			return nil
		}
		if ctx.Err() != nil || time.Now().After(deadline) || !(kerr.IsRetriable(err) || errors.Is(err, context.DeadlineExceeded)) {
			return fmt.Errorf("create %s: %w", name, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// failoverProducer is a producer that retries fast: 10 ms backoff,
// metadata refreshed as often as every 10 ms, acks=all, idempotent.
func failoverProducer(c *benchCluster, topic string) (*kgo.Client, error) {
	return kgo.NewClient(
		kgo.SeedBrokers(c.bootstrap()...),
		kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0),
		kgo.RetryBackoffFn(func(int) time.Duration { return 10 * time.Millisecond }),
		kgo.MetadataMinAge(10*time.Millisecond),
		kgo.RecordDeliveryTimeout(2*time.Minute),
	)
}

// restartAndSync starts nd again and waits for the topic's ISR to be full.
func restartAndSync(ctx context.Context, c *benchCluster, nd *clusterNode, topic string) error {
	if err := nd.start(); err != nil {
		return err
	}
	if err := c.waitInSync(ctx, []string{topic}, 1, 3*time.Minute, 50*time.Millisecond); err != nil {
		return fmt.Errorf("node %d restarted, ISR not full: %w", nd.id, err)
	}
	return nil
}

// measureKills: n times, SIGKILL the leader of a 1-partition RF=3 topic and
// time until a produce (acks=all) succeeds on the new leader; then restart
// the node and wait for the ISR to be full again.
func measureKills(ctx context.Context, c *benchCluster, round, n int) FaultSamples {
	var s FaultSamples
	topic := fmt.Sprintf("failover-r%d", round)
	admCl, err := kgo.NewClient(kgo.SeedBrokers(c.bootstrap()...))
	if err != nil {
		s.Errors = append(s.Errors, err.Error())
		return s
	}
	defer admCl.Close()
	if err := faultTopic(ctx, c, kadm.NewClient(admCl), topic); err != nil {
		s.Errors = append(s.Errors, err.Error())
		return s
	}
	cl, err := failoverProducer(c, topic)
	if err != nil {
		s.Errors = append(s.Errors, err.Error())
		return s
	}
	defer cl.Close()
	rec := func() *kgo.Record { return &kgo.Record{Value: make([]byte, 100)} }
	for i := 0; i < n && ctx.Err() == nil; i++ {
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := cl.ProduceSync(pctx, rec()).FirstErr() // the producer is connected and current
		cancel()
		if err != nil {
			s.Errors = append(s.Errors, fmt.Sprintf("kill %d: produce before the kill: %v", i+1, err))
			return s
		}
		leader, err := c.leaderOf(ctx, topic, 0)
		if err != nil {
			s.Errors = append(s.Errors, fmt.Sprintf("kill %d: %v", i+1, err))
			return s
		}
		nd := c.node(leader)
		if nd == nil {
			s.Errors = append(s.Errors, fmt.Sprintf("kill %d: leader %d is no node of the cluster", i+1, leader))
			return s
		}
		t0 := time.Now()
		nd.signal(syscall.SIGKILL)
		var took time.Duration
		for {
			pctx, cancel := context.WithTimeout(ctx, 90*time.Second)
			err := cl.ProduceSync(pctx, rec()).FirstErr()
			cancel()
			if err == nil {
				took = time.Since(t0)
				break
			}
			if time.Since(t0) > 90*time.Second || ctx.Err() != nil {
				s.Errors = append(s.Errors, fmt.Sprintf("kill %d of node %d: no produce within 90 s: %v", i+1, leader, err))
				return s
			}
		}
		s.MS = append(s.MS, float64(took.Microseconds())/1000)
		nd.kill()
		if err := restartAndSync(ctx, c, nd, topic); err != nil {
			s.Errors = append(s.Errors, fmt.Sprintf("kill %d: %v", i+1, err))
			return s
		}
	}
	return s
}

// measureShutdowns: n times, SIGTERM the leader of a 1-partition RF=3 topic
// and time until the process exits (its controlled shutdown), then
// restart it and wait for the ISR to be full.
func measureShutdowns(ctx context.Context, c *benchCluster, round, n int) FaultSamples {
	var s FaultSamples
	topic := fmt.Sprintf("shutdown-r%d", round)
	admCl, err := kgo.NewClient(kgo.SeedBrokers(c.bootstrap()...))
	if err != nil {
		s.Errors = append(s.Errors, err.Error())
		return s
	}
	defer admCl.Close()
	if err := faultTopic(ctx, c, kadm.NewClient(admCl), topic); err != nil {
		s.Errors = append(s.Errors, err.Error())
		return s
	}
	for i := 0; i < n && ctx.Err() == nil; i++ {
		leader, err := c.leaderOf(ctx, topic, 0)
		if err != nil {
			s.Errors = append(s.Errors, fmt.Sprintf("shutdown %d: %v", i+1, err))
			return s
		}
		nd := c.node(leader)
		if nd == nil {
			s.Errors = append(s.Errors, fmt.Sprintf("shutdown %d: leader %d is no node of the cluster", i+1, leader))
			return s
		}
		took, clean := nd.terminate(2 * time.Minute)
		if !clean {
			s.Errors = append(s.Errors, fmt.Sprintf("shutdown %d: node %d still running %v after SIGTERM: killed", i+1, leader, took.Round(time.Millisecond)))
		} else {
			s.MS = append(s.MS, float64(took.Microseconds())/1000)
		}
		if err := restartAndSync(ctx, c, nd, topic); err != nil {
			s.Errors = append(s.Errors, fmt.Sprintf("shutdown %d: %v", i+1, err))
			return s
		}
	}
	return s
}

// measureMetadata: n times, create a 1-partition RF=3 topic and time from
// the CreateTopics response until every node's own Metadata answer shows
// a leader for it (each node polled every millisecond).
func measureMetadata(ctx context.Context, c *benchCluster, round, n int) FaultSamples {
	var s FaultSamples
	admCl, err := kgo.NewClient(kgo.SeedBrokers(c.bootstrap()...))
	if err != nil {
		s.Errors = append(s.Errors, err.Error())
		return s
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	var pollers []*kgo.Client
	for _, nd := range c.nodes {
		cl, err := kgo.NewClient(kgo.SeedBrokers(nd.addr))
		if err != nil {
			s.Errors = append(s.Errors, err.Error())
			return s
		}
		defer cl.Close()
		pollers = append(pollers, cl)
	}
	for i := 0; i < n && ctx.Err() == nil; i++ {
		name := fmt.Sprintf("meta-r%d-%d", round, i)
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		resp, err := adm.CreateTopic(rctx, 1, 3, nil, name)
		cancel()
		t0 := time.Now()
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			s.Errors = append(s.Errors, fmt.Sprintf("create %s: %v", name, err))
			continue
		}
		took, err := seenEverywhere(ctx, pollers, name, t0, 30*time.Second)
		if err != nil {
			s.Errors = append(s.Errors, fmt.Sprintf("%s: %v", name, err))
			continue
		}
		s.MS = append(s.MS, float64(took.Microseconds())/1000)
	}
	return s
}

// seenEverywhere polls each client's node until its Metadata shows topic
// with a leader and returns the time from t0 to the last node to show it.
func seenEverywhere(ctx context.Context, pollers []*kgo.Client, topic string, t0 time.Time, limit time.Duration) (time.Duration, error) {
	var wg sync.WaitGroup
	seen := make([]time.Duration, len(pollers))
	errs := make([]error, len(pollers))
	for i, cl := range pollers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = pollUntil(ctx, limit, time.Millisecond, func() (bool, error) {
				m, err := metadataVia(ctx, cl, []string{topic})
				if err != nil {
					return false, nil
				}
				ps, ok := topicStates(m)[topic]
				if ok && len(ps.leaders) > 0 && ps.leaders[0] >= 0 {
					seen[i] = time.Since(t0)
					return true, nil
				}
				return false, nil
			})
		}()
	}
	wg.Wait()
	var last time.Duration
	for i := range pollers {
		if errs[i] != nil {
			return 0, fmt.Errorf("node %d: %w", i+1, errs[i])
		}
		last = max(last, seen[i])
	}
	return last, nil
}

// runScale: a fresh cluster of kind, partitions (RF=3) created in topics of
// 1,000; time to create and to full ISRs; per node RSS and idle CPU; then
// every node SIGTERMed and started again at once (a cold start of the
// whole cluster), timed to every partition led and in sync.
func runScale(ctx context.Context, env *brokerEnv, kind BrokerKind, co ClusterOptions, partitions int, log io.Writer) ScaleResult {
	r := ScaleResult{Broker: kind, Partitions: partitions}
	limit := time.Duration(co.ScaleLimit)
	if kind == Kafka && co.KafkaScaleLimit > 0 {
		limit = time.Duration(co.KafkaScaleLimit)
	}
	c, err := env.startCluster(ctx, kind, co.Nodes, fmt.Sprintf("scale%d", partitions))
	if err != nil {
		r.Err = err.Error()
		return r
	}
	defer c.destroy()
	admCl, err := kgo.NewClient(kgo.SeedBrokers(c.bootstrap()...), kgo.RequestTimeoutOverhead(limit))
	if err != nil {
		r.Err = err.Error()
		return r
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	var topics []string
	start := time.Now()
	for left, i := partitions, 0; left > 0; i++ {
		n := min(left, scaleTopicSize)
		left -= n
		name := fmt.Sprintf("scale-%02d", i)
		topics = append(topics, name)
		if err := createTopicRetry(ctx, adm, name, int32(n), 3, nil, limit-time.Since(start)); err != nil {
			r.Err = fmt.Sprintf("after %v, %d topics: %v", time.Since(start).Round(time.Second), i, err)
			return r
		}
	}
	r.CreateSeconds = time.Since(start).Seconds()
	fmt.Fprintf(log, "bench: scale %s: created %d partitions in %.1f s\n", kind, partitions, r.CreateSeconds)
	start = time.Now()
	if err := c.waitInSync(ctx, topics, partitions, limit, time.Second); err != nil {
		r.Err = "after create: " + err.Error()
		return r
	}
	r.InSyncSeconds = time.Since(start).Seconds()
	// Idle: let the last fetches and checkpoints settle, then measure.
	time.Sleep(5 * time.Second)
	idle := time.Duration(co.ScaleIdle)
	cpu, rss := idleWindow(c, idle)
	r.IdleSeconds, r.IdleCPU, r.RSS = idle.Seconds(), cpu, rss
	fmt.Fprintf(log, "bench: scale %s: idle CPU %v cores, RSS %v\n", kind, cpu, rss)

	start = time.Now()
	c.stopAll(limit)
	r.StopSeconds = time.Since(start).Seconds()
	start = time.Now()
	for _, nd := range c.nodes {
		if err := nd.start(); err != nil {
			r.Err = "cold start: " + err.Error()
			return r
		}
	}
	led := false
	err = pollUntil(ctx, limit, 500*time.Millisecond, func() (bool, error) {
		for _, nd := range c.nodes {
			if !nd.running() {
				return false, fmt.Errorf("node %d exited during the cold start", nd.id)
			}
		}
		for _, nd := range c.nodes {
			m, err := nodeMetadata(ctx, nd, topics)
			if err != nil {
				continue
			}
			full, l, total := inSync(topicStates(m))
			if !led && total >= partitions && l == total {
				led = true
				r.ColdLedSeconds = time.Since(start).Seconds()
			}
			return total >= partitions && full == total, nil
		}
		return false, nil
	})
	if err != nil {
		r.Err = "cold start: " + err.Error()
		return r
	}
	r.ColdSeconds = time.Since(start).Seconds()
	for _, nd := range c.nodes {
		if st, err := ReadProcStats(nd.pid()); err == nil {
			r.ColdRSS = append(r.ColdRSS, st.RSS)
		}
	}
	return r
}

// idleWindow measures each node's CPU (in cores) over d and its RSS at the end.
func idleWindow(c *benchCluster, d time.Duration) ([]float64, []int64) {
	pids := c.pids()
	before := make([]ProcStats, len(pids))
	for i, p := range pids {
		before[i], _ = ReadProcStats(p)
	}
	time.Sleep(d)
	var cpu []float64
	var rss []int64
	for i, p := range pids {
		after, err := ReadProcStats(p)
		if err != nil {
			continue
		}
		cpu = append(cpu, (after.CPU-before[i].CPU).Seconds()/after.Sampled.Sub(before[i].Sampled).Seconds())
		rss = append(rss, after.RSS)
	}
	return cpu, rss
}

func (r ScaleResult) brief() string {
	if r.Err != "" {
		return "FAILED: " + r.Err
	}
	return fmt.Sprintf("created in %.1f s, in sync %.1f s later; idle CPU %v; RSS %v; stop %.1f s; cold start: led %.1f s, in sync %.1f s",
		r.CreateSeconds, r.InSyncSeconds, r.IdleCPU, r.RSS, r.StopSeconds, r.ColdLedSeconds, r.ColdSeconds)
}
