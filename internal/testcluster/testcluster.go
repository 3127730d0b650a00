// Package testcluster runs a Sluice cluster of N nodes as separate
// processes of the built binary, each with its own config file and data
// dir, on 127.0.0.1 ports, every node a broker and a controller voter
// (process.roles=broker,controller) unless Options.Roles says otherwise
// (controller-only and broker-only nodes). Tests kill (SIGKILL), stop (SIGTERM:
// controlled shutdown), pause (SIGSTOP), resume and restart nodes, and
// talk to the cluster with real Kafka clients.
//
// StartInProcess (inproc.go) runs the same cluster inside the test's
// process, for the scenarios that need no kill, pause or network fault: a
// process per node is what kill tests need, since a SIGKILLed broker must
// close its sockets the way a dead process does.
package testcluster

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/controller"
)

// Cluster is N running nodes.
type Cluster struct {
	t         testing.TB
	bin       string
	ClusterID string
	Nodes     []*Node
	// Voters is controller.quorum.voters.
	Voters string
	// clientOpts are Options.ClientOpts.
	clientOpts []kgo.Opt
}

// Node is one sluice process.
type Node struct {
	ID             int32
	Addr           string // PLAINTEXT listener ("" on a controller-only node)
	ControllerAddr string // CONTROLLER listener ("" on a broker-only node of Start)
	// Roles is the node's process.roles.
	Roles      string
	ConfigPath string
	DataDir    string

	c    *Cluster
	mu   sync.Mutex
	cmd  *exec.Cmd
	log  *lockedBuffer
	done chan struct{}
	err  error // the exit status, once done
}

// Options adjust a cluster.
type Options struct {
	// Extra lines appended to every node's config file, {PLAINTEXT} and
	// {CONTROLLER} replaced by the node's addresses.
	Extra []string
	// Roles, when set, is each node's process.roles ("broker",
	// "controller" or "broker,controller"; one per node, in id order);
	// by default every node has both. The voters are the nodes with the
	// controller role; broker-only nodes find them through
	// controller.quorum.voters too.
	Roles []string
	// FormatArgs are more `sluice format` flags for every node
	// (--add-scram).
	FormatArgs []string
	// ClientOpts (TLS, SASL) go to every client the harness makes, its
	// own waits included: a cluster whose listeners are not PLAINTEXT.
	ClientOpts []kgo.Opt
}

// IsBroker reports whether the node serves clients (its roles include
// broker).
func (nd *Node) IsBroker() bool { return strings.Contains(nd.Roles, "broker") }

// IsController reports whether the node is a voter.
func (nd *Node) IsController() bool { return strings.Contains(nd.Roles, "controller") }

var (
	portsMu   sync.Mutex
	portsUsed = map[string]bool{}

	buildOnce sync.Once
	buildBin  string
	buildErr  error
)

// Binary builds cmd/sluice once per test binary and returns its path;
// with SLUICE_TESTCLUSTER_RACE=1 the nodes run under the race detector,
// and a race a node reports fails the test.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "sluice-testcluster-")
		if err != nil {
			buildErr = err
			return
		}
		buildBin = filepath.Join(dir, "sluice")
		args := []string{"build", "-o", buildBin}
		if os.Getenv("SLUICE_TESTCLUSTER_RACE") == "1" {
			args = append(args, "-race")
		}
		out, err := exec.Command("go", append(args, "github.com/sluice-broker/sluice/cmd/sluice")...).CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildBin
}

// freePort returns a 127.0.0.1 port nothing listens on now, below the
// kernel's ephemeral range (32768 and up on Linux): a port from that
// range, free when checked, can be taken by any outgoing connection
// before the node binds it.
func freePort(t testing.TB) string {
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 1000 {
		addr := fmt.Sprintf("127.0.0.1:%d", 20000+rand.IntN(12000))
		if portsUsed[addr] {
			continue // handed out before: a node may hold it, or be about to
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		ln.Close()
		portsUsed[addr] = true
		return addr
	}
	t.Fatal("no free port below the ephemeral range")
	return ""
}

// Start formats and starts n nodes and waits until every one is a
// registered, unfenced broker. The nodes are killed when the test ends.
func Start(t testing.TB, n int, opts Options) *Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a cluster of processes: skipped under -short")
	}
	c := &Cluster{t: t, bin: Binary(t), ClusterID: "sluice-test-" + fmt.Sprint(time.Now().UnixNano()%1e9), clientOpts: opts.ClientOpts}
	var voters []string
	brokers := 0
	for i := 1; i <= n; i++ {
		nd := &Node{ID: int32(i), Roles: "broker,controller", DataDir: t.TempDir(), c: c}
		if len(opts.Roles) > 0 {
			nd.Roles = opts.Roles[i-1]
		}
		if nd.IsBroker() {
			nd.Addr = freePort(t)
			brokers++
		}
		if nd.IsController() {
			nd.ControllerAddr = freePort(t)
			voters = append(voters, fmt.Sprintf("%d@%s", i, nd.ControllerAddr))
		}
		c.Nodes = append(c.Nodes, nd)
	}
	c.Voters = strings.Join(voters, ",")
	for _, nd := range c.Nodes {
		nd.ConfigPath = c.WriteConfig(nd, nd.Roles, "controller.quorum.voters="+c.Voters, opts.Extra...)
		c.Format(nd.ConfigPath, c.ClusterID, opts.FormatArgs...)
	}
	t.Cleanup(func() {
		for _, nd := range c.Nodes {
			nd.signal(syscall.SIGCONT)
			nd.signal(syscall.SIGKILL)
			nd.wait(5 * time.Second)
			if strings.Contains(nd.Log(), "WARNING: DATA RACE") {
				t.Errorf("node %d reported a data race", nd.ID)
			}
			if t.Failed() {
				t.Logf("node %d log:\n%s", nd.ID, nd.Log())
			}
		}
	})
	for _, nd := range c.Nodes {
		nd.start()
	}
	c.WaitFor(30*time.Second, fmt.Sprintf("%d brokers", brokers), func() bool {
		for _, nd := range c.Nodes {
			if !nd.Running() {
				err, _ := nd.wait(0)
				t.Fatalf("node %d exited while the cluster formed: %v\n%s", nd.ID, err, nd.Log())
			}
		}
		return c.hasBrokers(brokers)
	})
	return c
}

