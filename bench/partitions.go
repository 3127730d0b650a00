package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// PartitionScaleConfig is one run of the partition-scale workload (issue
// 17): N partitions over M topics on one broker, one record each.
type PartitionScaleConfig struct {
	Partitions, Topics int
	// Bootstrap is the broker's address. With Command set, it is where
	// the started broker listens.
	Bootstrap string
	// Command, if set, returns the command that runs the broker on its
	// data directory; it is called for the first start and again for
	// the cold start. The run stops the broker with SIGTERM and waits
	// for it (so the exit time is not a reaped zombie's). Without it the
	// broker is one already running: shutdown and cold start are left
	// out.
	Command func() *exec.Cmd
	// Pid is the running broker's pid (no Command) for its resident
	// memory and CPU; 0 leaves those out.
	Pid int
	// Idle is how long idle CPU is measured; MetadataSamples how many
	// full Metadata requests the median is taken over.
	Idle            time.Duration
	MetadataSamples int
	// Timeout bounds each step (creation, writing, each start).
	Timeout time.Duration
	// Log receives progress lines; nil discards them.
	Log io.Writer
}

// PartitionScaleResult is what the run measured; durations are zero and
// sizes -1 where a figure was left out.
type PartitionScaleResult struct {
	Partitions, Topics int
	StartToServing     time.Duration // fresh data directory: process start to a Metadata answer
	Create             time.Duration // the M CreateTopics requests, one after another
	Write              time.Duration // one record to every partition, acks=all
	RSSBytes           int64         // resident memory after creating and writing
	OpenFDs, Mappings  int           // the broker's descriptors and memory mappings then
	IdleCPU            float64       // cores used (user+system) while idle, after writing
	MetadataMedian     time.Duration // full Metadata (all topics), median of MetadataSamples
	MetadataMin        time.Duration
	MetadataMax        time.Duration
	MetadataPartitions int           // partitions listed in a full Metadata response
	Shutdown           time.Duration // SIGTERM to exit
	ColdServing        time.Duration // restart on the same data: process start to a Metadata answer
	ColdReadable       time.Duration // process start to every partition's record fetched
	RSSAfterRestart    int64
}

// RunPartitionScale runs the workload: start (if it has a command),
// create, write, measure the idle broker, stop, cold start, read back.
func RunPartitionScale(ctx context.Context, cfg PartitionScaleConfig) (*PartitionScaleResult, error) {
	if cfg.Partitions < cfg.Topics || cfg.Topics < 1 {
		return nil, fmt.Errorf("need at least one partition per topic (%d partitions, %d topics)", cfg.Partitions, cfg.Topics)
	}
	cfg.defaults()
	r := &PartitionScaleResult{Partitions: cfg.Partitions, Topics: cfg.Topics, RSSBytes: -1, RSSAfterRestart: -1, OpenFDs: -1, Mappings: -1}
	b := &scaleBroker{cfg: &cfg}
	defer b.kill()
	if cfg.Command != nil {
		d, err := b.start(ctx)
		if err != nil {
			return r, err
		}
		r.StartToServing = d
		cfg.logf("started, serving after %v", d)
	}
	cl, err := scaleClient(cfg.Bootstrap)
	if err != nil {
		return r, err
	}
	defer cl.Close()
	if r.Create, err = createScaleTopics(ctx, &cfg, kadm.NewClient(cl)); err != nil {
		return r, err
	}
	cfg.logf("created %d partitions in %v", cfg.Partitions, r.Create)
	if r.Write, err = writeScaleRecords(ctx, &cfg, cl); err != nil {
		return r, err
	}
	cfg.logf("wrote a record to each partition in %v", r.Write)
	if err := measureIdle(ctx, &cfg, b.pid(), r); err != nil {
		return r, err
	}
	if err := measureMetadata(ctx, &cfg, cl, r); err != nil {
		return r, err
	}
	cl.Close()
	if cfg.Command == nil {
		return r, nil
	}
	return r, coldRestart(ctx, &cfg, b, r)
}

func (c *PartitionScaleConfig) defaults() {
	if c.Idle <= 0 {
		c.Idle = 5 * time.Second
	}
	if c.MetadataSamples <= 0 {
		c.MetadataSamples = 9
	}
	if c.Timeout <= 0 {
		c.Timeout = 10 * time.Minute
	}
}

func (c *PartitionScaleConfig) logf(format string, args ...any) {
	if c.Log != nil {
		fmt.Fprintf(c.Log, "partitions: "+format+"\n", args...)
	}
}

// topicName and topicPartitions spread the partitions over the topics as
// evenly as possible.
func (c *PartitionScaleConfig) topicName(i int) string { return fmt.Sprintf("scale-%05d", i) }

