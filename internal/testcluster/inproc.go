package testcluster

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-broker/sluice/engine"
	"github.com/sluice-broker/sluice/internal/server"
	"github.com/sluice-broker/sluice/metadata"
)

// InProc is a cluster of N nodes inside the test's own process: each node
// the real quorum member, broker and network layer (internal/server) on its
// own 127.0.0.1 ports and data dir, every node a broker and a controller
// voter. It forms and restarts in a fraction of what a process per node
// costs, so the cluster scenarios that need no SIGKILL, SIGSTOP or network
// fault run here; those that do need Start's processes, since only a dead
// process closes its sockets the way a crash does.
type InProc struct {
	t         testing.TB
	ClusterID string
	Voters    string
	Nodes     []*InProcNode
	// clientOpts go to every client the harness makes (the security of
	// a cluster whose listeners are not PLAINTEXT).
	clientOpts []kgo.Opt
}

// InProcOptions are StartInProcessWith's.
type InProcOptions struct {
	// ClientOpts (TLS, SASL) go to every client the harness makes, its
	// own waits included.
	ClientOpts []kgo.Opt
	// Bootstrap are records every node is formatted with (sluice format
	// --add-scram).
	Bootstrap []metadata.Record
}

// InProcNode is one node of an InProc cluster.
type InProcNode struct {
	ID             int32
	Addr           string // PLAINTEXT listener
	ControllerAddr string // CONTROLLER listener
	DataDir        string

	props string // its server.properties lines
	mu    sync.Mutex
	srv   *server.Server // nil while stopped
}

// StartInProcess formats and starts n nodes in this process and waits until
// every one is a registered broker; extra config lines go to every node,
// with {PLAINTEXT} and {CONTROLLER} replaced by the node's addresses.
// The nodes shut down when the test ends.
func StartInProcess(t testing.TB, n int, extra ...string) *InProc {
	t.Helper()
	return StartInProcessWith(t, n, InProcOptions{}, extra...)
}

// StartInProcessWith is StartInProcess with options.
func StartInProcessWith(t testing.TB, n int, o InProcOptions, extra ...string) *InProc {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a cluster: skipped under -short")
	}
	c := &InProc{t: t, ClusterID: metadata.NewClusterID(), clientOpts: o.ClientOpts}
	var voters []string
	for i := 1; i <= n; i++ {
		nd := &InProcNode{ID: int32(i), Addr: freePort(t), ControllerAddr: freePort(t), DataDir: t.TempDir()}
		voters = append(voters, fmt.Sprintf("%d@%s", i, nd.ControllerAddr))
		c.Nodes = append(c.Nodes, nd)
	}
	c.Voters = strings.Join(voters, ",")
	for _, nd := range c.Nodes {
		nd.props = strings.Join(append([]string{
			"process.roles=broker,controller",
			fmt.Sprintf("node.id=%d", nd.ID),
			"listeners=PLAINTEXT://" + nd.Addr + ",CONTROLLER://" + nd.ControllerAddr,
			"controller.listener.names=CONTROLLER",
			"controller.quorum.voters=" + c.Voters,
			"log.dirs=" + nd.DataDir,
			"sluice.net=std",
			"group.initial.rebalance.delay.ms=0",
			"offsets.topic.num.partitions=3",
		}, nodeLines(extra, nd)...), "\n")
		if _, err := metadata.LoadMetaProperties(nd.DataDir, nd.ID, c.ClusterID); err != nil {
			t.Fatalf("format node %d: %v", nd.ID, err)
		}
		if len(o.Bootstrap) > 0 {
			if err := metadata.WriteBootstrap(nd.DataDir, o.Bootstrap); err != nil {
				t.Fatalf("format node %d: %v", nd.ID, err)
			}
		}
	}
	t.Cleanup(func() {
		for _, nd := range c.Nodes {
			nd.Stop(t)
		}
	})
	c.startAll(c.Nodes)
	c.WaitBrokers(n, 30*time.Second)
	return c
}

