package server_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/oauth"

	"github.com/sluice-broker/sluice/internal/testbroker"
	"github.com/sluice-broker/sluice/netpoll"
)

// issuer signs ES256 JWTs with a key it publishes as a JWKS file.
type issuer struct {
	key  *ecdsa.PrivateKey
	jwks string // path
}

func newIssuer(t *testing.T, dir string) *issuer {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	x, y := make([]byte, 32), make([]byte, 32)
	key.X.FillBytes(x)
	key.Y.FillBytes(y)
	b64 := base64.RawURLEncoding.EncodeToString
	set := fmt.Sprintf(`{"keys":[{"kty":"EC","crv":"P-256","kid":"k1","use":"sig","x":%q,"y":%q}]}`, b64(x), b64(y))
	path := dir + "/jwks.json"
	if err := os.WriteFile(path, []byte(set), 0o600); err != nil {
		t.Fatal(err)
	}
	return &issuer{key: key, jwks: path}
}

func (is *issuer) token(t *testing.T, sub string, exp time.Time) string {
	enc := func(v any) string {
		b, _ := json.Marshal(v)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	signed := enc(map[string]string{"alg": "ES256", "kid": "k1"}) + "." +
		enc(map[string]any{"sub": sub, "iss": "https://idp.test", "aud": "kafka", "exp": exp.Unix(), "iat": time.Now().Unix()})
	d := sha256.Sum256([]byte(signed))
	r, s, err := ecdsa.Sign(rand.Reader, is.key, d[:])
	if err != nil {
		t.Fatal(err)
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return signed + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// TestOAuthBearer: franz-go authenticates with a JWT the broker checks
// against a JWKS file (issuer, audience, expiry); an expired token, a token
// for another audience and a token from another key get
// SASL_AUTHENTICATION_FAILED.
func TestOAuthBearer(t *testing.T) {
	dir := t.TempDir()
	is := newIssuer(t, dir)
	tb := testbroker.StartNet(t, netpoll.BackendEpoll, set(
		"listeners", "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
		"sasl.enabled.mechanisms", "OAUTHBEARER",
		"sasl.oauthbearer.jwks.endpoint.url", (&url.URL{Scheme: "file", Path: is.jwks}).String(),
		"sasl.oauthbearer.expected.issuer", "https://idp.test",
		"sasl.oauthbearer.expected.audience", "kafka",
		"sasl.oauthbearer.clock.skew.seconds", "5",
	))
	addr := tb.ListenerAddr("SASL_PLAINTEXT")
	with := func(tok string) []kgo.Opt {
		return []kgo.Opt{kgo.SeedBrokers(addr), kgo.SASL(oauth.Auth{Token: tok}.AsMechanism())}
	}
	roundTrip(t, "oauth-topic", 3, with(is.token(t, "alice", time.Now().Add(time.Hour)))...)
	mustFail(t, kerr.SaslAuthenticationFailed, with(is.token(t, "alice", time.Now().Add(-time.Minute)))...)
	mustFail(t, kerr.SaslAuthenticationFailed, with(newIssuer(t, t.TempDir()).token(t, "alice", time.Now().Add(time.Hour)))...)
	mustFail(t, kerr.SaslAuthenticationFailed, with("not.a.jwt")...)
}

// TestCertificateReload: replacing the PEM keystore file changes the
// certificate new connections are served, without a restart.
func TestCertificateReload(t *testing.T) {
	pki := newPKI(t)
	tb := testbroker.StartNet(t, netpoll.BackendEpoll, set(
		"listeners", "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
		"ssl.keystore.location", pki.keyPEM,
	))
	addr := tb.ListenerAddr("SSL")
	served := func() *x509.Certificate {
		c, err := tls.Dial("tcp", addr, pki.clientTLS(false))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0]
	}
	before := served()
	next := newPKI(t) // a new CA and broker certificate
	data, err := os.ReadFile(next.keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pki.keyPEM, data, 0o600); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(2 * time.Second)
	os.Chtimes(pki.keyPEM, later, later)
	nextCA, _ := x509.ParseCertificate(next.broker.Certificate[1])
	pki.pool.AddCert(nextCA) // trust both while the change is picked up
	for i := 0; ; i++ {
		if got := served(); got.SerialNumber.Cmp(before.SerialNumber) != 0 {
			if got.SerialNumber.Cmp(next.broker.Leaf.SerialNumber) != 0 {
				t.Fatalf("served neither the old nor the new certificate")
			}
			return
		}
		if i == 100 {
			t.Fatal("the new certificate was never served")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
