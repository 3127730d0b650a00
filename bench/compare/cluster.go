package compare

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A three-node cluster of Kafka or Sluice processes for `benchcompare
// kafka-cluster`: every node a broker and a controller voter, on 127.0.0.1
// ports, each with its own data directory. Nodes can be SIGKILLed,
// SIGTERMed and restarted on the same directory and ports.

// KafkaClusterHeap is each Kafka node's JVM heap in the three-node runs:
// three JVMs share the machine with Sluice's and the load generator.
const KafkaClusterHeap = "-Xmx512m -Xms512m"

// clusterNode is one broker+controller process.
type clusterNode struct {
	id       int32
	addr     string // PLAINTEXT listener
	ctrlAddr string // CONTROLLER listener
	dataDir  string
	logPath  string
	argv     []string // the command that (re)starts it

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{} // closed when cmd has exited
	started time.Time
}

// benchCluster is N nodes of one kind.
type benchCluster struct {
	kind  BrokerKind
	nodes []*clusterNode
	dir   string
}

// clusterPorts hands out 127.0.0.1 ports below the kernel's ephemeral range
// (32768 and up), so that a port stays free while its node is down between
// a kill and a restart: an ephemeral port could be taken by any outgoing
// connection meanwhile.
var clusterPorts = struct {
	sync.Mutex
	used map[int]bool
}{used: map[int]bool{}}

func clusterPort() (string, error) {
	clusterPorts.Lock()
	defer clusterPorts.Unlock()
	for range 2000 {
		p := 20000 + rand.IntN(12000)
		if clusterPorts.used[p] {
			continue
		}
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue
		}
		ln.Close()
		clusterPorts.used[p] = true
		return fmt.Sprintf("127.0.0.1:%d", p), nil
	}
	return "", errors.New("no free port in 20000–32000")
}

// KafkaClusterProperties is one node's server.properties in the three-node
// comparison. voters is controller.quorum.voters ("1@host:port,…").
func KafkaClusterProperties(id int32, addr, ctrlAddr, voters, logDir string) string {
	return fmt.Sprintf(`process.roles=broker,controller
node.id=%[1]d
controller.quorum.voters=%[4]s
listeners=PLAINTEXT://%[2]s,CONTROLLER://%[3]s
advertised.listeners=PLAINTEXT://%[2]s
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=%[5]s
num.network.threads=2
num.io.threads=2
num.recovery.threads.per.data.dir=1
background.threads=2
num.partitions=1
default.replication.factor=3
offsets.topic.replication.factor=3
offsets.topic.num.partitions=3
transaction.state.log.replication.factor=3
transaction.state.log.min.isr=2
share.coordinator.state.topic.replication.factor=3
share.coordinator.state.topic.min.isr=2
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=false
`, id, addr, ctrlAddr, voters, logDir)
}

// SluiceClusterProperties is one Sluice node's config file in the
// three-node comparison (README "A three-node cluster").
func SluiceClusterProperties(id int32, addr, ctrlAddr, voters, logDir string) string {
	return fmt.Sprintf(`process.roles=broker,controller
node.id=%[1]d
listeners=PLAINTEXT://%[2]s,CONTROLLER://%[3]s
controller.listener.names=CONTROLLER
controller.quorum.voters=%[4]s
log.dirs=%[5]s
default.replication.factor=3
offsets.topic.num.partitions=3
group.initial.rebalance.delay.ms=0
`, id, addr, ctrlAddr, voters, logDir)
}

// startCluster formats and starts n nodes of kind on fresh directories
// under env.workDir and waits until every node's Metadata lists n brokers.
func (e *brokerEnv) startCluster(ctx context.Context, kind BrokerKind, n int, tag string) (*benchCluster, error) {
	dir, err := os.MkdirTemp(e.workDir, string(kind)+"-cluster-")
	if err != nil {
		return nil, err
	}
	c := &benchCluster{kind: kind, dir: dir}
	var voters []string
	for i := 1; i <= n; i++ {
		nd := &clusterNode{id: int32(i), dataDir: filepath.Join(dir, fmt.Sprintf("node%d", i))}
		if nd.addr, err = clusterPort(); err != nil {
			return nil, err
		}
		if nd.ctrlAddr, err = clusterPort(); err != nil {
			return nil, err
		}
		nd.logPath = filepath.Join(e.logDir, fmt.Sprintf("%s-%s-node%d.log", kind, tag, i))
		c.nodes = append(c.nodes, nd)
		voters = append(voters, fmt.Sprintf("%d@%s", i, nd.ctrlAddr))
	}
	clusterID := kafkaClusterID()
	// Formatting Kafka's directories starts a JVM each: all at once.
	errs := make([]error, len(c.nodes))
	var wg sync.WaitGroup
	for i, nd := range c.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = e.prepareNode(ctx, kind, nd, strings.Join(voters, ","), clusterID)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	for _, nd := range c.nodes {
		if err := nd.start(); err != nil {
			c.destroy()
			return nil, err
		}
	}
	if err := c.waitBrokers(ctx, n, 3*time.Minute); err != nil {
		c.destroy()
		return nil, fmt.Errorf("%s cluster did not form (logs %s): %w", kind, filepath.Join(e.logDir, string(kind)+"-"+tag+"-node*.log"), err)
	}
	return c, nil
}