func (c *PartitionScaleConfig) topicPartitions(i int) int32 {
	n := c.Partitions / c.Topics
	if i < c.Partitions%c.Topics {
		n++
	}
	return int32(n)
}

func scaleClient(addr string, opts ...kgo.Opt) (*kgo.Client, error) {
	opts = append([]kgo.Opt{
		kgo.SeedBrokers(addr),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
		kgo.MetadataMinAge(50 * time.Millisecond),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0),
		// A new topic's partitions may be unknown for a moment after
		// CreateTopics returns (Kafka applies the metadata record
		// asynchronously); the step's timeout bounds the retries.
		kgo.UnknownTopicRetries(-1),
	}, opts...)
	return kgo.NewClient(opts...)
}

// createScaleTopics sends one CreateTopics per topic, as an operator or
// a provisioning tool does.
func createScaleTopics(ctx context.Context, cfg *PartitionScaleConfig, adm *kadm.Client) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	start := time.Now()
	for i := 0; i < cfg.Topics; i++ {
		resp, err := adm.CreateTopic(ctx, cfg.topicPartitions(i), 1, nil, cfg.topicName(i))
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			return 0, fmt.Errorf("create %s: %w", cfg.topicName(i), err)
		}
	}
	return time.Since(start), nil
}

// writeScaleRecords produces one record to every partition; its value
// names the partition, which the read-back checks.
func writeScaleRecords(ctx context.Context, cfg *PartitionScaleConfig, cl *kgo.Client) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	recs := make([]*kgo.Record, 0, cfg.Partitions)
	for i := 0; i < cfg.Topics; i++ {
		for p := int32(0); p < cfg.topicPartitions(i); p++ {
			recs = append(recs, &kgo.Record{Topic: cfg.topicName(i), Partition: p, Value: []byte(fmt.Sprintf("%s/%d", cfg.topicName(i), p))})
		}
	}
	start := time.Now()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return 0, fmt.Errorf("produce: %w", err)
	}
	return time.Since(start), nil
}

// measureIdle reads the broker's resident memory, descriptors and
// mappings, then its CPU time over cfg.Idle with no client activity.
func measureIdle(ctx context.Context, cfg *PartitionScaleConfig, pid int, r *PartitionScaleResult) error {
	if pid <= 0 {
		return nil
	}
	r.RSSBytes = procRSS(pid)
	r.OpenFDs = procCount(pid, "fd")
	r.Mappings = procLines(pid, "maps")
	before, err := procCPU(pid)
	if err != nil {
		return err
	}
	start := time.Now()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(cfg.Idle):
	}
	after, err := procCPU(pid)
	if err != nil {
		return err
	}
	r.IdleCPU = (after - before).Seconds() / time.Since(start).Seconds()
	cfg.logf("resident %d MB, %d descriptors, %d mappings, idle CPU %.3f cores", r.RSSBytes>>20, r.OpenFDs, r.Mappings, r.IdleCPU)
	return nil
}

// measureMetadata times full Metadata requests (every topic) on one
// connection, after one unmeasured request opens it.
func measureMetadata(ctx context.Context, cfg *PartitionScaleConfig, cl *kgo.Client, r *PartitionScaleResult) error {
	brokers := cl.SeedBrokers()
	if len(brokers) == 0 {
		return errors.New("no seed broker")
	}
	b := brokers[0]
	var times []time.Duration
	for i := 0; i <= cfg.MetadataSamples; i++ {
		req := kmsg.NewPtrMetadataRequest() // Topics nil: all topics
		start := time.Now()
		resp, err := b.Request(ctx, req)
		d := time.Since(start)
		if err != nil {
			return fmt.Errorf("metadata: %w", err)
		}
		n := 0
		for _, t := range resp.(*kmsg.MetadataResponse).Topics {
			n += len(t.Partitions)
		}
		if i == 0 {
			r.MetadataPartitions = n
			continue
		}
		times = append(times, d)
	}
	slices.Sort(times)
	r.MetadataMedian, r.MetadataMin, r.MetadataMax = times[len(times)/2], times[0], times[len(times)-1]
	cfg.logf("full Metadata (%d partitions): median %v (min %v, max %v)", r.MetadataPartitions, r.MetadataMedian, r.MetadataMin, r.MetadataMax)
	return nil
}

