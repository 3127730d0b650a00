package controller

import (
	"context"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// startServicesWith runs n controller nodes over real TCP on 127.0.0.1,
// their decisions configured by cfg.
func startServicesWith(t *testing.T, n int, cfg Config) ([]*Service, []string) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	voters := map[int32]string{}
	var lns []net.Listener
	var addrs []string
	for i := range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		voters[int32(i+1)] = ln.Addr().String()
		addrs = append(addrs, ln.Addr().String())
	}
	svcs := make([]*Service, n)
	for i := range svcs {
		s, err := StartService(ServiceConfig{NodeID: int32(i + 1), ClusterID: cfg.ClusterID, Voters: voters,
			Listener: lns[i], Dir: t.TempDir(), Decide: cfg, RaftTick: 10 * time.Millisecond, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		svcs[i] = s
		t.Cleanup(func() { s.Close() })
	}
	return svcs, addrs
}

// testBroker is a broker's side of the controller link as engine's
// clusterLink drives it: register, then heartbeat every interval, and at
// once when the client signals Switched; its presence connections are
// held when present is set.
type testBroker struct {
	t      *testing.T
	id     int32
	c      *Client
	epoch  int64
	stop   chan struct{}
	wg     sync.WaitGroup
	mu     sync.Mutex
	paused bool
}

func startTestBroker(t *testing.T, addrs []string, id int32, interval time.Duration, present bool) *testBroker {
	b := &testBroker{t: t, id: id, c: NewClient(addrs), stop: make(chan struct{})}
	if present {
		b.c.Present(id)
	}
	reg := kmsg.NewPtrBrokerRegistrationRequest()
	reg.BrokerID, reg.ClusterID = id, "test-cluster"
	l := kmsg.NewBrokerRegistrationRequestListener()
	l.Name, l.Host, l.Port = "PLAINTEXT", "127.0.0.1", uint16(9000+id)
	reg.Listeners = append(reg.Listeners, l)
	rr := call[*kmsg.BrokerRegistrationResponse](t, b.c, LineHeartbeat, reg)
	if rr.ErrorCode != 0 {
		t.Fatalf("registration: code %d", rr.ErrorCode)
	}
	b.epoch = rr.BrokerEpoch
	b.wg.Add(1)
	go b.loop(interval)
	t.Cleanup(b.close)
	return b
}

func (b *testBroker) loop(interval time.Duration) {
	defer b.wg.Done()
	for {
		b.mu.Lock()
		paused := b.paused
		b.mu.Unlock()
		if !paused {
			hb := kmsg.NewPtrBrokerHeartbeatRequest()
			hb.BrokerID, hb.BrokerEpoch, hb.CurrentMetadataOffset = b.id, b.epoch, 1<<40
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			b.c.Call(ctx, LineHeartbeat, hb)
			cancel()
		}
		select {
		case <-b.stop:
			return
		case <-b.c.Switched():
		case <-time.After(interval):
		}
	}
}

// pause stops heartbeats but keeps every connection open, as a SIGSTOP
// does.
func (b *testBroker) pause() {
	b.mu.Lock()
	b.paused = true
	b.mu.Unlock()
}

// close ends the broker: its connections close as its process's would.
func (b *testBroker) close() {
	select {
	case <-b.stop:
		return
	default:
	}
	close(b.stop)
	b.wg.Wait()
	b.c.Close()
}

func activeOf(svcs []*Service) *Service {
	for _, s := range svcs {
		if s.IsActive() {
			return s
		}
	}
	return nil
}

// brokerState reads broker id from the active controller's image.
func brokerState(svcs []*Service, id int32) (registered, fenced bool) {
	s := activeOf(svcs)
	if s == nil {
		return false, false
	}
	br, ok := s.Store().Image().Broker(id)
	return ok, br.Fenced
}

func waitBroker(t *testing.T, svcs []*Service, id int32, fenced bool, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if ok, f := brokerState(svcs, id); ok && f == fenced {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("broker %d not fenced=%v after %v", id, fenced, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// resetBrokerConns resets (RST) every broker connection the controller
// holds, as a middlebox dropping idle connections would.
func resetBrokerConns(s *Service) int {
	s.rpc.mu.Lock()
	defer s.rpc.mu.Unlock()
	n := 0
	for c := range s.rpc.mu.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetLinger(0)
		}
		c.Close()
		n++
	}
	return n
}

// Regression: an idle heartbeat connection reset while its broker lives
// was read as the broker's death and fenced it after the 500 ms grace,
// its next heartbeat being up to an interval (2 s here) away. The client
// now sees the close and the broker heartbeats at once on a new
// connection.
func TestHeartbeatConnResetDoesNotFenceLiveBroker(t *testing.T) {
	cfg := DefaultConfig("test-cluster")
	cfg.SessionTimeoutMs = 60_000 // only the connection-lost path can fence
	svcs, addrs := startServicesWith(t, 1, cfg)
	b := startTestBroker(t, addrs, 10, 2*time.Second, false)
	waitBroker(t, svcs, 10, false, 10*time.Second)
	for round := range 3 {
		// Just after a heartbeat: the next one is an interval away.
		time.Sleep(100 * time.Millisecond)
		if n := resetBrokerConns(svcs[0]); n == 0 {
			t.Fatalf("round %d: no broker connection to reset", round)
		}
		time.Sleep(time.Duration(3*cfg.ConnectionLostGraceMs) * time.Millisecond)
		if _, fenced := brokerState(svcs, 10); fenced {
			t.Fatalf("round %d: a live broker whose connection was reset was fenced", round)
		}
	}
	// The close of its current connection still fences it once it is gone.
	b.close()
	waitBroker(t, svcs, 10, true, 10*time.Second)
}

// A broker-only node that dies together with the active controller: the
// new controller never had its heartbeat connection, but its presence
// connections to the other voters were closed by its kernel, so it is
// fenced after the grace rather than a whole session later. A broker that
// only went silent (paused, every connection open) is not.
func TestBrokerOnlyDiesWithController(t *testing.T) {
	cfg := DefaultConfig("test-cluster")
	cfg.SessionTimeoutMs = 60_000 // only a close can fence within the test
	svcs, addrs := startServicesWith(t, 3, cfg)
	dying := startTestBroker(t, addrs, 10, 200*time.Millisecond, true)
	silent := startTestBroker(t, addrs, 11, 200*time.Millisecond, true)
	waitBroker(t, svcs, 10, false, 10*time.Second)
	waitBroker(t, svcs, 11, false, 10*time.Second)
	time.Sleep(300 * time.Millisecond) // presence connections are up

	silent.pause()
	old := activeOf(svcs)
	start := time.Now()
	dying.close()
	old.Close()
	var rest []*Service
	for _, s := range svcs {
		if s != old {
			rest = append(rest, s)
		}
	}
	waitBroker(t, rest, 10, true, 15*time.Second)
	t.Logf("broker 10 fenced %v after it died with the controller (session %d ms)", time.Since(start).Round(time.Millisecond), cfg.SessionTimeoutMs)
	if _, fenced := brokerState(rest, 11); fenced {
		t.Fatal("a paused broker with its connections open was fenced")
	}
}
