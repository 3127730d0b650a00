package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The faults a run draws from. Each injects, holds, heals; the runner
// then waits for a full ISR and measures.
var allFaults = []string{
	"kill-leader",     // SIGKILL a partition leader that is not the controller, restart
	"kill-controller", // SIGKILL the active controller's node, restart
	"kill-follower",   // SIGKILL a follower of a partition, restart
	"kill-two",        // SIGKILL two nodes at once (with 3 voters: no quorum), restart
	"pause-leader",    // SIGSTOP a leader past the session timeout, SIGCONT
	"rolling-restart", // SIGTERM and restart every node in turn, waiting for a full ISR
	"isolate-leader",  // cut a leader off from every other node (clients still reach it)
	// cut a leader off for a third of the session timeout: a hiccup that
	// must not move leadership (no flapping)
	"hiccup",
	"split-minority", // split the nodes: a minority holding a leader, a majority
	"asym-leader",    // a leader's outgoing packets to the other nodes are dropped
	// cut the group's coordinator off past the group session timeout, so
	// its successor expires the members and they rejoin there
	"isolate-coordinator",
	"disk-full",  // fill the tmpfs data dir of one node, then free it
	"add-broker", // start one more (broker-only) node, when none runs
	"reassign",   // move one replica of a partition onto a broker without one (a new broker first if none)
	// move every replica off the broker-only node, stop it and unregister
	// it, when one runs
	"remove-broker",
}

// sessionTimeout is broker.session.timeout.ms of brokerConfig;
// groupSessionTimeout is the consumers' session.timeout.ms.
const (
	sessionTimeout      = 3 * time.Second
	groupSessionTimeout = 10 * time.Second
)

// fault is one injection as reported.
type fault struct {
	kind      string
	detail    string
	partition int32 // whose produce recovery is measured; -1: any
	start     time.Time
	healStart time.Time
	// produceRecovery: from start until a value sent after start was
	// acknowledged (on partition, or any); isrRecovery: from the heal
	// until every replica was back in the ISR. Zero when not reached.
	produceRecovery, isrRecovery time.Duration
	crashed                      []int32 // nodes that exited on their own
	// flapped: a hiccup moved leadership (counted as a flap in the report)
	flapped bool
	note    string
	err     string // the fault could not be injected or did not heal
}

// injector runs faults against a cluster.
type injector struct {
	c     *cluster
	rng   *rand.Rand
	topic string
	parts int
	group string // the workload's consumer group
	// copyTopic is the transactional copiers' output ("" without them).
	copyTopic string
	added     bool // a broker-only node runs (add-broker or reassign started it)
	maxNode   int  // add-broker's bound on the number of nodes
	logf      func(format string, args ...any)
}

// inject runs one fault of kind and returns its heal function.
func (in *injector) inject(f *fault) (heal func() error, hold time.Duration, err error) {
	switch f.kind {
	case "kill-leader":
		return in.kill(f, in.leader(f))
	case "kill-controller":
		id := in.c.activeController()
		if id < 0 {
			return nil, 0, errors.New("no active controller")
		}
		f.detail = fmt.Sprintf("node %d (controller)", id)
		return in.kill(f, []int32{id})
	case "kill-follower":
		return in.kill(f, in.follower(f))
	case "kill-two":
		ids := in.c.ids()[:len(in.c.nodes)]
		in.rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
		ids = ids[:2]
		f.detail = fmt.Sprintf("nodes %v", ids)
		return in.kill(f, ids)
	case "pause-leader":
		id := in.leader(f)
		if id == nil {
			return nil, 0, errors.New("no leader")
		}
		nd := in.c.node(id[0])
		f.start = time.Now()
		nd.signal(syscall.SIGSTOP)
		return func() error { nd.signal(syscall.SIGCONT); return nil }, sessionTimeout + 1500*time.Millisecond, nil
	case "rolling-restart":
		return nil, 0, in.rolling(f)
	case "isolate-leader", "split-minority", "asym-leader", "isolate-coordinator":
		return in.partition(f)
	case "hiccup":
		return in.hiccup(f)
	case "disk-full":
		return in.diskFull(f)
	case "reassign":
		return nil, 0, in.reassign(f)
	case "remove-broker":
		return nil, 0, in.removeBroker(f)
	case "add-broker":
		nd, err := in.c.addBroker()
		if err != nil {
			return nil, 0, err
		}
		in.added = true
		f.detail = fmt.Sprintf("node %d (broker only)", nd.id)
		return nil, 0, nil
	}
	return nil, 0, fmt.Errorf("unknown fault %q", f.kind)
}

