// Command driver runs Sluice's compatibility matrix: it starts a freshly
// built `sluice serve` on a free 127.0.0.1 port with a temporary data
// directory, runs every client's scenario against it (each with its own
// timeout), stops the broker cleanly, runs the on-disk checks against its
// segment files, writes the matrix (to bin/COMPATIBILITY.md unless -out
// says otherwise: `make interop-doc` passes -out COMPATIBILITY.md, so the
// tracked file changes only when asked) and exits non-zero when any
// capability failed.
//
// A scenario is any program that prints result lines on stdout (see
// results.go); everything else it prints is kept in its log file.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

func main() {
	log.SetFlags(0)
	log.SetPrefix("interop: ")
	opts := parseFlags()
	ok, err := run(opts)
	if err != nil {
		log.Fatal(err)
	}
	if !ok {
		os.Exit(1)
	}
}

type options struct {
	root     string // repository root
	sluice   string // broker binary; built from the repo when empty
	only     map[string]bool
	out      string // where the matrix goes, relative to root; empty: nowhere
	workDir  string // logs and data; a temp dir when empty
	logLevel string
	budget   time.Duration // the whole matrix; scenarios get what is left
	cluster  bool          // also run the three-broker matrix
}

func parseFlags() options {
	var o options
	var only string
	flag.StringVar(&o.root, "root", ".", "repository root")
	flag.StringVar(&o.sluice, "sluice", "", "sluice binary (default: go build ./cmd/sluice)")
	flag.StringVar(&only, "only", "", "comma-separated scenario ids to run (default: all; \"cluster\": every cluster-* one)")
	flag.StringVar(&o.out, "out", filepath.Join("bin", "COMPATIBILITY.md"), "matrix to write, relative to -root (empty: none; COMPATIBILITY.md updates the tracked one)")
	flag.StringVar(&o.workDir, "work", "", "directory for logs and the broker's data (default: a new temp dir)")
	flag.StringVar(&o.logLevel, "broker-log-level", "info", "the broker's --log-level")
	flag.DurationVar(&o.budget, "budget", 15*time.Minute, "time for the whole matrix; a scenario gets at most what is left")
	flag.BoolVar(&o.cluster, "cluster", true, "also run the matrix against a three-broker cluster")
	flag.Parse()
	if only != "" {
		o.only = map[string]bool{}
		for _, id := range strings.Split(only, ",") {
			o.only[strings.TrimSpace(id)] = true
		}
	}
	return o
}

func run(o options) (passed bool, err error) {
	root, err := filepath.Abs(o.root)
	if err != nil {
		return false, err
	}
	work := o.workDir
	if work == "" {
		if work, err = os.MkdirTemp("", "sluice-interop-"); err != nil {
			return false, err
		}
		// Logs and data are worth keeping only when something failed.
		defer func() {
			if passed {
				os.RemoveAll(work)
			}
		}()
	}
	if err := os.MkdirAll(work, 0o755); err != nil {
		return false, err
	}
	log.Printf("work dir %s", work)
	bin := o.sluice
	if bin == "" {
		bin = filepath.Join(work, "sluice")
		if err := buildBroker(root, bin); err != nil {
			return false, err
		}
	}
	deadline := time.Now().Add(o.budget)
	var results []scenarioResult
	if single := selectScenarios(matrix(), o.only); len(single) > 0 {
		br, err := startBroker(bin, work, o.logLevel)
		if err != nil {
			return false, err
		}
		defer br.kill()
		log.Printf("broker %s up (pid %d, data %s, log %s)", br.addr, br.cmd.Process.Pid, br.dataDir, br.logPath)
		env := scenarioEnv{root: root, work: work, bootstrap: br.addr, dataDir: br.dataDir, deadline: deadline, extraEnv: br.secureEnv}
		results = runMatrix(single, env, br)
	}
	if clustered := selectScenarios(clusterMatrix(), o.only); len(clustered) > 0 && o.cluster {
		c, err := startCluster(bin, work, o.logLevel, 3)
		if err != nil {
			return false, fmt.Errorf("three-broker cluster: %w", err)
		}
		defer c.kill()
		log.Printf("cluster %s up: %s (data %s)", c.id, c.bootstrap(), c.dataDirs())
		env := scenarioEnv{root: root, work: work, bootstrap: c.bootstrap(), dataDir: c.dataDirs(),
			clusterID: c.id, deadline: deadline}
		results = append(results, runClusterMatrix(clustered, env, c)...)
	}
	ok := publish(results)
	if o.out != "" && o.only == nil {
		path := filepath.Join(root, o.out)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return false, err
		}
		if err := os.WriteFile(path, []byte(renderMarkdown(results, time.Now())), 0o644); err != nil {
			return false, err
		}
		log.Printf("wrote %s", path)
	}
	return ok, nil
}

