package server

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/engine"
	"github.com/sluice-broker/sluice/metadata"
)

// writeNodePEM writes a PEM keystore (key and a self-signed certificate
// for 127.0.0.1, usable by servers and clients) with the given common
// name; it is also a truststore of itself.
func writeNodePEM(t *testing.T, cn string) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalPKCS8PrivateKey(key)
	path := filepath.Join(t.TempDir(), cn+".pem")
	data := append(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func nodeConfig(t *testing.T, props string) *engine.Config {
	t.Helper()
	cfg := engine.DefaultConfig()
	base := "process.roles=broker,controller\ncontroller.quorum.voters=1@127.0.0.1:1\n" +
		"authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n"
	if _, err := cfg.ApplyProperties(strings.NewReader(base + props)); err != nil {
		t.Fatal(err)
	}
	return &cfg
}

// admittedController serves a secured controller listener and reports,
// per dialled connection, whether it reached the controller (the
// listener's Accept returned it).
func admittedController(t *testing.T, cfg *engine.Config) (addr string, admitted func(c net.Conn) bool) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	noImage := func() (metadata.Image, bool) { return metadata.Image{}, false }
	ln, err := secureControllerListener(cfg, raw, noImage, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("ok"))
			t.Cleanup(func() { c.Close() })
		}
	}()
	return raw.Addr().String(), func(c net.Conn) bool {
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		var b [2]byte
		_, err := io.ReadFull(c, b[:])
		return err == nil && string(b[:]) == "ok"
	}
}

