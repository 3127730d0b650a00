package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The cluster half of the matrix: three `sluice serve` processes, each a
// broker and a controller voter (process.roles=broker,controller), formatted
// with one cluster id, configured the way README's three-node section says.
// Client scenarios run against all three bootstrap addresses and ask the
// driver, on their stdout, to stop and start a broker (see control below).

// clusterProperties is every node's config beyond its identity and
// listeners: internal topics replicated over the three brokers (Kafka's
// default; Sluice's single-node default for offsets is 1), fast group
// formation as in the single-node run.
const clusterProperties = `default.replication.factor=3
offsets.topic.replication.factor=3
group.initial.rebalance.delay.ms=100
`

// cluster is the three nodes under test.
type cluster struct {
	id    string // the cluster id every data dir was formatted with
	nodes []*broker
	bin   string
	level string // --log-level
}

// bootstrap is every node's client address.
func (c *cluster) bootstrap() string {
	var addrs []string
	for _, n := range c.nodes {
		addrs = append(addrs, n.addr)
	}
	return strings.Join(addrs, ",")
}

func (c *cluster) dataDirs() string {
	var dirs []string
	for _, n := range c.nodes {
		dirs = append(dirs, n.dataDir)
	}
	return strings.Join(dirs, ",")
}

// startCluster formats and starts n nodes under work/cluster and waits
// until every node's Metadata lists n brokers.
func startCluster(bin, work, logLevel string, n int) (*cluster, error) {
	dir := filepath.Join(work, "cluster")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	out, err := exec.Command(bin, "format", "--random-cluster-id").Output()
	if err != nil {
		return nil, fmt.Errorf("sluice format --random-cluster-id: %w", err)
	}
	c := &cluster{id: strings.TrimSpace(string(out)), bin: bin, level: logLevel}
	ports, err := freePorts(2 * n)
	if err != nil {
		return nil, err
	}
	var voters []string
	for i := 1; i <= n; i++ {
		b := &broker{
			id:             int32(i),
			addr:           fmt.Sprintf("127.0.0.1:%d", ports[2*i-2]),
			controllerAddr: fmt.Sprintf("127.0.0.1:%d", ports[2*i-1]),
			dataDir:        filepath.Join(dir, fmt.Sprintf("data%d", i)),
			logPath:        filepath.Join(dir, fmt.Sprintf("node%d.log", i)),
			configPath:     filepath.Join(dir, fmt.Sprintf("node%d.properties", i)),
		}
		c.nodes = append(c.nodes, b)
		voters = append(voters, fmt.Sprintf("%d@%s", i, b.controllerAddr))
	}
	for _, b := range c.nodes {
		props := fmt.Sprintf("process.roles=broker,controller\nnode.id=%d\nlisteners=PLAINTEXT://%s,CONTROLLER://%s\n"+
			"controller.listener.names=CONTROLLER\ncontroller.quorum.voters=%s\nlog.dirs=%s\n%s",
			b.id, b.addr, b.controllerAddr, strings.Join(voters, ","), b.dataDir, clusterProperties)
		if err := os.WriteFile(b.configPath, []byte(props), 0o644); err != nil {
			return nil, err
		}
		if out, err := exec.Command(bin, "format", "--cluster-id", c.id, "--config", b.configPath).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("sluice format node %d: %v: %s", b.id, err, out)
		}
	}
	for _, b := range c.nodes {
		if err := c.startNode(b); err != nil {
			c.kill()
			return nil, err
		}
	}
	if err := c.waitWhole(60 * time.Second); err != nil {
		c.kill()
		return nil, err
	}
	return c, nil
}

// startNode starts a node's process (again) and waits for its listener.
func (c *cluster) startNode(b *broker) error {
	f, err := os.OpenFile(b.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	return b.start(f, exec.Command(c.bin, "serve", "--config", b.configPath, "--log-level", c.level))
}

func (c *cluster) node(id int32) *broker {
	for _, b := range c.nodes {
		if b.id == id {
			return b
		}
	}
	return nil
}

// admin is a kadm client of every node.
func (c *cluster) admin() (*kadm.Client, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(c.bootstrap(), ",")...),
		kgo.MetadataMinAge(100*time.Millisecond), kgo.RetryTimeout(5*time.Second))
	if err != nil {
		return nil, err
	}
	return kadm.NewClient(cl), nil
}

