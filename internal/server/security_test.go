package server_test

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sluice-broker/sluice/engine"
	"github.com/sluice-broker/sluice/internal/testbroker"
	"github.com/sluice-broker/sluice/netpoll"
)

// netBackends are the backends every security test runs on: TLS and SASL
// must work on the event loops, not only goroutine per connection.
func netBackends(t *testing.T) []string {
	out := []string{netpoll.BackendStd, netpoll.BackendEpoll}
	if netpoll.UringAvailable() == nil {
		out = append(out, netpoll.BackendUring)
	}
	return out
}

func set(kv ...string) func(*engine.Config) {
	return func(c *engine.Config) {
		for i := 0; i < len(kv); i += 2 {
			if err := c.Set(kv[i], kv[i+1]); err != nil {
				panic(err)
			}
		}
	}
}

func ctxT(t *testing.T) context.Context { return ctxB(t) }

func ctxB(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// roundTrip produces n records to topic through cl and reads them back
// through a fresh consumer built with the same options.
func roundTrip(t *testing.T, topic string, n int, opts ...kgo.Opt) {
	t.Helper()
	ctx := ctxT(t)
	prod, err := kgo.NewClient(append(opts, kgo.DefaultProduceTopic(topic))...)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	if _, err := kadm.NewClient(prod).CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := prod.ProduceSync(ctx, kgo.StringRecord(fmt.Sprint("v", i))).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	cons, err := kgo.NewClient(append(opts, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	got := 0
	for got < n {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d: %v", got, n, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Value) != fmt.Sprint("v", got) {
				t.Fatalf("record %d: %q", got, r.Value)
			}
			got++
		})
	}
}

// mustFail runs one request with opts and expects err to be code.
func mustFail(t *testing.T, code *kerr.Error, opts ...kgo.Opt) {
	t.Helper()
	cl, err := kgo.NewClient(append(opts, kgo.RequestRetries(0), kgo.RetryTimeout(time.Second))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	_, err = kadm.NewClient(cl).ListTopics(ctxT(t))
	if !errors.Is(err, code) {
		t.Fatalf("want %v, got %v", code, err)
	}
}

// TestSASLSSLScramSHA512 runs franz-go over SASL_SSL with SCRAM-SHA-512 on
// every backend: users are created with AlterUserScramCredentials on the
// PLAINTEXT listener (as kafka-configs does), records go through the
// SASL_SSL listener (whose own endpoint Metadata advertises), a wrong
// password and a deleted user get SASL_AUTHENTICATION_FAILED.
func TestSASLSSLScramSHA512(t *testing.T) {
	pki := newPKI(t)
	for _, backend := range netBackends(t) {
		t.Run(backend, func(t *testing.T) {
			tb := testbroker.StartNet(t, backend, set(
				"listeners", "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
				"sasl.enabled.mechanisms", "SCRAM-SHA-512,SCRAM-SHA-256",
				"listener.name.sasl_ssl.ssl.keystore.type", "PEM",
				"listener.name.sasl_ssl.ssl.keystore.location", pki.keyPEM,
			))
			adm := tb.Admin(t)
			altered, err := adm.AlterUserSCRAMs(ctxT(t), nil, []kadm.UpsertSCRAM{
				{User: "alice", Mechanism: kadm.ScramSha512, Iterations: 8192, Password: "alice-secret"},
				{User: "bob", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "bob-secret"},
			})
			if err == nil {
				err = altered.Error()
			}
			if err != nil {
				t.Fatal(err)
			}
			described, err := adm.DescribeUserSCRAMs(ctxT(t))
			if err != nil || len(described) != 2 || described["alice"].CredInfos[0].Iterations != 8192 {
				t.Fatalf("describe: %+v %v", described, err)
			}
			addr := tb.ListenerAddr("SASL_SSL")
			auth := func(user, pass string) kgo.Opt {
				return kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism())
			}
			secure := []kgo.Opt{kgo.SeedBrokers(addr), kgo.DialTLSConfig(pki.clientTLS(false))}

			roundTrip(t, "scram-topic", 20, append(secure, auth("alice", "alice-secret"))...)
			checkAdvertised(t, addr, append(secure, auth("alice", "alice-secret"))...)
			mustFail(t, kerr.SaslAuthenticationFailed, append(secure, auth("alice", "wrong"))...)
			mustFail(t, kerr.SaslAuthenticationFailed, append(secure, auth("mallory", "x"))...)
			// bob has SHA-256 only.
			mustFail(t, kerr.SaslAuthenticationFailed, append(secure, auth("bob", "bob-secret"))...)
			roundTrip(t, "scram-topic-256", 1, append(secure, kgo.SASL(scram.Auth{User: "bob", Pass: "bob-secret"}.AsSha256Mechanism()))...)

			// Before authentication a request is bounded by
			// sasl.server.max.receive.size (512 KiB), not
			// socket.request.max.bytes: a 1 MiB size prefix closes the
			// connection at once (the authentication timeout is 30 s).
			big, err := tls.Dial("tcp", addr, pki.clientTLS(false))
			if err != nil {
				t.Fatal(err)
			}
			big.Write(binary.BigEndian.AppendUint32(nil, 1<<20))
			big.SetReadDeadline(time.Now().Add(10 * time.Second))
			if _, err := io.Copy(io.Discard, big); err != nil && !isTimeout(err) {
				t.Logf("closed with %v", err)
			} else if isTimeout(err) {
				t.Fatal("a 1 MiB frame before authentication was not refused")
			}
			big.Close()

			if _, err := adm.AlterUserSCRAMs(ctxT(t), []kadm.DeleteSCRAM{{User: "alice", Mechanism: kadm.ScramSha512}}, nil); err != nil {
				t.Fatal(err)
			}
			mustFail(t, kerr.SaslAuthenticationFailed, append(secure, auth("alice", "alice-secret"))...)
		})
	}
}

