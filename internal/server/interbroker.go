package server

// How nodes of a cluster reach each other, with the security of the
// listener they dial, as Kafka's brokers do:
//
//   - brokers dial each other's inter-broker listener
//     (inter.broker.listener.name or security.inter.broker.protocol):
//     replica fetchers and the transaction coordinator's markers;
//   - brokers and controllers dial the controller listener
//     (controller.listener.names): raft between voters, the brokers'
//     registration, heartbeats, presence and metadata long poll.
//
// One peerDialer per listener does all of it: TCP, then TLS when the
// listener's protocol is SSL or SASL_SSL (a client configuration from the
// same ssl.* keys the node serves that listener with: its truststore
// checks the peer, its keystore is the client certificate, and
// ssl.endpoint.identification.algorithm=https, the default, checks the
// host), then a SASL login when it is SASL_PLAINTEXT or SASL_SSL:
// SaslHandshake and SaslAuthenticate with sasl.mechanism.inter.broker.protocol
// or sasl.mechanism.controller.protocol, as the username and password of
// the listener's listener.name.<l>.<mechanism>.sasl.jaas.config, logging
// in again within the session lifetime the listener gives (reauthConn).
// The broker listeners' server side is the one every client gets
// (listeners.go, auth.go); the controller listener's is controller_auth.go.

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	franzsasl "github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sluice-broker/sluice/engine"
	"github.com/sluice-broker/sluice/security/sasl"
	"github.com/sluice-broker/sluice/security/tlsconf"
)

// peerDialer dials one kind of listener of other nodes as this node.
type peerDialer struct {
	tls  *tls.Config         // nil without TLS
	mech franzsasl.Mechanism // nil without SASL
}

// newPeerDialer builds the dialer of the listener named name whose
// security protocol is protocol, logging in with mechanism on a SASL one;
// nil for PLAINTEXT.
func newPeerDialer(cfg *engine.Config, name, protocol, mechanism string, log *slog.Logger) (*peerDialer, error) {
	if protocol == engine.ProtocolPlaintext {
		return nil, nil
	}
	get := func(k string) string { return cfg.SecurityValue(name, k) }
	d := &peerDialer{}
	if protocol == engine.ProtocolSSL || protocol == engine.ProtocolSASLSSL {
		r, err := tlsconf.New(get, log.With("listener", name, "side", "client"))
		if err != nil {
			return nil, fmt.Errorf("listener %s: %w", name, err)
		}
		algo, set := securityLookup(cfg, name, "ssl.endpoint.identification.algorithm")
		algo = strings.ToLower(strings.TrimSpace(algo))
		if set && algo != "" && algo != "https" {
			return nil, fmt.Errorf("listener %s: ssl.endpoint.identification.algorithm=%q: want https or empty", name, algo)
		}
		d.tls = r.ClientConfig(!set || algo == "https")
	}
	if protocol == engine.ProtocolSASLPlaintext || protocol == engine.ProtocolSASLSSL {
		m, err := loginMechanism(get, name, mechanism)
		if err != nil {
			return nil, err
		}
		d.mech = m
	}
	return d, nil
}

// securityLookup is a listener's value of a security key and whether it
// is set at all (an empty ssl.endpoint.identification.algorithm differs
// from none).
func securityLookup(cfg *engine.Config, listener, key string) (string, bool) {
	if v, ok := cfg.Security["listener.name."+strings.ToLower(listener)+"."+key]; ok {
		return v, true
	}
	v, ok := cfg.Security[key]
	return v, ok
}