// leader picks a random partition's leader (not the active controller
// unless it leads everything); f's partition and detail are set.
func (in *injector) leader(f *fault) []int32 {
	leaders := in.c.leaders(in.topic, in.parts)
	if len(leaders) == 0 {
		return nil
	}
	active := in.c.activeController()
	order := in.rng.Perm(in.parts)
	pick := int32(-1)
	for _, p := range order {
		l := leaders[int32(p)]
		if l >= 0 && (pick < 0 || leaders[pick] == active) {
			pick = int32(p)
		}
	}
	if pick < 0 {
		return nil
	}
	f.partition = pick
	f.detail = fmt.Sprintf("node %d (leader of %d)", leaders[pick], pick)
	return []int32{leaders[pick]}
}

// follower picks a replica of a random partition that does not lead it.
func (in *injector) follower(f *fault) []int32 {
	p := int32(in.rng.IntN(in.parts))
	leaders := in.c.leaders(in.topic, in.parts)
	var cands []int32
	for _, r := range in.c.replicasOf(in.topic, p) {
		if r != leaders[p] {
			cands = append(cands, r)
		}
	}
	if len(cands) == 0 {
		return nil
	}
	id := cands[in.rng.IntN(len(cands))]
	f.detail = fmt.Sprintf("node %d (follower of %d)", id, p)
	return []int32{id}
}

// kill SIGKILLs ids; the heal restarts them after 1–3 s down.
func (in *injector) kill(f *fault, ids []int32) (func() error, time.Duration, error) {
	if len(ids) == 0 {
		return nil, 0, errors.New("no victim")
	}
	f.start = time.Now()
	for _, id := range ids {
		in.c.node(id).kill()
	}
	return func() error {
		var errs []error
		for _, id := range ids {
			errs = append(errs, in.c.node(id).start(in.c.bin))
		}
		return errors.Join(errs...)
	}, time.Second + time.Duration(in.rng.IntN(2000))*time.Millisecond, nil
}

// reassign moves one replica of a random partition onto a broker that
// holds none of it (the leader's, sometimes: leadership then moves) and
// waits until the controller has completed the move: the new replica in
// the ISR, the old one gone from the replica set.
func (in *injector) reassign(f *fault) error {
	p := int32(in.rng.IntN(in.parts))
	replicas := in.c.replicasOf(in.topic, p)
	var spare []int32
	for _, id := range in.c.ids() {
		if !slices.Contains(replicas, id) {
			spare = append(spare, id)
		}
	}
	if len(replicas) == 0 {
		return errors.New("no replicas")
	}
	if len(spare) == 0 {
		if len(in.c.nodes) >= in.maxNode {
			return errors.New("no broker without a replica, and no room to add one")
		}
		nd, err := in.c.addBroker()
		if err != nil {
			return err
		}
		in.added = true
		if err := in.c.waitFor(60*time.Second, "the new broker", func() bool { return in.c.brokersUp(len(in.c.nodes)) }); err != nil {
			return err
		}
		spare = []int32{nd.id}
	}
	target := slices.Clone(replicas)
	out := in.rng.IntN(len(target))
	target[out] = spare[in.rng.IntN(len(spare))]
	f.partition = p
	f.detail = fmt.Sprintf("%s-%d %v → %v", in.topic, p, replicas, target)
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign(in.topic, p, target)
	f.start = time.Now()
	if err := in.alter(req); err != nil {
		return err
	}
	err := in.c.waitFor(120*time.Second, "the reassignment", func() bool {
		got := in.c.replicasOf(in.topic, p)
		slices.Sort(got)
		want := slices.Clone(target)
		slices.Sort(want)
		return slices.Equal(got, want)
	})
	f.note = fmt.Sprintf("moved in %v", time.Since(f.start).Round(10*time.Millisecond))
	return err
}

// rolling restarts every node with SIGTERM, one at a time, each after the
// previous one is back in every ISR.
func (in *injector) rolling(f *fault) error {
	defer func() {
		f.note = fmt.Sprintf("took %v, each node back in every ISR before the next", time.Since(f.start).Round(100*time.Millisecond))
	}()
	var order []string
	for _, nd := range in.c.nodes {
		if err := nd.stop(30 * time.Second); err != nil {
			order = append(order, err.Error())
		}
		if err := nd.start(in.c.bin); err != nil {
			return err
		}
		if err := in.c.waitFor(90*time.Second, "a full ISR", func() bool { return in.c.healed(in.topics(), in.counts()) }); err != nil {
			return fmt.Errorf("after restarting node %d: %w", nd.id, err)
		}
	}
	f.detail = fmt.Sprintf("nodes %v", in.c.ids())
	if len(order) > 0 {
		return errors.New(strings.Join(order, "; "))
	}
	return nil
}

