package sasl

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"
)

// JWTValidator checks signed JWTs (RFC 7519) against a key set: the
// signature (RS256/384/512, PS256/384/512, ES256/384/512), exp (required),
// nbf and iat, within ClockSkew, and the issuer and audience when set.
type JWTValidator struct {
	Keys      *JWKS
	Issuer    string   // sasl.oauthbearer.expected.issuer; "" skips the check
	Audience  []string // sasl.oauthbearer.expected.audience; empty skips it
	ClockSkew time.Duration
	SubClaim  string // sasl.oauthbearer.sub.claim.name (default "sub")
	// Now is the clock; nil is time.Now (tests pass a fixed one).
	Now func() time.Time
}

// maxToken bounds a token's length.
const maxToken = 64 << 10

// Claims is what a valid token says of its principal.
type Claims struct {
	Subject string
	Expiry  time.Time
}

var errBadToken = errors.New("invalid token")

// Validate checks a compact JWS and returns its subject and expiry.
func (v *JWTValidator) Validate(token string) (Claims, error) {
	if len(token) > maxToken {
		return Claims{}, fmt.Errorf("%w: too long", errBadToken)
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return Claims{}, fmt.Errorf("%w: not a signed JWT", errBadToken)
	}
	var hdr struct {
		Alg string `json:"alg"`
		Kid string `json:"kid"`
	}
	if err := decodeSegment(parts[0], &hdr); err != nil {
		return Claims{}, err
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return Claims{}, fmt.Errorf("%w: signature encoding", errBadToken)
	}
	key, err := v.Keys.find(hdr.Kid, hdr.Alg)
	if err != nil {
		return Claims{}, err
	}
	if err := verify(hdr.Alg, key, []byte(parts[0]+"."+parts[1]), sig); err != nil {
		return Claims{}, err
	}
	claims := map[string]any{}
	if err := decodeSegment(parts[1], &claims); err != nil {
		return Claims{}, err
	}
	return v.check(claims)
}

func decodeSegment(seg string, into any) error {
	b, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		return fmt.Errorf("%w: segment encoding", errBadToken)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(into); err != nil {
		return fmt.Errorf("%w: segment JSON", errBadToken)
	}
	return nil
}

func (v *JWTValidator) check(c map[string]any) (Claims, error) {
	now := time.Now()
	if v.Now != nil {
		now = v.Now()
	}
	exp, ok := numericDate(c["exp"])
	if !ok {
		return Claims{}, fmt.Errorf("%w: no exp claim", errBadToken)
	}
	if now.After(exp.Add(v.ClockSkew)) {
		return Claims{}, fmt.Errorf("%w: expired at %s", errBadToken, exp.UTC().Format(time.RFC3339))
	}
	for _, name := range []string{"nbf", "iat"} {
		if t, ok := numericDate(c[name]); ok && t.After(now.Add(v.ClockSkew)) {
			return Claims{}, fmt.Errorf("%w: %s is in the future", errBadToken, name)
		}
	}
	if v.Issuer != "" {
		if iss, _ := c["iss"].(string); iss != v.Issuer {
			return Claims{}, fmt.Errorf("%w: issuer %q is not the expected one", errBadToken, iss)
		}
	}
	if len(v.Audience) > 0 && !audienceMatches(c["aud"], v.Audience) {
		return Claims{}, fmt.Errorf("%w: audience is not an expected one", errBadToken)
	}
	claim := v.SubClaim
	if claim == "" {
		claim = "sub"
	}
	sub, _ := c[claim].(string)
	if sub == "" {
		return Claims{}, fmt.Errorf("%w: no %s claim", errBadToken, claim)
	}
	return Claims{Subject: sub, Expiry: exp}, nil
}

func numericDate(v any) (time.Time, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return time.Time{}, false
	}
	f, err := n.Float64()
	if err != nil || f < 0 || f > 1<<40 {
		return time.Time{}, false
	}
	return time.Unix(int64(f), 0), true
}

