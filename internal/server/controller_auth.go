package server

// The controller listener's security. The controller package serves raw
// connections (raft, presence, Kafka-framed RPCs told apart by their
// first bytes) and knows nothing of TLS or SASL; on an SSL, SASL_PLAINTEXT
// or SASL_SSL controller listener, controllerListener stands between the
// socket and it and hands out only connections that have
//
//   - done the TLS handshake (SSL, SASL_SSL; with ssl.client.auth the
//     principal is the client certificate's, mapped by
//     ssl.principal.mapping.rules);
//   - logged in with SaslHandshake (v1) and SaslAuthenticate (v0-v2),
//     Kafka-framed, before anything else (SASL_*), the principal then
//     being User:<name>;
//   - a principal allowed CLUSTER_ACTION on the cluster: one of
//     super.users, or one the ACLs of the controller's own metadata image
//     allow (with no authorizer.class.name, any authenticated principal).
//
// Anything else is closed without an answer. Kafka authorizes each
// controller request instead; refusing the connection whole is stricter
// and keeps the controller's code free of principals, but it means an
// admin tool cannot reach a secured controller listener as a user who
// lacks CLUSTER_ACTION (use a broker listener for those requests).

import (
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/controller"
	"github.com/sluice-broker/sluice/engine"
	"github.com/sluice-broker/sluice/metadata"
	"github.com/sluice-broker/sluice/security/acl"
)

// controllerListener is a controller listener that accepts authenticated
// and authorized connections only.
type controllerListener struct {
	net.Listener
	sec       *listenerSec
	authorize func(principal, host string) bool
	log       *slog.Logger
	ready     chan net.Conn // connections done with their login
	done      chan struct{} // closed by Close
	once      sync.Once
	slots     chan struct{} // bounds the logins in progress
	// logins are the connections logging in, closed by Close.
	mu struct {
		sync.Mutex
		logins map[net.Conn]struct{}
	}
}

// maxControllerLogins bounds the connections logging in at once.
const maxControllerLogins = 64

// secureControllerListener wraps ln when the controller listener's
// protocol asks for TLS or SASL; ln itself when it is PLAINTEXT.
// SCRAM credentials and ACLs are the controller's image's (image returns
// false until the controller runs).
func secureControllerListener(cfg *engine.Config, ln net.Listener, image func() (metadata.Image, bool), log *slog.Logger) (net.Listener, error) {
	proto := cfg.ControllerProtocol()
	if proto == engine.ProtocolPlaintext {
		return ln, nil
	}
	name := cfg.ControllerListenerKey()
	sec := &listenerSec{Listener: engine.Listener{Name: strings.ToUpper(name), Protocol: proto}}
	scram := func(user string, mechanism int8) (metadata.ScramCredential, bool) {
		if img, ok := image(); ok {
			return img.ScramCredential(user, mechanism)
		}
		return metadata.ScramCredential{}, false
	}
	if err := secure(cfg, []*listenerSec{sec}, scram, log); err != nil {
		return nil, err
	}
	l := &controllerListener{Listener: ln, sec: sec, authorize: clusterActionCheck(cfg, image), log: log.With("listener", sec.Name),
		ready: make(chan net.Conn), done: make(chan struct{}), slots: make(chan struct{}, maxControllerLogins)}
	l.mu.logins = map[net.Conn]struct{}{}
	go l.acceptLoop()
	return l, nil
}

// Accept returns the next connection that logged in and may act for the
// cluster.
func (l *controllerListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ready:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *controllerListener) Close() error {
	l.once.Do(func() {
		close(l.done)
		l.mu.Lock()
		for c := range l.mu.logins {
			c.Close()
		}
		l.mu.Unlock()
	})
	return l.Listener.Close()
}

// track records c as logging in (false once closing); untrack forgets it.
func (l *controllerListener) track(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.done:
		return false
	default:
	}
	l.mu.logins[c] = struct{}{}
	return true
}

func (l *controllerListener) untrack(c net.Conn) {
	l.mu.Lock()
	delete(l.mu.logins, c)
	l.mu.Unlock()
}

func (l *controllerListener) acceptLoop() {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			l.Close()
			return
		}
		select {
		case l.slots <- struct{}{}:
		case <-l.done:
			c.Close()
			return
		}
		if !l.track(c) {
			c.Close()
			<-l.slots
			return
		}
		go func() {
			defer func() { <-l.slots }()
			defer l.untrack(c)
			l.admit(c)
		}()
	}
}

// admit logs c in and hands it to Accept, or closes it.
func (l *controllerListener) admit(c net.Conn) {
	timeout := l.sec.authTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	c.SetDeadline(time.Now().Add(timeout))
	sc, principal, err := l.login(c)
	host, _, _ := net.SplitHostPort(c.RemoteAddr().String())
	if err == nil && !l.authorize(principal, host) {
		err = fmt.Errorf("%s may not act for the cluster (needs CLUSTER_ACTION or super.users)", principal)
	}
	if err != nil {
		l.log.Warn("controller listener connection refused", "remote", c.RemoteAddr().String(), "err", err)
		c.Close()
		return
	}
	sc.SetDeadline(time.Time{})
	select {
	case l.ready <- sc:
	case <-l.done:
		sc.Close()
	}
}

// login does TLS and SASL on c and returns the connection to use and its
// principal.
func (l *controllerListener) login(c net.Conn) (net.Conn, string, error) {
	principal := engine.AnonymousPrincipal
	if l.sec.tls != nil {
		tc := tls.Server(c, l.sec.tls)
		if err := tc.Handshake(); err != nil {
			return nil, "", err
		}
		if certs := tc.ConnectionState().PeerCertificates; len(certs) > 0 && l.sec.mapper != nil {
			principal = l.sec.mapper.Principal(certs[0])
		}
		c = tc
	}
	if l.sec.isSASL() {
		user, err := l.saslLogin(c)
		if err != nil {
			return nil, "", err
		}
		principal = "User:" + user
	}
	return c, principal, nil
}