func dialAs(t *testing.T, cfg *engine.Config, addr string) (net.Conn, error) {
	t.Helper()
	d, err := controllerDialer(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return d.dial(ctx, addr)
}

// TestControllerListenerSASLSSLAdmitsOnlyClusterAction: on a SASL_SSL
// controller listener a node logging in as a super user gets through; a
// user who logs in but lacks CLUSTER_ACTION is closed before the
// controller sees the connection; a wrong password is refused with
// SASL_AUTHENTICATION_FAILED; a plaintext Kafka request gets no answer.
func TestControllerListenerSASLSSLAdmitsOnlyClusterAction(t *testing.T) {
	store := writeNodePEM(t, "node")
	props := func(user, pass string) string {
		return "listeners=SASL_SSL://127.0.0.1:0,CONTROLLER://127.0.0.1:0\n" +
			"listener.security.protocol.map=SASL_SSL:SASL_SSL,CONTROLLER:SASL_SSL\n" +
			"sasl.mechanism.controller.protocol=PLAIN\n" +
			"listener.name.controller.sasl.enabled.mechanisms=PLAIN\n" +
			`listener.name.controller.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="` + user + `" password="` + pass + `" user_broker="broker-secret" user_carol="carol-secret";` + "\n" +
			"ssl.keystore.location=" + store + "\nssl.truststore.location=" + store + "\n" +
			"super.users=User:broker\n"
	}
	addr, admitted := admittedController(t, nodeConfig(t, props("broker", "broker-secret")))

	c, err := dialAs(t, nodeConfig(t, props("broker", "broker-secret")), addr)
	if err != nil {
		t.Fatalf("the super user's login: %v", err)
	}
	if !admitted(c) {
		t.Fatal("User:broker (a super user) did not reach the controller")
	}
	c, err = dialAs(t, nodeConfig(t, props("carol", "carol-secret")), addr)
	if err != nil {
		t.Fatalf("carol's login: %v", err)
	}
	if admitted(c) {
		t.Fatal("User:carol, without CLUSTER_ACTION, reached the controller")
	}
	if _, err := dialAs(t, nodeConfig(t, props("broker", "wrong")), addr); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("a wrong password: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
	if plaintextAnswered(t, addr) {
		t.Fatal("the SASL_SSL controller listener answered a plaintext request")
	}
}

// TestControllerListenerMutualTLSPrincipal: on an SSL controller listener
// with ssl.client.auth=required the principal is the dialling node's
// certificate's: the super user's certificate gets through, another
// node's, trusted but not a super user, does not.
func TestControllerListenerMutualTLSPrincipal(t *testing.T) {
	good, other := writeNodePEM(t, "broker"), writeNodePEM(t, "stranger")
	both := filepath.Join(t.TempDir(), "trust.pem")
	a, _ := os.ReadFile(good)
	b, _ := os.ReadFile(other)
	if err := os.WriteFile(both, append(a, b...), 0o600); err != nil {
		t.Fatal(err)
	}
	props := func(keystore string) string {
		return "listeners=SSL://127.0.0.1:0,CONTROLLER://127.0.0.1:0\n" +
			"listener.security.protocol.map=SSL:SSL,CONTROLLER:SSL\n" +
			"ssl.client.auth=required\nssl.keystore.location=" + keystore + "\nssl.truststore.location=" + both + "\n" +
			"super.users=User:CN=broker\n"
	}
	server := nodeConfig(t, props(good))
	addr, admitted := admittedController(t, server)
	c, err := dialAs(t, nodeConfig(t, props(good)), addr)
	if err != nil {
		t.Fatal(err)
	}
	if !admitted(c) {
		t.Fatal("User:CN=broker (a super user) did not reach the controller")
	}
	if c, err := dialAs(t, nodeConfig(t, props(other)), addr); err == nil && admitted(c) {
		t.Fatal("User:CN=stranger reached the controller")
	}
}

// plaintextAnswered reports whether addr answers an ApiVersions sent
// without TLS.
func plaintextAnswered(t *testing.T, addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(0)
	c.Write(kmsg.NewRequestFormatter().AppendRequest(nil, req, 7))
	var hdr [8]byte
	_, err = io.ReadFull(c, hdr[:])
	return err == nil && hdr[7] == 7 && hdr[4] == 0
}

// TestInterBrokerDialerReauthenticates: on a SASL listener with
// connections.max.reauth.ms, a connection from the inter-broker dialer
// logs in again before its first request after the session's end (KIP-368)
// (at 85% of it, as Kafka's clients) and goes on being served, where the
// same connection without the re-authentication is closed by the broker
// at the session's end.
func TestInterBrokerDialerReauthenticates(t *testing.T) {
	cfg := engine.DefaultConfig()
	props := "listeners=SASL_PLAINTEXT://127.0.0.1:0\nsasl.enabled.mechanisms=PLAIN\nconnections.max.reauth.ms=4000\n" +
		"log.dirs=" + t.TempDir() + "\n" +
		`listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" password="broker-secret" user_broker="broker-secret";` + "\n"
	if _, err := cfg.ApplyProperties(strings.NewReader(props)); err != nil {
		t.Fatal(err)
	}
	srv, err := Start(Options{Config: cfg, Logger: slog.New(slog.DiscardHandler), Net: "std"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	d, err := newPeerDialer(&cfg, "SASL_PLAINTEXT", engine.ProtocolSASLPlaintext, "PLAIN", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	dial := func() net.Conn {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := d.dial(ctx, srv.ListenerAddr("SASL_PLAINTEXT"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	metadata := func(c net.Conn, corr int32) error {
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(12)
		c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Write(kmsg.NewRequestFormatter().AppendRequest(nil, req, corr)); err != nil {
			return err
		}
		var hdr [8]byte
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			return err
		}
		body := make([]byte, binary.BigEndian.Uint32(hdr[:])-4)
		_, err := io.ReadFull(c, body)
		return err
	}
	renewing, plain := dial(), dial()
	rc, ok := renewing.(*reauthConn)
	if !ok {
		t.Fatalf("a SASL connection with a session lifetime is a %T", renewing)
	}
	plain = plain.(*reauthConn).Conn // the same login, never renewed
	for _, c := range []net.Conn{renewing, plain} {
		if err := metadata(c, 1); err != nil {
			t.Fatal(err)
		}
	}
	sleepUntil := func(at time.Time) {
		for time.Now().Before(at) {
			time.Sleep(time.Until(at))
		}
	}
	end := rc.renewAt.Add(600 * time.Millisecond) // no later than the broker's end of the first session (15% of 4 s)
	sleepUntil(rc.renewAt.Add(50 * time.Millisecond))
	if err := metadata(renewing, 2); err != nil {
		t.Fatalf("in the last 15%% of the session, with re-authentication: %v", err)
	}
	sleepUntil(end.Add(300 * time.Millisecond))
	if err := metadata(renewing, 3); err != nil {
		t.Fatalf("after the first session's end, re-authenticated: %v", err)
	}
	if err := metadata(plain, 2); err == nil {
		t.Fatal("after the session's end, without re-authentication, the broker still served the connection")
	}
}
