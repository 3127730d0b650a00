package compare

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BrokerKind names a broker the runner can start.
type BrokerKind string

const (
	Kafka  BrokerKind = "kafka"
	Sluice BrokerKind = "sluice"
	Kfake  BrokerKind = "kfake"
)

// Title is the display name.
func (k BrokerKind) Title() string {
	switch k {
	case Kafka:
		return "Kafka " + KafkaVersion
	case Sluice:
		return "Sluice"
	case Kfake:
		return "kfake"
	}
	return string(k)
}

// Color is the broker's color in charts.
func (k BrokerKind) Color() string {
	switch k {
	case Kafka:
		return "#c53030"
	case Sluice:
		return "#2b6cb0"
	case Kfake:
		return "#718096"
	}
	return ""
}

// KafkaVersion is the Apache Kafka release compared against (bench/kafka/pom.xml).
const KafkaVersion = "4.4.0"

// KafkaHeap is the JVM heap given to Kafka, kafka-server-start.sh's default.
const KafkaHeap = "-Xmx1G -Xms1G"

// brokerEnv is how to start brokers.
type brokerEnv struct {
	sluice    string // the sluice binary (sluice serve)
	self      string // this binary (benchcompare serve-kfake)
	java      string
	kafkaLibs string // directory of Kafka's jars
	workDir   string // fresh data directories are made under it
	logDir    string // broker stdout/stderr
	// extraProps, if set, gives configuration lines added to a broker's
	// (tls.go): appended to Kafka's server.properties, where a later key
	// wins, and given to Sluice as its --config file. port is the
	// PLAINTEXT listener's, controllerPort Kafka's controller listener's.
	extraProps func(kind BrokerKind, port, controllerPort int) string
}

// brokerProc is a running broker process.
type brokerProc struct {
	kind    BrokerKind
	addr    string
	dataDir string
	metrics string // Sluice's metrics listener (broker-side latency); "" for the others
	cmd     *exec.Cmd
	log     *os.File
	exited  chan error
}

func (b *brokerProc) pid() int { return b.cmd.Process.Pid }

// startBroker starts kind on a fresh data directory and waits until it
// answers metadata requests.
func (e *brokerEnv) startBroker(ctx context.Context, kind BrokerKind, tag string) (*brokerProc, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dataDir, err := os.MkdirTemp(e.workDir, string(kind)+"-data-")
	if err != nil {
		return nil, err
	}
	b := &brokerProc{kind: kind, addr: fmt.Sprintf("127.0.0.1:%d", port), dataDir: dataDir, exited: make(chan error, 1)}
	switch kind {
	case Sluice:
		mport, err := freePort()
		if err != nil {
			os.RemoveAll(dataDir)
			return nil, err
		}
		b.metrics = fmt.Sprintf("127.0.0.1:%d", mport)
		b.cmd = exec.Command(e.sluice, "serve", "--listen", b.addr, "--data-dir", dataDir, "--log-level", "warn", "--metrics", b.metrics)
		if e.extraProps != nil {
			// Beside the data directory, not in it: the broker reads that.
			path := dataDir + ".properties"
			if err := os.WriteFile(path, []byte(e.extraProps(kind, port, 0)), 0o644); err != nil {
				os.RemoveAll(dataDir)
				return nil, err
			}
			b.cmd.Args = append(b.cmd.Args, "--config", path)
		}
	case Kfake:
		b.cmd = exec.Command(e.self, "serve-kfake", "--port", fmt.Sprint(port))
	case Kafka:
		if b.cmd, err = e.kafkaCommand(ctx, dataDir, port); err != nil {
			os.RemoveAll(dataDir)
			return nil, err
		}
	default:
		return nil, fmt.Errorf("unknown broker %q", kind)
	}
	if b.log, err = os.Create(filepath.Join(e.logDir, fmt.Sprintf("%s-%s.log", kind, tag))); err != nil {
		os.RemoveAll(dataDir)
		return nil, err
	}
	b.cmd.Stdout, b.cmd.Stderr = b.log, b.log
	b.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive the runner
	if err := b.cmd.Start(); err != nil {
		b.log.Close()
		os.RemoveAll(dataDir)
		return nil, fmt.Errorf("start %s: %w", kind, err)
	}
	go func() { b.exited <- b.cmd.Wait() }()
	if err := b.waitReady(ctx, 90*time.Second); err != nil {
		b.stop()
		return nil, fmt.Errorf("%s did not come up (log %s): %w", kind, b.log.Name(), err)
	}
	return b, nil
}

