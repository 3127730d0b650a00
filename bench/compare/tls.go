package compare

// benchcompare tls: Sluice against Apache Kafka 4.4 over TLS, in one run
// (issue 14's benchmark; `make bench-kafka-tls`).
//
// A throwaway CA and broker certificate are made for the run
// (bench.WritePKI). Each round starts each broker once, fresh, with three
// listeners on 127.0.0.1: PLAINTEXT (the runner's admin requests, Kafka's
// inter-broker name), SSL and SASL_SSL with SCRAM-SHA-512, the keystore
// the same PEM file for both (ssl.keystore.type=PEM). A SCRAM user is
// created through Kafka's AlterUserScramCredentials (kadm) on both. After
// a warm-up (plaintext and TLS produce, then TLS and SCRAM connections:
// Kafka's JIT), every workload runs once on that broker, each over
// PLAINTEXT and over SSL, so the ratio of the two is what TLS costs that
// broker; the topic is deleted and the page cache synced after each. The
// brokers, and the two listeners of each workload, alternate which goes
// first from round to round.

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-broker/sluice/bench"
)

// tlsUser is the SCRAM user of the connection workloads.
const tlsUser, tlsPassword = "bench", "bench-secret"

// tlsOptions configure a `benchcompare tls` run.
type tlsOptions struct {
	Brokers        []BrokerKind  `json:"brokers"`
	Rounds         int           `json:"rounds"`
	Duration       time.Duration `json:"duration_ns"`
	Warmup         time.Duration `json:"warmup_ns"`
	CatchUpRecords int64         `json:"catch_up_records"`
	ConnWorkers    int           `json:"connect_workers"`
	KeyType        string        `json:"key_type"`
	Only           []string      `json:"only,omitempty"`
	Nice           int           `json:"nice"`
	Command        string        `json:"command"`
	env            brokerEnv
	verbose        bool
}

// tlsWorkload is one row group: a load-generator run or a connection
// set-up run, over one listener.
type tlsWorkload struct {
	Name     string       `json:"name"`
	Title    string       `json:"title"`
	Listener string       `json:"listener"` // PLAINTEXT, SSL or SASL_SSL
	Config   bench.Config `json:"config"`   // load workloads
	Connect  bool         `json:"connect"`  // a connection set-up run
	SASL     string       `json:"sasl,omitempty"`
}

// tlsRun is one workload on one broker in one round.
type tlsRun struct {
	Workload   string               `json:"workload"`
	Broker     BrokerKind           `json:"broker"`
	Round      int                  `json:"round"`
	LoadAvg    string               `json:"loadavg"` // at the start of the run
	Result     *bench.Result        `json:"result,omitempty"`
	Connect    *bench.ConnectResult `json:"connect,omitempty"`
	CPUSeconds float64              `json:"broker_cpu_seconds"` // measured span (catch-up: the read phase)
	ClientCPU  float64              `json:"client_cpu_seconds"`
	Err        string               `json:"error,omitempty"`
}

// tlsReport is a whole run, as --json writes it.
type tlsReport struct {
	Options   tlsOptions    `json:"options"`
	Machine   MachineInfo   `json:"machine"`
	Started   time.Time     `json:"started"`
	Finished  time.Time     `json:"finished"`
	Workloads []tlsWorkload `json:"workloads"`
	Runs      []tlsRun      `json:"runs"`
}

