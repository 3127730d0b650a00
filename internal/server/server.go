// Package server wires the engine to the network layer: it opens the
// broker, listens, adapts netpoll's connection handlers to engine sessions
// and shuts everything down in order. cmd/sluice and the tests share it.
package server

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
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
	ln         net.Listener   // the primary (inter-broker) listener
	listeners  []*listenerSec // every broker listener (listeners.go)
	net        netpoll.Server
	http       *http.Server
	log        *slog.Logger
	served     chan error
	// stopWaiting is closed by Shutdown: listeners still waiting for the
	// broker to catch up (serveWhenCaughtUp) are closed unserved.
	stopWaiting chan struct{}
	stopOnce    sync.Once
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
	lss, err := bindListeners(&cfg)
	if err != nil {
		return nil, err
	}
	ln := primaryListener(&cfg, lss).ln
	ctl, err := startController(cfg, o.Logger)
	if err != nil {
		closeListeners(lss)
		return nil, err
	}
	b, err := newBroker(cfg, o.Logger)
	if err != nil {
		closeListeners(lss)
		closeController(ctl)
		return nil, err
	}
	if err := secure(&cfg, lss, b.ScramCredential, o.Logger); err != nil {
		closeListeners(lss)
		b.Close()
		closeController(ctl)
		return nil, err
	}
	s := &Server{Broker: b, Controller: ctl, ln: ln, listeners: lss, log: o.Logger, served: make(chan error, len(lss)), stopWaiting: make(chan struct{})}
	netOpts := netpoll.Options{
		MaxFrame:      cfg.SocketRequestMaxBytes,
		IdleTimeout:   cfg.ConnectionsMaxIdle,
		SendBuffer:    int(cfg.SocketSendBufferBytes),
		ReceiveBuffer: int(cfg.SocketReceiveBufferBytes),
		Logger:        o.Logger,
		Loops:         o.NetLoops,
	}
	if o.NetTune != nil {
		o.NetTune(&netOpts)
	}
	limits, err := newConnLimiter(cfg.Authz) // connlimit.go
	if err != nil {
		closeListeners(lss)
		b.Close()
		return nil, err
	}
	h := &handler{b: b, listeners: map[string]*listenerSec{}, limits: limits, log: o.Logger}
	for _, l := range lss {
		h.listeners[l.Name] = l
	}
	s.net, err = netpoll.New(o.Net, h, netOpts)
	if err != nil {
		closeListeners(lss)
		b.Close()
		return nil, err
	}
	if o.Metrics != "" {
		if err := s.startMetrics(o.Metrics); err != nil {
			closeListeners(lss)
			b.Close()
			return nil, err
		}
	}
	for _, l := range lss {
		go s.serveWhenCaughtUp(l)
		o.Logger.Info("listening", "listener", l.Name, "protocol", l.Protocol, "addr", l.ln.Addr().String(), "advertised", l.Advertised, "net", s.net.Backend())
	}
	return s, nil
}

