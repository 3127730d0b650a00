package sasl

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"hash"
	"strconv"
	"strings"
	"time"
)

// ScramCredential is what the broker keeps of a SCRAM password (Kafka's
// UserScramCredentialRecord): never the password, nor the salted password.
type ScramCredential struct {
	Salt       []byte
	StoredKey  []byte
	ServerKey  []byte
	Iterations int32
}

// ScramLookup finds a user's credential for a mechanism.
type ScramLookup func(user, mechanism string) (ScramCredential, bool)

// Kafka's bounds on SCRAM iterations.
const (
	MinScramIterations = 4096
	MaxScramIterations = 16384
)

func scramHash(mechanism string) (func() hash.Hash, bool) {
	switch mechanism {
	case ScramSHA256:
		return sha256.New, true
	case ScramSHA512:
		return sha512.New, true
	}
	return nil, false
}

// ScramMechanismType is Kafka's ScramMechanism code (1 SHA-256, 2 SHA-512;
// 0 unknown) for a mechanism name, and back.
func ScramMechanismType(name string) int8 {
	switch name {
	case ScramSHA256:
		return 1
	case ScramSHA512:
		return 2
	}
	return 0
}

func ScramMechanismName(t int8) string {
	switch t {
	case 1:
		return ScramSHA256
	case 2:
		return ScramSHA512
	}
	return ""
}

// SaltPassword is Hi(password, salt, iterations) of RFC 5802 (PBKDF2).
func SaltPassword(mechanism, password string, salt []byte, iterations int) ([]byte, error) {
	h, ok := scramHash(mechanism)
	if !ok {
		return nil, fmt.Errorf("unknown SCRAM mechanism %q", mechanism)
	}
	return pbkdf2.Key(h, password, salt, iterations, h().Size())
}

// NewScramCredential derives the stored and server keys from a salted
// password (what AlterUserScramCredentials carries).
func NewScramCredential(mechanism string, salt, salted []byte, iterations int32) (ScramCredential, error) {
	h, ok := scramHash(mechanism)
	if !ok {
		return ScramCredential{}, fmt.Errorf("unknown SCRAM mechanism %q", mechanism)
	}
	clientKey := mac(h, salted, "Client Key")
	sum := h()
	sum.Write(clientKey)
	return ScramCredential{
		Salt:       append([]byte(nil), salt...),
		StoredKey:  sum.Sum(nil),
		ServerKey:  mac(h, salted, "Server Key"),
		Iterations: iterations,
	}, nil
}

