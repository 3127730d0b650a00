package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Session is the engine's view of one client connection. The network layer
// creates it with NewSession and keeps it for the connection's life; the
// engine keeps per-connection state here (client id, fetch sessions are
// broker-wide). It carries no socket.
type Session struct {
	ID     uint64
	Remote string

	// Listener is the name of the listener the connection came in on
	// ("PLAINTEXT" unless listeners are named); Metadata advertises that
	// listener's endpoints to it.
	Listener string

	// Principal is who the connection authenticated as, in Kafka's
	// "Type:Name" form ("User:alice"). Until a listener authenticates
	// (TLS client certificate, SASL) it is AnonymousPrincipal. The
	// authorizer checks ACLs against it and quotas are keyed by it.
	Principal string

	// Auth is the connection's SASL state on a SASL listener, nil on
	// others; SaslHandshake and SaslAuthenticate drive it (17_*, 36_*).
	Auth Authenticator

	// Batch, when set, is the ProduceBatch of the event loop that serves
	// this connection's frames: produce appends wait for its Flush
	// (produce_batch.go). Nil appends at once.
	Batch *ProduceBatch
}

// AnonymousPrincipal is the principal of a connection that has not
// authenticated, as Kafka names it.
const AnonymousPrincipal = "User:ANONYMOUS"

// Request is one decoded request on its way through a handler.
type Request struct {
	Key         int16
	Version     int16
	Correlation int32
	ClientID    string
	Msg         kmsg.Request
	Session     *Session
	Received    time.Time

	broker *Broker
	done   func(*Response)
	frame  frameWriter
	authz  requestAuthz // authz.go
	hot    *hotRequest  // the pooled object r lives in (request_hot.go); nil for other APIs
	// offLoop is set when the handler runs on a goroutine of its own
	// rather than on the caller's (the network loop's): it must not use
	// the loop's ProduceBatch.
	offLoop bool
	// dispatching says who returns a pooled request to its pool:
	// notDispatching (whoever answers), inDispatch (dispatch, if the
	// answer comes while it is still serving: it touches r after serve)
	// or answeredInDispatch (the answer came; dispatch releases).
	dispatching atomic.Int32
}

const (
	notDispatching int32 = iota
	inDispatch
	answeredInDispatch
)

// produceBatch is the batch this request's appends may join: the
// session's, when the handler runs on the goroutine that flushes it.
func (r *Request) produceBatch() *ProduceBatch {
	if r.offLoop {
		return nil
	}
	return r.Session.Batch
}

var errMalformed = errors.New("malformed request")

// Handle decodes one request frame and answers it through done, exactly
// once, possibly after Handle returned (long-polling fetch) and from another
// goroutine. frame must stay untouched until done is called: decoded byte
// fields (produce records) alias it.
func (b *Broker) Handle(s *Session, frame []byte, done func(*Response)) {
	b.handle(s, frame, done, false)
}

// HandleOffLoop is Handle for a caller that is not the goroutine that
// flushes s.Batch (a timer serving a muted connection's request later):
// the request appends at once instead of joining the batch.
func (b *Broker) HandleOffLoop(s *Session, frame []byte, done func(*Response)) {
	b.handle(s, frame, done, true)
}

func (b *Broker) handle(s *Session, frame []byte, done func(*Response), offLoop bool) {
	r := newRequest(frame)
	r.Session, r.broker, r.done, r.Received, r.offLoop = s, b, done, time.Now(), offLoop
	body, err := r.parseHeader(frame)
	if err != nil {
		b.log.Debug("closing connection on bad request header", "remote", s.Remote, "err", err)
		r.closeConn()
		return
	}
	b.dispatch(r, body)
}

// newRequest takes a pooled Request for the hot APIs (the key is peeked
// from the frame) and allocates one for the others.
func newRequest(frame []byte) *Request {
	if len(frame) >= 2 && isHot(int16(binary.BigEndian.Uint16(frame))) {
		h := hotRequests.Get().(*hotRequest)
		h.hot, h.pooled = h, false
		return &h.Request
	}
	return new(Request)
}

// parseHeader reads request header v1 or v2 and returns the body.
func (r *Request) parseHeader(frame []byte) ([]byte, error) {
	if len(frame) < 10 {
		return nil, errMalformed
	}
	r.Key = int16(binary.BigEndian.Uint16(frame[0:]))
	r.Version = int16(binary.BigEndian.Uint16(frame[2:]))
	r.Correlation = int32(binary.BigEndian.Uint32(frame[4:]))
	n := int16(binary.BigEndian.Uint16(frame[8:]))
	rest := frame[10:]
	if n > 0 {
		if int(n) > len(rest) {
			return nil, errMalformed
		}
		if r.hot != nil {
			r.ClientID = r.hot.names.intern(rest[:n])
		} else {
			r.ClientID = string(rest[:n])
		}
		rest = rest[n:]
	}
	return rest, nil
}

