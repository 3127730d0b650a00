// Command chaos is Sluice's fault-injection harness (issue 12): it starts a
// cluster of N `sluice serve` processes, each in its own network
// namespace joined by a bridge, runs idempotent acks=all producers and a
// consumer group against it, injects faults drawn from a seed — SIGKILL and
// restart of leaders, the controller, followers, two nodes at once;
// SIGSTOP past the session timeout; rolling restarts; network partitions
// (isolation, minority split, one-way); a full disk; a new broker — heals,
// waits for a full ISR, and checks what the clients saw with tools/chaos/check.
// A second phase measures what acks=1 loses under leader kills.
//
// It needs root (namespaces, tmpfs) and stops by itself: --duration bounds
// the fault phase, --max-faults the count. It removes its namespaces,
// bridge and processes on exit and, at start, what a killed run left.
//
//	go run ./tools/chaos --seed 1 --duration 3m
//
// Exit status: 0 clean, 1 anomalies or a fault that did not heal, 2 the
// harness itself failed.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-broker/sluice/tools/chaos/check"
)

type options struct {
	nodes, partitions      int
	producers, consumers   int
	copiers                int
	rate                   int
	duration               time.Duration
	maxFaults              int
	seed                   uint64
	faults                 string
	fixed                  bool
	bin, workBase, netMode string
	tmpfsMB                int
	acks1Kills             int
	keepData               bool
	security               string
}

func parseFlags() options {
	var o options
	flag.IntVar(&o.nodes, "nodes", 3, "voters (broker+controller), 3 to 5")
	flag.IntVar(&o.partitions, "partitions", 3, "partitions of the workload topic (RF 3)")
	flag.IntVar(&o.producers, "producers", 2, "idempotent acks=all producers")
	flag.IntVar(&o.consumers, "consumers", 2, "consumers in one group")
	flag.IntVar(&o.copiers, "copiers", 2, "transactional copiers of the topic (read-process-write in one group)")
	flag.IntVar(&o.rate, "rate", 200, "records per second per producer")
	flag.DurationVar(&o.duration, "duration", 3*time.Minute, "how long faults are injected")
	flag.IntVar(&o.maxFaults, "max-faults", 0, "stop after this many faults (0: duration only)")
	flag.Uint64Var(&o.seed, "seed", 0, "random seed (0: from the clock, printed)")
	flag.StringVar(&o.faults, "faults", strings.Join(allFaults, ","), "fault kinds to draw from")
	flag.BoolVar(&o.fixed, "fixed", false, "inject the kinds in the order given instead of at random")
	flag.StringVar(&o.bin, "bin", "", "sluice binary (default: built into the work dir)")
	flag.StringVar(&o.workBase, "work", "/tmp/sluice-chaos", "where runs keep configs, logs and data")
	flag.StringVar(&o.netMode, "net", "std", "sluice.net of the brokers")
	flag.IntVar(&o.tmpfsMB, "tmpfs-mb", 256, "size of the last voter's tmpfs data dir (disk-full); 0: no tmpfs")
	flag.IntVar(&o.acks1Kills, "acks1-kills", 3, "leader kills of the acks=1 measurement (0: skip it)")
	flag.BoolVar(&o.keepData, "keep-data", false, "keep the data dirs of a clean run")
	flag.StringVar(&o.security, "security", secPlaintext, "listeners of every node and the harness's clients: plaintext, or sasl_ssl (SCRAM-SHA-512 over TLS on the client and inter-broker listener, PLAIN over TLS on the controller one, a run-time CA, connections.max.reauth.ms=10000)")
	flag.Parse()
	if o.seed == 0 {
		o.seed = uint64(time.Now().UnixNano())
	}
	return o
}

// lockPath serializes runs on a machine: every run names its namespaces,
// veths and bridge alike and starts by removing what a previous run left,
// so a second run at once would kill the first one's brokers.
const lockPath = "/run/sluice-chaos.lock"