// loginMechanism is the client side of mechanism with the node's own
// credentials: the username and password options of the listener's
// <mechanism>.sasl.jaas.config (else its sasl.jaas.config). The mechanism
// must be one the listener enables, since the peers serve it with the
// same keys.
func loginMechanism(get tlsconf.Getter, listener, mechanism string) (franzsasl.Mechanism, error) {
	mechanism = strings.ToUpper(strings.TrimSpace(mechanism))
	enabled := get("sasl.enabled.mechanisms")
	if strings.TrimSpace(enabled) == "" {
		enabled = sasl.ScramSHA256 + "," + sasl.ScramSHA512
	}
	found := false
	for _, m := range strings.Split(enabled, ",") {
		found = found || strings.EqualFold(strings.TrimSpace(m), mechanism)
	}
	if !found {
		return nil, fmt.Errorf("listener %s: nodes log in to it with %s, which its sasl.enabled.mechanisms (%s) does not list", listener, mechanism, enabled)
	}
	key := strings.ToLower(mechanism) + ".sasl.jaas.config"
	conf := get(key)
	if conf == "" {
		conf = get("sasl.jaas.config")
	}
	if conf == "" {
		return nil, fmt.Errorf("listener %s: nodes log in to it with %s as the username and password of listener.name.%s.%s, which is not set", listener, mechanism, strings.ToLower(listener), key)
	}
	j, err := sasl.ParseJAAS(conf)
	if err != nil {
		return nil, fmt.Errorf("listener %s: %w", listener, err)
	}
	user, pass := j.Options["username"], j.Options["password"]
	if user == "" {
		return nil, fmt.Errorf("listener %s: %s has no username=\"…\" password=\"…\" for the node's own login", listener, key)
	}
	switch mechanism {
	case sasl.Plain:
		return plain.Auth{User: user, Pass: pass}.AsMechanism(), nil
	case sasl.ScramSHA256:
		return scram.Auth{User: user, Pass: pass}.AsSha256Mechanism(), nil
	case sasl.ScramSHA512:
		return scram.Auth{User: user, Pass: pass}.AsSha512Mechanism(), nil
	}
	return nil, fmt.Errorf("listener %s: nodes cannot log in with %s: use PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (GSSAPI is Kafka's default and not supported)", listener, mechanism)
}

// dial opens a connection to addr through d; a nil d dials plain TCP.
// The whole of it (TCP, TLS, SASL) is bounded by ctx.
func (d *peerDialer) dial(ctx context.Context, addr string) (net.Conn, error) {
	var nd net.Dialer
	c, err := nd.DialContext(ctx, "tcp", addr)
	if err != nil || d == nil {
		return c, err
	}
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	if c, err = d.secure(ctx, c, addr); err != nil {
		return nil, err
	}
	c.SetDeadline(time.Time{})
	return c, nil
}

// secure does the TLS handshake and the SASL login on c, closing it on
// failure.
func (d *peerDialer) secure(ctx context.Context, c net.Conn, addr string) (net.Conn, error) {
	if d.tls != nil {
		cfg := d.tls.Clone()
		cfg.ServerName, _, _ = net.SplitHostPort(addr)
		tc := tls.Client(c, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			c.Close()
			return nil, fmt.Errorf("TLS to %s: %w", addr, err)
		}
		c = tc
	}
	if d.mech != nil {
		lifetime, err := saslLogin(ctx, c, d.mech, addr)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("SASL %s login to %s: %w", d.mech.Name(), addr, err)
		}
		if lifetime > 0 {
			return &reauthConn{Conn: c, mech: d.mech, addr: addr, renewAt: renewTime(lifetime)}, nil
		}
	}
	return c, nil
}

// renewTime is when a session of lifetime is renewed: at 85% of it, as
// Kafka's clients do at the earliest.
func renewTime(lifetime time.Duration) time.Time {
	return time.Now().Add(lifetime * 85 / 100)
}

// reauthConn is a connection whose SASL session has a lifetime
// (connections.max.reauth.ms, KIP-368): the first write after 85% of it
// logs in again before writing, so the listener does not close it. Its
// users (replica fetchers, transaction peers) send one request at a time
// and read its answer before the next write, so nothing of theirs is in
// flight while the login reads its own answers.
type reauthConn struct {
	net.Conn
	mech    franzsasl.Mechanism
	addr    string
	renewAt time.Time
}

func (c *reauthConn) Write(b []byte) (int, error) {
	if time.Now().After(c.renewAt) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		lifetime, err := saslLogin(ctx, c.Conn, c.mech, c.addr)
		cancel()
		if err != nil {
			return 0, fmt.Errorf("SASL re-authentication to %s: %w", c.addr, err)
		}
		c.renewAt = time.Now().Add(time.Duration(1<<62 - 1))
		if lifetime > 0 {
			c.renewAt = renewTime(lifetime)
		}
	}
	return c.Conn.Write(b)
}

// clientOpts are d's TLS and SASL for a franz-go client, which logs in
// (and re-authenticates) itself.
func (d *peerDialer) clientOpts() []kgo.Opt {
	var opts []kgo.Opt
	if d.tls != nil {
		opts = append(opts, kgo.DialTLSConfig(d.tls)) // kgo sets ServerName to the host dialled
	}
	if d.mech != nil {
		opts = append(opts, kgo.SASL(d.mech))
	}
	return opts
}

