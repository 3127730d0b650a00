package engine

// The broker in a cluster (docs/cluster.md). A node is in a cluster when
// its config names a controller quorum (controller.quorum.voters or
// controller.quorum.bootstrap.servers); otherwise it runs alone exactly as
// before: broker and a one-voter controller over the local metadata file
// (image.go).
//
// In a cluster the broker
//
//   - registers with the active controller (BrokerRegistration, key 62)
//     and heartbeats every broker.heartbeat.interval.ms (BrokerHeartbeat,
//     63) on a connection of its own, whose close tells the controller the
//     process is gone;
//   - follows the committed metadata log (SluiceMetadataFetch) into its
//     image, publishes it and lets the partition manager (registry.go) set
//     each hosted partition's role from it;
//   - sends metadata changes to the controller instead of writing them:
//     CreateTopics, CreatePartitions, DeleteTopics and producer-id blocks
//     (AllocateProducerIds, 67), then waits until its own image has them;
//   - on SIGTERM heartbeats WantShutDown until the controller answers
//     ShouldShutDown, having moved its leaderships away (controlled
//     shutdown).

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/controller"
	"github.com/sluice-broker/sluice/metadata"
)

// ControllerLink is the broker's connection to the controller quorum.
// The engine never touches a socket: internal/server hands it a
// controller.Client, which owns the connections.
type ControllerLink interface {
	// Call sends req on one of the link's connections to the active
	// controller and returns its answer.
	Call(ctx context.Context, line controller.Line, req kmsg.Request) (kmsg.Response, error)
	// FetchMetadata long-polls the committed metadata log from offset from.
	FetchMetadata(ctx context.Context, from int64, wait time.Duration) (controller.LogRead, error)
	Close()
}

// clusterLink is the broker's side of the cluster.
type clusterLink struct {
	b      *Broker
	client ControllerLink
	// incarnation is this process's registration id.
	incarnation [16]byte
	// epoch is the broker epoch of the current registration (-1: none).
	epoch atomic.Int64
	// applied is the offset of the last metadata record in the image.
	applied atomic.Int64
	// fenced is the last state the controller reported.
	fenced atomic.Bool
	// caughtUp is closed, once, when the image first holds this process's
	// registration record (applied >= epoch): everything committed before
	// the broker registered — topics, SCRAM credentials, ACLs, quotas — is
	// in it. Until then the broker's image is partial (empty at start), so
	// internal/server does not serve its listeners: a login would be
	// refused for a user the image does not have yet, a Metadata request
	// answered without topics. Kafka gates its data plane the same way.
	caughtUp     chan struct{}
	caughtUpOnce sync.Once

	wantShutdown atomic.Bool
	// nudge wakes the heartbeat loop early (controlled shutdown begins).
	nudge chan struct{}
	// creatingOffsets is set while __consumer_offsets is being created.
	creatingOffsets atomic.Bool
	// creatingTxnState is set while __transaction_state is being created.
	creatingTxnState atomic.Bool
	shutdownOK       chan struct{}
	shutdownOnce     sync.Once
	// fatal carries the error that stops the broker (another cluster).
	fatal chan error
	// imageMoved is closed and replaced under mu whenever the image moves.
	mu         sync.Mutex
	imageMoved chan struct{}
	// autoCreating holds the topics this broker is auto-creating through
	// the controller (03_metadata.go); guarded by mu.
	autoCreating map[string]bool

	ctx    context.Context
	cancel context.CancelFunc
}

// followerStore is the broker's metadata.Store in a cluster: the image it
// followed. Changes go to the controller (cluster_admin.go), never here.
type followerStore struct{ b *Broker }

func (s followerStore) Image() metadata.Image { return s.b.image() }

func (s followerStore) Append(...metadata.Record) (metadata.Image, error) {
	return s.b.image(), errors.New("metadata changes in a cluster go through the controller")
}

func (s followerStore) Close() error { return nil }