// exclusive takes the machine-wide run lock, waiting for a run that holds
// it; the lock is held until the returned file is closed or the process
// exits.
func exclusive(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		fmt.Fprintf(os.Stderr, "chaos: another run holds %s; waiting for it\n", path)
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
	}
	return f, nil
}

func main() {
	o := parseFlags()
	if o.nodes < 3 || o.nodes > 5 {
		fmt.Fprintln(os.Stderr, "chaos: --nodes must be 3 to 5")
		os.Exit(2)
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "chaos: needs root (network namespaces, tmpfs)")
		os.Exit(2)
	}
	lock, err := exclusive(lockPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(2)
	}
	defer lock.Close()
	cleanupNetwork(o.workBase)
	work := filepath.Join(o.workBase, fmt.Sprintf("%s-seed%d", time.Now().UTC().Format("20060102T150405"), o.seed))
	if err := os.MkdirAll(work, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(2)
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	r := &runner{o: o, work: work}
	go func() {
		<-sigs
		fmt.Fprintln(os.Stderr, "chaos: interrupted; cleaning up")
		r.cleanup(true)
		os.Exit(2)
	}()
	// A watchdog for a harness that hangs anyway: every wait has its own
	// bound, this one bounds the whole run.
	time.AfterFunc(o.duration+20*time.Minute, func() {
		fmt.Fprintln(os.Stderr, "chaos: watchdog: the run overran its bound; cleaning up")
		r.cleanup(true)
		os.Exit(2)
	})
	code := r.run()
	r.cleanup(code != 0)
	os.Exit(code)
}

// runner is one run.
type runner struct {
	o      options
	work   string
	c      *cluster
	out    io.Writer
	report *os.File
}

func (r *runner) logf(format string, args ...any) {
	fmt.Fprintf(r.out, "%s "+format+"\n", append([]any{time.Now().UTC().Format("15:04:05.000")}, args...)...)
}

// cleanup kills the nodes and removes the network; data dirs go unless
// the run failed or --keep-data.
func (r *runner) cleanup(failed bool) {
	if r.c != nil {
		r.c.killAll()
		if failed {
			r.c.saveTmpfs()
		}
		if !failed && !r.o.keepData {
			r.c.removeData()
		}
	}
	cleanupNetwork(r.o.workBase)
}

