package engine

// SaslHandshake (key 17), versions 0-1.
//
// Chooses the SASL mechanism of the connection's next authentication
// (KIP-368 re-authentication starts here too). The exchange itself belongs
// to the network layer (internal/server builds each SASL listener's
// mechanisms and keeps the connection's state behind Session.Auth); this
// handler only speaks the protocol. An unknown or disabled mechanism gets
// UNSUPPORTED_SASL_MECHANISM with the enabled ones; a listener without
// SASL, or a handshake in the middle of an exchange, ILLEGAL_SASL_STATE.
// After a v0 handshake the client sends bare SASL tokens instead of
// SaslAuthenticate requests (Kafka's unframed form), which the network
// layer handles before the engine sees them.

import (
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.SASLHandshake, 0, 1, (*Broker).handleSaslHandshake) }

// Authenticator is a connection's SASL state on a SASL listener
// (internal/server implements it).
type Authenticator interface {
	// Mechanisms lists the listener's enabled mechanisms.
	Mechanisms() []string
	// Handshake starts an authentication with mechanism; version is the
	// SaslHandshake version (0: unframed tokens follow). It returns
	// kerr.UnsupportedSaslMechanism or kerr.IllegalSaslState.
	Handshake(mechanism string, version int16) error
	// Authenticate takes the client's next token and returns the answer.
	// Once authenticated, lifetime is the session's (0: no limit). A
	// failure is a *kerr.Error (SaslAuthenticationFailed,
	// IllegalSaslState) wrapped with the message for the client.
	Authenticate(token []byte) (answer []byte, lifetime time.Duration, err error)
}

// AuthError is an Authenticator's failure: Kafka's code and the message
// the client is told.
type AuthError struct {
	Code *kerr.Error
	Msg  string
}

func (e *AuthError) Error() string { return e.Msg }

func (b *Broker) handleSaslHandshake(r *Request) {
	req := r.Msg.(*kmsg.SASLHandshakeRequest)
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	a := r.Session.Auth
	if a == nil {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		r.Respond(resp)
		return
	}
	resp.SupportedMechanisms = a.Mechanisms()
	if err := a.Handshake(req.Mechanism, r.Version); err != nil {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		var ke *kerr.Error
		if errors.As(err, &ke) {
			resp.ErrorCode = ke.Code
		}
	}
	r.Respond(resp)
}