// checkAdvertised asks Metadata through the listener at addr and expects
// the broker at that listener's port.
func checkAdvertised(t *testing.T, addr string, opts ...kgo.Opt) {
	t.Helper()
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctxT(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(addr)
	if len(resp.Brokers) != 1 || fmt.Sprint(resp.Brokers[0].Port) != port {
		t.Fatalf("metadata brokers %+v, want port %s", resp.Brokers, port)
	}
}

// TestMutualTLS serves an SSL listener from a PKCS12 keystore and
// truststore with ssl.client.auth=required: a client with a certificate
// the CA signed produces and consumes; one without is refused.
func TestMutualTLS(t *testing.T) {
	pki := newPKI(t)
	for _, backend := range netBackends(t) {
		t.Run(backend, func(t *testing.T) {
			tb := testbroker.StartNet(t, backend, set(
				"listeners", "PLAINTEXT://127.0.0.1:0,SECURE://127.0.0.1:0",
				"listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,SECURE:SSL",
				"ssl.keystore.type", "PKCS12", "ssl.keystore.location", pki.keyP12, "ssl.keystore.password", "ks-pass",
				"ssl.truststore.type", "PKCS12", "ssl.truststore.location", pki.trustPK, "ssl.truststore.password", "ts-pass",
				"ssl.client.auth", "required",
				"ssl.enabled.protocols", "TLSv1.3",
			))
			addr := tb.ListenerAddr("SECURE")
			roundTrip(t, "mtls-topic", 10, kgo.SeedBrokers(addr), kgo.DialTLSConfig(pki.clientTLS(true)))
			bulkOverTLS(t, "tls-bulk", kgo.SeedBrokers(addr), kgo.DialTLSConfig(pki.clientTLS(true)))
			checkAdvertised(t, addr, kgo.SeedBrokers(addr), kgo.DialTLSConfig(pki.clientTLS(true)))

			c, err := tls.Dial("tcp", addr, pki.clientTLS(false))
			if err == nil {
				c.SetReadDeadline(time.Now().Add(10 * time.Second))
				_, err = c.Read(make([]byte, 1)) // TLS 1.3: the refusal comes after the client's Finished
				c.Close()
			}
			if err == nil {
				t.Fatal("a client without a certificate was served")
			}
			old := pki.clientTLS(true)
			old.MaxVersion = tls.VersionTLS12
			if c, err := tls.Dial("tcp", addr, old); err == nil {
				c.Close()
				t.Fatal("TLS 1.2 accepted with ssl.enabled.protocols=TLSv1.3")
			}
		})
	}
}

// TestSASLGate speaks to a SASL_PLAINTEXT listener by hand: before
// authentication only ApiVersions and SASL are served (a Metadata request
// closes the connection); a v0 handshake followed by a bare PLAIN token
// authenticates; a connection that never authenticates is closed after
// sluice.sasl.authentication.timeout.ms; a wrong password over
// SaslAuthenticate gets SASL_AUTHENTICATION_FAILED and a closed
// connection.
func TestSASLGate(t *testing.T) {
	for _, backend := range netBackends(t) {
		t.Run(backend, func(t *testing.T) {
			tb := testbroker.StartNet(t, backend, set(
				"listeners", "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
				"listener.name.sasl_plaintext.sasl.enabled.mechanisms", "PLAIN",
				"listener.name.sasl_plaintext.plain.sasl.jaas.config",
				`org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";`,
				"sluice.sasl.authentication.timeout.ms", "300",
			))
			addr := tb.ListenerAddr("SASL_PLAINTEXT")
			dialRaw := func() *rawClient {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { c.Close() })
				c.SetDeadline(time.Now().Add(15 * time.Second))
				return &rawClient{c: c}
			}

			rc := dialRaw()
			if _, err := rc.roundTrip(kmsg.NewPtrApiVersionsRequest()); err != nil {
				t.Fatalf("ApiVersions before authentication: %v", err)
			}
			if _, err := rc.roundTrip(kmsg.NewPtrMetadataRequest()); err == nil {
				t.Fatal("Metadata served before authentication")
			}

			rc = dialRaw()
			hs := kmsg.NewPtrSASLHandshakeRequest()
			hs.Version, hs.Mechanism = 0, "PLAIN"
			resp, err := rc.roundTrip(hs)
			if err != nil || resp.(*kmsg.SASLHandshakeResponse).ErrorCode != 0 {
				t.Fatalf("handshake v0: %+v %v", resp, err)
			}
			token := []byte("\x00alice\x00alice-secret")
			rc.c.Write(binary.BigEndian.AppendUint32(nil, uint32(len(token))))
			rc.c.Write(token)
			var size [4]byte
			if _, err := io.ReadFull(rc.c, size[:]); err != nil || binary.BigEndian.Uint32(size[:]) != 0 {
				t.Fatalf("unframed PLAIN answer: %v %x", err, size)
			}
			if _, err := rc.roundTrip(kmsg.NewPtrMetadataRequest()); err != nil {
				t.Fatalf("Metadata after unframed authentication: %v", err)
			}

			idle := dialRaw()
			if _, err := io.Copy(io.Discard, idle.c); err != nil {
				t.Fatalf("an unauthenticated connection was not closed: %v", err)
			}

			mustFail(t, kerr.SaslAuthenticationFailed, kgo.SeedBrokers(addr), kgo.SASL(plain.Auth{User: "alice", Pass: "nope"}.AsMechanism()))
			mustFail(t, kerr.UnsupportedSaslMechanism, kgo.SeedBrokers(addr), kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism()))
			roundTrip(t, "plain-topic", 3, kgo.SeedBrokers(addr), kgo.SASL(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()))
		})
	}
}