// prepareNode writes nd's config, formats its data directory and sets the
// command that runs it.
func (e *brokerEnv) prepareNode(ctx context.Context, kind BrokerKind, nd *clusterNode, voters, clusterID string) error {
	if err := os.MkdirAll(nd.dataDir, 0o755); err != nil {
		return err
	}
	props := filepath.Join(nd.dataDir, "server.properties")
	logDir := filepath.Join(nd.dataDir, "logs")
	switch kind {
	case Sluice:
		if err := os.WriteFile(props, []byte(SluiceClusterProperties(nd.id, nd.addr, nd.ctrlAddr, voters, logDir)), 0o644); err != nil {
			return err
		}
		out, err := exec.CommandContext(ctx, e.sluice, "format", "--cluster-id", clusterID, "--config", props).CombinedOutput()
		if err != nil {
			return fmt.Errorf("sluice format: %v: %s", err, out)
		}
		nd.argv = []string{e.sluice, "serve", "--config", props, "--log-level", "warn"}
	case Kafka:
		if e.kafkaLibs == "" {
			return errors.New("no Kafka jars (run via `make bench-kafka-cluster`, or pass --kafka-libs)")
		}
		if err := os.WriteFile(props, []byte(KafkaClusterProperties(nd.id, nd.addr, nd.ctrlAddr, voters, logDir)), 0o644); err != nil {
			return err
		}
		log4j := filepath.Join(nd.dataDir, "log4j2.yaml")
		if err := os.WriteFile(log4j, []byte(kafkaLog4j), 0o644); err != nil {
			return err
		}
		common := []string{"-cp", filepath.Join(e.kafkaLibs, "*"), "-Dlog4j2.configurationFile=" + log4j, "-Djava.awt.headless=true"}
		format := exec.CommandContext(ctx, e.java, append(append([]string{"-Xmx256m"}, common...), "kafka.tools.StorageTool", "format",
			"-t", clusterID, "-c", props, "--ignore-formatted")...)
		if out, err := format.CombinedOutput(); err != nil {
			return fmt.Errorf("kafka storage format: %v: %s", err, out)
		}
		argv := append([]string{e.java}, strings.Fields(KafkaClusterHeap)...)
		argv = append(argv, kafkaJVMOpts...)
		argv = append(argv, common...)
		nd.argv = append(argv, "kafka.Kafka", props)
	default:
		return fmt.Errorf("no cluster mode for %q", kind)
	}
	return nil
}

// start runs the node's command (again), appending to its log.
func (nd *clusterNode) start() error {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	log, err := os.OpenFile(nd.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(nd.argv[0], nd.argv[1:]...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive the runner
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("start node %d: %w", nd.id, err)
	}
	exited := make(chan struct{})
	nd.cmd, nd.exited, nd.started = cmd, exited, time.Now()
	go func() {
		cmd.Wait()
		log.Close()
		close(exited)
	}()
	return nil
}

// pid is the running process's id, 0 when it is not running.
func (nd *clusterNode) pid() int {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.cmd == nil || !nd.runningLocked() {
		return 0
	}
	return nd.cmd.Process.Pid
}

func (nd *clusterNode) running() bool {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	return nd.runningLocked()
}

func (nd *clusterNode) runningLocked() bool {
	if nd.exited == nil {
		return false
	}
	select {
	case <-nd.exited:
		return false
	default:
		return true
	}
}

// signal sends s and returns the channel closed at exit.
func (nd *clusterNode) signal(s syscall.Signal) <-chan struct{} {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.cmd != nil && nd.runningLocked() {
		_ = nd.cmd.Process.Signal(s)
	}
	if nd.exited == nil {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	return nd.exited
}

// kill SIGKILLs the node and waits for it to be gone.
func (nd *clusterNode) kill() {
	<-nd.signal(syscall.SIGKILL)
}

// terminate SIGTERMs the node and waits up to limit for it to exit (then
// kills it); it returns how long the exit took and whether it was clean.
func (nd *clusterNode) terminate(limit time.Duration) (time.Duration, bool) {
	start := time.Now()
	done := nd.signal(syscall.SIGTERM)
	select {
	case <-done:
		return time.Since(start), true
	case <-time.After(limit):
		nd.kill()
		return time.Since(start), false
	}
}

// pids of the running nodes.
func (c *benchCluster) pids() []int {
	var out []int
	for _, nd := range c.nodes {
		if p := nd.pid(); p != 0 {
			out = append(out, p)
		}
	}
	return out
}

func (c *benchCluster) bootstrap() []string {
	var out []string
	for _, nd := range c.nodes {
		out = append(out, nd.addr)
	}
	return out
}

func (c *benchCluster) node(id int32) *clusterNode {
	for _, nd := range c.nodes {
		if nd.id == id {
			return nd
		}
	}
	return nil
}

// destroy kills every node and removes the data directories.
func (c *benchCluster) destroy() {
	for _, nd := range c.nodes {
		nd.signal(syscall.SIGKILL)
	}
	for _, nd := range c.nodes {
		nd.kill()
	}
	os.RemoveAll(c.dir)
}

// stopAll SIGTERMs every node at once and waits for them (bounded).
func (c *benchCluster) stopAll(limit time.Duration) {
	for _, nd := range c.nodes {
		nd.signal(syscall.SIGTERM)
	}
	deadline := time.After(limit)
	for _, nd := range c.nodes {
		select {
		case <-nd.signal(0):
		case <-deadline:
		}
	}
	for _, nd := range c.nodes {
		nd.kill()
	}
}

// nodeMetadata asks node nd itself for the metadata of topics (nil: all).
func nodeMetadata(ctx context.Context, nd *clusterNode, topics []string) (*kmsg.MetadataResponse, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(nd.addr), kgo.RequestRetries(0))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	return metadataVia(ctx, cl, topics)
}

// metadataVia sends one Metadata request to cl's first seed broker, so
// that the answer is that node's view.
func metadataVia(ctx context.Context, cl *kgo.Client, topics []string) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	if topics != nil {
		req.Topics = []kmsg.MetadataRequestTopic{}
		for _, t := range topics {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(t)
			req.Topics = append(req.Topics, rt)
		}
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	seeds := cl.SeedBrokers()
	if len(seeds) == 0 {
		return nil, errors.New("no seed broker")
	}
	resp, err := seeds[0].Request(rctx, req)
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.MetadataResponse), nil
}