// saslLogin serves a client's SaslHandshake and SaslAuthenticate requests
// until it has logged in.
func (l *controllerListener) saslLogin(c net.Conn) (string, error) {
	var x interface {
		Step([]byte) ([]byte, bool, error)
		User() string
	}
	for range maxLoginSteps {
		key, version, corr, body, err := readLoginFrame(c, l.sec.maxReceive)
		if err != nil {
			return "", err
		}
		switch {
		case key == kmsg.SASLHandshake.Int16() && version == 1 && x == nil:
			req := kmsg.NewPtrSASLHandshakeRequest()
			req.SetVersion(version)
			if err := req.ReadFrom(body); err != nil {
				return "", err
			}
			resp := kmsg.NewPtrSASLHandshakeResponse()
			resp.SetVersion(version)
			resp.SupportedMechanisms = l.sec.mechNames
			resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
			for _, m := range l.sec.mechs {
				if m.Name() == req.Mechanism {
					x, resp.ErrorCode = m.Start(), 0
				}
			}
			if err := writeLoginFrame(c, corr, resp); err != nil || x == nil {
				return "", errors.Join(err, fmt.Errorf("mechanism %q is not enabled", req.Mechanism))
			}
		case key == kmsg.SASLAuthenticate.Int16() && version <= 2 && x != nil:
			req := kmsg.NewPtrSASLAuthenticateRequest()
			req.SetVersion(version)
			if err := req.ReadFrom(body); err != nil {
				return "", err
			}
			resp := kmsg.NewPtrSASLAuthenticateResponse()
			resp.SetVersion(version)
			answer, done, err := x.Step(req.SASLAuthBytes)
			if err != nil {
				resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
				msg := "Authentication failed"
				resp.ErrorMessage = &msg
				writeLoginFrame(c, corr, resp)
				return "", err
			}
			resp.SASLAuthBytes = answer
			if err := writeLoginFrame(c, corr, resp); err != nil {
				return "", err
			}
			if done {
				return x.User(), nil
			}
		default:
			return "", fmt.Errorf("request key %d v%d before logging in", key, version)
		}
	}
	return "", errors.New("too many SASL steps")
}

// readLoginFrame reads one request frame: its key, version, correlation
// id and body after the header (tagged fields skipped for flexible
// versions).
func readLoginFrame(r io.Reader, limit int32) (key, version int16, corr int32, body []byte, err error) {
	var size [4]byte
	if _, err = io.ReadFull(r, size[:]); err != nil {
		return
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 10 || n > limit {
		return 0, 0, 0, nil, fmt.Errorf("request frame of %d bytes", n)
	}
	frame := make([]byte, n)
	if _, err = io.ReadFull(r, frame); err != nil {
		return
	}
	key, version = int16(binary.BigEndian.Uint16(frame)), int16(binary.BigEndian.Uint16(frame[2:]))
	corr = int32(binary.BigEndian.Uint32(frame[4:]))
	idLen := int(int16(binary.BigEndian.Uint16(frame[8:])))
	body = frame[10:]
	if idLen > len(body) {
		return 0, 0, 0, nil, errors.New("bad client id")
	}
	body = body[max(idLen, 0):]
	if key == kmsg.SASLAuthenticate.Int16() && version >= 2 {
		body, err = skipHeaderTags(body)
	}
	return
}

// skipHeaderTags skips a flexible request header's tagged fields.
func skipHeaderTags(b []byte) ([]byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > 64 {
		return nil, errors.New("bad tagged fields")
	}
	b = b[k:]
	for range n {
		_, k := binary.Uvarint(b)
		if k <= 0 {
			return nil, errors.New("bad tagged fields")
		}
		b = b[k:]
		l, k := binary.Uvarint(b)
		if k <= 0 || l > uint64(len(b)-k) {
			return nil, errors.New("bad tagged fields")
		}
		b = b[k+int(l):]
	}
	return b, nil
}

// writeLoginFrame writes resp as the response to corr.
func writeLoginFrame(w io.Writer, corr int32, resp kmsg.Response) error {
	out := binary.BigEndian.AppendUint32(make([]byte, 4, 64), uint32(corr))
	if resp.IsFlexible() {
		out = append(out, 0) // no header tags
	}
	out = resp.AppendTo(out)
	binary.BigEndian.PutUint32(out, uint32(len(out)-4))
	_, err := w.Write(out)
	return err
}

// clusterActionCheck reports whether a principal may act for the
// cluster on the controller listener: super.users, or CLUSTER_ACTION by
// the ACLs of image() (nil before the controller runs: super users
// only). Without an authorizer anyone may.
func clusterActionCheck(cfg *engine.Config, image func() (metadata.Image, bool)) func(principal, host string) bool {
	if cfg.Authz.AuthorizerClass == "" {
		return func(string, string) bool { return true }
	}
	ac := acl.Config{AllowIfNoACL: cfg.Authz.AllowIfNoACL}
	for _, p := range strings.Split(cfg.Authz.SuperUsers, ";") {
		if p = strings.TrimSpace(p); p != "" {
			ac.SuperUsers = append(ac.SuperUsers, p)
		}
	}
	return func(principal, host string) bool {
		var bindings []acl.Binding
		if img, ok := image(); ok {
			for _, a := range img.ACLs() {
				bindings = append(bindings, controller.ACLBinding(a))
			}
		}
		return acl.New(ac, bindings).Authorize(principal, host, acl.OpClusterAction, acl.ResourceCluster, acl.ClusterName)
	}
}