// runMatrix runs the live scenarios (and the live parts of the others),
// stops the broker, then runs the scenarios that read what it left on disk.
// The broker's own clean shutdown is one more result.
func runMatrix(selected []scenario, env scenarioEnv, br *broker) (results []scenarioResult) {
	nodes := []*broker{br}
	lives := map[string]*runOutput{}
	for _, sc := range selected {
		if !sc.afterStop {
			results = append(results, runScenario(sc, env, nodes, nil, nil))
		} else if sc.liveArgv != nil {
			log.Printf("running %s live part", sc.id)
			out := runCommand(sc, sc.liveArgv, env, nodes, filepath.Join(env.work, sc.id+".log"), nil)
			lives[sc.id] = &out
		}
	}
	results = append(results, shutdownResult("broker", "sluice serve", tableTools, br.stop(30*time.Second), br.logPath))
	for _, sc := range selected {
		if sc.afterStop {
			results = append(results, runScenario(sc, env, nodes, lives[sc.id], nil))
		}
	}
	return results
}

// runClusterMatrix runs the cluster scenarios one after another, each
// starting from a whole cluster and able to have one node stopped and
// started again; then stops every node and runs the on-disk checks.
func runClusterMatrix(selected []scenario, env scenarioEnv, c *cluster) (results []scenarioResult) {
	for _, sc := range selected {
		if sc.afterStop {
			continue
		}
		r := &restarter{c: c}
		results = append(results, runScenario(sc, env, c.nodes, nil, r))
	}
	results = append(results, shutdownResult("cluster", "sluice serve ×3 (cluster)", tableClusterTools, c.stop(), c.nodes[0].logPath))
	for _, sc := range selected {
		if sc.afterStop {
			results = append(results, runScenario(sc, env, c.nodes, nil, nil))
		}
	}
	return results
}

// shutdownResult records whether the broker (every node) exited 0 on
// SIGTERM, as the dump-log checks rely on a clean shutdown.
func shutdownResult(id, client, table string, stopErr error, logPath string) scenarioResult {
	const capID = "SIGTERM, exit 0"
	r := scenarioResult{scenario: scenario{id: id, client: client, version: "this commit",
		table: table, caps: []string{capID}}, logPath: logPath}
	if stopErr != nil {
		log.Printf("%s did not stop cleanly: %v", id, stopErr)
		r.lines = []line{{"fail", capID, stopErr.Error()}}
	} else {
		r.lines = []line{{"pass", capID, "stopped accepting, flushed and exited 0"}}
	}
	r.finish()
	return r
}

// publish prints the tail of every failing scenario's log, then each
// failure and the totals as the last line; it returns whether all passed.
func publish(results []scenarioResult) bool {
	for _, r := range results {
		if r.failed() > 0 && r.logPath != "" {
			fmt.Printf("--- last lines of %s ---\n%s\n---\n", r.logPath, tail(r.logPath, 40))
		}
	}
	return report(os.Stdout, results)
}

func selectScenarios(all []scenario, only map[string]bool) []scenario {
	if only == nil {
		return all
	}
	var out []scenario
	for _, sc := range all {
		if only[sc.id] || (only["cluster"] && strings.HasPrefix(sc.id, "cluster-")) {
			out = append(out, sc)
		}
	}
	return out
}

func buildBroker(root, bin string) error {
	log.Printf("building %s", bin)
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/sluice")
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("build broker: %w", err)
	}
	return nil
}

