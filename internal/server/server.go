// Package server wires the engine to the network layer: it opens the
// broker, listens, adapts netpoll's connection handlers to engine sessions
// and shuts everything down in order. cmd/sluice and the tests share it.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/sluice-broker/sluice/controller"
	"github.com/sluice-broker/sluice/engine"
	"github.com/sluice-broker/sluice/netpoll"
)

// Options are what a server needs beyond the broker's own Config.
type Options struct {
	Config  engine.Config
	Logger  *slog.Logger
	Metrics string // host:port for /metrics; "" disables it
	// Net is the network backend (netpoll.BackendUring, BackendEpoll,
	// BackendStd); "" picks the fastest the host supports.
	Net string
	// NetLoops is the number of event loops (0: one per core).
	NetLoops int
	// NetTune, if set, adjusts the network options last (benchmarks).
	NetTune func(*netpoll.Options)
}

// Server is a running broker with its listener.
type Server struct {
	Broker *engine.Broker
	// Controller is this node's controller in a cluster whose
	// process.roles includes controller; nil otherwise.
	Controller *controller.Service
	ln         net.Listener
	net        netpoll.Server
	http       *http.Server
	log        *slog.Logger
	served     chan error
}

// Start opens the broker and starts serving. If Config.Listen has port 0 a
// free port is chosen; Addr reports it (and Advertise should then be left
// empty so clients are told the real port).
func Start(o Options) (*Server, error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	cfg := o.Config
	if controllerOnly(cfg) {
		return startControllerOnly(o) // controller_only.go
	}
	if cfg.Listen == "" {
		return nil, errors.New("listeners has no PLAINTEXT listener, which a broker needs")
	}
	ln, err := netpoll.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", cfg.Listen, err)
	}
	if cfg.Advertise == "" {
		cfg.Advertise = advertiseFor(cfg.Listen, ln.Addr().(*net.TCPAddr))
	}
	ctl, err := startController(cfg, o.Logger)
	if err != nil {
		ln.Close()
		return nil, err
	}
	b, err := newBroker(cfg, o.Logger)
	if err != nil {
		ln.Close()
		closeController(ctl)
		return nil, err
	}
	s := &Server{Broker: b, Controller: ctl, ln: ln, log: o.Logger, served: make(chan error, 1)}
	netOpts := netpoll.Options{
		MaxFrame:    cfg.SocketRequestMaxBytes,
		IdleTimeout: cfg.ConnectionsMaxIdle,
		Logger:      o.Logger,
		Loops:       o.NetLoops,
	}
	if o.NetTune != nil {
		o.NetTune(&netOpts)
	}
	s.net, err = netpoll.New(o.Net, &handler{b: b}, netOpts)
	if err != nil {
		ln.Close()
		b.Close()
		return nil, err
	}
	if o.Metrics != "" {
		if err := s.startMetrics(o.Metrics); err != nil {
			ln.Close()
			b.Close()
			return nil, err
		}
	}
	go func() { s.served <- s.net.Serve(ln) }()
	o.Logger.Info("listening", "addr", ln.Addr().String(), "advertised", cfg.Advertise, "net", s.net.Backend())
	return s, nil
}

// newBroker opens the broker; in a cluster with a link to the controller
// quorum (a controller.Client: the engine never touches a socket).
func newBroker(cfg engine.Config, log *slog.Logger) (*engine.Broker, error) {
	if !cfg.ClusterMode() {
		return engine.New(cfg, log)
	}
	addrs, err := cfg.ControllerAddrs()
	if err != nil {
		return nil, err
	}
	link := controller.NewClient(addrs)
	b, err := engine.NewInCluster(cfg, log, link)
	if err != nil {
		link.Close()
	}
	return b, err
}

// startController starts the controller of a cluster node whose
// process.roles includes controller (nil otherwise). A single node keeps
// its one-voter controller inside the broker's local metadata store.
func startController(cfg engine.Config, log *slog.Logger) (*controller.Service, error) {
	if !cfg.ClusterMode() || !cfg.HasRole("controller") {
		return nil, nil
	}
	clusterID, err := engine.FormattedClusterID(cfg)
	if err != nil {
		return nil, err
	}
	return startControllerService(cfg, clusterID, log)
}