func audienceMatches(aud any, want []string) bool {
	var got []string
	switch a := aud.(type) {
	case string:
		got = []string{a}
	case []any:
		for _, x := range a {
			if s, ok := x.(string); ok {
				got = append(got, s)
			}
		}
	}
	for _, g := range got {
		for _, w := range want {
			if g == w {
				return true
			}
		}
	}
	return false
}

func verify(alg string, key crypto.PublicKey, signed, sig []byte) error {
	var h crypto.Hash
	switch alg[min(2, len(alg)):] {
	case "256":
		h = crypto.SHA256
	case "384":
		h = crypto.SHA384
	case "512":
		h = crypto.SHA512
	default:
		return fmt.Errorf("%w: algorithm %q not accepted", errBadToken, alg)
	}
	digest := hashOf(h, signed)
	bad := fmt.Errorf("%w: signature does not verify", errBadToken)
	switch k := key.(type) {
	case *rsa.PublicKey:
		var err error
		switch alg[:2] {
		case "RS":
			err = rsa.VerifyPKCS1v15(k, h, digest, sig)
		case "PS":
			err = rsa.VerifyPSS(k, h, digest, sig, nil)
		default:
			return bad
		}
		if err != nil {
			return bad
		}
		return nil
	case *ecdsa.PublicKey:
		size := (k.Curve.Params().BitSize + 7) / 8
		if alg[:2] != "ES" || len(sig) != 2*size {
			return bad
		}
		r, s := new(big.Int).SetBytes(sig[:size]), new(big.Int).SetBytes(sig[size:])
		if !ecdsa.Verify(k, digest, r, s) {
			return bad
		}
		return nil
	}
	return bad
}

func hashOf(h crypto.Hash, b []byte) []byte {
	switch h {
	case crypto.SHA384:
		s := sha512.Sum384(b)
		return s[:]
	case crypto.SHA512:
		s := sha512.Sum512(b)
		return s[:]
	}
	s := sha256.Sum256(b)
	return s[:]
}

// JWKS is a set of public keys (RFC 7517) by key id.
type JWKS struct {
	keys []jwk
}

type jwk struct {
	kid string
	alg string
	key crypto.PublicKey
}

// maxKeys bounds a key set.
const maxKeys = 1000

// ParseJWKS reads a JWK set ({"keys":[…]}); RSA and EC (P-256/384/521)
// keys are kept, others skipped.
func ParseJWKS(data []byte) (*JWKS, error) {
	var set struct {
		Keys []struct {
			Kty, Kid, Alg, Use string
			N, E               string
			Crv, X, Y          string
		} `json:"keys"`
	}
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, fmt.Errorf("JWKS: %w", err)
	}
	if len(set.Keys) > maxKeys {
		return nil, fmt.Errorf("JWKS: more than %d keys", maxKeys)
	}
	out := &JWKS{}
	for _, k := range set.Keys {
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		var pub crypto.PublicKey
		switch k.Kty {
		case "RSA":
			n, err1 := base64.RawURLEncoding.DecodeString(k.N)
			e, err2 := base64.RawURLEncoding.DecodeString(k.E)
			if err1 != nil || err2 != nil || len(e) == 0 || len(e) > 4 || len(n) < 128 {
				return nil, fmt.Errorf("JWKS: bad RSA key %q", k.Kid)
			}
			pub = &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}
		case "EC":
			curve := map[string]elliptic.Curve{"P-256": elliptic.P256(), "P-384": elliptic.P384(), "P-521": elliptic.P521()}[k.Crv]
			x, err1 := base64.RawURLEncoding.DecodeString(k.X)
			y, err2 := base64.RawURLEncoding.DecodeString(k.Y)
			if curve == nil || err1 != nil || err2 != nil {
				return nil, fmt.Errorf("JWKS: bad EC key %q", k.Kid)
			}
			size := (curve.Params().BitSize + 7) / 8
			if len(x) != size || len(y) != size {
				return nil, fmt.Errorf("JWKS: EC key %q has coordinates of the wrong size", k.Kid)
			}
			ek, err := ecdsa.ParseUncompressedPublicKey(curve, append(append([]byte{4}, x...), y...))
			if err != nil {
				return nil, fmt.Errorf("JWKS: EC key %q: %w", k.Kid, err)
			}
			pub = ek
		default:
			continue
		}
		out.keys = append(out.keys, jwk{kid: k.Kid, alg: k.Alg, key: pub})
	}
	if len(out.keys) == 0 {
		return nil, errors.New("JWKS: no usable signing key")
	}
	return out, nil
}

