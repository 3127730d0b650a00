package engine

// SaslAuthenticate (key 36), versions 0-2.
//
// Carries one SASL message each way for the mechanism SaslHandshake chose
// (v1 or later handshakes; after a v0 handshake the tokens travel bare).
// A failed authentication answers SASL_AUTHENTICATION_FAILED with the
// mechanism's message and closes the connection once the answer is out,
// as Kafka does. From v1 a successful exchange reports the session's
// lifetime (KIP-368): the least of connections.max.reauth.ms and the
// credential's own expiry (an OAuth token's exp), 0 when neither applies;
// the client must re-authenticate within it or be disconnected.

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.SASLAuthenticate, 0, 2, (*Broker).handleSaslAuthenticate) }

func (b *Broker) handleSaslAuthenticate(r *Request) {
	req := r.Msg.(*kmsg.SASLAuthenticateRequest)
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	a := r.Session.Auth
	if a == nil {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		msg := "SaslAuthenticate on a listener without SASL"
		resp.ErrorMessage = &msg
		r.respondAndClose(resp)
		return
	}
	answer, lifetime, err := a.Authenticate(req.SASLAuthBytes)
	if err != nil {
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		var ae *AuthError
		if errors.As(err, &ae) {
			resp.ErrorCode = ae.Code.Code
		}
		msg := err.Error()
		resp.ErrorMessage = &msg
		r.respondAndClose(resp)
		return
	}
	resp.SASLAuthBytes = answer
	resp.SessionLifetimeMillis = lifetime.Milliseconds()
	r.Respond(resp)
}

// respondAndClose answers and then closes the connection.
func (r *Request) respondAndClose(resp kmsg.Response) {
	resp.SetVersion(r.Version)
	w := r.beginResponse(resp.IsFlexible())
	w.r.buf = resp.AppendTo(w.r.buf)
	out := w.finish()
	out.Close = true
	r.finish(out)
}