func (r *runner) run() int {
	var err error
	r.report, err = os.Create(filepath.Join(r.work, "report.md"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		return 2
	}
	defer r.report.Close()
	r.out = io.MultiWriter(os.Stdout, r.report)
	r.logf("chaos: seed %d, %d nodes, %d partitions, faults for %v, security %s, work dir %s", r.o.seed, r.o.nodes, r.o.partitions, r.o.duration, r.o.security, r.work)
	bin := r.o.bin
	if bin == "" {
		bin = filepath.Join(r.work, "sluice")
		if out, err := exec.Command("go", "build", "-o", bin, "github.com/sluice-broker/sluice/cmd/sluice").CombinedOutput(); err != nil {
			r.logf("go build: %v\n%s", err, out)
			return 2
		}
	}
	sec, err := newSecurity(r.o.security, filepath.Join(r.work, "pki"))
	if err != nil {
		r.logf("security: %v", err)
		return 2
	}
	if r.c, err = startCluster(bin, r.work, r.o.nodes, r.o.netMode, r.o.tmpfsMB, sec); err != nil {
		r.logf("starting the cluster: %v", err)
		return 2
	}
	res, err := r.mainPhase()
	if err != nil {
		r.logf("harness: %v", err)
		return 2
	}
	var a1 *acks1Result
	if r.o.acks1Kills > 0 {
		if a1, err = r.acks1Phase(); err != nil {
			r.logf("acks=1 phase: %v", err)
		}
	}
	r.printReport(res, a1)
	if res.anomalies.Total() > 0 || res.unhealed > 0 || res.flaps() > 0 {
		r.logf("FAILED: seed %d; schedule and broker logs above and in %s", r.o.seed, r.work)
		return 1
	}
	return 0
}

// flaps counts the hiccups that moved leadership.
func (res *result) flaps() int {
	n := 0
	for _, f := range res.faults {
		if f.flapped {
			n++
		}
	}
	return n
}

// result is the main phase's outcome.
type result struct {
	faults         []*fault
	sent, acked    int
	failed, polled int
	anomalies      check.Anomalies
	unhealed       int
	copiers        string // the copiers' summary ("" without them)
	logins         string // the login probe's summary ("" for plaintext)
}

const topic = "chaos"

// stableFor is how long a full ISR must hold before the check:
// replica.lag.time.max.ms and a margin.
const stableFor = 7 * time.Second

// mainPhase runs the workload under faults, heals and checks.
func (r *runner) mainPhase() (*result, error) {
	c := r.c
	if err := createTopic(c.clientOpts(), topic, r.o.partitions); err != nil {
		return nil, err
	}
	in := &injector{c: c, rng: rand.New(rand.NewPCG(r.o.seed, 12)), topic: topic, parts: r.o.partitions, group: topic + "-group",
		maxNode: r.o.nodes + 1, logf: r.logf}
	if err := c.waitFor(60*time.Second, "a full ISR", func() bool { return c.healed([]string{topic}, in.counts()) }); err != nil {
		return nil, err
	}
	var cp *copiers
	if r.o.copiers > 0 {
		in.copyTopic = topic + "-copy"
		if err := createTopic(c.clientOpts(), in.copyTopic, r.o.partitions); err != nil {
			return nil, err
		}
	}
	h := check.NewHistory()
	w, err := startWorkload(c.clientOpts(), h, topic, r.o.partitions, r.o.producers, r.o.consumers, r.o.rate, true)
	if err != nil {
		return nil, err
	}
	if r.o.copiers > 0 {
		clientLog, err := os.Create(filepath.Join(r.work, "copiers-client.log"))
		if err != nil {
			w.stop(0)
			return nil, err
		}
		defer clientLog.Close()
		if cp, err = startCopiers(c.seeds(), c.sec.opts(), topic, in.copyTopic, r.o.copiers, r.logf, clientLog); err != nil {
			w.stop(0)
			return nil, err
		}
	}
	var probe *authProbe
	if c.sec.secured() {
		probe = startAuthProbe(c)
	}
	time.Sleep(3 * time.Second)
	res := &result{}
	kinds := strings.Split(r.o.faults, ",")
	end := time.Now().Add(r.o.duration)
	for i := 0; time.Now().Before(end) && (r.o.maxFaults == 0 || i < r.o.maxFaults); i++ {
		f := &fault{kind: in.next(kinds, r.o.fixed, i), partition: -1}
		r.runFault(in, h, f)
		res.faults = append(res.faults, f)
		if f.isrRecovery == 0 {
			res.unhealed++
		}
		time.Sleep(time.Duration(1000+in.rng.IntN(2000)) * time.Millisecond)
	}
	r.logf("faults done; waiting for a full ISR that holds for %v", stableFor)
	if err := c.waitStable(in.topics(), in.counts(), stableFor, 3*time.Minute); err != nil {
		r.logf("NOT HEALED at the end: %v", err)
		res.unhealed++
	}
	if probe != nil {
		probe.stop()
		res.logins = probe.summary()
	}
	if err := w.stop(60 * time.Second); err != nil {
		r.logf("workload stop: %v (unanswered values stay indeterminate)", err)
	}
	res.sent, res.acked, res.failed = h.Counts()
	res.polled = h.PollCount()
	res.anomalies, err = r.checkTopic(h, topic, r.o.partitions, topic+"-group")
	if err == nil && cp != nil {
		cp.stop()
		err = r.checkCopy(cp, res.anomalies)
		res.copiers = cp.summary()
	}
	if err == nil && res.anomalies.Total() > 0 {
		r.dumpHistory(h, "history.txt")
	}
	return res, err
}

// checkCopy holds the copiers' output to exactly once, adding what it
// finds to an.
func (r *runner) checkCopy(cp *copiers, an check.Anomalies) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	got, err := cp.check(ctx, r.c.seeds(), r.c.sec.opts(), r.o.partitions)
	if err != nil {
		return err
	}
	for k, s := range got {
		an.Add(k, s...)
	}
	return nil
}

