package server

// The broker's listeners and their security: each listener of
// engine.Config.BrokerListeners is bound here and served by the network
// layer under its name; SSL and SASL_SSL listeners get a TLS config built
// from their ssl.* keys (security/tlsconf, reloaded when the store files
// change); SASL_PLAINTEXT and SASL_SSL listeners get their enabled
// mechanisms (security/sasl) and every connection an authenticator
// (auth.go).

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluice-broker/sluice/engine"
	"github.com/sluice-broker/sluice/metadata"
	"github.com/sluice-broker/sluice/netpoll"
	"github.com/sluice-broker/sluice/security/sasl"
	"github.com/sluice-broker/sluice/security/tlsconf"
)

// listenerSec is one listener: its socket and what its connections need.
type listenerSec struct {
	engine.Listener
	ln     net.Listener
	tls    *tls.Config              // SSL, SASL_SSL
	mapper *tlsconf.PrincipalMapper // SSL: principal from the client certificate
	// SASL listeners.
	mechs       []sasl.Mechanism
	mechNames   []string
	reauth      time.Duration // connections.max.reauth.ms; 0 for none
	authTimeout time.Duration // time to authenticate before being closed
	maxReceive  int32         // sasl.server.max.receive.size: a request's bound until authenticated
}

func (l *listenerSec) isSASL() bool {
	return l.Protocol == engine.ProtocolSASLPlaintext || l.Protocol == engine.ProtocolSASLSSL
}

// bindListeners binds every broker listener and fills in the advertised
// address of those with port 0 or none given; cfg's listeners are updated
// to what was bound.
func bindListeners(cfg *engine.Config) ([]*listenerSec, error) {
	ls, err := cfg.BrokerListeners()
	if err != nil {
		return nil, err
	}
	if len(ls) == 0 {
		return nil, errors.New("listeners has no broker listener, which a broker needs")
	}
	var out []*listenerSec
	for _, l := range ls {
		ln, err := netpoll.Listen("tcp", l.Addr)
		if err != nil {
			closeListeners(out)
			return nil, fmt.Errorf("listen %s (%s): %w", l.Addr, l.Name, err)
		}
		if l.Advertised == "" {
			l.Advertised = advertiseFor(l.Addr, ln.Addr().(*net.TCPAddr))
		}
		out = append(out, &listenerSec{Listener: l, ln: ln})
	}
	cfg.Listeners = ls[:0:0]
	for _, l := range out {
		cfg.Listeners = append(cfg.Listeners, l.Listener)
	}
	p := primaryListener(cfg, out)
	cfg.Advertise = p.Advertised
	return out, nil
}

// primaryListener is the inter-broker listener (else the first).
func primaryListener(cfg *engine.Config, ls []*listenerSec) *listenerSec {
	for _, l := range ls {
		if l.Name == cfg.InterBrokerName() {
			return l
		}
	}
	return ls[0]
}

func closeListeners(ls []*listenerSec) {
	for _, l := range ls {
		l.ln.Close()
	}
}

// scramSource looks SCRAM credentials up: the broker's image, or on the
// controller listener the controller's.
type scramSource func(user string, mechanism int8) (metadata.ScramCredential, bool)

// secure builds each listener's TLS and SASL from cfg's security keys.
func secure(cfg *engine.Config, ls []*listenerSec, scram scramSource, log *slog.Logger) error {
	for _, l := range ls {
		get := func(k string) string { return cfg.SecurityValue(l.Name, k) }
		if l.Protocol == engine.ProtocolSSL || l.Protocol == engine.ProtocolSASLSSL {
			r, err := tlsconf.New(get, log.With("listener", l.Name))
			if err != nil {
				return fmt.Errorf("listener %s: %w", l.Name, err)
			}
			l.tls = r.Config()
			if l.mapper, err = tlsconf.ParseMappingRules(get("ssl.principal.mapping.rules")); err != nil {
				return fmt.Errorf("listener %s: %w", l.Name, err)
			}
		}
		if l.isSASL() {
			if err := l.saslMechanisms(get, scram, log); err != nil {
				return fmt.Errorf("listener %s: %w", l.Name, err)
			}
		}
	}
	return nil
}

// saslMechanisms builds the listener's sasl.enabled.mechanisms (default
// SCRAM-SHA-256,SCRAM-SHA-512).
func (l *listenerSec) saslMechanisms(get tlsconf.Getter, scram scramSource, log *slog.Logger) error {
	names := get("sasl.enabled.mechanisms")
	if strings.TrimSpace(names) == "" {
		names = sasl.ScramSHA256 + "," + sasl.ScramSHA512
	}
	var err error
	if l.reauth, err = millisKey(get, "connections.max.reauth.ms", 0); err != nil {
		return err
	}
	if l.authTimeout, err = millisKey(get, "sluice.sasl.authentication.timeout.ms", 30000); err != nil {
		return err
	}
	l.maxReceive = sasl.MaxMessage
	if v := strings.TrimSpace(get("sasl.server.max.receive.size")); v != "" {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n < 1024 {
			return fmt.Errorf("sasl.server.max.receive.size=%q: want bytes, at least 1024", v)
		}
		l.maxReceive = int32(n)
	}
	lookup := func(user, mech string) (sasl.ScramCredential, bool) {
		c, ok := scram(user, sasl.ScramMechanismType(mech))
		return sasl.ScramCredential{Salt: c.Salt, StoredKey: c.StoredKey, ServerKey: c.ServerKey, Iterations: c.Iterations}, ok
	}
	for _, n := range strings.Split(names, ",") {
		n = strings.ToUpper(strings.TrimSpace(n))
		var m sasl.Mechanism
		switch n {
		case "":
			continue
		case sasl.Plain:
			m, err = plainMechanism(get)
		case sasl.ScramSHA256, sasl.ScramSHA512:
			m, err = sasl.NewScram(n, lookup)
		case sasl.OAuthBearer:
			m, err = oauthMechanism(get, log)
		case "GSSAPI":
			err = errors.New("sasl.enabled.mechanisms: GSSAPI (Kerberos) is not supported")
		default:
			err = fmt.Errorf("sasl.enabled.mechanisms: unknown mechanism %s", n)
		}
		if err != nil {
			return err
		}
		l.mechs, l.mechNames = append(l.mechs, m), append(l.mechNames, n)
	}
	return nil
}

