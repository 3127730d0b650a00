package controller

// The controller runtime: what runs on a node whose process.roles
// includes controller. It owns
//
//   - a quorum member (quorum.Node on a quorum.Runner) whose state machine
//     is the RaftStore, so every controller holds the committed image;
//   - the CONTROLLER listener (rpc.go), which hands raft connections (they
//     open with the quorum hello) to the transport and serves the broker
//     RPCs on the others;
//   - on the raft leader only, the active controller: one goroutine (loop)
//     that feeds events to a Controller one at a time, proposes each
//     decision's records through raft, waits for them to commit and only
//     then answers, and calls Tick when NextTickMs comes.
//
// Serial decisions against the committed image are what controller's doc
// asks for ("the image passed to each call must include every record the
// controller proposed before"): the loop waits for each batch to commit
// before it takes the next event. A controller that becomes active first
// commits an empty barrier batch, so its image holds everything the
// previous leader committed before it decides anything.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-broker/sluice/controller/quorum"
	"github.com/sluice-broker/sluice/metadata"
	pb "go.etcd.io/raft/v3/raftpb"
)

// ServiceConfig configures a controller node.
type ServiceConfig struct {
	NodeID    int32
	ClusterID string
	// Voters maps every voter's node id to its CONTROLLER listener.
	Voters map[int32]string
	// Listener is this node's bound CONTROLLER listener; on a secured
	// one it hands out connections already authenticated.
	Listener net.Listener
	// Dial opens raft connections to the other voters' CONTROLLER
	// listeners, TLS and SASL done as they ask; nil dials plain TCP.
	Dial func(ctx context.Context, addr string) (net.Conn, error)
	// Bootstrap are records committed with the cluster record when the
	// metadata log is new (sluice format --add-scram).
	Bootstrap []metadata.Record
	// Dir holds the raft log and snapshots (<data-dir>/__cluster_metadata).
	Dir string
	// Decide configures the decisions.
	Decide Config
	// RebalanceInterval is how often the active controller moves
	// leadership back to preferred replicas when a broker's imbalance
	// exceeds RebalancePercent (auto.leader.rebalance.enable,
	// leader.imbalance.check.interval.seconds and
	// leader.imbalance.per.broker.percentage); 0 turns it off.
	RebalanceInterval time.Duration
	RebalancePercent  int
	// RaftTick is raft's tick (50 ms: elections after 0.5–1 s of silence).
	RaftTick time.Duration
	Logger   *slog.Logger
	// ValidateConfigs checks the configs a resource would have after an
	// IncrementalAlterConfigs (configs.go); nil accepts any.
	ValidateConfigs ConfigValidator
}

// Service is one running controller node.
type Service struct {
	cfg    ServiceConfig
	log    *slog.Logger
	store  *RaftStore
	node   *quorum.Node
	runner *quorum.Runner
	tr     *quorum.TCPTransport
	raftLn *connListener

	// events carries work for the active controller's loop.
	events chan func(a *active)
	// leadership carries raft's leader changes to the loop.
	leadership chan uint64
	// isActive is true while this node's loop is the active controller.
	isActive atomic.Bool
	// leaderID is the last raft leader this node heard of (-1: none).
	leaderID atomic.Int32

	// voters tracks the raft connections other voters opened here, and
	// the brokers' presence connections, so that on becoming active this
	// node knows which processes died (voters.go).
	voters struct {
		sync.Mutex
		conns nodeConns
	}

	stop      chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup
	rpc       rpcServer
}

// active is the active controller's state, owned by the loop goroutine.
type active struct {
	s    *Service
	ctrl *Controller
	// lastRebalance is when the imbalance was last checked.
	lastRebalance time.Time
	// ticked is false until the first Tick, which starts every registered
	// broker's session; NextTickMs knows no session before it.
	ticked bool
}