// waitReady polls until the broker lists itself in a metadata response.
func (b *brokerProc) waitReady(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		select {
		case err := <-b.exited:
			b.exited <- err
			return fmt.Errorf("exited: %v", err)
		default:
		}
		if err := pingBroker(ctx, b.addr); err == nil {
			return nil
		} else if time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func pingBroker(ctx context.Context, addr string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(0))
	if err != nil {
		return err
	}
	defer cl.Close()
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	m, err := kadm.NewClient(cl).BrokerMetadata(pctx)
	if err != nil {
		return err
	}
	if len(m.Brokers) == 0 {
		return errors.New("no brokers in metadata")
	}
	return nil
}

// stop sends SIGTERM, waits up to 30 s for a clean exit, then kills, and
// removes the data directory.
func (b *brokerProc) stop() {
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.exited:
	case <-time.After(30 * time.Second):
		_ = b.cmd.Process.Kill()
		<-b.exited
	}
	b.log.Close()
	os.RemoveAll(b.dataDir)
	os.Remove(b.dataDir + ".properties") // Sluice's extraProps, if any
}

// kafkaCommand writes a single-node KRaft server.properties, formats the
// log directory with Kafka's StorageTool and returns the command that runs
// the broker.
func (e *brokerEnv) kafkaCommand(ctx context.Context, dataDir string, port int) (*exec.Cmd, error) {
	if e.kafkaLibs == "" {
		return nil, errors.New("no Kafka jars (run via `make bench-kafka`, or pass --kafka-libs)")
	}
	cport, err := freePort()
	if err != nil {
		return nil, err
	}
	props := filepath.Join(dataDir, "server.properties")
	logDir := filepath.Join(dataDir, "kraft-logs")
	text := KafkaServerProperties(port, cport, logDir)
	if e.extraProps != nil {
		text += e.extraProps(Kafka, port, cport)
	}
	if err := os.WriteFile(props, []byte(text), 0o644); err != nil {
		return nil, err
	}
	log4j := filepath.Join(dataDir, "log4j2.yaml")
	if err := os.WriteFile(log4j, []byte(kafkaLog4j), 0o644); err != nil {
		return nil, err
	}
	cp := filepath.Join(e.kafkaLibs, "*")
	common := []string{"-cp", cp, "-Dlog4j2.configurationFile=" + log4j, "-Djava.awt.headless=true"}
	format := exec.CommandContext(ctx, e.java, append(common, "kafka.tools.StorageTool", "format",
		"-t", kafkaClusterID(), "-c", props, "--ignore-formatted")...)
	if out, err := format.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("kafka storage format: %v: %s", err, out)
	}
	args := append(strings.Fields(KafkaHeap), kafkaJVMOpts...)
	args = append(args, common...)
	args = append(args, "kafka.Kafka", props)
	return exec.Command(e.java, args...), nil
}

// kafkaJVMOpts are kafka-run-class.sh's default performance options.
var kafkaJVMOpts = []string{
	"-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
	"-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
}

// KafkaServerProperties is the Kafka configuration the comparison runs:
// one combined broker+controller node, Kafka's defaults otherwise, with
// threads sized to a 2-core machine.
func KafkaServerProperties(port, controllerPort int, logDir string) string {
	return fmt.Sprintf(`process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:%[2]d
listeners=PLAINTEXT://127.0.0.1:%[1]d,CONTROLLER://127.0.0.1:%[2]d
advertised.listeners=PLAINTEXT://127.0.0.1:%[1]d
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=%[3]s
num.network.threads=2
num.io.threads=2
num.recovery.threads.per.data.dir=1
background.threads=2
num.partitions=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=true
`, port, controllerPort, logDir)
}

const kafkaLog4j = `Configuration:
  Appenders:
    Console:
      name: STDOUT
      PatternLayout:
        Pattern: "[%d] %p %m (%c)%n"
  Loggers:
    Root:
      level: WARN
      AppenderRef:
        - ref: STDOUT
`

// kafkaClusterID is a random Kafka Uuid in its string form (URL-safe
// base64 of 16 bytes, not starting with '-').
func kafkaClusterID() string {
	for {
		var b [16]byte
		_, _ = rand.Read(b[:])
		if s := base64.RawURLEncoding.EncodeToString(b[:]); s[0] != '-' {
			return s
		}
	}
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