// openCluster sets up the broker of a cluster node in place of the local
// metadata store; the image stays empty until startCluster follows it.
func (b *Broker) openCluster(link ControllerLink) error {
	if !b.cfg.HasRole("broker") {
		return errors.New("process.roles without broker: a controller-only node runs no broker (internal/server starts its controller alone)")
	}
	if link == nil {
		return errors.New("a broker in a cluster needs a link to the controllers (engine.NewInCluster)")
	}
	id, err := FormattedClusterID(b.cfg)
	if err != nil {
		return err
	}
	b.clusterID = id
	ctx, cancel := context.WithCancel(context.Background())
	l := &clusterLink{b: b, client: link, shutdownOK: make(chan struct{}), caughtUp: make(chan struct{}),
		fatal: make(chan error, 1), nudge: make(chan struct{}, 1), imageMoved: make(chan struct{}), ctx: ctx, cancel: cancel}
	_, _ = rand.Read(l.incarnation[:])
	l.epoch.Store(-1)
	l.applied.Store(-1)
	l.fenced.Store(true)
	b.cluster = l
	b.meta.store = followerStore{b}
	img := metadata.Image{}
	b.meta.image.Store(&img)
	return nil
}

// start starts following the metadata log and heartbeating, and holds a
// presence connection to every controller (controller.Client.Present), so
// that whichever becomes active next knows if this process died.
func (l *clusterLink) start() {
	if p, ok := l.client.(interface{ Present(id int32) }); ok {
		p.Present(l.b.cfg.NodeID)
	}
	l.b.wg.Add(2)
	go l.follow()
	go l.heartbeats()
}

func (l *clusterLink) close() {
	l.cancel()
	l.client.Close()
}

// Fatal reports an error that must stop the broker: its registration was
// refused for good (another cluster's id). Nil outside a cluster.
func (b *Broker) Fatal() <-chan error {
	if b.cluster == nil {
		return nil
	}
	return b.cluster.fatal
}

// follow applies the committed metadata log to the image, batch by batch.
func (l *clusterLink) follow() {
	defer l.b.wg.Done()
	next := int64(0)
	for l.ctx.Err() == nil {
		rd, err := l.client.FetchMetadata(l.ctx, next, time.Second)
		if err != nil {
			l.sleep(100 * time.Millisecond)
			continue
		}
		if len(rd.Batches) == 0 {
			continue
		}
		if err := l.apply(rd); err != nil {
			l.b.log.Error("cannot apply the metadata log; reading it again from its start", "offset", next, "err", err)
			next = 0
			l.sleep(time.Second)
			continue
		}
		next = rd.Next
		l.applied.Store(next - 1)
		l.noteCatchUp()
	}
}

// noteCatchUp closes caughtUp the first time the applied image reaches
// the registration record. The broker epoch is that record's offset (the
// controller's IsCaughtUp test), so the broker needs no heartbeat round
// trip to know it.
func (l *clusterLink) noteCatchUp() {
	e := l.epoch.Load()
	if e < 0 || l.applied.Load() < e {
		return
	}
	l.caughtUpOnce.Do(func() {
		l.b.log.Info("caught up with the metadata log", "offset", l.applied.Load(), "epoch", e)
		close(l.caughtUp)
	})
}

// closedChan is a channel that is always ready.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// CaughtUp is closed once the broker's metadata image holds everything
// committed before it registered with the controller; internal/server
// starts serving the broker's listeners then. A single node's image is
// its own and complete from the start: closed at once.
func (b *Broker) CaughtUp() <-chan struct{} {
	if b.cluster == nil {
		return closedChan
	}
	return b.cluster.caughtUp
}

func (l *clusterLink) sleep(d time.Duration) {
	select {
	case <-l.ctx.Done():
	case <-time.After(d):
	}
}

// apply publishes the image rd leads to and brings the partitions in step.
func (l *clusterLink) apply(rd controller.LogRead) error {
	b := l.b
	b.meta.mu.Lock()
	defer b.meta.mu.Unlock()
	img := b.image()
	if rd.Snapshot {
		img = metadata.Image{}
	}
	var err error
	for _, batch := range rd.Batches {
		if img, err = metadata.ApplyAll(img, batch.Records); err != nil {
			return err
		}
	}
	b.meta.image.Store(&img)
	if err := b.syncPartitions(img); err != nil {
		b.log.Error("partitions not in step with the metadata image", "err", err)
	}
	b.syncGroups(img)
	b.syncTxns(img)
	l.mu.Lock()
	close(l.imageMoved)
	l.imageMoved = make(chan struct{})
	l.mu.Unlock()
	return nil
}