// StartService opens the raft log in cfg.Dir and starts the node.
func StartService(cfg ServiceConfig) (*Service, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.RaftTick == 0 {
		cfg.RaftTick = 50 * time.Millisecond
	}
	s := &Service{cfg: cfg, log: cfg.Logger.With("component", "controller"), events: make(chan func(*active), 256),
		leadership: make(chan uint64, 16), stop: make(chan struct{})}
	s.leaderID.Store(-1)
	s.voters.conns = newNodeConns()
	s.raftLn = newConnListener(cfg.Listener.Addr())
	s.tr = quorum.NewTCPTransportOn(uint64(cfg.NodeID), cfg.ClusterID, s.raftLn, s.log,
		func(m *pb.Message) { s.runner.Deliver(m) },
		func(to uint64, u, sf bool) { s.runner.Report(to, u, sf) })
	s.tr.SetDialer(cfg.Dial)
	var voters []uint64
	for id, addr := range cfg.Voters {
		voters = append(voters, uint64(id))
		if id != cfg.NodeID {
			s.tr.SetPeer(uint64(id), addr)
		}
	}
	sort.Slice(voters, func(i, j int) bool { return voters[i] < voters[j] })
	s.store = NewRaftStore(func(ctx context.Context, data []byte) error { return s.runner.Propose(ctx, data) })
	n, err := quorum.NewNode(quorum.Config{ID: uint64(cfg.NodeID), Voters: voters, Dir: cfg.Dir, Logger: s.log}, s.store, s.tr)
	if err != nil {
		s.tr.Close()
		return nil, err
	}
	s.node = n
	n.OnLeaderChange(func(leader, term uint64) {
		s.leaderID.Store(int32(leader))
		select {
		case s.leadership <- leader:
		default:
		}
	})
	s.runner = quorum.NewRunner(n, cfg.RaftTick, s.log)
	s.runner.Start()
	s.wg.Add(2)
	go s.loop()
	go s.rpc.serve(s, cfg.Listener)
	s.log.Info("controller started", "node", cfg.NodeID, "voters", voters, "listener", cfg.Listener.Addr().String())
	return s, nil
}

// Store is the node's view of the committed metadata log.
func (s *Service) Store() *RaftStore { return s.store }

// IsActive reports whether this node is the active controller.
func (s *Service) IsActive() bool { return s.isActive.Load() }

// Close stops the listener, the loop and the quorum member. Closing again
// does nothing.
func (s *Service) Close() error {
	var err error
	s.closeOnce.Do(func() {
		close(s.stop)
		s.rpc.close()
		s.wg.Wait()
		s.runner.Stop()
		err = errors.Join(s.tr.Close(), s.node.Close())
	})
	return err
}

// errNotActive answers events that reach a node that is not (or no
// longer) the active controller.
var errNotActive = errors.New("controller: not the active controller")

// submit runs fn on the loop as the active controller and waits for it;
// it returns errNotActive on a node that is not active.
func (s *Service) submit(ctx context.Context, fn func(a *active)) error {
	if !s.isActive.Load() {
		return errNotActive
	}
	done := make(chan struct{})
	var ran bool
	select {
	case s.events <- func(a *active) {
		if a != nil {
			ran = true
			fn(a)
		}
		close(done)
	}:
	case <-ctx.Done():
		return ctx.Err()
	case <-s.stop:
		return errNotActive
	}
	select {
	case <-done:
	case <-s.stop:
		return errNotActive
	}
	if !ran {
		return errNotActive
	}
	return nil
}

// loop is the active controller: events one at a time, ticks when due.
func (s *Service) loop() {
	defer s.wg.Done()
	var a *active
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-s.stop:
			s.isActive.Store(false)
			return
		case leader := <-s.leadership:
			a = s.leaderChanged(a, leader)
		case fn := <-s.events:
			fn(a)
		case <-tick.C:
			if a == nil && s.leaderID.Load() == s.cfg.NodeID {
				a = s.leaderChanged(nil, uint64(s.cfg.NodeID)) // a failed barrier, retried
			}
			if a != nil {
				a.tick()
			}
		}
	}
}

// leaderChanged starts or ends this node's term as the active controller.
func (s *Service) leaderChanged(a *active, leader uint64) *active {
	if leader != uint64(s.cfg.NodeID) {
		if a != nil {
			s.log.Info("no longer the active controller", "leader", leader)
		}
		s.isActive.Store(false)
		return nil
	}
	if a != nil {
		return a
	}
	// Catch up with everything committed before this term, then decide.
	if _, err := s.store.Append(); err != nil {
		s.log.Warn("active controller barrier failed", "err", err)
		return nil
	}
	a = &active{s: s, ctrl: New(s.cfg.Decide), lastRebalance: time.Now()}
	s.suspectLostVoters(a)
	if s.store.Image().ClusterID() == "" {
		if err := a.commit(append([]metadata.Record{metadata.ClusterRecord{ClusterID: s.cfg.ClusterID}}, s.cfg.Bootstrap...)); err != nil {
			s.log.Warn("cannot record the cluster id", "err", err)
			return nil
		}
	}
	s.isActive.Store(true)
	s.log.Info("active controller", "node", s.cfg.NodeID, "offset", s.store.NextOffset())
	return a
}

