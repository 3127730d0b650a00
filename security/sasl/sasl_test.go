package sasl

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	ksasl "github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// run drives franz-go's client side of a mechanism against ours, the way
// a broker relays SaslAuthenticate messages.
func run(t *testing.T, client ksasl.Mechanism, server Mechanism) (Exchange, error) {
	t.Helper()
	sess, msg, err := client.Authenticate(context.Background(), "broker")
	if err != nil {
		t.Fatal(err)
	}
	x := server.Start()
	for i := 0; i < 5; i++ {
		answer, done, err := x.Step(msg)
		if err != nil {
			return x, err
		}
		clientDone, next, cerr := sess.Challenge(answer)
		if cerr != nil {
			t.Fatalf("client refused the server's answer: %v", cerr)
		}
		if done {
			if !clientDone {
				t.Fatal("server done, client not")
			}
			return x, nil
		}
		msg = next
	}
	t.Fatal("exchange did not finish")
	return nil, nil
}

func scramUsers(t *testing.T, mech string, users map[string]string) ScramLookup {
	creds := map[string]ScramCredential{}
	for u, p := range users {
		salt := []byte("salt-of-" + u)
		salted, err := SaltPassword(mech, p, salt, 4096)
		if err != nil {
			t.Fatal(err)
		}
		c, err := NewScramCredential(mech, salt, salted, 4096)
		if err != nil {
			t.Fatal(err)
		}
		creds[u] = c
	}
	return func(user, m string) (ScramCredential, bool) {
		c, ok := creds[user]
		return c, ok && m == mech
	}
}

func TestScramWithFranzGo(t *testing.T) {
	for _, mech := range []string{ScramSHA256, ScramSHA512} {
		t.Run(mech, func(t *testing.T) {
			s, err := NewScram(mech, scramUsers(t, mech, map[string]string{"alice": "alice-secret", "we,ird=": "pw"}))
			if err != nil {
				t.Fatal(err)
			}
			client := func(u, p string) ksasl.Mechanism {
				a := scram.Auth{User: u, Pass: p}
				if mech == ScramSHA256 {
					return a.AsSha256Mechanism()
				}
				return a.AsSha512Mechanism()
			}
			x, err := run(t, client("alice", "alice-secret"), s)
			if err != nil || x.User() != "alice" {
				t.Fatalf("alice: user %q, err %v", x.User(), err)
			}
			if x, err = run(t, client("we,ird=", "pw"), s); err != nil || x.User() != "we,ird=" {
				t.Fatalf("escaped name: user %q, err %v", x.User(), err)
			}
			for _, c := range [][2]string{{"alice", "wrong"}, {"bob", "alice-secret"}} {
				if _, err := run(t, client(c[0], c[1]), s); !IsAuthError(err) {
					t.Fatalf("%s/%s: want an authentication failure, got %v", c[0], c[1], err)
				}
			}
		})
	}
}

func TestPlainWithFranzGo(t *testing.T) {
	j, err := ParseJAAS(`org.apache.kafka.common.security.plain.PlainLoginModule required
		username="admin" password="admin-secret" user_admin="admin-secret" user_alice="a \"quoted\" secret";`)
	if err != nil {
		t.Fatal(err)
	}
	p := NewPlain(PlainUsersFromJAAS(j))
	x, err := run(t, plain.Auth{User: "alice", Pass: `a "quoted" secret`}.AsMechanism(), p)
	if err != nil || x.User() != "alice" {
		t.Fatalf("user %q err %v", x.User(), err)
	}
	for _, a := range []plain.Auth{{User: "alice", Pass: "nope"}, {User: "carol", Pass: "x"}, {Zid: "admin", User: "alice", Pass: `a "quoted" secret`}} {
		if _, err := run(t, a.AsMechanism(), p); !IsAuthError(err) {
			t.Fatalf("%+v: want an authentication failure, got %v", a, err)
		}
	}
}

// testIssuer signs ES256 tokens with a key published as a JWKS.
type testIssuer struct {
	key  *ecdsa.PrivateKey
	jwks []byte
}

func newIssuer(t testing.TB) *testIssuer {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	b64 := func(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }
	x, y := make([]byte, 32), make([]byte, 32)
	key.X.FillBytes(x)
	key.Y.FillBytes(y)
	jwks := fmt.Sprintf(`{"keys":[{"kty":"EC","crv":"P-256","kid":"k1","alg":"ES256","use":"sig","x":%q,"y":%q}]}`, b64(x), b64(y))
	return &testIssuer{key: key, jwks: []byte(jwks)}
}

