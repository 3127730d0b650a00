package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/controller"
)

// cluster is the run's nodes: voters first (ids 1..n, broker and
// controller), then brokers added by the membership fault.
type cluster struct {
	bin       string
	work      string
	clusterID string
	voters    string
	extra     []string
	tmpfsMB   int
	sec       *security
	// nodes changes only on the harness's main goroutine, under nodesMu,
	// which other goroutines hold to read it (snapshot).
	nodes   []*node
	nodesMu sync.Mutex
	// lastID is the highest node id handed out; a removed broker's id is
	// not reused.
	lastID int32
}

// brokerConfig is every node's tuning: Kafka's durability settings, short
// sessions so a run sees many failovers.
func brokerConfig(netBackend string) []string {
	return []string{
		"sluice.net=" + netBackend,
		"broker.session.timeout.ms=3000",
		"broker.heartbeat.interval.ms=500",
		"replica.lag.time.max.ms=5000",
		"min.insync.replicas=2",
		"default.replication.factor=3",
		"offsets.topic.replication.factor=3",
		"offsets.topic.num.partitions=3",
		"group.initial.rebalance.delay.ms=0",
		"transaction.state.log.replication.factor=3",
		"transaction.state.log.num.partitions=3",
	}
}

// startCluster creates n namespaces and voters and waits for n brokers.
// The last node's data dir is a tmpfs when tmpfsMB > 0.
func startCluster(bin, work string, n int, netBackend string, tmpfsMB int, sec *security) (*cluster, error) {
	c := &cluster{bin: bin, work: work, clusterID: fmt.Sprintf("sluice-chaos-%d", time.Now().UnixNano()%1e9),
		extra: brokerConfig(netBackend), tmpfsMB: tmpfsMB, sec: sec}
	if err := setupBridge(); err != nil {
		return nil, err
	}
	var voters []string
	for i := 1; i <= n; i++ {
		nd := &node{id: int32(i), dir: filepath.Join(work, fmt.Sprintf("node%d", i)), tmpfs: tmpfsMB > 0 && i == n, sec: sec}
		c.nodes = append(c.nodes, nd)
		voters = append(voters, fmt.Sprintf("%d@%s", i, nd.controllerAddr()))
	}
	c.voters = strings.Join(voters, ",")
	for _, nd := range c.nodes {
		if err := setupNamespace(nd.id); err != nil {
			return nil, err
		}
		if err := nd.prepare(bin, c.clusterID, "broker,controller", "controller.quorum.voters="+c.voters, c.extra, tmpfsMB); err != nil {
			return nil, err
		}
	}
	for _, nd := range c.nodes {
		if err := nd.start(bin); err != nil {
			return nil, err
		}
	}
	return c, c.waitFor(60*time.Second, fmt.Sprintf("%d brokers", n), func() bool { return c.brokersUp(n) })
}

// addBroker starts a broker-only node (the membership fault) in a new
// namespace, reaching the quorum through its bootstrap servers.
func (c *cluster) addBroker() (*node, error) {
	c.lastID = max(c.lastID, int32(len(c.nodes))) + 1
	id := c.lastID
	if id > maxNodeID {
		return nil, fmt.Errorf("node id %d: the run's addresses end at node %d", id, maxNodeID)
	}
	nd := &node{id: id, brokerOnly: true, dir: filepath.Join(c.work, fmt.Sprintf("node%d", id)), sec: c.sec}
	var boot []string
	for _, v := range c.nodes {
		boot = append(boot, v.controllerAddr())
	}
	if err := setupNamespace(id); err != nil {
		return nil, err
	}
	if err := nd.prepare(c.bin, c.clusterID, "broker", "controller.quorum.bootstrap.servers="+strings.Join(boot, ","), c.extra, 0); err != nil {
		return nil, err
	}
	c.nodesMu.Lock()
	c.nodes = append(c.nodes, nd)
	c.nodesMu.Unlock()
	return nd, nd.start(c.bin)
}

// brokerOnly is a running broker-only node (one add-broker started), or
// nil.
func (c *cluster) brokerOnly() *node {
	for _, nd := range c.nodes {
		if nd.brokerOnly && nd.running() {
			return nd
		}
	}
	return nil
}