func mac(h func() hash.Hash, key []byte, msg string) []byte {
	m := hmac.New(h, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}

// Scram is the SCRAM-SHA-256 or SCRAM-SHA-512 mechanism.
type Scram struct {
	name   string
	h      func() hash.Hash
	lookup ScramLookup
}

// NewScram serves mechanism (ScramSHA256 or ScramSHA512) with credentials
// from lookup.
func NewScram(mechanism string, lookup ScramLookup) (*Scram, error) {
	h, ok := scramHash(mechanism)
	if !ok {
		return nil, fmt.Errorf("unknown SCRAM mechanism %q", mechanism)
	}
	return &Scram{name: mechanism, h: h, lookup: lookup}, nil
}

func (s *Scram) Name() string    { return s.name }
func (s *Scram) Start() Exchange { return &scramExchange{s: s} }

// scramExchange: client-first → server-first → client-final → server-final.
type scramExchange struct {
	s           *Scram
	step        int
	user        string
	cred        ScramCredential
	nonce       string // client nonce + server nonce
	gs2         string // the client's gs2 header, echoed in c=
	clientFirst string // client-first-message-bare
	serverFirst string
}

func (x *scramExchange) User() string      { return x.user }
func (x *scramExchange) Expiry() time.Time { return time.Time{} }

var errScramCredentials = authFailed("Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM")

func (x *scramExchange) Step(msg []byte) ([]byte, bool, error) {
	if len(msg) > MaxMessage {
		return nil, false, authFailed("Authentication failed: SCRAM message too long")
	}
	x.step++
	switch x.step {
	case 1:
		out, err := x.clientFirstMsg(string(msg))
		return out, false, err
	case 2:
		out, err := x.clientFinalMsg(string(msg))
		return out, err == nil, err
	}
	return nil, false, errDone
}

// clientFirstMsg reads gs2-header client-first-message-bare:
// "n,,n=user,r=nonce[,ext…]".
func (x *scramExchange) clientFirstMsg(m string) ([]byte, error) {
	bad := authFailed("Authentication failed: invalid SCRAM client-first message")
	switch {
	case strings.HasPrefix(m, "n,"), strings.HasPrefix(m, "y,"):
	case strings.HasPrefix(m, "p="):
		return nil, authFailed("Authentication failed: SCRAM channel binding is not supported")
	default:
		return nil, bad
	}
	_, rest, ok := strings.Cut(m[2:], ",") // authzid part
	if !ok {
		return nil, bad
	}
	authz := m[2 : len(m)-len(rest)-1]
	x.gs2, x.clientFirst = m[:len(m)-len(rest)], rest
	attrs := strings.Split(rest, ",")
	if len(attrs) < 2 || !strings.HasPrefix(attrs[0], "n=") || !strings.HasPrefix(attrs[1], "r=") || len(attrs[1]) < 3 {
		return nil, bad
	}
	for _, a := range attrs[2:] {
		if strings.HasPrefix(a, "tokenauth=") {
			return nil, authFailed("Authentication failed: delegation tokens are not supported")
		}
	}
	user, err := scramUnescape(attrs[0][2:])
	if err != nil || user == "" {
		return nil, bad
	}
	if authz != "" && authz != "a="+attrs[0][2:] {
		return nil, authFailed("Authentication failed: Authorization id differs from the user name")
	}
	cnonce := attrs[1][2:]
	if strings.ContainsAny(cnonce, ",") {
		return nil, bad
	}
	cred, ok := x.s.lookup(user, x.s.name)
	if !ok {
		return nil, errScramCredentials
	}
	x.user, x.cred = user, cred
	var sn [24]byte
	rand.Read(sn[:])
	x.nonce = cnonce + base64.RawStdEncoding.EncodeToString(sn[:])
	x.serverFirst = "r=" + x.nonce + ",s=" + base64.StdEncoding.EncodeToString(cred.Salt) + ",i=" + strconv.Itoa(int(cred.Iterations))
	return []byte(x.serverFirst), nil
}

// clientFinalMsg reads "c=…,r=…[,ext…],p=proof" and checks the proof.
func (x *scramExchange) clientFinalMsg(m string) ([]byte, error) {
	bad := authFailed("Authentication failed: invalid SCRAM client-final message")
	i := strings.LastIndex(m, ",p=")
	if i < 0 {
		return nil, bad
	}
	withoutProof, proofB64 := m[:i], m[i+3:]
	attrs := strings.Split(withoutProof, ",")
	if len(attrs) < 2 || attrs[0] != "c="+base64.StdEncoding.EncodeToString([]byte(x.gs2)) || attrs[1] != "r="+x.nonce {
		return nil, bad
	}
	proof, err := base64.StdEncoding.DecodeString(proofB64)
	if err != nil || len(proof) != x.s.h().Size() || len(x.cred.StoredKey) != len(proof) {
		return nil, bad
	}
	auth := x.clientFirst + "," + x.serverFirst + "," + withoutProof
	sig := mac(x.s.h, x.cred.StoredKey, auth)
	clientKey := make([]byte, len(proof))
	for i := range proof {
		clientKey[i] = proof[i] ^ sig[i]
	}
	sum := x.s.h()
	sum.Write(clientKey)
	if subtle.ConstantTimeCompare(sum.Sum(nil), x.cred.StoredKey) != 1 {
		return nil, errScramCredentials
	}
	return []byte("v=" + base64.StdEncoding.EncodeToString(mac(x.s.h, x.cred.ServerKey, auth))), nil
}

// scramUnescape decodes a saslname: "=2C" is ",", "=3D" is "=", and any
// other "=" is an error.
func scramUnescape(s string) (string, error) {
	if !strings.Contains(s, "=") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '=' {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case strings.HasPrefix(s[i:], "=2C"):
			b.WriteByte(',')
		case strings.HasPrefix(s[i:], "=3D"):
			b.WriteByte('=')
		default:
			return "", fmt.Errorf("bad escape in SCRAM user name")
		}
		i += 2
	}
	return b.String(), nil
}