// TestSASLReauthentication: with connections.max.reauth.ms the
// SaslAuthenticate answer carries the session lifetime, and franz-go
// re-authenticates on its connection before it runs out, so a producer
// keeps working across several lifetimes.
func TestSASLReauthentication(t *testing.T) {
	tb := testbroker.StartNet(t, netpoll.BackendEpoll, set(
		"listeners", "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
		"sasl.enabled.mechanisms", "PLAIN",
		"listener.name.sasl_plaintext.plain.sasl.jaas.config", `x required user_alice="pw";`,
		"connections.max.reauth.ms", "1500",
	))
	addr := tb.ListenerAddr("SASL_PLAINTEXT")

	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(15 * time.Second))
	rc := &rawClient{c: c}
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, "PLAIN"
	if _, err := rc.roundTrip(hs); err != nil {
		t.Fatal(err)
	}
	au := kmsg.NewPtrSASLAuthenticateRequest()
	au.Version, au.SASLAuthBytes = 1, []byte("\x00alice\x00pw")
	resp, err := rc.roundTrip(au)
	if err != nil {
		t.Fatal(err)
	}
	if r := resp.(*kmsg.SASLAuthenticateResponse); r.ErrorCode != 0 || r.SessionLifetimeMillis != 1500 {
		t.Fatalf("SaslAuthenticate: %+v", r)
	}
	if _, err := rc.roundTrip(kmsg.NewPtrMetadataRequest()); err != nil {
		t.Fatalf("Metadata within the session: %v", err)
	}
	// Past the lifetime without re-authenticating, the connection is done.
	time.Sleep(1600 * time.Millisecond)
	if _, err := rc.roundTrip(kmsg.NewPtrMetadataRequest()); err == nil {
		t.Fatal("Metadata served after the session expired")
	}

	var auths, connects atomic.Int32
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.SASL(plain.Auth{User: "alice", Pass: "pw"}.AsMechanism()),
		kgo.DefaultProduceTopic("reauth"), kgo.AllowAutoTopicCreation(), kgo.WithHooks(authCounter{&auths, &connects}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// Produce across about three session lifetimes.
	for i, end := 0, time.Now().Add(4500*time.Millisecond); time.Now().Before(end); i++ {
		if err := cl.ProduceSync(ctxT(t), kgo.StringRecord(fmt.Sprint(i))).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Every connection authenticated more than once: re-authentication,
	// not reconnection, kept the sessions alive.
	if a, c := auths.Load(), connects.Load(); a < 2*c {
		t.Fatalf("%d authentications on %d connections", a, c)
	}
}

// authCounter counts SaslAuthenticate answers a client reads.
type authCounter struct{ n, conns *atomic.Int32 }

func (h authCounter) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	if err == nil {
		h.conns.Add(1)
	}
}

func (h authCounter) OnBrokerRead(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == kmsg.SASLAuthenticate.Int16() && err == nil {
		h.n.Add(1)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// bulkOverTLS produces 8 MiB in 4 KiB records and fetches them back in
// large fetches, so that replies of many segment-file regions are sealed
// in several chunks on the event loops.
func bulkOverTLS(t *testing.T, topic string, opts ...kgo.Opt) {
	t.Helper()
	ctx := ctxT(t)
	const n, size = 2048, 4096
	prod, err := kgo.NewClient(append(opts, kgo.DefaultProduceTopic(topic))...)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	if _, err := kadm.NewClient(prod).CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		v := make([]byte, size)
		binary.BigEndian.PutUint32(v, uint32(i))
		prod.Produce(ctx, &kgo.Record{Value: v}, nil)
	}
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	cons, err := kgo.NewClient(append(opts, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxBytes(16<<20), kgo.FetchMaxPartitionBytes(16<<20))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	for got := 0; got < n; {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d", got, n)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) {
			if len(r.Value) != size || binary.BigEndian.Uint32(r.Value) != uint32(got) {
				t.Fatalf("record %d differs", got)
			}
			got++
		})
	}
}