// forget drops nd from the cluster's nodes (remove-broker retired it).
func (c *cluster) forget(nd *node) {
	c.nodesMu.Lock()
	defer c.nodesMu.Unlock()
	c.nodes = slices.DeleteFunc(slices.Clone(c.nodes), func(x *node) bool { return x == nd })
}

// snapshot is a copy of the nodes, for goroutines other than the main one.
func (c *cluster) snapshot() []*node {
	c.nodesMu.Lock()
	defer c.nodesMu.Unlock()
	return slices.Clone(c.nodes)
}

func (c *cluster) ids() []int32 {
	var out []int32
	for _, nd := range c.nodes {
		out = append(out, nd.id)
	}
	return out
}

func (c *cluster) node(id int32) *node {
	for _, nd := range c.nodes {
		if nd.id == id {
			return nd
		}
	}
	return nil
}

// seeds is every node's client address (clients skip the dead ones).
func (c *cluster) seeds() []string {
	var out []string
	for _, nd := range c.nodes {
		out = append(out, nd.addr())
	}
	return out
}

// clientOpts are the options of a client of the cluster: every node as a
// seed, the run's TLS and SASL, and more.
func (c *cluster) clientOpts(more ...kgo.Opt) []kgo.Opt {
	return c.sec.clientOpts(c.seeds(), more...)
}