func closeController(c *controller.Service) error {
	if c == nil {
		return nil
	}
	return c.Close()
}

// advertiseFor keeps the configured host but fills in the real port.
func advertiseFor(listen string, bound *net.TCPAddr) string {
	host, _, err := net.SplitHostPort(listen)
	if err != nil || host == "" || host == "0.0.0.0" || host == "::" {
		host = "localhost"
	}
	return net.JoinHostPort(host, fmt.Sprint(bound.Port))
}

func (s *Server) startMetrics(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("metrics listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", s.Broker.Metrics().Handler())
	s.http = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go s.http.Serve(ln)
	s.log.Info("metrics", "addr", ln.Addr().String())
	return nil
}

// Addr is the address the broker listens on ("" on a controller-only
// node).
func (s *Server) Addr() string {
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// Net names the network backend serving (after any fallback; "" on a
// controller-only node).
func (s *Server) Net() string {
	if s.net == nil {
		return ""
	}
	return s.net.Backend()
}

// Done reports when the accept loop stopped on its own (an error).
func (s *Server) Done() <-chan error { return s.served }

// Shutdown stops accepting, finishes in-flight requests, closes the
// connections, then flushes and closes the broker (clean-shutdown marker).
func (s *Server) Shutdown(ctx context.Context) error {
	if s.Broker == nil {
		return closeController(s.Controller)
	}
	// In a cluster, hand this broker's leaderships over first (controlled
	// shutdown), while clients can still be served and redirected.
	csCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := s.Broker.ControlledShutdown(csCtx); err != nil {
		s.log.Warn("controlled shutdown did not finish", "err", err)
	}
	// Long-polling fetches are in-flight requests too; answer them now
	// rather than have the drain wait out their max.wait.ms.
	s.Broker.ReleaseWaitingFetches()
	// Likewise JoinGroup/SyncGroup requests parked in a rebalance.
	s.Broker.ReleaseGroupWaiters()
	netErr := s.net.Shutdown(ctx)
	if s.http != nil {
		s.http.Shutdown(ctx)
	}
	return errors.Join(netErr, s.Broker.Close(), closeController(s.Controller))
}

// handler adapts netpoll to the engine.
type handler struct {
	b      *engine.Broker
	nextID atomic.Uint64
	// batches are the event loops' produce batches, by loop; set by
	// BeginLoops before any connection.
	batches []*engine.ProduceBatch
}

func (h *handler) Open(remote net.Addr) netpoll.ConnHandler {
	c := &conn{b: h.b, s: &engine.Session{ID: h.nextID.Add(1), Remote: remote.String(), Listener: "PLAINTEXT", Principal: engine.AnonymousPrincipal}}
	c.done = c.complete
	h.b.Metrics().ConnOpened()
	return c
}

// BeginLoops, OpenOnLoop and EndBatch make the handler a
// netpoll.BatchHandler: each event loop gets a ProduceBatch, so that
// produce requests served together append together.
func (h *handler) BeginLoops(n int) {
	h.batches = make([]*engine.ProduceBatch, n)
	for i := range h.batches {
		h.batches[i] = engine.NewProduceBatch()
	}
}

func (h *handler) OpenOnLoop(remote net.Addr, loop int) netpoll.ConnHandler {
	c := h.Open(remote).(*conn)
	c.s.Batch = h.batches[loop]
	return c
}

func (h *handler) EndBatch(loop int) { h.batches[loop].Flush() }

// conn is one connection's adapter. Requests on a connection are served one
// at a time, so reply is only ever the current request's callback.
type conn struct {
	b     *engine.Broker
	s     *engine.Session
	reply func(netpoll.Reply)
	done  func(*engine.Response) // c.complete, bound once
}

func (c *conn) Serve(frame []byte, reply func(netpoll.Reply)) {
	c.reply = reply
	c.b.Handle(c.s, frame, c.done)
}

// complete converts the engine's answer: a nil *Response must become a nil
// interface, not an interface holding a nil pointer.
func (c *conn) complete(r *engine.Response) {
	if r == nil {
		c.reply(nil)
		return
	}
	c.reply(r)
}

func (c *conn) Closed() { c.b.Metrics().ConnClosed() }