// runFault injects f, holds, heals and measures.
func (r *runner) runFault(in *injector, h *check.History, f *fault) {
	c := r.c
	f.start = time.Now()
	heal, hold, err := in.inject(f)
	r.logf("fault %-15s %s", f.kind, f.detail)
	if err != nil {
		f.err = err.Error()
		r.logf("  %s: %v", f.kind, err)
	}
	time.Sleep(hold)
	f.healStart = time.Now()
	if heal != nil {
		if err := heal(); err != nil {
			f.err = strings.TrimSpace(f.err + " heal: " + err.Error())
		}
	}
	for _, nd := range c.nodes { // a node that exited on its own
		if !nd.running() && !nd.paused() {
			f.crashed = append(f.crashed, nd.id)
			r.logf("  node %d exited on its own; log %s:\n%s", nd.id, nd.logPath, nd.tail(2000))
			nd.start(c.bin)
		}
	}
	if err := c.waitFor(120*time.Second, "a full ISR", func() bool { return c.healed(in.topics(), in.counts()) }); err != nil {
		f.err = strings.TrimSpace(f.err + " " + err.Error())
		r.logf("  NOT HEALED: %v", err)
	} else {
		f.isrRecovery = time.Since(f.healStart)
	}
	// Produce recovery: the first value sent after the fault began and
	// acknowledged; wait a little for it if the heal was quick.
	c.waitFor(10*time.Second, "an acknowledgement", func() bool { _, ok := h.FirstAck(f.partition, f.start); return ok })
	if at, ok := h.FirstAck(f.partition, f.start); ok && f.kind != "rolling-restart" {
		f.produceRecovery = at.Sub(f.start)
	}
	r.logf("  produce ok after %v, full ISR %v after the heal", f.produceRecovery.Round(time.Millisecond), f.isrRecovery.Round(time.Millisecond))
}

// checkTopic reads topic back, fetches the group's committed offsets,
// runs the checker and compares the replicas below the HW.
func (r *runner) checkTopic(h *check.History, topic string, parts int, group string) (check.Anomalies, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	logs, err := check.ReadLogs(ctx, r.c.seeds(), topic, parts, r.c.sec.opts()...)
	if err != nil {
		return nil, err
	}
	var committed map[int32]int64
	if group != "" {
		if committed, err = committedOffsets(ctx, r.c.seeds(), r.c.sec.opts(), group, topic); err != nil {
			return nil, err
		}
	}
	an := h.Check(logs, committed)
	for p := range int32(parts) {
		an.Add(check.Diverged, check.Replicas(p, logs[p].HW, r.c.partitionDirs(topic, p, r.c.isrOf(topic, p)))...)
	}
	return an, nil
}

// dumpHistory writes what the clients saw next to the broker logs.
func (r *runner) dumpHistory(h *check.History, name string) {
	f, err := os.Create(filepath.Join(r.work, name))
	if err != nil {
		r.logf("history: %v", err)
		return
	}
	defer f.Close()
	if err := h.Dump(f); err != nil {
		r.logf("history: %v", err)
	}
	r.logf("client history: %s", f.Name())
}

// createTopic creates name with RF 3 through a client of opts.
func createTopic(opts []kgo.Opt, name string, parts int) error {
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, int32(parts), 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}, name)
	if err == nil {
		err = resp.Err
	}
	return err
}