// awaitImage waits until the image satisfies ok (a change the controller
// committed has reached this broker), or ctx ends.
func (l *clusterLink) awaitImage(ctx context.Context, ok func(metadata.Image) bool) bool {
	for {
		l.mu.Lock()
		ch := l.imageMoved
		l.mu.Unlock()
		if ok(l.b.image()) {
			return true
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}

// heartbeats registers, then heartbeats until the broker closes or the
// controller lets it shut down. It heartbeats early when nudged, and when
// the link reports that the controller may have changed, so a newly
// active controller hears from it at once, or that the controller's side
// closed the idle heartbeat connection, which the controller reads as
// this process's death unless it hears from it within the grace.
func (l *clusterLink) heartbeats() {
	defer l.b.wg.Done()
	var switched <-chan struct{}
	if sw, ok := l.client.(interface{ Switched() <-chan struct{} }); ok {
		switched = sw.Switched()
	}
	for l.ctx.Err() == nil {
		if l.epoch.Load() < 0 && !l.register() {
			l.sleep(200 * time.Millisecond)
			continue
		}
		l.heartbeat()
		select {
		case <-l.ctx.Done():
		case <-l.nudge:
		case <-switched:
		case <-time.After(l.heartbeatInterval()):
		}
	}
}

// heartbeatInterval is broker.heartbeat.interval.ms, shortened while the
// broker waits for the controller (to be unfenced, or to shut down).
func (l *clusterLink) heartbeatInterval() time.Duration {
	if l.fenced.Load() || l.wantShutdown.Load() {
		return min(l.b.cfg.BrokerHeartbeatInterval, 100*time.Millisecond)
	}
	return l.b.cfg.BrokerHeartbeatInterval
}

func (l *clusterLink) register() bool {
	b := l.b
	req := kmsg.NewPtrBrokerRegistrationRequest()
	req.BrokerID, req.ClusterID, req.IncarnationID = b.cfg.NodeID, b.clusterID, l.incarnation
	req.Listeners = b.registrationListeners() // listeners.go
	if b.cfg.BrokerRack != "" {
		req.Rack = kmsg.StringPtr(b.cfg.BrokerRack)
	}
	req.PreviousBrokerEpoch = -1
	resp, err := l.call(controller.LineHeartbeat, req)
	if err != nil {
		return false
	}
	r := resp.(*kmsg.BrokerRegistrationResponse)
	switch {
	case r.ErrorCode == kerr.InconsistentClusterID.Code:
		err := fmt.Errorf("the controller quorum refused this broker: cluster id %s is not the quorum's (INCONSISTENT_CLUSTER_ID)", b.clusterID)
		b.log.Error("registration refused", "err", err)
		select {
		case l.fatal <- err:
		default:
		}
		l.cancel()
		return false
	case r.ErrorCode != 0:
		b.log.Warn("registration refused", "err", kerr.ErrorForCode(r.ErrorCode))
		return false
	}
	l.epoch.Store(r.BrokerEpoch)
	b.log.Info("registered with the controller", "node", b.cfg.NodeID, "epoch", r.BrokerEpoch)
	l.noteCatchUp()
	return true
}

func (l *clusterLink) heartbeat() {
	req := kmsg.NewPtrBrokerHeartbeatRequest()
	req.BrokerID, req.BrokerEpoch = l.b.cfg.NodeID, l.epoch.Load()
	req.CurrentMetadataOffset = l.applied.Load()
	req.WantShutdown = l.wantShutdown.Load()
	resp, err := l.call(controller.LineHeartbeat, req)
	if err != nil {
		return
	}
	r := resp.(*kmsg.BrokerHeartbeatResponse)
	switch r.ErrorCode {
	case 0:
	case kerr.StaleBrokerEpoch.Code, kerr.BrokerIDNotRegistered.Code:
		l.epoch.Store(-1) // register again
		return
	default:
		return
	}
	if was := l.fenced.Swap(r.IsFenced); was != r.IsFenced {
		l.b.log.Info("broker state", "fenced", r.IsFenced, "caught_up", r.IsCaughtUp)
	}
	if r.ShouldShutdown {
		l.shutdownOnce.Do(func() { close(l.shutdownOK) })
	}
}

// call sends req to the active controller, bounded by the controller's
// answer time.
func (l *clusterLink) call(line controller.Line, req kmsg.Request) (kmsg.Response, error) {
	ctx, cancel := context.WithTimeout(l.ctx, 15*time.Second)
	defer cancel()
	return l.client.Call(ctx, line, req)
}

// ControlledShutdown asks the controller to move this broker's
// leaderships away and waits until it says the broker may go, or ctx
// ends, or broker.session.timeout.ms passes (a controller that cannot
// answer, such as a quorum without its majority, must not keep the broker
// from stopping). Outside a cluster it returns at once.
func (b *Broker) ControlledShutdown(ctx context.Context) error {
	l := b.cluster
	if l == nil || l.epoch.Load() < 0 {
		return nil
	}
	l.wantShutdown.Store(true)
	select {
	case l.nudge <- struct{}{}:
	default:
	}
	start := time.Now()
	select {
	case <-l.shutdownOK:
		b.log.Info("controlled shutdown done", "took", time.Since(start).Round(time.Millisecond))
		return nil
	case <-ctx.Done():
		return fmt.Errorf("controlled shutdown: %w", ctx.Err())
	case <-time.After(b.cfg.BrokerSessionTimeout):
		return errors.New("controlled shutdown: the controller did not answer within broker.session.timeout.ms")
	}
}

// brokerEndpoint is broker id's inter-broker endpoint, from the image (a
// registration lists it first: listeners.go).
func brokerEndpoint(img metadata.Image, id int32) (host string, port int32, ok bool) {
	return brokerEndpointFor(img, id, "")
}

// BrokerAddr is host:port of broker id's inter-broker listener (its first
// registered endpoint), for the replica fetchers and transaction peers.
func (b *Broker) BrokerAddr(id int32) (string, bool) {
	if b.cluster == nil {
		if id == b.cfg.NodeID {
			return net.JoinHostPort(b.host, strconv.Itoa(int(b.port))), true
		}
		return "", false
	}
	host, port, ok := brokerEndpoint(b.image(), id)
	return net.JoinHostPort(host, strconv.Itoa(int(port))), ok
}

// currentLeader is the image's leader and epoch of a partition, for the
// KIP-951 hints of NOT_LEADER_OR_FOLLOWER answers.
func (b *Broker) currentLeader(topicID [16]byte, partition int32) (leader, epoch int32, ok bool) {
	ti := b.image().TopicByID(topicID)
	if ti == nil || partition < 0 || int(partition) >= len(ti.Partitions) {
		return -1, -1, false
	}
	p := &ti.Partitions[partition]
	return p.Leader, p.LeaderEpoch, true
}

// notLeaderHint turns a produce answer for a partition this broker does
// not lead into NOT_LEADER_OR_FOLLOWER with KIP-951's CurrentLeader and,
// once per response, the leader's endpoint (v10+), so the client moves
// without a metadata refresh. Outside a cluster it does nothing.
func (b *Broker) notLeaderHint(resp *kmsg.ProduceResponse, version int16, topicID [16]byte, partition int32, out *kmsg.ProduceResponseTopicPartition) {
	if b.cluster == nil {
		return
	}
	leader, epoch, ok := b.currentLeader(topicID, partition)
	if !ok {
		return
	}
	out.ErrorCode = kerr.NotLeaderForPartition.Code
	out.CurrentLeader.LeaderID, out.CurrentLeader.LeaderEpoch = leader, epoch
	host, port, found := brokerEndpoint(b.image(), leader)
	if !found || version < 10 {
		return
	}
	for _, e := range resp.Brokers {
		if e.NodeID == leader {
			return
		}
	}
	resp.Brokers = append(resp.Brokers, kmsg.ProduceResponseBroker{NodeID: leader, Host: host, Port: port})
}

// AlterPartition sends a leader's ISR changes to the active controller
// (AlterPartition, key 56) with this broker's id and epoch, and returns
// the controller's answer. It is the cluster half of the link the
// replication work's ISR driver calls (engine/cluster_link.go); a single
// node, whose partitions have one replica, never shrinks or grows an ISR.
func (l *clusterLink) AlterPartition(ctx context.Context, req *kmsg.AlterPartitionRequest) (*kmsg.AlterPartitionResponse, error) {
	if req.Version == 0 {
		req.Version = 3 // topic ids and broker epochs in NewEpochISR
	}
	req.BrokerID, req.BrokerEpoch = l.b.cfg.NodeID, l.epoch.Load()
	resp, err := l.client.Call(ctx, controller.LineAdmin, req)
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.AlterPartitionResponse), nil
}