// partition cuts the network around a leader: isolate it, split off a
// minority holding it, or drop only what it sends.
func (in *injector) partition(f *fault) (func() error, time.Duration, error) {
	var id []int32
	hold := sessionTimeout + time.Duration(2000+in.rng.IntN(3000))*time.Millisecond
	if f.kind == "isolate-coordinator" {
		id = in.coordinator(f)
		hold = groupSessionTimeout + time.Duration(2000+in.rng.IntN(3000))*time.Millisecond
	} else {
		id = in.leader(f)
	}
	if id == nil {
		return nil, 0, errors.New("no leader")
	}
	minority := []int32{id[0]}
	if f.kind == "split-minority" {
		others := slices.DeleteFunc(in.c.ids(), func(x int32) bool { return x == id[0] })
		in.rng.Shuffle(len(others), func(i, j int) { others[i], others[j] = others[j], others[i] })
		minority = append(minority, others[:(len(in.c.nodes)-1)/2-1]...)
	}
	var errs []error
	for _, a := range minority {
		for _, b := range in.c.ids() {
			if slices.Contains(minority, b) {
				continue
			}
			errs = append(errs, blackhole(a, b))
			if f.kind != "asym-leader" {
				errs = append(errs, blackhole(b, a))
			}
		}
	}
	f.start = time.Now() // every route is in place
	f.detail = fmt.Sprintf("%s; minority %v", f.detail, minority)
	heal := func() error { return healNetwork(in.c.ids()) }
	if err := errors.Join(errs...); err != nil {
		heal()
		return nil, 0, err
	}
	return heal, hold, nil
}

// hiccup cuts a leader off from the other nodes, both ways, for a third
// of the broker session timeout: silence without a closed connection,
// which the controller must sit out. (Not half: TCP's retransmission
// backoff — 0.2, 0.6, 1.4, 3 s — stretches a silence of 1.5 s into 3 s of
// no heartbeat, the whole session of these runs.) The heal checks that the partition kept its
// leader and leader epoch; a move is reported as a flap.
func (in *injector) hiccup(f *fault) (func() error, time.Duration, error) {
	id := in.leader(f)
	if id == nil {
		return nil, 0, errors.New("no leader")
	}
	leader, epoch, ok := in.c.leaderEpoch(in.topic, f.partition)
	if !ok {
		return nil, 0, errors.New("no metadata")
	}
	var errs []error
	for _, b := range in.c.ids() {
		if b != id[0] {
			errs = append(errs, blackhole(id[0], b), blackhole(b, id[0]))
		}
	}
	f.start = time.Now()
	heal := func() error {
		err := healNetwork(in.c.ids())
		// The controller decides within its session timeout of the
		// silence's start; look once that has passed.
		time.Sleep(time.Until(f.start.Add(sessionTimeout + 500*time.Millisecond)))
		l, e, ok := in.c.leaderEpoch(in.topic, f.partition)
		switch {
		case !ok:
			f.note = "leadership unknown after the heal"
		case l != leader || e != epoch:
			f.flapped = true
			f.note = fmt.Sprintf("FLAP: leader %d epoch %d became leader %d epoch %d", leader, epoch, l, e)
		default:
			f.note = fmt.Sprintf("leader %d kept epoch %d", leader, epoch)
		}
		return err
	}
	if err := errors.Join(errs...); err != nil {
		heal()
		return nil, 0, err
	}
	return heal, sessionTimeout / 3, nil
}