// tlsWorkloads are the run's workloads: each load workload over PLAINTEXT
// and SSL, then the connection workloads.
func tlsWorkloads(o tlsOptions) []tlsWorkload {
	base := bench.DefaultConfig()
	base.Duration, base.Progress, base.Acks, base.Partitions = o.Duration, 0, "1", 4
	if o.verbose {
		base.Progress = 2 * time.Second
	}
	type load struct {
		name, title string
		set         func(*bench.Config)
	}
	loads := []load{
		{"produce", "Max-throughput produce, franz-go, 1 producer, 4 partitions, acks=1",
			func(c *bench.Config) { c.Consumers = 0 }},
		{"raw-produce", "Raw produce (batches built once, 4 connections × 8 in flight), 4 partitions, acks=1",
			func(c *bench.Config) { c.Mode, c.Consumers, c.Producers, c.RawInFlight = bench.ModeRawProduce, 0, 4, 8 }},
		{"catch-up", "Catch-up consume of page-cached data, franz-go consumer, 4 partitions",
			func(c *bench.Config) { c.Mode, c.Records = bench.ModeCatchUp, o.CatchUpRecords }},
		{"raw-fetch", "Catch-up consume, raw fetch loop (records not decoded), 4 partitions",
			func(c *bench.Config) { c.Mode, c.Records = bench.ModeRawFetch, o.CatchUpRecords }},
	}
	var ws []tlsWorkload
	for _, l := range loads {
		for _, listener := range []string{"PLAINTEXT", "SSL"} {
			c := base
			l.set(&c)
			w := tlsWorkload{Name: l.name + "-" + strings.ToLower(listener), Title: l.title + " over " + listener, Listener: listener, Config: c}
			ws = append(ws, w)
		}
	}
	ws = append(ws,
		tlsWorkload{Name: "connect-ssl", Title: "Connection set-up over SSL: TLS handshake, ApiVersions, Metadata", Listener: "SSL", Connect: true},
		tlsWorkload{Name: "connect-scram", Title: "Connection set-up over SASL_SSL: TLS handshake, ApiVersions, SCRAM-SHA-512, Metadata", Listener: "SASL_SSL", Connect: true, SASL: "SCRAM-SHA-512"},
	)
	if len(o.Only) == 0 {
		return ws
	}
	var out []tlsWorkload
	for _, w := range ws {
		for _, n := range o.Only {
			if w.Name == n || strings.HasPrefix(w.Name, n+"-") {
				out = append(out, w)
				break
			}
		}
	}
	return out
}

// TLSMain is `benchcompare tls`.
func TLSMain(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("benchcompare tls", flag.ContinueOnError)
	o := tlsOptions{}
	brokers := fs.String("brokers", "kafka,sluice", "brokers to compare")
	fs.IntVar(&o.Rounds, "rounds", 3, "rounds (each broker started fresh once per round)")
	fs.DurationVar(&o.Duration, "duration", 10*time.Second, "length of each produce and connection run")
	fs.DurationVar(&o.Warmup, "warmup", 5*time.Second, "warm-up produce on each fresh broker, plaintext and TLS each (Kafka's JIT)")
	fs.Int64Var(&o.CatchUpRecords, "catch-up-records", 1_000_000, "records (1 KiB) written then read back by the catch-up workloads")
	fs.IntVar(&o.ConnWorkers, "connect-workers", 4, "connections being set up at once in the connection workloads")
	fs.StringVar(&o.KeyType, "key", bench.KeyRSA2048, "broker key: rsa2048 or p256")
	only := fs.String("only", "", "comma-separated workloads (produce, raw-produce, catch-up, raw-fetch, connect-ssl, connect-scram; a base name runs both listeners)")
	defNice := 0
	if os.Geteuid() == 0 {
		defNice = -10
	}
	fs.IntVar(&o.Nice, "nice", defNice, "run the runner and brokers at this nice level (negative needs root; 0 leaves it)")
	jsonOut := fs.String("json", "", "write every run as JSON to this file")
	from := fs.String("from", "", "print the tables of a saved --json report instead of running")
	home, _ := os.UserHomeDir()
	fs.StringVar(&o.env.kafkaLibs, "kafka-libs", filepath.Join(home, ".cache", "sluice-bench", "kafka-"+KafkaVersion, "libs"), "directory of Apache Kafka's jars")
	fs.StringVar(&o.env.java, "java", "java", "java binary for Kafka")
	fs.StringVar(&o.env.sluice, "sluice-bin", "", "sluice binary (default: beside this binary, else on $PATH)")
	fs.BoolVar(&o.verbose, "v", false, "print live progress of each run")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if *from != "" {
		rep, err := loadTLSReport(*from)
		if err != nil {
			return err
		}
		rep.writeMarkdown(os.Stdout)
		return nil
	}
	o.Command = "benchcompare tls " + strings.Join(args, " ")
	for _, b := range bench.SplitList(*brokers) {
		o.Brokers = append(o.Brokers, BrokerKind(b))
	}
	o.Only = bench.SplitList(*only)
	rep, err := runTLS(ctx, o, os.Stderr)
	if rep == nil {
		return err
	}
	rep.writeMarkdown(os.Stdout)
	if *jsonOut != "" {
		if jerr := bench.WriteJSONFile(*jsonOut, rep); jerr != nil {
			return jerr
		}
	}
	return err
}