// WriteConfig writes a node's server.properties.
func (c *Cluster) WriteConfig(nd *Node, roles string, quorum string, extra ...string) string {
	var listeners []string
	if nd.Addr != "" {
		listeners = append(listeners, "PLAINTEXT://"+nd.Addr)
	}
	if nd.ControllerAddr != "" {
		listeners = append(listeners, "CONTROLLER://"+nd.ControllerAddr)
	}
	lines := []string{
		"process.roles=" + roles,
		fmt.Sprintf("node.id=%d", nd.ID),
		"listeners=" + strings.Join(listeners, ","),
		"controller.listener.names=CONTROLLER",
		quorum,
		"log.dirs=" + nd.DataDir,
		"sluice.net=std",
		"group.initial.rebalance.delay.ms=0",
		"offsets.topic.num.partitions=3",
	}
	for _, l := range extra { // {PLAINTEXT} and {CONTROLLER} are the node's addresses, as in StartInProcess
		lines = append(lines, strings.NewReplacer("{PLAINTEXT}", nd.Addr, "{CONTROLLER}", nd.ControllerAddr).Replace(l))
	}
	path := filepath.Join(nd.DataDir, "..", fmt.Sprintf("node%d-%d.properties", nd.ID, time.Now().UnixNano()))
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		c.t.Fatal(err)
	}
	return path
}

// Format runs `sluice format` for a config, with more flags if given.
func (c *Cluster) Format(config, clusterID string, more ...string) {
	out, err := exec.Command(c.bin, append([]string{"format", "--cluster-id", clusterID, "--config", config}, more...)...).CombinedOutput()
	if err != nil {
		c.t.Fatalf("sluice format: %v\n%s", err, out)
	}
}

// AddNode starts one more process that is not a voter: process.roles
// broker, reaching the quorum through controller.quorum.bootstrap.servers,
// its data dir formatted with clusterID. It is not waited for.
func (c *Cluster) AddNode(id int32, clusterID string) *Node {
	nd := &Node{ID: id, Roles: "broker", Addr: freePort(c.t), ControllerAddr: freePort(c.t), DataDir: c.t.TempDir(), c: c}
	var boot []string
	for _, v := range c.Nodes {
		if v.IsController() {
			boot = append(boot, v.ControllerAddr)
		}
	}
	nd.ConfigPath = c.WriteConfig(nd, "broker", "controller.quorum.bootstrap.servers="+strings.Join(boot, ","))
	c.Format(nd.ConfigPath, clusterID)
	c.Nodes = append(c.Nodes, nd)
	nd.start()
	return nd
}

// Bootstrap is every running node's client address.
func (c *Cluster) Bootstrap() []string {
	var out []string
	for _, nd := range c.Nodes {
		if nd.Running() && nd.IsBroker() {
			out = append(out, nd.Addr)
		}
	}
	return out
}

// Client is a franz-go client of the running nodes.
func (c *Cluster) Client(opts ...kgo.Opt) *kgo.Client {
	cl, err := kgo.NewClient(append(append([]kgo.Opt{kgo.SeedBrokers(c.Bootstrap()...)}, c.clientOpts...), opts...)...)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(cl.Close)
	return cl
}

// Node returns the node with id.
func (c *Cluster) Node(id int32) *Node {
	for _, nd := range c.Nodes {
		if nd.ID == id {
			return nd
		}
	}
	c.t.Fatalf("no node %d", id)
	return nil
}

// Metadata asks node nd for the cluster's metadata (all topics).
func (c *Cluster) Metadata(nd *Node) (*kmsg.MetadataResponse, error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(nd.Addr), kgo.MetadataMinAge(10 * time.Millisecond)}, c.clientOpts...)...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	return req.RequestWith(ctx, cl)
}