// dialFunc is d's dial as the engine and the controller take it.
func (d *peerDialer) dialFunc() func(ctx context.Context, addr string) (net.Conn, error) {
	return d.dial
}

// saslLogin logs in on c with SaslHandshake v1 and SaslAuthenticate v1,
// and returns the session's lifetime (0: none).
func saslLogin(ctx context.Context, c net.Conn, mech franzsasl.Mechanism, addr string) (time.Duration, error) {
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("sluice-node"))
	var corr int32
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Mechanism = mech.Name()
	hsResp := kmsg.NewPtrSASLHandshakeResponse()
	if err := loginRoundTrip(c, f, &corr, hs, hsResp); err != nil {
		return 0, err
	}
	if err := kerr.ErrorForCode(hsResp.ErrorCode); err != nil {
		return 0, fmt.Errorf("%w (the listener enables %v)", err, hsResp.SupportedMechanisms)
	}
	sess, out, err := mech.Authenticate(ctx, addr)
	if err != nil {
		return 0, err
	}
	for range maxLoginSteps {
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.SASLAuthBytes = out
		resp := kmsg.NewPtrSASLAuthenticateResponse()
		if err := loginRoundTrip(c, f, &corr, req, resp); err != nil {
			return 0, err
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			if resp.ErrorMessage != nil {
				return 0, fmt.Errorf("%w: %s", err, *resp.ErrorMessage)
			}
			return 0, err
		}
		done, next, err := sess.Challenge(resp.SASLAuthBytes)
		if err != nil || done {
			return time.Duration(resp.SessionLifetimeMillis) * time.Millisecond, err
		}
		out = next
	}
	return 0, errors.New("too many SASL steps")
}

// maxLoginSteps bounds a login's SaslAuthenticate round trips (SCRAM
// takes two).
const maxLoginSteps = 8

// maxLoginResponse bounds a SASL response frame.
const maxLoginResponse = 1 << 20

// loginRoundTrip writes req at version 1 and reads its response into resp.
func loginRoundTrip(c net.Conn, f *kmsg.RequestFormatter, corr *int32, req kmsg.Request, resp kmsg.Response) error {
	req.SetVersion(1)
	resp.SetVersion(1)
	*corr++
	if _, err := c.Write(f.AppendRequest(nil, req, *corr)); err != nil {
		return err
	}
	var hdr [8]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		return err
	}
	n := int32(binary.BigEndian.Uint32(hdr[:]))
	if n < 4 || n > maxLoginResponse {
		return fmt.Errorf("response frame of %d bytes", n)
	}
	if int32(binary.BigEndian.Uint32(hdr[4:])) != *corr {
		return errors.New("response with a wrong correlation id")
	}
	body := make([]byte, n-4)
	if _, err := io.ReadFull(c, body); err != nil {
		return err
	}
	return resp.ReadFrom(body)
}

// interBrokerDialer is the dialer of cfg's inter-broker listener (nil
// for PLAINTEXT).
func interBrokerDialer(cfg *engine.Config, log *slog.Logger) (*peerDialer, error) {
	ls, err := cfg.BrokerListeners()
	if err != nil || len(ls) == 0 {
		return nil, err
	}
	ib := ls[0]
	for _, l := range ls {
		if l.Name == cfg.InterBrokerName() {
			ib = l
		}
	}
	return newPeerDialer(cfg, ib.Name, ib.Protocol, cfg.InterBroker.SASLMechanism, log)
}

// controllerDialer is the dialer of cfg's controller listener (nil for
// PLAINTEXT).
func controllerDialer(cfg *engine.Config, log *slog.Logger) (*peerDialer, error) {
	proto := cfg.ControllerProtocol()
	sasl := proto == engine.ProtocolSASLPlaintext || proto == engine.ProtocolSASLSSL
	if m := strings.ToUpper(cfg.InterBroker.ControllerSASLMechanism); sasl && strings.HasPrefix(m, "SCRAM-") {
		// As in Kafka: SCRAM credentials live in the metadata the
		// controllers replicate, so voters could not log in to each
		// other before they had agreed on it.
		return nil, fmt.Errorf("sasl.mechanism.controller.protocol=%s: SCRAM cannot secure the controller listener (its credentials are in the metadata the controllers replicate); use PLAIN or SSL", m)
	}
	return newPeerDialer(cfg, cfg.ControllerListenerKey(), cfg.ControllerProtocol(), cfg.InterBroker.ControllerSASLMechanism, log)
}
