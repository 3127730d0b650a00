package bench

// Connection set-up rate: how many new client connections a broker brings
// to the point of serving requests per second. Each worker loops: open a
// connection (with TLS if configured: a full handshake, no session
// resumption), send ApiVersions, authenticate with SCRAM (SaslHandshake and
// SaslAuthenticate twice) if a mechanism is given, send one Metadata
// request for no topics, close. That is what a Kafka client does before
// its first real request.
//
// The client keeps its own cost low so that the broker is measured: it
// derives SCRAM's salted password once per salt (a real client derives it
// on every connection, 4096 iterations of HMAC at least, which would cost
// the shared machine more than the broker's side).

import (
	"context"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ConnectConfig is one connection set-up run.
type ConnectConfig struct {
	Addr string
	// TLS, if not nil, makes every connection TLS. Session resumption is
	// left off whatever it says: every connection pays a full handshake.
	TLS *tls.Config
	// Mechanism is "" (no SASL), SCRAM-SHA-256 or SCRAM-SHA-512.
	Mechanism      string
	User, Password string
	Workers        int // connections being set up at once
	Duration       time.Duration
}

// ConnectResult is what a connection set-up run measured.
type ConnectResult struct {
	Connections int64          `json:"connections"` // completed set-ups
	Seconds     float64        `json:"seconds"`
	PerSec      float64        `json:"per_sec"`
	SetUp       LatencySummary `json:"set_up_latency"` // dial to Metadata response
	Errors      int64          `json:"errors"`
	FirstError  string         `json:"first_error,omitempty"`
	// TLS is the negotiated version, cipher suite and key exchange.
	TLS string `json:"tls,omitempty"`
}

// ConnectRate runs cc and reports the set-up rate. A run with more
// failed set-ups than completed ones is an error.
func ConnectRate(ctx context.Context, cc ConnectConfig) (*ConnectResult, error) {
	if cc.Workers < 1 || cc.Duration <= 0 {
		return nil, errors.New("connect: need workers and a duration")
	}
	if _, err := scramHash(cc.Mechanism); err != nil {
		return nil, err
	}
	if cc.TLS != nil {
		cc.TLS = serverName(cc.TLS, cc.Addr).Clone()
		cc.TLS.ClientSessionCache = nil
		cc.TLS.SessionTicketsDisabled = true
	}
	start := time.Now()
	c := &connector{cc: cc, lat: NewRecorder(), salted: map[string][]byte{}, end: start.Add(cc.Duration)}
	rctx, cancel := context.WithDeadline(ctx, c.end)
	defer cancel()
	var wg sync.WaitGroup
	for range cc.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for rctx.Err() == nil && time.Now().Before(c.end) {
				c.once(rctx)
			}
		}()
	}
	wg.Wait()
	res := &ConnectResult{Connections: c.done.Load(), Seconds: time.Since(start).Seconds(), SetUp: c.lat.Summary(), Errors: c.errs.Load()}
	res.PerSec = float64(res.Connections) / res.Seconds
	if p := c.firstErr.Load(); p != nil {
		res.FirstError = *p
	}
	if s := c.tlsState.Load(); s != nil {
		res.TLS = *s
	}
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	if res.Errors > res.Connections {
		return res, fmt.Errorf("connect: %d of %d set-ups failed, the first: %s", res.Errors, res.Errors+res.Connections, res.FirstError)
	}
	return res, nil
}

// connector is the shared state of one ConnectRate run.
type connector struct {
	cc       ConnectConfig
	end      time.Time // the run's deadline
	lat      *Recorder
	done     atomic.Int64
	errs     atomic.Int64
	firstErr atomic.Pointer[string]
	tlsState atomic.Pointer[string]

	mu     sync.Mutex
	salted map[string][]byte // salt and iterations → salted password
}

// once sets up and closes one connection, counting it as done or failed
// (a failure because the run ended is neither). The end is the clock's,
// not ctx.Err(): on a loaded machine the context's timer may fire late,
// while a dial fails at once on a deadline already past.
func (c *connector) once(ctx context.Context) {
	t0 := time.Now()
	err := c.setUp(ctx)
	switch {
	case ctx.Err() != nil || !time.Now().Before(c.end):
	case err != nil:
		if c.errs.Add(1) == 1 {
			s := err.Error()
			c.firstErr.Store(&s)
		}
	default:
		c.lat.Record(time.Since(t0))
		c.done.Add(1)
	}
}

func (c *connector) setUp(ctx context.Context) error {
	rc, err := dialRaw(ctx, c.cc.Addr, c.cc.TLS)
	if err != nil {
		return err
	}
	defer rc.c.Close()
	stop := context.AfterFunc(ctx, func() { rc.c.Close() })
	defer stop()
	if tc, ok := rc.c.(*tls.Conn); ok && c.tlsState.Load() == nil {
		st := tc.ConnectionState()
		s := fmt.Sprintf("%s %s %s", tls.VersionName(st.Version), tls.CipherSuiteName(st.CipherSuite), st.CurveID)
		c.tlsState.Store(&s)
	}
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version, av.ClientSoftwareName, av.ClientSoftwareVersion = 3, "sluice-bench", "1"
	if _, err := rc.roundTrip(av); err != nil {
		return fmt.Errorf("ApiVersions: %w", err)
	}
	if c.cc.Mechanism != "" {
		if err := c.scram(rc); err != nil {
			return err
		}
	}
	md := kmsg.NewPtrMetadataRequest()
	md.Version, md.Topics = 12, []kmsg.MetadataRequestTopic{}
	body, err := rc.roundTrip(md)
	if err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	resp := kmsg.NewPtrMetadataResponse()
	resp.Version = md.Version
	if err := resp.ReadFrom(body); err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	if len(resp.Brokers) == 0 {
		return errors.New("metadata: no brokers")
	}
	return nil
}