func loadTLSReport(path string) (*tlsReport, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rep tlsReport
	if err := json.Unmarshal(raw, &rep); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &rep, nil
}

// runTLS runs every workload on every broker, o.Rounds times.
func runTLS(ctx context.Context, o tlsOptions, log io.Writer) (*tlsReport, error) {
	if o.Rounds < 1 || o.ConnWorkers < 1 {
		return nil, errors.New("--rounds and --connect-workers must be at least 1")
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	if o.env.sluice == "" {
		if o.env.sluice, err = findSluice(self); err != nil {
			return nil, err
		}
	}
	for _, b := range o.Brokers {
		if b == Kfake {
			return nil, errors.New("kfake serves no TLS: --brokers kafka,sluice")
		}
		if b == Kafka {
			if err := checkKafka(Options{Java: o.env.java, KafkaLibs: o.env.kafkaLibs}); err != nil {
				return nil, err
			}
		}
	}
	work, err := os.MkdirTemp("", "sluice-tls-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	o.env.workDir, o.env.logDir = work, filepath.Join(work, "logs")
	if err := os.MkdirAll(o.env.logDir, 0o755); err != nil {
		return nil, err
	}
	pki, err := bench.WritePKI(work, o.KeyType)
	if err != nil {
		return nil, err
	}
	tc, err := bench.ClientTLS(pki.CAFile)
	if err != nil {
		return nil, err
	}
	if o.Nice != 0 {
		if err := setNice(o.Nice); err != nil {
			fmt.Fprintf(log, "bench: could not set nice %d: %v\n", o.Nice, err)
			o.Nice = 0
		}
	}
	ports := map[string]int{}
	o.env.extraProps = func(kind BrokerKind, port, cport int) string {
		return secureProps(kind, pki, port, cport, ports["SSL"], ports["SASL_SSL"])
	}
	sec := &secureRun{o: o, tc: tc, caFile: pki.CAFile, ports: ports}
	rep := &tlsReport{Options: o, Machine: DescribeMachine(o.env.java), Started: time.Now(), Workloads: tlsWorkloads(o)}
	defer func() { rep.Finished = time.Now() }()
	for round := 1; round <= o.Rounds; round++ {
		order := append([]BrokerKind(nil), o.Brokers...)
		if round%2 == 0 {
			for i, j := 0, len(order)-1; i < j; i, j = i+1, j-1 {
				order[i], order[j] = order[j], order[i]
			}
		}
		for _, kind := range order {
			if ctx.Err() != nil {
				return rep, ctx.Err()
			}
			runs, err := sec.round(ctx, kind, round, rep.Workloads, log)
			rep.Runs = append(rep.Runs, runs...)
			if err != nil {
				return rep, fmt.Errorf("%s round %d: %w (logs in %s)", kind, round, err, o.env.logDir)
			}
		}
	}
	return rep, nil
}

// secureProps are the listener and security lines of a broker: the
// PLAINTEXT listener stays the primary (inter-broker) one.
func secureProps(kind BrokerKind, pki bench.PKI, port, cport, sslPort, saslPort int) string {
	listeners := fmt.Sprintf("PLAINTEXT://127.0.0.1:%d,SSL://127.0.0.1:%d,SASL_SSL://127.0.0.1:%d", port, sslPort, saslPort)
	lines := []string{
		"listeners=" + listeners,
		"sasl.enabled.mechanisms=SCRAM-SHA-512",
		"ssl.keystore.type=PEM",
		"ssl.keystore.location=" + pki.KeystoreFile,
		// A deleted topic's files go at once, not a minute later in the
		// middle of another run (both brokers' default is 60 s): each run
		// writes gigabytes and its topic is deleted after it.
		"log.segment.delete.delay.ms=0",
	}
	if kind == Kafka {
		lines[0] += fmt.Sprintf(",CONTROLLER://127.0.0.1:%d", cport)
		lines = append(lines,
			"advertised.listeners="+listeners,
			"listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL",
			// The broker side of SCRAM needs a login module entry (its
			// options are only for a broker that is itself a client).
			"listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;",
		)
	}
	return strings.Join(lines, "\n") + "\n"
}

// secureRun is what the rounds of a run share.
type secureRun struct {
	o      tlsOptions
	tc     *tls.Config // the clients' (bench.ClientTLS)
	caFile string
	ports  map[string]int // listener → port of the broker being run
}

// round starts kind fresh, prepares it and runs every workload once.
func (s *secureRun) round(ctx context.Context, kind BrokerKind, round int, ws []tlsWorkload, log io.Writer) ([]tlsRun, error) {
	o := s.o
	for _, l := range []string{"SSL", "SASL_SSL"} {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		s.ports[l] = p // read by o.env.extraProps as the broker starts
	}
	b, err := o.env.startBroker(ctx, kind, fmt.Sprintf("tls-r%d", round))
	if err != nil {
		return nil, err
	}
	defer b.stop()
	addrs := map[string]string{
		"PLAINTEXT": b.addr,
		"SSL":       fmt.Sprintf("127.0.0.1:%d", s.ports["SSL"]),
		"SASL_SSL":  fmt.Sprintf("127.0.0.1:%d", s.ports["SASL_SSL"]),
	}
	if err := s.prepare(ctx, b.addr, addrs); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	var runs []tlsRun
	for _, w := range listenerOrder(ws, round) {
		if ctx.Err() != nil {
			return runs, ctx.Err()
		}
		r := s.run(ctx, b, w, addrs[w.Listener], round)
		runs = append(runs, r)
		fmt.Fprintf(log, "bench: round %d/%d %-22s %-7s load %s: %s\n", round, o.Rounds, w.Name, kind, r.LoadAvg, r.brief())
	}
	return runs, nil
}

// prepareSecure creates the SCRAM user and warms the broker up: produce
// over PLAINTEXT and SSL, then connections over SSL and SASL_SSL until
// the user's credential is in place (Kafka applies it asynchronously).
func (s *secureRun) prepare(ctx context.Context, plain string, addrs map[string]string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(plain))
	if err != nil {
		return err
	}
	defer cl.Close()
	res, err := kadm.NewClient(cl).AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: tlsUser, Mechanism: kadm.ScramSha512, Iterations: 4096, Password: tlsPassword}})
	if err != nil {
		return err
	}
	if err := res.Error(); err != nil {
		return err
	}
	for _, l := range []string{"PLAINTEXT", "SSL"} {
		if s.o.Warmup <= 0 {
			break
		}
		wc := bench.DefaultConfig()
		wc.Brokers, wc.Topic, wc.Consumers, wc.Acks = []string{addrs[l]}, "warmup-"+strings.ToLower(l), 0, "1"
		wc.Duration, wc.Progress = s.o.Warmup, 0
		if l == "SSL" {
			wc.TLSCA = s.caFile
		}
		if _, err := bench.Run(ctx, wc, nil); err != nil {
			return err
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, w := range []bench.ConnectConfig{
		{Addr: addrs["SSL"], TLS: s.tc},
		{Addr: addrs["SASL_SSL"], TLS: s.tc, Mechanism: "SCRAM-SHA-512", User: tlsUser, Password: tlsPassword},
	} {
		w.Workers, w.Duration = 2, time.Second
		for {
			res, err := bench.ConnectRate(ctx, w)
			if err == nil && res.Errors == 0 {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("connections to %s %s: %v", w.Addr, w.Mechanism, err)
			}
		}
	}
	return nil
}

// run runs w against b at addr, with the broker's and this process's CPU
// over the measured span.
func (s *secureRun) run(ctx context.Context, b *brokerProc, w tlsWorkload, addr string, round int) tlsRun {
	r := tlsRun{Workload: w.Name, Broker: b.kind, Round: round, LoadAvg: loadAvg()}
	var before, selfBefore ProcStats
	mark := func() {
		before, _ = ReadProcStats(b.pid())
		selfBefore, _ = ReadProcStats(os.Getpid())
	}
	mark()
	var err error
	if w.Connect {
		cc := bench.ConnectConfig{Addr: addr, TLS: s.tc, Workers: s.o.ConnWorkers, Duration: s.o.Duration}
		if w.SASL != "" {
			cc.Mechanism, cc.User, cc.Password = w.SASL, tlsUser, tlsPassword
		}
		r.Connect, err = bench.ConnectRate(ctx, cc)
	} else {
		cfg := w.Config
		cfg.Brokers, cfg.Topic = []string{addr}, "tls-bench-"+w.Name
		if w.Listener == "SSL" {
			cfg.TLSCA = s.caFile
		}
		r.Result, err = bench.RunWith(ctx, cfg, nil, bench.Hooks{BeforeRead: mark})
	}
	if err != nil {
		r.Err = err.Error()
	}
	if after, err := ReadProcStats(b.pid()); err == nil {
		r.CPUSeconds = (after.CPU - before.CPU).Seconds()
	}
	if self, err := ReadProcStats(os.Getpid()); err == nil {
		r.ClientCPU = (self.CPU - selfBefore.CPU).Seconds()
	}
	if !w.Connect {
		// Its files removed and the rest of the page cache written back
		// before the next run: both would otherwise happen during it, on
		// that run's CPU bill.
		deleteTopic(ctx, b.addr, "tls-bench-"+w.Name)
		waitRemoved(ctx, b.dataDir, "tls-bench-"+w.Name, 30*time.Second)
		syscall.Sync()
	}
	return r
}

// waitRemoved waits until no directory under dataDir, two levels deep
// (Kafka keeps its logs in dataDir/kraft-logs), names topic's partitions,
// or until limit.
func waitRemoved(ctx context.Context, dataDir, topic string, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		left := false
		for _, pattern := range []string{topic + "-*", "*/" + topic + "-*"} {
			m, _ := filepath.Glob(filepath.Join(dataDir, pattern))
			left = left || len(m) > 0
		}
		if !left {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// listenerOrder is ws with each PLAINTEXT/SSL pair swapped in even
// rounds, so that neither listener always runs second (on a page cache
// the first has filled).
func listenerOrder(ws []tlsWorkload, round int) []tlsWorkload {
	out := append([]tlsWorkload(nil), ws...)
	if round%2 == 1 {
		return out
	}
	for i := 0; i+1 < len(out); i++ {
		base, ok := strings.CutSuffix(out[i].Name, "-plaintext")
		if ok && out[i+1].Name == base+"-ssl" {
			out[i], out[i+1] = out[i+1], out[i]
			i++
		}
	}
	return out
}

// deleteTopic drops a finished run's data (the runs write gigabytes).
func deleteTopic(ctx context.Context, addr, topic string) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return
	}
	defer cl.Close()
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, _ = kadm.NewClient(cl).DeleteTopics(dctx, topic)
}

// tlsFigure is one reported figure of a run.
type tlsFigure struct {
	label  string
	higher bool // higher is better
	get    func(r *tlsRun) (float64, bool)
}

// figures are the figures reported for w.
func (w tlsWorkload) figures() []tlsFigure {
	if w.Connect {
		return []tlsFigure{
			{"connections/s", true, func(r *tlsRun) (float64, bool) { return r.Connect.PerSec, r.Connect.Connections > 0 }},
			{"set-up p50 ms", false, func(r *tlsRun) (float64, bool) { return r.Connect.SetUp.P50, r.Connect.Connections > 0 }},
			{"set-up p99 ms", false, func(r *tlsRun) (float64, bool) { return r.Connect.SetUp.P99, r.Connect.Connections > 0 }},
			{"broker CPU ms per connection", false, func(r *tlsRun) (float64, bool) {
				return 1e3 * r.CPUSeconds / float64(r.Connect.Connections), r.Connect.Connections > 0 && r.CPUSeconds > 0
			}},
			{"load generator CPU ms per connection", false, func(r *tlsRun) (float64, bool) {
				return 1e3 * r.ClientCPU / float64(r.Connect.Connections), r.Connect.Connections > 0 && r.ClientCPU > 0
			}},
		}
	}
	read := w.Config.Mode == bench.ModeCatchUp || w.Config.Mode == bench.ModeRawFetch
	tp := func(res *bench.Result) bench.Throughput {
		if read {
			return res.Consume
		}
		return res.Produce
	}
	label := "produce MB/s"
	if read {
		label = "consume MB/s"
	}
	return []tlsFigure{
		{label, true, func(r *tlsRun) (float64, bool) { return tp(r.Result).MBPerSec, true }},
		{"broker CPU s per GB", false, func(r *tlsRun) (float64, bool) {
			gb := float64(tp(r.Result).Bytes) / 1e9
			return r.CPUSeconds / gb, gb > 0 && r.CPUSeconds > 0
		}},
		{"load generator CPU s per GB", false, func(r *tlsRun) (float64, bool) {
			gb := float64(tp(r.Result).Bytes) / 1e9
			return r.ClientCPU / gb, gb > 0 && r.ClientCPU > 0
		}},
	}
}

// values are f over the successful runs of (workload, broker).
func (rep *tlsReport) values(w tlsWorkload, b BrokerKind, f tlsFigure) []float64 {
	var vs []float64
	for i := range rep.Runs {
		r := &rep.Runs[i]
		if r.Workload != w.Name || r.Broker != b || r.Err != "" || (r.Result == nil && r.Connect == nil) {
			continue
		}
		if v, ok := f.get(r); ok {
			vs = append(vs, v)
		}
	}
	sort.Float64s(vs)
	return vs
}

func (r tlsRun) brief() string {
	switch {
	case r.Err != "":
		return "FAILED: " + r.Err
	case r.Connect != nil:
		return fmt.Sprintf("%.0f conn/s, p50 %.2f ms, broker cpu %.2f s (%s)", r.Connect.PerSec, r.Connect.SetUp.P50, r.CPUSeconds, r.Connect.TLS)
	case r.Result != nil:
		tp := r.Result.Produce
		if r.Result.Config.Mode == bench.ModeCatchUp || r.Result.Config.Mode == bench.ModeRawFetch {
			tp = r.Result.Consume
		}
		return fmt.Sprintf("%.0f MB/s, broker cpu %.2f s, client cpu %.2f s", tp.MBPerSec, r.CPUSeconds, r.ClientCPU)
	}
	return "no result"
}

// writeMarkdown prints the tables: per workload, each figure's median and
// range per broker and Sluice ÷ Kafka; then what TLS costs each broker.
func (rep *tlsReport) writeMarkdown(w io.Writer) {
	o := rep.Options
	fmt.Fprintf(w, "`%s` — %s, %d round(s), medians <sub>min–max</sub>; load average at the runs' starts %s.\n\n",
		strings.TrimSpace(o.Command), rep.Started.UTC().Format("2006-01-02 15:04 MST"), o.Rounds, rep.loadRange())
	if tlsInfo := rep.tlsVersions(); tlsInfo != "" {
		fmt.Fprintf(w, "Negotiated: %s; broker key %s.\n\n", tlsInfo, o.KeyType)
	}
	for _, wl := range rep.Workloads {
		fmt.Fprintf(w, "**%s** (`%s`)\n\n", wl.Title, wl.Name)
		header := []string{"figure"}
		for _, b := range o.Brokers {
			header = append(header, b.Title())
		}
		ratio := containsKind(o.Brokers, Kafka) && containsKind(o.Brokers, Sluice)
		if ratio {
			header = append(header, "Sluice ÷ Kafka")
		}
		var rows [][]string
		for _, f := range wl.figures() {
			row := []string{f.label}
			for _, b := range o.Brokers {
				row = append(row, tlsMedian(rep.values(wl, b, f)))
			}
			if ratio {
				row = append(row, tlsRatio(median(rep.values(wl, Sluice, f)), median(rep.values(wl, Kafka, f))))
			}
			rows = append(rows, row)
		}
		var b strings.Builder
		writeTable(&b, header, rows)
		fmt.Fprint(w, b.String())
	}
	rep.writeTLSCost(w)
}

// writeTLSCost prints, per broker, TLS ÷ plaintext for each load workload.
func (rep *tlsReport) writeTLSCost(w io.Writer) {
	header := []string{"workload", "figure"}
	for _, b := range rep.Options.Brokers {
		header = append(header, b.Title()+" TLS ÷ plaintext")
	}
	var rows [][]string
	for _, plain := range rep.Workloads {
		base, ok := strings.CutSuffix(plain.Name, "-plaintext")
		if !ok {
			continue
		}
		for _, secure := range rep.Workloads {
			if secure.Name != base+"-ssl" {
				continue
			}
			for i, f := range plain.figures()[:2] {
				row := []string{base, f.label}
				for _, b := range rep.Options.Brokers {
					row = append(row, tlsRatio(median(rep.values(secure, b, secure.figures()[i])), median(rep.values(plain, b, f))))
				}
				rows = append(rows, row)
			}
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(w, "**What TLS costs each broker** (medians over SSL ÷ medians over PLAINTEXT, same broker, same run)")
	fmt.Fprintln(w)
	var b strings.Builder
	writeTable(&b, header, rows)
	fmt.Fprint(w, b.String())
}

func tlsMedian(vs []float64) string {
	if len(vs) == 0 {
		return "–"
	}
	if len(vs) == 1 {
		return fmtValue(vs[0])
	}
	return fmt.Sprintf("%s <sub>%s–%s</sub>", fmtValue(median(vs)), fmtValue(vs[0]), fmtValue(vs[len(vs)-1]))
}

func tlsRatio(num, den float64) string {
	if num == 0 || den == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", num/den)
}

// loadRange is the lowest and highest 1-minute load average seen at the
// runs' starts.
func (rep *tlsReport) loadRange() string {
	var ls []float64
	for _, r := range rep.Runs {
		var l float64
		if _, err := fmt.Sscan(r.LoadAvg, &l); err == nil {
			ls = append(ls, l)
		}
	}
	if len(ls) == 0 {
		return "unknown"
	}
	sort.Float64s(ls)
	return fmt.Sprintf("%.1f–%.1f (median %.1f, 1-minute)", ls[0], ls[len(ls)-1], median(ls))
}

// tlsVersions names the negotiated TLS parameters per broker.
func (rep *tlsReport) tlsVersions() string {
	seen := map[BrokerKind]string{}
	for _, r := range rep.Runs {
		if r.Connect != nil && r.Connect.TLS != "" {
			seen[r.Broker] = r.Connect.TLS
		}
	}
	var parts []string
	for _, b := range rep.Options.Brokers {
		if s, ok := seen[b]; ok {
			parts = append(parts, b.Title()+" "+s)
		}
	}
	return strings.Join(parts, ", ")
}