// whole says why the cluster is not whole, or "" when every node's
// Metadata lists every broker and every partition of every topic has all
// its replicas in the ISR and a leader.
func (c *cluster) whole(ctx context.Context) string {
	for _, b := range c.nodes {
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr))
		if err != nil {
			return err.Error()
		}
		md, err := kadm.NewClient(cl).Metadata(ctx)
		cl.Close()
		if err != nil {
			return fmt.Sprintf("node %d: Metadata: %v", b.id, err)
		}
		if len(md.Brokers) != len(c.nodes) {
			return fmt.Sprintf("node %d lists %d brokers", b.id, len(md.Brokers))
		}
		for _, t := range md.Topics {
			for _, p := range t.Partitions {
				if p.Err != nil || p.Leader < 0 || len(p.ISR) != len(p.Replicas) {
					return fmt.Sprintf("node %d: %s-%d leader %d replicas %v isr %v (%v)",
						b.id, t.Topic, p.Partition, p.Leader, p.Replicas, p.ISR, p.Err)
				}
			}
		}
	}
	return ""
}

// waitWhole waits until the cluster is whole.
func (c *cluster) waitWhole(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		why := c.whole(ctx)
		cancel()
		if why == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cluster not whole after %v: %s", timeout, why)
		}
		for _, b := range c.nodes {
			if b.cmd != nil && !b.alive() {
				return fmt.Errorf("node %d exited; log:\n%s", b.id, tail(b.logPath, 20))
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// coordinator is the node coordinating group.
func (c *cluster) coordinator(group string) (int32, error) {
	return c.findCoordinator(group, (*kadm.Client).FindGroupCoordinators)
}

// txnCoordinator is the node coordinating a transactional id.
func (c *cluster) txnCoordinator(id string) (int32, error) {
	return c.findCoordinator(id, (*kadm.Client).FindTxnCoordinators)
}

// findCoordinator is the node find names for key.
func (c *cluster) findCoordinator(key string, find func(*kadm.Client, context.Context, ...string) kadm.FindCoordinatorResponses) (int32, error) {
	adm, err := c.admin()
	if err != nil {
		return -1, err
	}
	defer adm.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, ok := find(adm, ctx, key)[key]
	if !ok || r.Err != nil {
		return -1, fmt.Errorf("FindCoordinator %s: %v", key, r.Err)
	}
	return r.NodeID, nil
}

// partitionLeader is the leader of "<topic> <partition>".
func (c *cluster) partitionLeader(key string) (int32, error) {
	topic, ps, _ := strings.Cut(key, " ")
	p, err := strconv.Atoi(strings.TrimSpace(ps))
	if err != nil {
		return -1, fmt.Errorf("partition %q: %w", key, err)
	}
	adm, err := c.admin()
	if err != nil {
		return -1, err
	}
	defer adm.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	td, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return -1, err
	}
	pd, ok := td[topic].Partitions[int32(p)]
	if !ok || pd.Leader < 0 {
		return -1, fmt.Errorf("%s-%d: no leader (%v)", topic, p, td[topic].Err)
	}
	return pd.Leader, nil
}

// restarter serves one scenario's broker stop and start requests; it
// remembers the node it stopped and what happened, for the "restart" cell.
type restarter struct {
	c       *cluster
	stopped *broker
	why     string // whose node it stopped
	stopDur time.Duration
	killed  bool   // stopped by SIGKILL rather than SIGTERM
	lines   []line // the driver's own results for the scenario
}

// control answers one request of the scenario:
//
//	broker stop <group>   SIGTERM the coordinator of group (controlled
//	                      shutdown), wait for exit 0; reply "stopped node <id> …"
//	broker stop-txn <id>  the same for the coordinator of a transactional id
//	broker kill-txn <id>  SIGKILL the coordinator of a transactional id and
//	                      wait for it to be gone; reply "killed node <id> …"
//	broker kill-leader <topic> <partition>
//	                      the same for the leader of a partition
//	broker start          start it again, wait until it is back in every
//	                      ISR; reply "started node <id> …"
//
// A failure replies "error <why>" and fails the "restart" cell.
func (r *restarter) control(req string) string {
	verb, arg, _ := strings.Cut(req, " ")
	switch verb {
	case "stop":
		return r.stop(strings.TrimSpace(arg), "group", r.c.coordinator)
	case "stop-txn":
		return r.stop(strings.TrimSpace(arg), "transactional id", r.c.txnCoordinator)
	case "kill-txn":
		return r.kill(strings.TrimSpace(arg), "coordinator of transactional id", r.c.txnCoordinator)
	case "kill-leader":
		return r.kill(strings.TrimSpace(arg), "leader of partition", r.c.partitionLeader)
	case "start":
		return r.start()
	}
	return "error unknown request " + req
}

// stop stops the coordinator of key (a group or a transactional id, as
// find looks it up), node 2 when it cannot be found.
func (r *restarter) stop(key, kind string, find func(string) (int32, error)) string {
	if r.stopped != nil {
		return r.fail("a node is already stopped")
	}
	id, err := find(key)
	r.why = fmt.Sprintf("node %d, coordinator of %s %s", id, kind, key)
	if err != nil || r.c.node(id) == nil {
		id = 2
		r.why = fmt.Sprintf("node 2 (FindCoordinator %s: %v)", key, err)
	}
	b := r.c.node(id)
	log.Printf("stopping %s", r.why)
	start := time.Now()
	if err := b.stop(60 * time.Second); err != nil {
		return r.fail(fmt.Sprintf("%s: SIGTERM: %v", r.why, err))
	}
	r.stopped, r.stopDur = b, time.Since(start)
	return "stopped " + r.why
}

// kill SIGKILLs the node that is role of key (as find looks it up): a
// crash, nothing flushed or handed over. It is an error when there is no
// such node.
func (r *restarter) kill(key, role string, find func(string) (int32, error)) string {
	if r.stopped != nil {
		return r.fail("a node is already stopped")
	}
	id, err := find(key)
	if err != nil || r.c.node(id) == nil {
		return r.fail(fmt.Sprintf("no %s %s to kill: %v", role, key, err))
	}
	r.why = fmt.Sprintf("node %d, %s %s", id, role, key)
	log.Printf("killing %s", r.why)
	b := r.c.node(id)
	b.kill()
	r.stopped, r.killed = b, true
	return "killed " + r.why + " (SIGKILL)"
}

func (r *restarter) start() string {
	b := r.stopped
	if b == nil {
		return r.fail("start without a stopped node")
	}
	start := time.Now()
	if err := r.c.startNode(b); err != nil {
		return r.fail(fmt.Sprintf("%s: start again: %v", r.why, err))
	}
	if err := r.c.waitWhole(60 * time.Second); err != nil {
		return r.fail(fmt.Sprintf("%s: after the restart: %v", r.why, err))
	}
	r.stopped = nil
	how := fmt.Sprintf("controlled shutdown (SIGTERM, exit 0) in %.1fs", r.stopDur.Seconds())
	if r.killed {
		how = "SIGKILLed"
	}
	r.lines = append(r.lines, line{"pass", "restart", fmt.Sprintf(
		"%s: %s; started again, back in every ISR after %.1fs", r.why, how, time.Since(start).Seconds())})
	return fmt.Sprintf("started node %d again, back in every ISR", b.id)
}

func (r *restarter) fail(why string) string {
	r.lines = append(r.lines, line{"fail", "restart", why})
	return "error " + why
}

// heal starts a node a scenario left stopped and waits for a whole
// cluster, so the next scenario starts from three in-sync brokers.
func (r *restarter) heal() error {
	if r.stopped != nil {
		if r.c.startNode(r.stopped) == nil {
			r.stopped = nil
		}
	}
	return r.c.waitWhole(60 * time.Second)
}

// stop SIGTERMs the nodes one after another; every one must exit 0.
func (c *cluster) stop() error {
	var errs []error
	for _, b := range c.nodes {
		if err := b.stop(60 * time.Second); err != nil {
			errs = append(errs, fmt.Errorf("node %d: %w", b.id, err))
		}
	}
	return errors.Join(errs...)
}

func (c *cluster) kill() {
	for _, b := range c.nodes {
		b.kill()
	}
}

// freePorts returns n distinct 127.0.0.1 ports below the kernel's
// ephemeral range, free when checked: a port from that range could be
// taken by an outgoing connection before a restarted node binds it again.
func freePorts(n int) ([]int, error) {
	var out []int
	for port := 20000 + int(time.Now().UnixNano()%10000); len(out) < n && port < 32000; port++ {
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		ln.Close()
		out = append(out, port)
	}
	if len(out) < n {
		return nil, errors.New("no free ports below the ephemeral range")
	}
	return out, nil
}
