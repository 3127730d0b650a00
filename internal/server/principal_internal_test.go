package server

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/sluice-broker/sluice/engine"
	"github.com/sluice-broker/sluice/netpoll"
	"github.com/sluice-broker/sluice/security/tlsconf"
)

// TestSSLPrincipalFromCertificate: a connection on an SSL listener takes
// its principal from the client certificate through
// ssl.principal.mapping.rules; without a certificate, or on a SASL_SSL
// listener (where SASL decides), it stays anonymous.
func TestSSLPrincipalFromCertificate(t *testing.T) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour),
		Subject: pkix.Name{CommonName: "Alice", OrganizationalUnit: []string{"eng"}, Organization: []string{"Sluice"}}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	mapper, err := tlsconf.ParseMappingRules(`RULE:^CN=([a-zA-Z]+),OU=eng,.*$/$1/L, DEFAULT`)
	if err != nil {
		t.Fatal(err)
	}
	b := newTestEngine(t)
	h := &handler{b: b, listeners: map[string]*listenerSec{
		"SSL":      {Listener: engine.Listener{Name: "SSL", Protocol: engine.ProtocolSSL}, mapper: mapper},
		"SASL_SSL": {Listener: engine.Listener{Name: "SASL_SSL", Protocol: engine.ProtocolSASLSSL}, mapper: mapper},
	}}
	state := &tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}}
	remote := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}
	for _, c := range []struct {
		listener string
		tls      *tls.ConnectionState
		want     string
	}{
		{"SSL", state, "User:alice"},
		{"SSL", &tls.ConnectionState{}, engine.AnonymousPrincipal},
		{"SASL_SSL", state, engine.AnonymousPrincipal},
	} {
		ch := h.Open(netpoll.ConnInfo{Remote: remote, Listener: c.listener, TLS: c.tls})
		var s *engine.Session
		switch x := ch.(type) {
		case *conn:
			s = x.s
		case *authedConn:
			s = x.s
		}
		if s.Principal != c.want || s.Listener != c.listener {
			t.Errorf("%s: principal %q listener %q, want %q", c.listener, s.Principal, s.Listener, c.want)
		}
		ch.Closed()
	}
	// A rule that does not match leaves the name as Kafka's DEFAULT has it.
	if got := mapper.Principal(&x509.Certificate{Subject: pkix.Name{CommonName: "bob"}}); got != "User:CN=bob" {
		t.Errorf("default mapping: %q", got)
	}
}

func newTestEngine(t *testing.T) *engine.Broker {
	cfg := engine.DefaultConfig()
	cfg.Listen, cfg.DataDir, cfg.OffsetsTopicPartitions = "127.0.0.1:9092", t.TempDir(), 1
	b, err := engine.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}