// suspectLostVoters hands a newly active controller the voters whose
// processes died (their raft connections here were closed by their
// kernel and none reopened): their brokers are fenced after the
// connection-lost grace unless heard from, instead of a whole session
// later. This is what moves the partitions of a node that died together
// with the old controller.
func (s *Service) suspectLostVoters(a *active) {
	s.voters.Lock()
	losses := s.voters.conns.losses()
	s.voters.Unlock()
	delete(losses, s.cfg.NodeID)
	if ids := a.ctrl.VotersLost(s.store.Image(), losses, time.Now().UnixMilli()); len(ids) > 0 {
		s.log.Info("voters gone with their process; fencing their brokers after the grace unless they heartbeat", "brokers", ids)
	}
}

// voterOpened and voterClosed track the raft connections of other voters.
func (s *Service) voterOpened(id int32) {
	s.nodeConn(func(n *nodeConns) { n.raft.opened(id) })
}

func (s *Service) voterClosed(id int32, byPeer bool) {
	now, logEnd := nowMs(), s.store.NextOffset()
	s.nodeConn(func(n *nodeConns) { n.raft.closed(id, byPeer, now, logEnd) })
}

// nodeConn runs fn on the connections tracked by node, under their lock.
func (s *Service) nodeConn(fn func(n *nodeConns)) {
	s.voters.Lock()
	fn(&s.voters.conns)
	s.voters.Unlock()
}

func nowMs() int64 { return time.Now().UnixMilli() }

// commit proposes recs and waits for them to commit. A failure (the
// quorum lost its majority, or this node its leadership) ends this node's
// term as active controller until raft names it leader again.
func (a *active) commit(recs []metadata.Record) error {
	if len(recs) == 0 {
		return nil
	}
	if _, err := a.s.store.Append(recs...); err != nil {
		if !errors.Is(err, ErrNotApplied) {
			a.s.log.Warn("metadata change not committed", "err", err)
		}
		return err
	}
	return nil
}

func (a *active) tick() {
	a.maybeRebalance()
	now := time.Now().UnixMilli()
	if a.ticked && now < a.ctrl.NextTickMs() {
		return
	}
	a.ticked = true
	res := a.ctrl.Tick(a.s.store.Image(), now)
	if len(res.Records) > 0 {
		a.s.log.Info("fencing brokers", "records", describe(res.Records))
	}
	a.commit(res.Records)
}

// maybeRebalance runs the preferred-leader check when it is due.
func (a *active) maybeRebalance() {
	iv := a.s.cfg.RebalanceInterval
	if iv <= 0 || time.Since(a.lastRebalance) < iv {
		return
	}
	a.lastRebalance = time.Now()
	res := a.ctrl.Rebalance(a.s.store.Image(), a.s.cfg.RebalancePercent)
	if len(res.Records) > 0 {
		a.s.log.Info("preferred leader election", "records", describe(res.Records))
		a.commit(res.Records)
	}
}

// describe summarises records for the log.
func describe(recs []metadata.Record) string {
	out := ""
	for i, r := range recs {
		if i > 0 {
			out += " "
		}
		switch r := r.(type) {
		case metadata.FenceBrokerRecord:
			out += "fence(" + strconv.Itoa(int(r.BrokerID)) + ")"
		case metadata.PartitionChangeRecord:
			out += fmt.Sprintf("change(%x/%d leader=%d)", r.TopicID[:2], r.Partition, r.Leader)
		default:
			out += r.Type().String()
		}
	}
	return out
}

// connListener is a net.Listener fed by the CONTROLLER listener's
// multiplexer with the connections that belong to raft.
type connListener struct {
	addr  net.Addr
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newConnListener(addr net.Addr) *connListener {
	return &connListener{addr: addr, conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *connListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *connListener) hand(c net.Conn) {
	select {
	case l.conns <- c:
	case <-l.done:
		c.Close()
	}
}

func (l *connListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *connListener) Addr() net.Addr { return l.addr }
