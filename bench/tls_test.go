package bench

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/sluice-broker/sluice/engine"
	"github.com/sluice-broker/sluice/internal/testbroker"
)

// secureBroker starts an in-process broker with PLAINTEXT, SSL and
// SASL_SSL (SCRAM-SHA-512) listeners on a fresh PKI, and a SCRAM user
// "bench" with password "bench-pw".
func secureBroker(t *testing.T, keyType string) (*testbroker.Broker, PKI) {
	t.Helper()
	pki, err := WritePKI(t.TempDir(), keyType)
	if err != nil {
		t.Fatal(err)
	}
	tb := testbroker.Start(t, func(c *engine.Config) {
		for _, kv := range [][2]string{
			{"listeners", "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0"},
			{"sasl.enabled.mechanisms", "SCRAM-SHA-512"},
			{"ssl.keystore.type", "PEM"},
			{"ssl.keystore.location", pki.KeystoreFile},
		} {
			if err := c.Set(kv[0], kv[1]); err != nil {
				t.Fatal(err)
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = tb.Admin(t).AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "bench", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "bench-pw"}})
	if err != nil {
		t.Fatal(err)
	}
	return tb, pki
}

// TestRunOverTLS runs the load generator's franz-go and raw modes through
// a broker's SSL listener: every record written is read back.
func TestRunOverTLS(t *testing.T) {
	tb, pki := secureBroker(t, KeyP256)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, mode := range []Mode{ModeCatchUp, ModeRawFetch} {
		t.Run(string(mode), func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Brokers, cfg.Topic, cfg.Partitions, cfg.Mode = []string{tb.ListenerAddr("SSL")}, "tls-"+string(mode), 2, mode
			cfg.Records, cfg.Progress, cfg.Acks, cfg.TLSCA = 3000, 0, "1", pki.CAFile
			res, err := Run(ctx, cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.Produce.Records != 3000 || res.Consume.Records != 3000 || res.ProduceErrors != 0 {
				t.Fatalf("produced %d, read back %d, errors %d (%s)", res.Produce.Records, res.Consume.Records, res.ProduceErrors, res.FirstError)
			}
		})
	}
	t.Run("raw-produce", func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.Brokers, cfg.Topic, cfg.Partitions, cfg.Mode = []string{tb.ListenerAddr("SSL")}, "tls-raw-produce", 2, ModeRawProduce
		cfg.Producers, cfg.RawInFlight, cfg.Consumers, cfg.Acks = 2, 4, 0, "1"
		cfg.Duration, cfg.Progress, cfg.TLSCA = time.Second, 0, pki.CAFile
		res, err := Run(ctx, cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.Produce.Records == 0 || res.ProduceErrors != 0 {
			t.Fatalf("produced %d, errors %d (%s)", res.Produce.Records, res.ProduceErrors, res.FirstError)
		}
	})
	t.Run("untrusted", func(t *testing.T) {
		// Without the CA the broker's certificate does not verify.
		cfg := DefaultConfig()
		cfg.Brokers, cfg.Topic, cfg.Consumers, cfg.Records, cfg.Progress = []string{tb.ListenerAddr("SSL")}, "tls-untrusted", 0, 10, 0
		cfg.TLS = true
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if _, err := Run(sctx, cfg, nil); err == nil {
			t.Fatal("a run trusting only the system's roots reached the broker")
		}
	})
}

// TestConnectRate sets up connections through the SSL listener and,
// with SCRAM-SHA-512, through the SASL_SSL one; a wrong password fails
// every set-up.
func TestConnectRate(t *testing.T) {
	tb, pki := secureBroker(t, KeyRSA2048)
	tc, err := ClientTLS(pki.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, c := range []ConnectConfig{
		{Addr: tb.ListenerAddr("SSL"), TLS: tc},
		{Addr: tb.ListenerAddr("SASL_SSL"), TLS: tc, Mechanism: "SCRAM-SHA-512", User: "bench", Password: "bench-pw"},
	} {
		c.Workers, c.Duration = 2, 500*time.Millisecond
		res, err := ConnectRate(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		if res.Connections == 0 || res.Errors != 0 || !strings.HasPrefix(res.TLS, "TLS 1.3") {
			t.Fatalf("%s %s: %+v", c.Addr, c.Mechanism, res)
		}
		t.Logf("%s over %s: %d set-ups, %.0f/s, p50 %.2f ms", c.Mechanism, res.TLS, res.Connections, res.PerSec, res.SetUp.P50)
	}
	res, err := ConnectRate(ctx, ConnectConfig{Addr: tb.ListenerAddr("SASL_SSL"), TLS: tc, Mechanism: "SCRAM-SHA-512",
		User: "bench", Password: "wrong", Workers: 1, Duration: 300 * time.Millisecond})
	if err == nil || res.Connections != 0 || !strings.Contains(res.FirstError, "SASL_AUTHENTICATION_FAILED") {
		t.Fatalf("wrong password: %v, %+v", err, res)
	}
}