// scram authenticates rc with SCRAM (RFC 5802) as the configured user.
func (c *connector) scram(rc *rawConn) error {
	h, _ := scramHash(c.cc.Mechanism)
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, c.cc.Mechanism
	body, err := rc.roundTrip(hs)
	if err != nil {
		return fmt.Errorf("SaslHandshake: %w", err)
	}
	hsr := kmsg.NewPtrSASLHandshakeResponse()
	hsr.Version = hs.Version
	if err := hsr.ReadFrom(body); err != nil {
		return fmt.Errorf("SaslHandshake: %w", err)
	}
	if err := kerr.ErrorForCode(hsr.ErrorCode); err != nil {
		return fmt.Errorf("SaslHandshake: %w", err)
	}
	var nonce [18]byte
	_, _ = rand.Read(nonce[:])
	first := "n=" + scramName(c.cc.User) + ",r=" + base64.RawStdEncoding.EncodeToString(nonce[:])
	serverFirst, err := saslStep(rc, "n,,"+first)
	if err != nil {
		return err
	}
	attrs := scramAttrs(serverFirst)
	salt, err := base64.StdEncoding.DecodeString(attrs["s"])
	iter, ierr := strconv.Atoi(attrs["i"])
	if err != nil || ierr != nil || !strings.HasPrefix(attrs["r"], first[strings.Index(first, ",r=")+3:]) {
		return fmt.Errorf("SCRAM: bad server-first message %q", serverFirst)
	}
	salted, err := c.saltedPassword(h, salt, iter)
	if err != nil {
		return err
	}
	final := "c=biws,r=" + attrs["r"]
	auth := first + "," + serverFirst + "," + final
	clientKey := hmacOf(h, salted, "Client Key")
	sh := h()
	sh.Write(clientKey)
	proof := hmacOf(h, sh.Sum(nil), auth)
	for i := range proof {
		proof[i] ^= clientKey[i]
	}
	serverFinal, err := saslStep(rc, final+",p="+base64.StdEncoding.EncodeToString(proof))
	if err != nil {
		return err
	}
	want := "v=" + base64.StdEncoding.EncodeToString(hmacOf(h, hmacOf(h, salted, "Server Key"), auth))
	if serverFinal != want {
		return fmt.Errorf("SCRAM: server signature %q does not match", serverFinal)
	}
	return nil
}

// saslStep sends one SaslAuthenticate and returns the broker's bytes.
func saslStep(rc *rawConn, msg string) (string, error) {
	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.Version, req.SASLAuthBytes = 2, []byte(msg)
	body, err := rc.roundTrip(req)
	if err != nil {
		return "", fmt.Errorf("SaslAuthenticate: %w", err)
	}
	resp := kmsg.NewPtrSASLAuthenticateResponse()
	resp.Version = req.Version
	if err := resp.ReadFrom(body); err != nil {
		return "", fmt.Errorf("SaslAuthenticate: %w", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		msg := ""
		if resp.ErrorMessage != nil {
			msg = ": " + *resp.ErrorMessage
		}
		return "", fmt.Errorf("SaslAuthenticate: %w%s", err, msg)
	}
	return string(resp.SASLAuthBytes), nil
}

// saltedPassword is Hi(password, salt, iter), derived once per salt.
func (c *connector) saltedPassword(h func() hash.Hash, salt []byte, iter int) ([]byte, error) {
	key := string(salt) + "/" + strconv.Itoa(iter)
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.salted[key]; ok {
		return s, nil
	}
	if iter < 1 || iter > 1<<20 {
		return nil, fmt.Errorf("SCRAM: %d iterations", iter)
	}
	s, err := pbkdf2.Key(h, c.cc.Password, salt, iter, h().Size())
	if err != nil {
		return nil, err
	}
	c.salted[key] = s
	return s, nil
}

func scramHash(mechanism string) (func() hash.Hash, error) {
	switch mechanism {
	case "", "SCRAM-SHA-512":
		return sha512.New, nil
	case "SCRAM-SHA-256":
		return sha256.New, nil
	}
	return nil, fmt.Errorf("connect: unsupported SASL mechanism %q (SCRAM-SHA-256, SCRAM-SHA-512)", mechanism)
}

func hmacOf(h func() hash.Hash, key []byte, msg string) []byte {
	m := hmac.New(h, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}

// scramName escapes a user name for SCRAM's n= attribute.
func scramName(u string) string {
	return strings.NewReplacer("=", "=3D", ",", "=2C").Replace(u)
}

// scramAttrs splits "k=v,k=v" (a value may itself hold '=').
func scramAttrs(msg string) map[string]string {
	out := map[string]string{}
	for _, kv := range strings.Split(msg, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			out[k] = v
		}
	}
	return out
}