// waitBrokers waits until every running node's Metadata lists n brokers.
func (c *benchCluster) waitBrokers(ctx context.Context, n int, limit time.Duration) error {
	return pollUntil(ctx, limit, 200*time.Millisecond, func() (bool, error) {
		for _, nd := range c.nodes {
			if !nd.running() {
				return false, fmt.Errorf("node %d exited", nd.id)
			}
			m, err := nodeMetadata(ctx, nd, []string{})
			if err != nil {
				return false, nil
			}
			if len(m.Brokers) != n {
				return false, nil
			}
		}
		return true, nil
	})
}

// partitionState is what one Metadata answer says of a topic's partitions.
type partitionState struct {
	leaders map[int32]int32
	isr     map[int32]int
	rf      map[int32]int
}

func topicStates(m *kmsg.MetadataResponse) map[string]partitionState {
	out := map[string]partitionState{}
	for _, t := range m.Topics {
		if t.Topic == nil || t.ErrorCode != 0 {
			continue
		}
		ps := partitionState{leaders: map[int32]int32{}, isr: map[int32]int{}, rf: map[int32]int{}}
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 && p.Leader < 0 {
				ps.leaders[p.Partition] = -1
			} else {
				ps.leaders[p.Partition] = p.Leader
			}
			ps.isr[p.Partition] = len(p.ISR)
			ps.rf[p.Partition] = len(p.Replicas)
		}
		out[*t.Topic] = ps
	}
	return out
}

// inSync counts partitions with a leader and a full ISR, and those with a
// leader, over states.
func inSync(states map[string]partitionState) (full, led, total int) {
	for _, ps := range states {
		for p, l := range ps.leaders {
			total++
			if l >= 0 {
				led++
				if ps.isr[p] >= ps.rf[p] && ps.rf[p] > 0 {
					full++
				}
			}
		}
	}
	return full, led, total
}

// waitInSync waits until, in some running node's Metadata, every partition
// of topics (nil: all) has a leader and a full ISR, and there are want
// partitions in all (0: any).
func (c *benchCluster) waitInSync(ctx context.Context, topics []string, want int, limit time.Duration, every time.Duration) error {
	var last string
	err := pollUntil(ctx, limit, every, func() (bool, error) {
		for _, nd := range c.nodes {
			if !nd.running() {
				continue
			}
			m, err := nodeMetadata(ctx, nd, topics)
			if err != nil {
				last = err.Error()
				continue
			}
			full, led, total := inSync(topicStates(m))
			last = fmt.Sprintf("%d of %d partitions led, %d with a full ISR", led, total, full)
			return total > 0 && full == total && (want == 0 || total >= want), nil
		}
		return false, nil
	})
	if err != nil && last != "" {
		return fmt.Errorf("%w (%s)", err, last)
	}
	return err
}

// leaderOf is the leader of topic's partition p per a running node.
func (c *benchCluster) leaderOf(ctx context.Context, topic string, p int32) (int32, error) {
	var errs []error
	for _, nd := range c.nodes {
		if !nd.running() {
			continue
		}
		m, err := nodeMetadata(ctx, nd, []string{topic})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if ps, ok := topicStates(m)[topic]; ok {
			if l, ok := ps.leaders[p]; ok && l >= 0 {
				return l, nil
			}
		}
	}
	return -1, fmt.Errorf("no leader for %s-%d: %v", topic, p, errors.Join(errs...))
}

// pollUntil calls cond every interval until it is true, returns an error,
// limit passes or ctx ends.
func pollUntil(ctx context.Context, limit, every time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(limit)
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %v", limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(every):
		}
	}
}