// broker is one sluice serve process under test: the single node, or a
// node of the cluster (id, controllerAddr and configPath set).
type broker struct {
	id                     int32
	addr, dataDir, logPath string
	controllerAddr         string
	configPath             string
	cmd                    *exec.Cmd // nil while stopped
	exited                 chan error
	logFile                *os.File
	secureEnv              []string // the single node's secure listeners (security.go)
}

// brokerProperties speeds up group formation (the scenarios form dozens of
// groups) and keeps everything else at Kafka's defaults, except for an
// authorizer that changes nothing for the other scenarios (the plaintext
// clients are User:ANONYMOUS, a super user; the secured ones may use
// whatever has no ACL): without one the ACL APIs answer SECURITY_DISABLED,
// as Kafka's do, and kafka-acls has nothing to talk to.
const brokerProperties = `group.initial.rebalance.delay.ms=100
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:ANONYMOUS
allow.everyone.if.no.acl.found=true
`

func startBroker(bin, work, logLevel string) (*broker, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	b := &broker{
		addr:    fmt.Sprintf("127.0.0.1:%d", port),
		dataDir: filepath.Join(work, "data"),
		logPath: filepath.Join(work, "broker.log"),
	}
	secure, env, err := secureListeners(work, b.addr)
	if err != nil {
		return nil, err
	}
	b.secureEnv = env
	props := filepath.Join(work, "server.properties")
	if err := os.WriteFile(props, []byte(brokerProperties+secure), 0o644); err != nil {
		return nil, err
	}
	logFile, err := os.Create(b.logPath)
	if err != nil {
		return nil, err
	}
	return b, b.start(logFile, exec.Command(bin, "serve", "--listen", b.addr, "--data-dir", b.dataDir,
		"--config", props, "--log-level", logLevel))
}

// start runs cmd as the broker, logging to logFile, and waits until it
// listens on b.addr.
func (b *broker) start(logFile *os.File, cmd *exec.Cmd) error {
	b.logFile, b.cmd, b.exited = logFile, cmd, make(chan error, 1)
	b.cmd.Stdout, b.cmd.Stderr = b.logFile, b.logFile
	if err := b.cmd.Start(); err != nil {
		b.cmd = nil
		logFile.Close()
		return fmt.Errorf("start broker: %w", err)
	}
	go func() { b.exited <- cmd.Wait() }()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if !b.alive() {
			err := <-b.exited
			b.cmd = nil
			b.logFile.Close()
			return fmt.Errorf("broker exited at start (%v); log:\n%s", err, tail(b.logPath, 30))
		}
		if c, err := net.DialTimeout("tcp", b.addr, time.Second); err == nil {
			c.Close()
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.kill()
	return fmt.Errorf("broker did not listen on %s within 30s", b.addr)
}

// alive reports whether the broker process is still running.
func (b *broker) alive() bool {
	select {
	case err := <-b.exited:
		b.exited <- err
		return false
	default:
		return true
	}
}

// stop sends SIGTERM and waits for a clean exit 0.
func (b *broker) stop(timeout time.Duration) error {
	if b.cmd == nil {
		return nil
	}
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-b.exited:
		b.cmd = nil
		b.logFile.Close()
		return err
	case <-time.After(timeout):
		b.kill()
		return fmt.Errorf("no exit %v after SIGTERM", timeout)
	}
}