// waitFor polls cond every 50 ms until it holds or d passes.
func (c *cluster) waitFor(d time.Duration, what string, cond func() bool) error {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// metadata asks node nd for every topic's metadata.
func (c *cluster) metadata(nd *node) (*kmsg.MetadataResponse, error) {
	cl, err := kgo.NewClient(c.sec.clientOpts([]string{nd.addr()}, kgo.MetadataMinAge(10*time.Millisecond),
		kgo.DialTimeout(time.Second), kgo.RequestRetries(0))...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
}

// brokersUp reports whether every running node lists n brokers.
func (c *cluster) brokersUp(n int) bool {
	for _, nd := range c.nodes {
		if !nd.running() {
			continue
		}
		if m, err := c.metadata(nd); err != nil || len(m.Brokers) != n {
			return false
		}
	}
	return true
}

// partitionState is one partition as a node's metadata shows it.
type partitionState struct {
	leader      int32
	leaderEpoch int32
	replicas    []int32
	isr         []int32
}

// topicState returns topic's partitions as node nd sees them.
func (c *cluster) topicState(nd *node, topic string) map[int32]partitionState {
	m, err := c.metadata(nd)
	if err != nil {
		return nil
	}
	out := map[int32]partitionState{}
	for _, t := range m.Topics {
		if t.Topic != nil && *t.Topic == topic {
			for _, p := range t.Partitions {
				out[p.Partition] = partitionState{p.Leader, p.LeaderEpoch, p.Replicas, p.ISR}
			}
		}
	}
	return out
}

// healed reports whether every running node lists every node as a broker
// and shows each partition of topics with a leader and its whole replica
// set in the ISR.
func (c *cluster) healed(topics []string, partitions map[string]int) bool {
	if !c.brokersUp(len(c.nodes)) {
		return false
	}
	for _, nd := range c.nodes {
		if !nd.running() {
			return false
		}
		for _, t := range topics {
			st := c.topicState(nd, t)
			if len(st) != partitions[t] {
				return false
			}
			for _, p := range st {
				if p.leader < 0 || len(p.isr) != len(p.replicas) {
					return false
				}
			}
		}
	}
	return true
}

// leaders returns topic's partition → leader, asked of the first node
// that answers with every partition.
func (c *cluster) leaders(topic string, partitions int) map[int32]int32 {
	for _, nd := range c.nodes {
		if !nd.running() {
			continue
		}
		if st := c.topicState(nd, topic); len(st) == partitions {
			out := map[int32]int32{}
			for p, s := range st {
				out[p] = s.leader
			}
			return out
		}
	}
	return nil
}

// leaderEpoch is partition's leader and leader epoch as a running node
// sees them; ok false when none answers.
func (c *cluster) leaderEpoch(topic string, partition int32) (leader, epoch int32, ok bool) {
	for _, nd := range c.nodes {
		if !nd.running() {
			continue
		}
		if s, found := c.topicState(nd, topic)[partition]; found {
			return s.leader, s.leaderEpoch, true
		}
	}
	return 0, 0, false
}

// waitStable waits until healed has held for hold without a break: a
// replica that stopped fetching stays in the ISR until
// replica.lag.time.max.ms, so one look can be too early.
func (c *cluster) waitStable(topics []string, parts map[string]int, hold, timeout time.Duration) error {
	var since time.Time
	return c.waitFor(timeout, fmt.Sprintf("a full ISR for %v", hold), func() bool {
		if !c.healed(topics, parts) {
			since = time.Time{}
			return false
		}
		if since.IsZero() {
			since = time.Now()
		}
		return time.Since(since) >= hold
	})
}

// isrOf is topic-partition p's ISR as a running node sees it.
func (c *cluster) isrOf(topic string, p int32) []int32 {
	for _, nd := range c.nodes {
		if !nd.running() {
			continue
		}
		if s, ok := c.topicState(nd, topic)[p]; ok {
			return slices.Clone(s.isr)
		}
	}
	return nil
}

// replicasOf is topic-partition p's replica set as a running node sees it.
func (c *cluster) replicasOf(topic string, p int32) []int32 {
	for _, nd := range c.nodes {
		if !nd.running() {
			continue
		}
		if s, ok := c.topicState(nd, topic)[p]; ok {
			return slices.Clone(s.replicas)
		}
	}
	return nil
}

// activeController asks the voters (DescribeQuorum on the controller
// listeners) which node is the active controller; -1 when none answers.
// A sasl_ssl run asks the nodes' broker listeners, which forward the
// request to the active controller over their own secured controller
// link: the harness has no login of its own for the controller listener.
func (c *cluster) activeController() int32 {
	for _, nd := range c.nodes {
		if !nd.running() || nd.paused() {
			continue
		}
		req := kmsg.NewPtrDescribeQuorumRequest()
		t := kmsg.NewDescribeQuorumRequestTopic()
		t.Topic = "__cluster_metadata"
		t.Partitions = append(t.Partitions, kmsg.NewDescribeQuorumRequestTopicPartition())
		req.Topics = append(req.Topics, t)
		resp, err := c.describeQuorum(nd, req)
		if err != nil {
			continue
		}
		r := resp.(*kmsg.DescribeQuorumResponse)
		if len(r.Topics) == 1 && len(r.Topics[0].Partitions) == 1 {
			if p := r.Topics[0].Partitions[0]; p.ErrorCode == 0 && p.LeaderID >= 0 {
				return p.LeaderID
			}
		}
	}
	return -1
}

// describeQuorum sends req to nd's controller listener, or for a
// sasl_ssl run to its broker listener.
func (c *cluster) describeQuorum(nd *node, req *kmsg.DescribeQuorumRequest) (kmsg.Response, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if c.sec.secured() {
		cl, err := kgo.NewClient(c.sec.clientOpts([]string{nd.addr()}, kgo.DialTimeout(time.Second), kgo.RequestRetries(0))...)
		if err != nil {
			return nil, err
		}
		defer cl.Close()
		return req.RequestWith(ctx, cl)
	}
	cl := controller.NewClient([]string{nd.controllerAddr()})
	defer cl.Close()
	return cl.Call(ctx, controller.LineAdmin, req)
}

// partitionDirs maps node → topic-partition p's directory, for the nodes
// that hold a replica.
func (c *cluster) partitionDirs(topic string, p int32, replicas []int32) map[int32]string {
	out := map[int32]string{}
	for _, id := range replicas {
		if nd := c.node(id); nd != nil {
			out[id] = filepath.Join(nd.dataDir, fmt.Sprintf("%s-%d", topic, p))
		}
	}
	return out
}

// killAll SIGKILLs every node.
func (c *cluster) killAll() {
	for _, nd := range c.nodes {
		nd.kill()
	}
}

// saveTmpfs copies tmpfs data dirs to disk (they vanish when unmounted).
func (c *cluster) saveTmpfs() {
	for _, nd := range c.nodes {
		if nd.tmpfs {
			run("cp", "-a", nd.dataDir, nd.dataDir+".saved")
		}
	}
}

// removeData deletes the run's data dirs (logs and configs stay).
func (c *cluster) removeData() {
	unmountUnder(c.work)
	for _, nd := range c.nodes {
		os.RemoveAll(nd.dataDir)
	}
}