// WaitBrokers waits until a running node's Metadata lists n brokers.
func (c *Cluster) WaitBrokers(n int, timeout time.Duration) {
	c.t.Helper()
	c.WaitFor(timeout, fmt.Sprintf("%d brokers", n), func() bool { return c.hasBrokers(n) })
}

// hasBrokers reports whether every running node's Metadata lists n brokers.
func (c *Cluster) hasBrokers(n int) bool {
	for _, nd := range c.Nodes {
		if !nd.Running() || !nd.IsBroker() {
			continue
		}
		if m, err := c.Metadata(nd); err != nil || len(m.Brokers) != n {
			return false
		}
	}
	return true
}

// WaitFor polls cond until it holds or timeout passes (then fails).
func (c *Cluster) WaitFor(timeout time.Duration, what string, cond func() bool) {
	c.t.Helper()
	waitFor(c.t, timeout, what, cond)
}

// waitFor polls cond until it holds, failing t after timeout.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ActiveController asks the quorum (DescribeQuorum on the controller
// listeners) which node is the active controller; -1 when none answers.
func (c *Cluster) ActiveController() int32 {
	for _, nd := range c.Nodes {
		if !nd.Running() || !nd.IsController() {
			continue
		}
		cl := controller.NewClient([]string{nd.ControllerAddr})
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		req := kmsg.NewPtrDescribeQuorumRequest()
		t := kmsg.NewDescribeQuorumRequestTopic()
		t.Topic = "__cluster_metadata"
		t.Partitions = append(t.Partitions, kmsg.NewDescribeQuorumRequestTopicPartition())
		req.Topics = append(req.Topics, t)
		resp, err := cl.Call(ctx, controller.LineAdmin, req)
		cancel()
		cl.Close()
		if err != nil {
			continue
		}
		r := resp.(*kmsg.DescribeQuorumResponse)
		if len(r.Topics) == 1 && len(r.Topics[0].Partitions) == 1 {
			if p := r.Topics[0].Partitions[0]; p.ErrorCode == 0 && p.LeaderID == nd.ID {
				return nd.ID
			}
		}
	}
	return -1
}

func (nd *Node) start() {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	nd.log = &lockedBuffer{}
	cmd := exec.Command(nd.c.bin, "serve", "--config", nd.ConfigPath)
	cmd.Stdout, cmd.Stderr = nd.log, nd.log
	if err := cmd.Start(); err != nil {
		nd.c.t.Fatal(err)
	}
	nd.cmd, nd.done, nd.err = cmd, make(chan struct{}), nil
	done := nd.done
	go func() {
		err := cmd.Wait()
		nd.mu.Lock()
		nd.err = err
		nd.mu.Unlock()
		close(done)
	}()
}

// Running reports whether the process is alive (paused counts).
func (nd *Node) Running() bool {
	nd.mu.Lock()
	done := nd.done
	nd.mu.Unlock()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

func (nd *Node) signal(s syscall.Signal) {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.cmd != nil && nd.cmd.Process != nil {
		nd.cmd.Process.Signal(s)
	}
}

// wait waits for the process to exit and returns its exit error.
func (nd *Node) wait(timeout time.Duration) (error, bool) {
	nd.mu.Lock()
	done := nd.done
	nd.mu.Unlock()
	if done == nil {
		return nil, true
	}
	select {
	case <-done:
		nd.mu.Lock()
		defer nd.mu.Unlock()
		return nd.err, true
	case <-time.After(timeout):
		return nil, false
	}
}

// Kill SIGKILLs the node and waits for it to be gone.
func (nd *Node) Kill() {
	nd.signal(syscall.SIGKILL)
	nd.wait(10 * time.Second)
}

// Stop SIGTERMs the node (controlled shutdown) and waits for its exit.
func (nd *Node) Stop() error {
	nd.signal(syscall.SIGTERM)
	err, ok := nd.wait(30 * time.Second)
	if !ok {
		nd.c.t.Fatalf("node %d did not stop after SIGTERM", nd.ID)
	}
	return err
}

// Pause SIGSTOPs the node; Resume SIGCONTs it.
func (nd *Node) Pause()  { nd.signal(syscall.SIGSTOP) }
func (nd *Node) Resume() { nd.signal(syscall.SIGCONT) }

// Restart starts a stopped or killed node again with its data dir.
func (nd *Node) Restart() {
	if nd.Running() {
		nd.Kill()
	}
	nd.start()
}

// Wait waits up to timeout for the process to exit on its own and returns
// its exit error; ok is false if it is still running.
func (nd *Node) Wait(timeout time.Duration) (err error, ok bool) { return nd.wait(timeout) }

// Log is what the process wrote so far.
func (nd *Node) Log() string {
	nd.mu.Lock()
	l := nd.log
	nd.mu.Unlock()
	if l == nil {
		return ""
	}
	return l.String()
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// clientOf is a client of node nd alone, with the cluster's client options.
func (c *Cluster) clientOf(t testing.TB, nd *Node) *kgo.Client {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(nd.Addr)}, c.clientOpts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}