func millisKey(get tlsconf.Getter, k string, def int64) (time.Duration, error) {
	v := strings.TrimSpace(get(k))
	if v == "" {
		return time.Duration(def) * time.Millisecond, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s=%q: want milliseconds", k, v)
	}
	return time.Duration(n) * time.Millisecond, nil
}

// plainMechanism takes PLAIN's users from the listener's
// plain.sasl.jaas.config (Kafka's listener.name.<l>.plain.sasl.jaas.config).
func plainMechanism(get tlsconf.Getter) (sasl.Mechanism, error) {
	conf := get("plain.sasl.jaas.config")
	if conf == "" {
		conf = get("sasl.jaas.config")
	}
	if conf == "" {
		return nil, errors.New("PLAIN is enabled but no plain.sasl.jaas.config lists its users")
	}
	j, err := sasl.ParseJAAS(conf)
	if err != nil {
		return nil, err
	}
	users := sasl.PlainUsersFromJAAS(j)
	if len(users) == 0 {
		return nil, errors.New("plain.sasl.jaas.config has no user_<name>=\"<password>\" entry")
	}
	return sasl.NewPlain(users), nil
}

// oauthMechanism validates JWTs against a JWKS file
// (sasl.oauthbearer.jwks.endpoint.url=file:///…, re-read when it changes)
// or inline keys (sluice.sasl.oauthbearer.jwks).
func oauthMechanism(get tlsconf.Getter, log *slog.Logger) (sasl.Mechanism, error) {
	skew, err := millisKey(get, "sasl.oauthbearer.clock.skew.seconds", 30)
	if err != nil {
		return nil, err
	}
	v := &sasl.JWTValidator{
		Issuer:    get("sasl.oauthbearer.expected.issuer"),
		ClockSkew: skew * 1000, // the key counts seconds
		SubClaim:  get("sasl.oauthbearer.sub.claim.name"),
	}
	for _, a := range strings.Split(get("sasl.oauthbearer.expected.audience"), ",") {
		if a = strings.TrimSpace(a); a != "" {
			v.Audience = append(v.Audience, a)
		}
	}
	if inline := get("sluice.sasl.oauthbearer.jwks"); inline != "" {
		if v.Keys, err = sasl.ParseJWKS([]byte(inline)); err != nil {
			return nil, err
		}
		return sasl.NewOAuthBearer(v), nil
	}
	raw := get("sasl.oauthbearer.jwks.endpoint.url")
	u, err := url.Parse(raw)
	if raw == "" || err != nil || u.Scheme != "file" {
		return nil, fmt.Errorf("OAUTHBEARER needs sasl.oauthbearer.jwks.endpoint.url=file:///path/to/jwks.json or sluice.sasl.oauthbearer.jwks (got %q; https endpoints are not fetched)", raw)
	}
	f := &jwksFile{path: u.Path, v: v, log: log}
	if err := f.load(); err != nil {
		return nil, err
	}
	return f, nil
}

// jwksFile is OAUTHBEARER over a JWKS file, re-read (at most once a
// second) when its modification time changes.
type jwksFile struct {
	path string
	log  *slog.Logger
	mu   sync.Mutex
	v    *sasl.JWTValidator // replaced, never changed, on reload
	mod  time.Time
	seen time.Time
}

func (f *jwksFile) load() error {
	st, err := os.Stat(f.path)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(f.path)
	if err != nil {
		return err
	}
	keys, err := sasl.ParseJWKS(data)
	if err != nil {
		return fmt.Errorf("%s: %w", f.path, err)
	}
	v := *f.v
	v.Keys = keys
	f.v, f.mod = &v, st.ModTime()
	return nil
}

func (f *jwksFile) Name() string { return sasl.OAuthBearer }

func (f *jwksFile) Start() sasl.Exchange {
	f.mu.Lock()
	defer f.mu.Unlock()
	if now := time.Now(); now.Sub(f.seen) >= time.Second {
		f.seen = now
		if st, err := os.Stat(f.path); err == nil && !st.ModTime().Equal(f.mod) {
			if err := f.load(); err != nil {
				f.log.Error("JWKS file changed but cannot be read; keeping the previous keys", "err", err)
			}
		}
	}
	return sasl.NewOAuthBearer(f.v).Start()
}