// coordinator is the node coordinating the workload's group.
func (in *injector) coordinator(f *fault) []int32 {
	cl, err := kgo.NewClient(in.c.clientOpts()...)
	if err != nil {
		return nil
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, ok := kadm.NewClient(cl).FindGroupCoordinators(ctx, in.group)[in.group]
	if !ok || r.Err != nil {
		return nil
	}
	f.detail = fmt.Sprintf("node %d (coordinator of %s)", r.NodeID, in.group)
	return []int32{r.NodeID}
}

// diskFull fills the tmpfs node's data dir for 4–6 s; the heal frees it.
// A log that meets ENOSPC refuses writes (nothing may be appended past a
// hole), and a cluster broker with a failed log stops through its
// controlled shutdown, as Kafka's broker halts when its last log dir goes
// offline, so its leaders move at once. The heal starts it again, as its
// supervisor would, once the disk has room.
func (in *injector) diskFull(f *fault) (func() error, time.Duration, error) {
	var nd *node
	for _, n := range in.c.nodes {
		if n.tmpfs {
			nd = n
		}
	}
	if nd == nil {
		return nil, 0, errors.New("no tmpfs node (--tmpfs-mb 0)")
	}
	path, err := nd.fillDisk()
	f.start = time.Now() // the disk is full from here
	f.detail = fmt.Sprintf("node %d", nd.id)
	heal := func() error {
		if err := os.Remove(path); err != nil {
			return err
		}
		if !nd.running() {
			f.note = "a log failed on ENOSPC and the node stopped itself; restarted"
			return nd.start(in.c.bin)
		}
		return nil
	}
	if err != nil {
		heal()
		return nil, 0, err
	}
	return heal, time.Duration(4000+in.rng.IntN(2000)) * time.Millisecond, nil
}

// removeBroker retires the broker-only node as an operator shrinking a
// cluster does: every replica on it moves to a voter without one
// (kafka-reassign-partitions), then it stops (controlled shutdown) and is
// unregistered (kafka-cluster unregister). The workload runs throughout.
func (in *injector) removeBroker(f *fault) error {
	nd := in.c.brokerOnly()
	if nd == nil {
		return errors.New("no broker-only node to remove")
	}
	f.detail = fmt.Sprintf("node %d", nd.id)
	f.start = time.Now()
	var req kadm.AlterPartitionAssignmentsReq
	moved := 0
	for topic, n := range in.counts() {
		for p := range int32(n) {
			rs := in.c.replicasOf(topic, p)
			i := slices.Index(rs, nd.id)
			if i < 0 {
				continue
			}
			target := slices.Clone(rs)
			for _, o := range in.c.nodes {
				if o != nd && !slices.Contains(rs, o.id) {
					target[i] = o.id
					break
				}
			}
			if target[i] == nd.id {
				return fmt.Errorf("no node to take %s-%d %v", topic, p, rs)
			}
			req.Assign(topic, p, target)
			moved++
		}
	}
	if moved > 0 {
		if err := in.alter(req); err != nil {
			return err
		}
		err := in.c.waitFor(120*time.Second, "every replica off the broker", func() bool {
			for topic, n := range in.counts() {
				for p := range int32(n) {
					if slices.Contains(in.c.replicasOf(topic, p), nd.id) {
						return false
					}
				}
			}
			return true
		})
		if err != nil {
			return err
		}
	}
	if err := nd.stop(30 * time.Second); err != nil {
		return err
	}
	in.c.forget(nd)
	in.added = false
	if err := in.unregister(nd.id); err != nil {
		return err
	}
	f.note = fmt.Sprintf("%d replicas moved off; removed in %v", moved, time.Since(f.start).Round(10*time.Millisecond))
	return in.c.waitFor(30*time.Second, "the broker gone from Metadata", func() bool { return in.c.brokersUp(len(in.c.nodes)) })
}

// alter sends a reassignment and fails on any refusal.
func (in *injector) alter(req kadm.AlterPartitionAssignmentsReq) error {
	cl, err := kgo.NewClient(in.c.clientOpts()...)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(cl).AlterPartitionAssignments(ctx, req)
	if err != nil {
		return err
	}
	for _, r := range resp.Sorted() {
		if r.Err != nil {
			return fmt.Errorf("reassign %s-%d: %v %s", r.Topic, r.Partition, r.Err, r.ErrMessage)
		}
	}
	return nil
}

// unregister removes a stopped broker's registration through a running
// node (which forwards it to the controller).
func (in *injector) unregister(id int32) error {
	cl, err := kgo.NewClient(in.c.clientOpts()...)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req := kmsg.NewPtrUnregisterBrokerRequest()
	req.BrokerID = id
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("unregister broker %d: %w", id, err)
	}
	if resp.ErrorCode != 0 {
		return fmt.Errorf("unregister broker %d: %v", id, kerr.ErrorForCode(resp.ErrorCode))
	}
	return nil
}

// topics are those whose ISRs a heal waits for: the workload's,
// __consumer_offsets, and with copiers the copy topic and
// __transaction_state.
func (in *injector) topics() []string {
	out := []string{in.topic, "__consumer_offsets"}
	if in.copyTopic != "" {
		out = append(out, in.copyTopic, "__transaction_state")
	}
	return out
}

func (in *injector) counts() map[string]int {
	out := map[string]int{in.topic: in.parts, "__consumer_offsets": 3}
	if in.copyTopic != "" {
		out[in.copyTopic] = in.parts
		out["__transaction_state"] = 3
	}
	return out
}

// schedule picks the next fault kind: random from the seed, or the enabled
// kinds in turn, skipping a membership change the cluster cannot take now.
func (in *injector) next(kinds []string, fixed bool, i int) string {
	for range 100 * len(kinds) {
		var k string
		if fixed {
			k = kinds[i%len(kinds)]
			i++
		} else {
			k = kinds[in.rng.IntN(len(kinds))]
		}
		if in.allowed(k) {
			return k
		}
	}
	return "kill-follower"
}

// allowed: add-broker while no broker-only node runs and there is room,
// remove-broker while one does.
func (in *injector) allowed(kind string) bool {
	switch kind {
	case "add-broker":
		return !in.added && len(in.c.nodes) < in.maxNode
	case "remove-broker":
		return in.added
	}
	return true
}