// find returns the key a token names (by kid; the only key when the token
// names none and the set has one).
func (s *JWKS) find(kid, alg string) (crypto.PublicKey, error) {
	for _, k := range s.keys {
		if (k.kid == kid || kid == "" && len(s.keys) == 1) && (k.alg == "" || k.alg == alg) {
			return k.key, nil
		}
	}
	return nil, fmt.Errorf("%w: no key %q for %s", errBadToken, kid, alg)
}

// OAuth is the OAUTHBEARER mechanism over a JWT validator.
type OAuth struct{ v *JWTValidator }

func NewOAuthBearer(v *JWTValidator) *OAuth { return &OAuth{v: v} }

func (o *OAuth) Name() string    { return OAuthBearer }
func (o *OAuth) Start() Exchange { return &oauthExchange{o: o} }

type oauthExchange struct {
	o      *OAuth
	done   bool
	claims Claims
}

func (x *oauthExchange) User() string      { return x.claims.Subject }
func (x *oauthExchange) Expiry() time.Time { return x.claims.Expiry }

// Step reads the client's initial response (RFC 7628: gs2 header, then
// \x01-separated key=value pairs with auth=Bearer <token>). A bad token
// fails at once with SASL_AUTHENTICATION_FAILED, the RFC's error status in
// the message.
func (x *oauthExchange) Step(msg []byte) ([]byte, bool, error) {
	if x.done {
		return nil, false, errDone
	}
	x.done = true
	if len(msg) > MaxMessage {
		return nil, false, authFailed("Authentication failed: OAUTHBEARER message too long")
	}
	token, authz, err := parseOAuthInitial(string(msg))
	if err != nil {
		return nil, false, authFailed("Authentication failed: " + err.Error())
	}
	c, err := x.o.v.Validate(token)
	if err != nil {
		return nil, false, authFailed(`{"status":"invalid_token"} Authentication failed: ` + err.Error())
	}
	if authz != "" && authz != c.Subject {
		return nil, false, authFailed("Authentication failed: authorization id differs from the token's subject")
	}
	x.claims = c
	return nil, true, nil
}

func parseOAuthInitial(m string) (token, authz string, err error) {
	gs2, rest, ok := strings.Cut(m, "\x01")
	if !ok || !(strings.HasPrefix(gs2, "n,") || strings.HasPrefix(gs2, "y,")) || !strings.HasSuffix(gs2, ",") {
		return "", "", errors.New("invalid OAUTHBEARER initial response")
	}
	if a := strings.TrimSuffix(gs2[2:], ","); a != "" {
		if !strings.HasPrefix(a, "a=") {
			return "", "", errors.New("invalid OAUTHBEARER authorization id")
		}
		authz = a[2:]
	}
	if !strings.HasSuffix(rest, "\x01\x01") && rest != "\x01" {
		return "", "", errors.New("invalid OAUTHBEARER initial response")
	}
	for _, kv := range strings.Split(strings.TrimSuffix(rest, "\x01\x01"), "\x01") {
		if v, ok := strings.CutPrefix(kv, "auth="); ok {
			scheme, tok, ok := strings.Cut(v, " ")
			if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" {
				return "", "", errors.New("invalid OAUTHBEARER auth value")
			}
			token = strings.TrimSpace(tok)
		}
	}
	if token == "" {
		return "", "", errors.New("no token in OAUTHBEARER initial response")
	}
	return token, authz, nil
}
