// Package testbroker runs a real Sluice broker inside a test: a real
// listener on 127.0.0.1, real segment files in a temporary directory, the
// real network layer. Tests talk to it with real Kafka clients.
package testbroker

import (
	"context"
	"log/slog"
	"os"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-broker/sluice/engine"
	"github.com/sluice-broker/sluice/internal/server"
)

// Broker is a running in-process broker.
type Broker struct {
	Addr   string
	Broker *engine.Broker
	Config engine.Config
	// Net is the network backend asked for ("" for the default).
	Net string

	srv *server.Server
}

// Start starts a broker on a free 127.0.0.1 port with a temporary data
// directory; mutators adjust the config first. It is shut down when the
// test ends. The network backend is $SLUICE_NET (uring, epoll or std;
// unset: the host's default), so that `make test` runs the suites once per
// backend.
func Start(t testing.TB, mutators ...func(*engine.Config)) *Broker {
	t.Helper()
	return StartNet(t, os.Getenv("SLUICE_NET"), mutators...)
}

// StartNet is Start on the named network backend ("" for the default).
// Under -short (make unit) it skips the test: a test that needs a running
// broker is an end-to-end test.
func StartNet(t testing.TB, backend string, mutators ...func(*engine.Config)) *Broker {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a broker: skipped under -short")
	}
	cfg := engine.DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.DataDir = t.TempDir()
	cfg.GroupInitialRebalanceDelay = 0
	// __consumer_offsets is created at start; opening and closing 50 logs
	// would cost every test about a second.
	cfg.OffsetsTopicPartitions = 4
	for _, m := range mutators {
		m(&cfg)
	}
	tb := &Broker{Config: cfg, Net: backend}
	tb.start(t)
	t.Cleanup(func() { tb.Stop(t) })
	return tb
}

func (tb *Broker) start(t testing.TB) {
	t.Helper()
	srv, err := server.Start(server.Options{Config: tb.Config, Logger: testLogger(), Net: tb.Net})
	if err != nil {
		t.Fatalf("start broker: %v", err)
	}
	tb.srv = srv
	tb.Broker = srv.Broker
	tb.Addr = srv.Addr()
	// Later starts (Restart) must come back on the same port, so clients
	// holding the address reconnect to the new process.
	tb.Config.Listen = tb.Addr
}

// Stop shuts the broker down cleanly; calling it twice is harmless.
func (tb *Broker) Stop(t testing.TB) {
	t.Helper()
	if tb.srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := tb.srv.Shutdown(ctx); err != nil {
		// What held the shutdown up is on some goroutine's stack; a CI
		// log has nothing else to go on.
		var stacks strings.Builder
		pprof.Lookup("goroutine").WriteTo(&stacks, 1)
		t.Errorf("shutdown: %v\ngoroutines:\n%s", err, stacks.String())
	}
	tb.srv = nil
}

// Restart stops the broker cleanly and starts it again on the same data
// directory and port.
func (tb *Broker) Restart(t testing.TB) {
	t.Helper()
	tb.Stop(t)
	tb.start(t)
}

// Client returns a franz-go client seeded with the broker, closed when the
// test ends.
func (tb *Broker) Client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(tb.Addr)}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// Admin returns a kadm client on a fresh franz-go client.
func (tb *Broker) Admin(t testing.TB) *kadm.Client {
	return kadm.NewClient(tb.Client(t))
}

// testLogger is quiet unless SLUICE_TEST_LOG is set.
func testLogger() *slog.Logger {
	level := slog.LevelWarn
	if os.Getenv("SLUICE_TEST_LOG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// ListenerAddr is the bound address of a named listener of the broker.
func (tb *Broker) ListenerAddr(name string) string { return tb.srv.ListenerAddr(name) }
