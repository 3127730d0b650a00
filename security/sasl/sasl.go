// Package sasl holds the broker's side of the SASL mechanisms Kafka
// clients use: PLAIN (RFC 4616; users from a JAAS-style config),
// SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802/7677; salted credentials looked
// up by the caller, in Sluice from the replicated metadata) and OAUTHBEARER
// (RFC 7628; signed JWTs checked against a JWKS).
//
// A mechanism starts one Exchange per authentication; the exchange takes
// the client's messages one at a time and returns the server's. It knows
// nothing of Kafka's framing (SaslHandshake/SaslAuthenticate live in the
// engine and internal/server). Every parser here reads bytes a client
// sent: sizes are bounded and bad input is an error, never a panic (the
// fuzz tests hold that).
package sasl

import (
	"errors"
	"time"
)

// Mechanism names as clients send them in SaslHandshake.
const (
	Plain       = "PLAIN"
	ScramSHA256 = "SCRAM-SHA-256"
	ScramSHA512 = "SCRAM-SHA-512"
	OAuthBearer = "OAUTHBEARER"
)

// MaxMessage bounds one client message (Kafka's
// sasl.server.max.receive.size default).
const MaxMessage = 512 << 10

// Mechanism is one enabled mechanism of a listener.
type Mechanism interface {
	Name() string
	Start() Exchange
}

// Exchange is one authentication in progress.
type Exchange interface {
	// Step takes the client's next message and returns the server's
	// answer; done is true once the client is authenticated (the answer
	// may still need sending). An error is a failed authentication.
	Step(msg []byte) (answer []byte, done bool, err error)
	// User is the authenticated user's name, once done.
	User() string
	// Expiry is when the credential stops being valid (an OAuth token's
	// exp), zero when it does not expire; the session lifetime is cut to
	// it (KIP-368).
	Expiry() time.Time
}

// AuthError is a failed authentication: the message is what the client is
// told with SASL_AUTHENTICATION_FAILED.
type AuthError struct{ Msg string }

func (e *AuthError) Error() string { return e.Msg }

func authFailed(msg string) error { return &AuthError{Msg: msg} }

// IsAuthError reports whether err is a failed authentication (as opposed
// to a protocol error, which is also answered with a failure).
func IsAuthError(err error) bool {
	var ae *AuthError
	return errors.As(err, &ae)
}

var errDone = errors.New("sasl: message after the exchange finished")