func (b *broker) kill() {
	if b.cmd == nil {
		return
	}
	_ = b.cmd.Process.Kill()
	<-b.exited
	b.cmd = nil
	b.logFile.Close()
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// scenarioEnv is what every scenario is told through its environment.
type scenarioEnv struct {
	root, work, bootstrap string
	dataDir               string    // comma-separated for a cluster: one per node
	clusterID             string    // set for the cluster
	deadline              time.Time // of the whole matrix
	extraEnv              []string  // more variables for the scenarios
}

// runScenario runs a scenario's command (and, for an afterStop scenario,
// the live part recorded earlier) and folds its result lines. ctl, for a
// cluster scenario, serves its broker stop and start requests; the cluster
// is made whole again afterwards.
func runScenario(sc scenario, env scenarioEnv, nodes []*broker, live *runOutput, ctl *restarter) scenarioResult {
	res := scenarioResult{scenario: sc, logPath: filepath.Join(env.work, sc.id+".log")}
	log.Printf("running %s (timeout %v, log %s)", sc.id, sc.timeout, res.logPath)
	out := runCommand(sc, sc.argv, env, nodes, res.logPath, ctl)
	if live != nil {
		out.lines = append(live.lines, out.lines...)
		if out.err == nil {
			out.err = live.err
		}
		out.brokerLog = append(live.brokerLog, out.brokerLog...)
		out.brokerDied = out.brokerDied || live.brokerDied
	}
	if ctl != nil {
		if err := ctl.heal(); err != nil {
			ctl.lines = append(ctl.lines, line{"fail", "restart", "cluster not whole after the scenario: " + err.Error()})
		}
		out.lines = append(out.lines, ctl.lines...)
	}
	res.lines, res.runErr, res.brokerDied, res.brokerLog, res.elapsed = out.lines, out.err, out.brokerDied, out.brokerLog, out.elapsed
	res.finish()
	log.Printf("%s: %s in %.1fs", sc.id, res.summary(), res.elapsed.Seconds())
	return res
}

// runOutput is what one command of a scenario left.
type runOutput struct {
	lines      []line
	err        error
	brokerDied bool
	brokerLog  []string
	elapsed    time.Duration
}

func runCommand(sc scenario, argv []string, env scenarioEnv, nodes []*broker, logPath string, ctl *restarter) runOutput {
	var out runOutput
	start := time.Now()
	logMarks := make([]int64, len(nodes))
	for i, b := range nodes {
		logMarks[i] = fileSize(b.logPath)
	}
	timeout := min(sc.timeout, time.Until(env.deadline))
	if timeout <= 0 {
		out.err = errors.New("not started: the matrix's time budget was spent")
		return out
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = filepath.Join(env.root, sc.dir)
	cmd.Env = append(os.Environ(),
		"SLUICE_BOOTSTRAP="+env.bootstrap,
		"SLUICE_DATA_DIR="+env.dataDir,
		"SLUICE_ROOT="+env.root,
		"INTEROP_WORK="+env.work,
	)
	cmd.Env = append(cmd.Env, env.extraEnv...)
	if env.clusterID != "" {
		cmd.Env = append(cmd.Env, "SLUICE_CLUSTER_ID="+env.clusterID, "SLUICE_DATA_DIRS="+env.dataDir)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Kill the whole process group on timeout: JVMs and shells start children.
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		out.err = err
		return out
	}
	defer logFile.Close()
	fmt.Fprintf(logFile, "### %s\n", strings.Join(argv, " "))
	var requests chan string
	if ctl != nil {
		stdin, err := cmd.StdinPipe()
		if err != nil {
			out.err = err
			return out
		}
		requests = make(chan string, 4)
		served := make(chan struct{})
		defer func() { <-served }()
		go func() {
			defer close(served)
			for req := range requests {
				reply := ctl.control(req)
				fmt.Fprintf(logFile, "### driver: %s -> %s\n", req, reply)
				io.WriteString(stdin, reply+"\n")
			}
		}()
	}
	pr, pw := io.Pipe()
	cmd.Stdout = io.MultiWriter(logFile, pw)
	cmd.Stderr = logFile
	parsed := make(chan []line, 1)
	go func() {
		parsed <- parseLines(pr, requests)
		if requests != nil {
			close(requests)
		}
	}()
	runErr := cmd.Run()
	pw.Close()
	out.lines = <-parsed
	out.elapsed = time.Since(start)
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		out.err = fmt.Errorf("timed out after %v", timeout.Round(time.Second))
	case runErr != nil:
		out.err = runErr
	}
	for i, b := range nodes {
		if b.cmd != nil && !b.alive() {
			out.brokerDied = true
		}
		out.brokerLog = append(out.brokerLog, brokerComplaints(b.logPath, logMarks[i], 12)...)
	}
	return out
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// brokerComplaints returns the last n warning and error lines the broker
// logged after byte offset from.
func brokerComplaints(path string, from int64, n int) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return nil
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return nil
	}
	var out []string
	for _, l := range strings.Split(string(data), "\n") {
		if strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") || strings.Contains(l, "panic") {
			out = append(out, l)
		}
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return out
}