// coldRestart stops the broker, starts it on the same data and reads
// every partition's record back.
func coldRestart(ctx context.Context, cfg *PartitionScaleConfig, b *scaleBroker, r *PartitionScaleResult) error {
	d, err := b.stop()
	if err != nil {
		return err
	}
	r.Shutdown = d
	cfg.logf("SIGTERM to exit: %v", d)
	if r.ColdServing, err = b.start(ctx); err != nil {
		return err
	}
	cfg.logf("cold start, serving after %v", r.ColdServing)
	if err := readScaleRecords(ctx, cfg); err != nil {
		return err
	}
	r.ColdReadable = time.Since(b.started)
	r.RSSAfterRestart = procRSS(b.pid())
	cfg.logf("every partition readable %v after the start; resident %d MB", r.ColdReadable, r.RSSAfterRestart>>20)
	_, err = b.stop()
	return err
}

// readScaleRecords fetches every partition from its start until each
// one's record has arrived, and checks it.
func readScaleRecords(ctx context.Context, cfg *PartitionScaleConfig) error {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	assign := map[string]map[int32]kgo.Offset{}
	for i := 0; i < cfg.Topics; i++ {
		ps := map[int32]kgo.Offset{}
		for p := int32(0); p < cfg.topicPartitions(i); p++ {
			ps[p] = kgo.NewOffset().AtStart()
		}
		assign[cfg.topicName(i)] = ps
	}
	cl, err := scaleClient(cfg.Bootstrap, kgo.ConsumePartitions(assign), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	seen := 0
	for seen < cfg.Partitions {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("read back: %d of %d partitions after %v: %w", seen, cfg.Partitions, cfg.Timeout, err)
		}
		var bad error
		fs.EachRecord(func(rec *kgo.Record) {
			if want := fmt.Sprintf("%s/%d", rec.Topic, rec.Partition); string(rec.Value) != want && bad == nil {
				bad = fmt.Errorf("%s/%d@%d holds %q", rec.Topic, rec.Partition, rec.Offset, rec.Value)
			}
			seen++
		})
		if bad != nil {
			return bad
		}
	}
	return nil
}

// scaleBroker is the broker process the run started.
type scaleBroker struct {
	cfg     *PartitionScaleConfig
	cmd     *exec.Cmd
	exited  chan error
	started time.Time
}

func (b *scaleBroker) pid() int {
	if b.cmd != nil {
		return b.cmd.Process.Pid
	}
	return b.cfg.Pid
}

// start runs the broker and returns the time until it answered a
// Metadata request.
func (b *scaleBroker) start(ctx context.Context) (time.Duration, error) {
	b.cmd = b.cfg.Command()
	b.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	b.started = time.Now()
	if err := b.cmd.Start(); err != nil {
		return 0, err
	}
	b.exited = make(chan error, 1)
	go func(cmd *exec.Cmd, ch chan error) { ch <- cmd.Wait() }(b.cmd, b.exited)
	deadline := time.Now().Add(b.cfg.Timeout)
	for {
		if serving(ctx, b.cfg.Bootstrap) {
			return time.Since(b.started), nil
		}
		select {
		case err := <-b.exited:
			b.cmd = nil
			return 0, fmt.Errorf("broker exited at start: %v", err)
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("broker not serving after %v", b.cfg.Timeout)
		}
	}
}

// serving reports whether the broker answers a Metadata request now.
func serving(ctx context.Context, addr string) bool {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DialTimeout(500*time.Millisecond), kgo.RequestRetries(0))
	if err != nil {
		return false
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{} // none: just the brokers
	_, err = cl.SeedBrokers()[0].Request(ctx, req)
	return err == nil
}

// stop sends SIGTERM and waits for the process to exit.
func (b *scaleBroker) stop() (time.Duration, error) {
	if b.cmd == nil {
		return 0, nil
	}
	start := time.Now()
	if err := b.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return 0, err
	}
	select {
	case err := <-b.exited:
		d := time.Since(start)
		b.cmd = nil
		var ee *exec.ExitError
		if err != nil && !(errors.As(err, &ee) && ee.ExitCode() == 143) { // the JVM exits 143 on SIGTERM
			return d, fmt.Errorf("broker exit: %w", err)
		}
		return d, nil
	case <-time.After(b.cfg.Timeout):
		return 0, errors.New("broker did not exit after SIGTERM")
	}
}

// kill ends a broker the run leaves behind (after a failure).
func (b *scaleBroker) kill() {
	if b.cmd != nil {
		syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
		<-b.exited
		b.cmd = nil
	}
}

// procRSS is a process's resident memory in bytes, -1 if unknown.
func procRSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err == nil {
				return kb << 10
			}
		}
	}
	return -1
}

// procCPU is a process's user+system CPU time so far.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name (which may hold spaces) start after
	// the last ')'; utime and stime are fields 14 and 15 of the line.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: short", pid)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: bad times", pid)
	}
	const ticks = 100 // USER_HZ on Linux
	return time.Duration(ut+st) * time.Second / ticks, nil
}