func (is *testIssuer) token(t testing.TB, claims map[string]any) string {
	enc := func(v any) string {
		b, _ := json.Marshal(v)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	signed := enc(map[string]string{"alg": "ES256", "kid": "k1", "typ": "JWT"}) + "." + enc(claims)
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

func TestOAuthBearerWithFranzGo(t *testing.T) {
	is := newIssuer(t)
	keys, err := ParseJWKS(is.jwks)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_800_000_000, 0)
	v := &JWTValidator{Keys: keys, Issuer: "https://idp", Audience: []string{"kafka"}, ClockSkew: 30 * time.Second, Now: func() time.Time { return now }}
	o := NewOAuthBearer(v)
	good := map[string]any{"sub": "alice", "iss": "https://idp", "aud": []string{"kafka", "other"}, "exp": now.Unix() + 60, "iat": now.Unix()}
	x, err := run(t, oauth.Auth{Token: is.token(t, good)}.AsMechanism(), o)
	if err != nil || x.User() != "alice" || !x.Expiry().Equal(now.Add(time.Minute)) {
		t.Fatalf("user %q expiry %v err %v", x.User(), x.Expiry(), err)
	}
	with := func(k string, v any) map[string]any {
		c := map[string]any{}
		for a, b := range good {
			c[a] = b
		}
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
		return c
	}
	bad := map[string]string{
		"expired":        is.token(t, with("exp", now.Unix()-31)),
		"no exp":         is.token(t, with("exp", nil)),
		"future nbf":     is.token(t, with("nbf", now.Unix()+300)),
		"wrong issuer":   is.token(t, with("iss", "https://evil")),
		"wrong audience": is.token(t, with("aud", "else")),
		"no subject":     is.token(t, with("sub", nil)),
		"other key":      newIssuer(t).token(t, good),
		"tampered":       strings.Replace(is.token(t, good), ".", ".e30", 1),
	}
	for name, tok := range bad {
		if _, err := run(t, oauth.Auth{Token: tok}.AsMechanism(), o); !IsAuthError(err) {
			t.Errorf("%s: want an authentication failure, got %v", name, err)
		}
	}
	// Within the clock skew an expired token still passes.
	if _, err := run(t, oauth.Auth{Token: is.token(t, with("exp", now.Unix()-10))}.AsMechanism(), o); err != nil {
		t.Errorf("expired within skew: %v", err)
	}
}

func FuzzScramServer(f *testing.F) {
	f.Add([]byte("n,,n=alice,r=abc"), []byte("c=biws,r=abc,p=AAAA"))
	f.Add([]byte("y,a=alice,n=alice,r=x,tokenauth=true"), []byte(""))
	f.Add([]byte("p=tls,,n=a,r=b"), []byte("c=,r=,p="))
	cred, _ := NewScramCredential(ScramSHA256, []byte("s"), make([]byte, 32), 4096)
	s, _ := NewScram(ScramSHA256, func(string, string) (ScramCredential, bool) { return cred, true })
	f.Fuzz(func(t *testing.T, first, final []byte) {
		x := s.Start()
		if _, _, err := x.Step(first); err != nil {
			return
		}
		if _, done, err := x.Step(final); done && err == nil {
			t.Fatalf("authenticated by fuzz input %q %q", first, final)
		}
	})
}

func FuzzPlainAndOAuth(f *testing.F) {
	f.Add([]byte("\x00alice\x00secret"))
	f.Add([]byte("n,,\x01auth=Bearer a.b.c\x01\x01"))
	f.Add([]byte("n,a=alice,\x01host=x\x01auth=Bearer eyJ.eyJ.sig\x01\x01"))
	is := newIssuer(f)
	keys, _ := ParseJWKS(is.jwks)
	o := NewOAuthBearer(&JWTValidator{Keys: keys})
	p := NewPlain(map[string]string{"alice": "secret"})
	f.Fuzz(func(t *testing.T, msg []byte) {
		if _, done, err := o.Start().Step(msg); done || err == nil {
			t.Fatalf("OAUTHBEARER accepted fuzz input %q", msg)
		}
		p.Start().Step(msg)
	})
}

func FuzzJWTValidate(f *testing.F) {
	is := newIssuer(f)
	keys, _ := ParseJWKS(is.jwks)
	v := &JWTValidator{Keys: keys}
	f.Add(is.token(f, map[string]any{"sub": "a", "exp": 1}))
	f.Add("eyJhbGciOiJub25lIn0.eyJzdWIiOiJhIn0.")
	f.Fuzz(func(t *testing.T, tok string) {
		if c, err := v.Validate(tok); err == nil {
			t.Fatalf("fuzzed token validated: %+v", c)
		}
	})
}

func FuzzParseJAASAndJWKS(f *testing.F) {
	f.Add(`m required a="b" c=d;`)
	f.Add(`{"keys":[{"kty":"RSA","n":"AQAB","e":"AQAB"}]}`)
	f.Fuzz(func(t *testing.T, s string) {
		ParseJAAS(s)
		ParseJWKS([]byte(s))
	})
}

// BenchmarkScramServer measures the broker's side of one SCRAM-SHA-512
// authentication (both messages; the client's proof is computed from a
// salted password made once, as a client caching it would).
//
//	go test -run XXX -bench ScramServer ./security/sasl/
func BenchmarkScramServer(b *testing.B) {
	salt := []byte("0123456789abcdef")
	salted, _ := SaltPassword(ScramSHA512, "secret", salt, 4096)
	cred, _ := NewScramCredential(ScramSHA512, salt, salted, 4096)
	s, _ := NewScram(ScramSHA512, func(string, string) (ScramCredential, bool) { return cred, true })
	h := sha512.New
	clientKey := mac(h, salted, "Client Key")
	stored := sha512.Sum512(clientKey)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		x := s.Start()
		first := "n=alice,r=clientnonce"
		sf, _, err := x.Step([]byte("n,," + first))
		if err != nil {
			b.Fatal(err)
		}
		nonce := strings.TrimPrefix(strings.Split(string(sf), ",")[0], "r=")
		final := "c=biws,r=" + nonce
		sig := mac(h, stored[:], first+","+string(sf)+","+final)
		proof := make([]byte, len(sig))
		for j := range sig {
			proof[j] = clientKey[j] ^ sig[j]
		}
		if _, done, err := x.Step([]byte(final + ",p=" + base64.StdEncoding.EncodeToString(proof))); !done || err != nil {
			b.Fatal(err)
		}
	}
}
