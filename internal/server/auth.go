package server

// A connection's authentication on a SASL listener: the engine's
// SaslHandshake and SaslAuthenticate handlers drive it (engine.Authenticator),
// and conn.Serve asks it, before the engine sees a request, whether the
// request may be served:
//
//   - before authentication only ApiVersions, SaslHandshake and
//     SaslAuthenticate are; anything else closes the connection;
//   - after a v0 SaslHandshake the client's frames are bare SASL tokens
//     (Kafka's unframed form), answered here with bare tokens;
//   - a connection that has not authenticated within the listener's
//     authentication timeout, or whose session lifetime (KIP-368) ran out
//     without re-authentication, is closed (netpoll.Deadliner), and a
//     request other than a re-authentication after expiry closes it too;
//   - a failed authentication is answered SASL_AUTHENTICATION_FAILED and
//     the connection closed (the engine's handler does that; an unframed
//     exchange just closes).

import (
	"encoding/binary"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/engine"
	"github.com/sluice-broker/sluice/security/sasl"
)

// Exchange states.
const (
	authIdle       = iota // no exchange in progress
	authExchanging        // SaslHandshake chose a mechanism
	authFailed            // the connection is closing
)

// saslConn is one connection's SASL state. Requests on a connection are
// served one at a time, so its fields need no lock; deadline is also read
// by the network layer's idle check.
type saslConn struct {
	l     *listenerSec
	s     *engine.Session
	state int
	x     sasl.Exchange
	// unframed: the exchange in progress came from a v0 handshake.
	unframed bool
	// authenticated and user stay set through a re-authentication, whose
	// user must be the same (Kafka refuses a principal change).
	authenticated bool
	user          string
	expiry        time.Time    // session end; zero for none
	deadline      atomic.Int64 // unix ns the connection closes if idle; 0 none
}

func newSASLConn(l *listenerSec, s *engine.Session, now time.Time) *saslConn {
	a := &saslConn{l: l, s: s}
	if l.authTimeout > 0 {
		a.deadline.Store(now.Add(l.authTimeout).UnixNano())
	}
	return a
}

func (a *saslConn) Mechanisms() []string { return a.l.mechNames }

func (a *saslConn) Handshake(mechanism string, version int16) error {
	if a.state != authIdle {
		return kerr.IllegalSaslState
	}
	if a.authenticated && version == 0 {
		return kerr.IllegalSaslState // KIP-368: re-authentication needs v1
	}
	for _, m := range a.l.mechs {
		if m.Name() == mechanism {
			a.x, a.state, a.unframed = m.Start(), authExchanging, version == 0
			return nil
		}
	}
	return kerr.UnsupportedSaslMechanism
}

func (a *saslConn) Authenticate(token []byte) ([]byte, time.Duration, error) {
	if a.state != authExchanging {
		a.state = authFailed
		return nil, 0, &engine.AuthError{Code: kerr.IllegalSaslState, Msg: "SaslAuthenticate without a SaslHandshake"}
	}
	answer, done, err := a.x.Step(token)
	if err != nil {
		a.state = authFailed
		return nil, 0, &engine.AuthError{Code: kerr.SaslAuthenticationFailed, Msg: err.Error()}
	}
	if !done {
		return answer, 0, nil
	}
	user := a.x.User()
	if a.authenticated && user != a.user {
		a.state = authFailed
		return nil, 0, &engine.AuthError{Code: kerr.SaslAuthenticationFailed,
			Msg: fmt.Sprintf("Cannot change principals during re-authentication from User:%s to User:%s", a.user, user)}
	}
	now := time.Now()
	lifetime := a.l.reauth
	if exp := a.x.Expiry(); !exp.IsZero() && (lifetime == 0 || exp.Sub(now) < lifetime) {
		lifetime = max(exp.Sub(now), time.Millisecond)
	}
	a.authenticated, a.user, a.state, a.x = true, user, authIdle, nil
	a.s.Principal = "User:" + user
	a.expiry = time.Time{}
	a.deadline.Store(0)
	if lifetime > 0 {
		a.expiry = now.Add(lifetime)
		a.deadline.Store(a.expiry.UnixNano())
	}
	return answer, lifetime, nil
}

// Deadline closes a connection that has not authenticated in time or
// whose session expired (netpoll.Deadliner).
func (a *saslConn) Deadline() int64 { return a.deadline.Load() }

// admit reports whether a request with this API key may reach the engine.
func (a *saslConn) admit(key int16, now time.Time) bool {
	sasl := key == kmsg.SASLHandshake.Int16() || key == kmsg.SASLAuthenticate.Int16()
	switch {
	case a.state == authFailed:
		return false
	case !a.authenticated:
		return sasl || key == kmsg.ApiVersions.Int16()
	case !a.expiry.IsZero() && now.After(a.expiry):
		return sasl
	}
	return true
}

// unframedToken reports whether the next frame is a bare token of a v0
// exchange.
func (a *saslConn) unframedToken() bool { return a.state == authExchanging && a.unframed }

// token answers a bare token of a v0 exchange: the answer as a bare
// size-prefixed frame, or nil to close the connection.
func (a *saslConn) token(frame []byte) *rawReply {
	answer, _, err := a.Authenticate(frame)
	if err != nil {
		return nil
	}
	out := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(answer)), uint32(len(answer)))
	return &rawReply{b: append(out, answer...)}
}

// rawReply is a reply of one byte slice (netpoll.Reply).
type rawReply struct {
	b     []byte
	close bool
}

func (r *rawReply) NumParts() int { return 1 }
func (r *rawReply) PartAt(int) ([]byte, *os.File, int64, int64) {
	return r.b, nil, 0, 0
}
func (r *rawReply) ShouldClose() bool { return r.close }
func (r *rawReply) Release()          {}

// closeNow is the reply that closes a connection without an answer.
var closeNow = &rawReply{b: []byte{}, close: true}