func procCount(pid int, dir string) int {
	ents, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), dir))
	if err != nil {
		return -1
	}
	return len(ents)
}

func procLines(pid int, file string) int {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), file))
	if err != nil {
		return -1
	}
	return bytes.Count(b, []byte("\n"))
}

// SluiceCommand returns a PartitionScaleConfig.Command that runs
// `bin serve` listening on addr with its data in dataDir.
func SluiceCommand(bin, addr, dataDir string, extra ...string) func() *exec.Cmd {
	return func() *exec.Cmd {
		cmd := exec.Command(bin, append([]string{"serve", "--listen", addr, "--data-dir", dataDir, "--log-level", "warn"}, extra...)...)
		cmd.Stderr = os.Stderr
		return cmd
	}
}

// KafkaCommand formats dataDir for a single-node KRaft Apache Kafka
// (broker and controller in one process, listening on port and
// controllerPort of 127.0.0.1) and returns the command that runs it with
// the jars in libs and heap as its -Xmx.
func KafkaCommand(java, libs, dataDir string, port, controllerPort int, heap string) (func() *exec.Cmd, error) {
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return nil, err
	}
	props := filepath.Join(dataDir, "server.properties")
	text := fmt.Sprintf(`process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:%[2]d
listeners=PLAINTEXT://127.0.0.1:%[1]d,CONTROLLER://127.0.0.1:%[2]d
advertised.listeners=PLAINTEXT://127.0.0.1:%[1]d
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=%[3]s
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
`, port, controllerPort, filepath.Join(dataDir, "logs"))
	if err := os.WriteFile(props, []byte(text), 0o644); err != nil {
		return nil, err
	}
	log4j := filepath.Join(dataDir, "log4j2.yaml")
	if err := os.WriteFile(log4j, []byte("Configuration:\n  Appenders:\n    Console:\n      name: STDERR\n      target: SYSTEM_ERR\n      PatternLayout:\n        Pattern: \"[%d] %p %m (%c)%n\"\n  Loggers:\n    Root:\n      level: WARN\n      AppenderRef:\n        - ref: STDERR\n"), 0o644); err != nil {
		return nil, err
	}
	common := []string{"-cp", filepath.Join(libs, "*"), "-Dlog4j2.configurationFile=" + log4j, "-Djava.awt.headless=true"}
	format := exec.Command(java, append(common, "kafka.tools.StorageTool", "format", "-t", "c2x1dWNlLXNjYWxlLTAwMQ", "-c", props, "--ignore-formatted")...)
	if out, err := format.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("kafka storage format: %v: %s", err, out)
	}
	// kafka-server-start.sh's heap and kafka-run-class.sh's GC options.
	args := append([]string{"-Xms" + heap, "-Xmx" + heap, "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
		"-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent"}, common...)
	args = append(args, "kafka.Kafka", props)
	return func() *exec.Cmd {
		cmd := exec.Command(java, args...)
		if f, err := os.OpenFile(filepath.Join(dataDir, "kafka.out"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err == nil {
			cmd.Stdout, cmd.Stderr = f, f // left open until the bench exits: one per start
		}
		return cmd
	}, nil
}

// WriteText prints the result as a table of figures.
func (r *PartitionScaleResult) WriteText(w io.Writer) {
	fmt.Fprintf(w, "partitions %d over %d topics\n", r.Partitions, r.Topics)
	row := func(name string, v any) { fmt.Fprintf(w, "  %-38s %v\n", name, v) }
	dur := func(d time.Duration) any {
		if d == 0 {
			return "-"
		}
		return d.Round(time.Millisecond)
	}
	mb := func(n int64) any {
		if n < 0 {
			return "-"
		}
		return fmt.Sprintf("%.0f MB", float64(n)/1e6)
	}
	row("start to serving (empty)", dur(r.StartToServing))
	row("create (one CreateTopics per topic)", dur(r.Create))
	row("write one record to each", dur(r.Write))
	row("resident memory", mb(r.RSSBytes))
	row("descriptors / mappings", fmt.Sprintf("%d / %d", r.OpenFDs, r.Mappings))
	row("idle CPU (cores)", fmt.Sprintf("%.3f", r.IdleCPU))
	us := func(d time.Duration) time.Duration { return d.Round(10 * time.Microsecond) }
	row("full Metadata median (min-max)", fmt.Sprintf("%v (%v-%v)", us(r.MetadataMedian), us(r.MetadataMin), us(r.MetadataMax)))
	row("SIGTERM to exit", dur(r.Shutdown))
	row("cold start to serving", dur(r.ColdServing))
	row("cold start to every partition read", dur(r.ColdReadable))
	row("resident memory after cold start", mb(r.RSSAfterRestart))
}