// startAll starts nodes side by side: a node's start may wait for a
// quorum that the others make.
func (c *InProc) startAll(nodes []*InProcNode) {
	var wg sync.WaitGroup
	errs := make([]error, len(nodes))
	for i, nd := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = nd.start()
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			c.t.Fatalf("start node %d: %v", nodes[i].ID, err)
		}
	}
}

func (nd *InProcNode) start() error {
	cfg := engine.DefaultConfig()
	if _, err := cfg.ApplyProperties(strings.NewReader(nd.props)); err != nil {
		return err
	}
	var w io.Writer = io.Discard
	if os.Getenv("SLUICE_TESTCLUSTER_LOG") != "" { // the nodes' logs, when a scenario needs a look
		w = os.Stderr
	}
	logger := slog.New(slog.NewTextHandler(w, nil))
	srv, err := server.Start(server.Options{Config: cfg, Logger: logger, Net: "std"})
	if err != nil {
		return err
	}
	nd.mu.Lock()
	nd.srv = srv
	nd.mu.Unlock()
	return nil
}

// Start starts a stopped node again on its ports and data dir.
func (nd *InProcNode) Start(t testing.TB) {
	t.Helper()
	if err := nd.start(); err != nil {
		t.Fatalf("restart node %d: %v", nd.ID, err)
	}
}

// Stop shuts the node down as SIGTERM does (a controlled shutdown: its
// leaderships move first); a stopped node is left be.
func (nd *InProcNode) Stop(t testing.TB) {
	t.Helper()
	nd.mu.Lock()
	srv := nd.srv
	nd.srv = nil
	nd.mu.Unlock()
	if srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Errorf("stop node %d: %v", nd.ID, err)
	}
}

// Running reports whether the node is started.
func (nd *InProcNode) Running() bool {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	return nd.srv != nil
}

// Bootstrap lists the running nodes' client addresses.
func (c *InProc) Bootstrap() []string {
	var addrs []string
	for _, nd := range c.Nodes {
		if nd.Running() {
			addrs = append(addrs, nd.Addr)
		}
	}
	return addrs
}

// Client is a franz-go client bootstrapped from the running nodes, closed
// when the test ends.
func (c *InProc) Client(opts ...kgo.Opt) *kgo.Client {
	cl, err := kgo.NewClient(append(append([]kgo.Opt{kgo.SeedBrokers(c.Bootstrap()...)}, c.clientOpts...), opts...)...)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(cl.Close)
	return cl
}

// WaitBrokers waits until the cluster's metadata lists n brokers.
func (c *InProc) WaitBrokers(n int, timeout time.Duration) {
	c.t.Helper()
	c.WaitFor(timeout, fmt.Sprintf("%d brokers", n), func() bool {
		for _, nd := range c.Nodes {
			if !nd.Running() || nd.brokers(c.clientOpts) != n {
				return false
			}
		}
		return true
	})
}

// WaitFor polls cond until it holds, failing the test after timeout.
func (c *InProc) WaitFor(timeout time.Duration, what string, cond func() bool) {
	c.t.Helper()
	waitFor(c.t, timeout, what, cond)
}

// brokers counts the brokers a Metadata request to this node lists, -1 if
// it does not answer.
func (nd *InProcNode) brokers(opts []kgo.Opt) int {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(nd.Addr)}, opts...)...)
	if err != nil {
		return -1
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	m, err := kadm.NewClient(cl).BrokerMetadata(ctx)
	if err != nil {
		return -1
	}
	return len(m.Brokers)
}

// nodeLines fills a node's addresses into extra config lines.
func nodeLines(extra []string, nd *InProcNode) []string {
	out := make([]string, len(extra))
	for i, l := range extra {
		out[i] = strings.NewReplacer("{PLAINTEXT}", nd.Addr, "{CONTROLLER}", nd.ControllerAddr).Replace(l)
	}
	return out
}

// ListenerAddr is the bound address of one of the node's named listeners
// ("" while stopped).
func (nd *InProcNode) ListenerAddr(name string) string {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.srv == nil {
		return ""
	}
	return nd.srv.ListenerAddr(name)
}

// Broker is the node's running broker (nil while stopped).
func (nd *InProcNode) Broker() *engine.Broker {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.srv == nil {
		return nil
	}
	return nd.srv.Broker
}