// dispatch finds the handler, decodes the body and runs it, turning a panic
// into a closed connection rather than a dead broker.
func (b *Broker) dispatch(r *Request, body []byte) {
	a := lookupAPI(r.Key)
	if a == nil {
		b.log.Debug("unknown api key", "key", r.Key, "remote", r.Session.Remote)
		r.closeConn()
		return
	}
	if r.Version < a.min || r.Version > a.max {
		if r.Key == kmsg.ApiVersions.Int16() {
			b.apiVersionsUnsupported(r)
			return
		}
		b.log.Debug("unsupported version", "api", a.name, "version", r.Version)
		r.closeConn()
		return
	}
	msg, err := r.decode(body)
	if err != nil {
		b.log.Debug("closing connection on undecodable request", "api", a.name, "version", r.Version, "err", err)
		r.closeConn()
		return
	}
	r.Msg = msg
	b.metrics.requestStarted(a)
	if !b.admit(r) { // authz.go: ACLs
		return
	}
	if b.cluster != nil && writesGroupLog(r.Key) {
		r.offLoop = true
		go b.serve(r, a) // off the network loop: see writesGroupLog
		return
	}
	if b.cluster != nil && isTxnProduce(r) {
		b.serveTxnProduce(r, a) // txn_verify.go
		return
	}
	r.authz.inline.Store(true) // quota.go: request_percentage counts inline answers
	r.dispatching.Store(inDispatch)
	b.serve(r, a)
	r.authz.inline.Store(false)
	if r.dispatching.Swap(notDispatching) == answeredInDispatch && r.hot != nil {
		r.hot.release() // answered while serve ran: see answer
	}
}

// decode reads the request body after the header: into the pooled
// message for the hot APIs, with kmsg for the rest.
func (r *Request) decode(body []byte) (kmsg.Request, error) {
	var msg kmsg.Request
	if r.hot != nil {
		msg = r.hot.message()
	} else {
		msg = kmsg.RequestForKey(r.Key)
	}
	msg.SetVersion(r.Version)
	if msg.IsFlexible() {
		var err error
		if body, err = skipTags(body); err != nil {
			return nil, err
		}
	}
	if r.hot != nil {
		return msg, r.hot.decode(body)
	}
	return msg, msg.ReadFrom(body)
}

func (b *Broker) serve(r *Request, a *api) {
	defer b.recoverHandler(r, a)
	a.serve(b, r)
}

func (b *Broker) recoverHandler(r *Request, a *api) {
	if p := recover(); p != nil {
		b.log.Error("handler panic", "api", a.name, "version", r.Version,
			"panic", fmt.Sprint(p), "stack", string(debug.Stack()))
		r.closeConn()
	}
}

// skipTags skips the request header's tagged fields (header v2).
func skipTags(b []byte) ([]byte, error) {
	n, used := binary.Uvarint(b)
	if used <= 0 {
		return nil, errMalformed
	}
	b = b[used:]
	for i := uint64(0); i < n; i++ {
		_, u1 := binary.Uvarint(b)
		if u1 <= 0 {
			return nil, errMalformed
		}
		b = b[u1:]
		size, u2 := binary.Uvarint(b)
		if u2 <= 0 || uint64(len(b)-u2) < size {
			return nil, errMalformed
		}
		b = b[u2+int(size):]
	}
	return b, nil
}

// Respond encodes resp (same key and version as the request) and completes
// the request.
func (r *Request) Respond(resp kmsg.Response) {
	resp.SetVersion(r.Version)
	if r.authz.post != nil {
		r.authz.post(resp) // authz.go: denied resources back in, hidden ones out
	}
	mute := r.throttleResponse(resp) // quota.go
	w := r.beginResponse(resp.IsFlexible())
	w.r.buf = resp.AppendTo(w.r.buf)
	out := w.finish()
	out.Mute = mute
	r.authz.viaRespond = true
	r.finish(out)
}

// beginResponse starts a response frame with its header; handlers that
// splice file regions (fetch) write the body themselves through the
// returned writer and complete with r.finish(w.finish()).
func (r *Request) beginResponse(flexible bool) *frameWriter {
	w := &r.frame
	w.begin(newResponse())
	w.r.buf = binary.BigEndian.AppendUint32(w.r.buf, uint32(r.Correlation))
	// ApiVersions responses always use header v0, so that a client can
	// read them before it knows which versions the broker speaks.
	if flexible && r.Key != kmsg.ApiVersions.Int16() {
		w.r.buf = append(w.r.buf, 0) // no tagged fields
	}
	return w
}

// NoResponse completes a request that gets no answer (acks=0 produce);
// over a quota it still mutes the connection (quota.go).
func (r *Request) NoResponse() { r.finish(r.muteOnly()) }

func (r *Request) closeConn() {
	r.answer(&Response{Close: true})
}

func (r *Request) finish(resp *Response) {
	if !r.authz.viaRespond {
		r.throttleEncoded(resp) // quota.go: Fetch and cached Metadata encode their own answers
	}
	r.broker.metrics.requestDone(r, resp)
	if resp != nil {
		resp.metrics, resp.key = r.broker.metrics, r.Key
	}
	r.answer(resp)
}

// answer completes the request. A pooled Request goes back to its pool
// here, or when dispatch is done with it if it is still serving it:
// whoever answers must not touch r (or its Msg) afterwards.
func (r *Request) answer(resp *Response) {
	done, hot := r.done, r.hot
	inline := hot != nil && r.dispatching.CompareAndSwap(inDispatch, answeredInDispatch)
	done(resp)
	if hot != nil && !inline {
		hot.release()
	}
}

// logger returns a logger annotated with the request's identity.
func (r *Request) logger() *slog.Logger {
	return r.broker.log.With("api", kmsg.NameForKey(r.Key), "client", r.ClientID)
}