// serveWhenCaughtUp serves l once the broker's metadata image is complete
// (engine.Broker.CaughtUp: at once on a single node; in a cluster, when
// the image holds this broker's registration). The listener is bound from
// the start, so clients that connect early wait in its backlog rather than
// being refused or answered from a partial image. Nodes starting together
// do not wait on each other: catching up needs only the controllers.
func (s *Server) serveWhenCaughtUp(l *listenerSec) {
	start := time.Now()
	select {
	case <-s.Broker.CaughtUp():
	case <-s.stopWaiting:
		l.ln.Close()
		s.served <- nil
		return
	}
	if waited := time.Since(start); waited > time.Millisecond {
		s.log.Info("serving", "listener", l.Name, "after", waited.Round(time.Millisecond))
	}
	s.served <- s.net.ServeListener(l.ln, netpoll.ListenerOptions{Name: l.Name, TLS: l.tls})
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
	dial, err := controllerDialer(&cfg, log) // interbroker.go
	if err != nil {
		return nil, err
	}
	if cfg.InterBroker.Dial == nil {
		ib, err := interBrokerDialer(&cfg, log)
		if err != nil {
			return nil, err
		}
		if ib != nil {
			cfg.InterBroker.Dial, cfg.InterBroker.ClientOpts = ib.dialFunc(), ib.clientOpts()
		}
	}
	link := controller.NewClient(addrs)
	link.SetDialer(dial.dialFunc())
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
	mux.Handle("/debug/latency", s.Broker.Metrics().LatencyHandler()) // engine/metrics_latency.go
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

// ListenerAddr is the bound address of the named listener ("" if none).
func (s *Server) ListenerAddr(name string) string {
	for _, l := range s.listeners {
		if l.Name == name {
			return l.ln.Addr().String()
		}
	}
	return ""
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
	s.stopOnce.Do(func() { close(s.stopWaiting) }) // listeners not served yet
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
	b         *engine.Broker
	listeners map[string]*listenerSec // by name
	nextID    atomic.Uint64
	limits    *connLimiter // connlimit.go
	log       *slog.Logger
	// batches are the event loops' produce batches, by loop; set by
	// BeginLoops before any connection.
	batches []*engine.ProduceBatch
}

func (h *handler) Open(info netpoll.ConnInfo) netpoll.ConnHandler {
	ip := ipOf(info.Remote)
	if ok, why := h.limits.admit(ip, time.Now()); !ok {
		if h.log != nil {
			h.log.Debug("refusing connection", "remote", info.Remote.String(), "limit", why)
		}
		return refused{}
	}
	s := &engine.Session{ID: h.nextID.Add(1), Remote: info.Remote.String(), Listener: info.Listener, Principal: engine.AnonymousPrincipal}
	c := &conn{b: h.b, s: s}
	c.done = c.complete
	c.release = func() { h.limits.release(ip) }
	if l := h.listeners[info.Listener]; l != nil {
		if l.Protocol == engine.ProtocolSSL && info.TLS != nil && len(info.TLS.PeerCertificates) > 0 {
			s.Principal = l.mapper.Principal(info.TLS.PeerCertificates[0])
		}
		if l.isSASL() {
			c.auth = newSASLConn(l, s, time.Now())
			s.Auth = c.auth
		}
	}
	h.b.Metrics().ConnOpened()
	if c.auth != nil {
		return &authedConn{c}
	}
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

// OpenOnLoop is Open for a connection served on an event loop. Plain
// connections join the loop's batch; SASL ones (authedConn) append at
// once, as do refused ones (they serve nothing).
func (h *handler) OpenOnLoop(info netpoll.ConnInfo, loop int) netpoll.ConnHandler {
	ch := h.Open(info)
	if c, ok := ch.(*conn); ok {
		c.s.Batch = h.batches[loop]
	}
	return ch
}

func (h *handler) EndBatch(loop int) { h.batches[loop].Flush() }

// conn is one connection's adapter. Requests on a connection are served one
// at a time, so reply is only ever the current request's callback.
type conn struct {
	b     *engine.Broker
	s     *engine.Session
	auth  *saslConn // SASL listeners (auth.go)
	reply func(netpoll.Reply)
	done  func(*engine.Response) // c.complete, bound once
	// release uncounts the connection (connlimit.go).
	release func()
	// mutedUntil (unix ns) is when a throttled connection may be served
	// again (a client quota's Response.Mute): its next request waits
	// until then, as Kafka mutes the channel.
	mutedUntil atomic.Int64
}

func (c *conn) Serve(frame []byte, reply func(netpoll.Reply)) {
	c.reply = reply
	if a := c.auth; a != nil {
		if a.unframedToken() {
			if r := a.token(frame); r != nil {
				reply(r)
			} else {
				reply(closeNow)
			}
			return
		}
		if len(frame) < 2 || !a.admit(int16(binary.BigEndian.Uint16(frame)), time.Now()) {
			reply(closeNow)
			return
		}
	}
	if until := c.mutedUntil.Load(); until != 0 {
		if d := time.Until(time.Unix(0, until)); d > 0 {
			time.AfterFunc(d, func() { c.b.HandleOffLoop(c.s, frame, c.done) })
			return
		}
	}
	c.b.Handle(c.s, frame, c.done)
}

// authedConn is a conn on a SASL listener: its Deadline closes it when
// authentication or the session runs out of time (netpoll.Deadliner).
type authedConn struct{ *conn }

func (c *authedConn) Deadline() int64 { return c.auth.Deadline() }

// MaxFrame keeps requests before authentication to
// sasl.server.max.receive.size (netpoll.FrameLimiter), so an
// unauthenticated peer cannot make the broker take socket.request.max.bytes.
func (c *authedConn) MaxFrame() int32 {
	if c.auth.authenticated {
		return 0
	}
	return c.auth.l.maxReceive
}

// complete converts the engine's answer: a nil *Response must become a nil
// interface, not an interface holding a nil pointer.
func (c *conn) complete(r *engine.Response) {
	if r == nil {
		c.reply(nil)
		return
	}
	if r.Mute > 0 {
		c.mutedUntil.Store(time.Now().Add(r.Mute).UnixNano())
	}
	if len(r.Parts) == 0 && !r.Close { // a mute with nothing to write (acks=0 over a quota)
		r.Release()
		c.reply(nil)
		return
	}
	c.reply(r)
}

func (c *conn) Closed() {
	c.release()
	c.b.Metrics().ConnClosed()
	c.b.ConnectionClosed(c.s)
}
