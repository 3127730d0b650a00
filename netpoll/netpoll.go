// Package netpoll is Sluice's network layer: it accepts connections, reads
// size-prefixed request frames, hands each to a Handler and writes back the
// reply, made of byte slices (writev) and file regions (sendfile/splice), so
// that record bytes fetched from segment files never enter user space.
//
// It knows nothing of Kafka beyond the 4-byte big-endian frame size. It is
// Linux-only (sendfile, epoll, io_uring), like the broker.
//
// # Backends
//
// Three backends serve the same Handler contract; New picks one by name:
//
//   - "uring": event loops on io_uring (our own binding, netpoll/uring):
//     multishot accept, recv into provided buffer rings, sendmsg for byte
//     slices, and sendfile from the loop with io_uring poll for file regions.
//   - "epoll": event loops on edge-triggered epoll over non-blocking sockets,
//     with writev and sendfile.
//   - "std": one goroutine per connection on Go's net package; the
//     reference every other backend is tested against.
//
// The default ("") is the fastest that works on the host: uring when the
// kernel offers every op it needs, else epoll (the reason is logged).
//
// # One request in flight per connection
//
// Requests on one connection are served one at a time, as Kafka does (a
// connection is muted while its request is in flight): the next frame is
// taken only after the previous reply has been written. Replies therefore
// leave in request order even when the engine completes requests out of
// order across connections, and a client that pipelines simply waits in its
// socket buffer. That is also the backpressure: a peer that stops reading
// stops being read, so per connection the broker holds at most one request,
// one reply and (event loops) one read buffer of already-received bytes.
//
// # Event loops
//
// The uring and epoll backends run Options.Loops loops (default GOMAXPROCS).
// A uring loop is a goroutine locked to its OS thread that blocks in
// io_uring_enter. An epoll loop is an unlocked goroutine that, when idle,
// parks in the Go runtime's own netpoller on its epoll fd instead of
// blocking in epoll_wait: it then holds no P while it waits, which cut its
// context switches per request by a third and its produce latency from p50
// to p99 (park_linux.go; BENCHMARKS.md, issue 16, "Fourth pass").
// Connections are spread over the loops by SO_REUSEPORT (one
// listening socket per loop, when the listener was made with Listen) or
// else handed off round-robin from one accepting loop; SO_REUSEPORT is the
// default because it measured the same per request and opened 10,000
// connections faster (3× on uring; BENCHMARKS.md, "Network layer").
//
// ConnHandler.Serve runs on the loop: most requests are answered inline, so
// the reply goes out in the same loop iteration with no goroutine hand-off,
// and produce's page-cache write measured no slower there than on worker
// goroutines. Handlers that block (a produce that fsyncs because
// flush.messages is tiny) stall their loop; Options.Workers moves Serve to
// a pool of goroutines for such set-ups. A reply made later from another
// goroutine (a long-polling fetch) is queued to the loop through a
// lock-free list and a wake-up (an eventfd on uring; on epoll, the parked
// loop's read deadline moved into the past), so it never blocks the loop or
// other connections. Nothing on a connection's path takes a lock.
//
// # Memory
//
// Request frames come from size-class pools (frame.go) and go back once
// answered; the steady state allocates nothing per request (allocs_test.go).
// An idle connection holds no buffer: epoll reads into a per-loop scratch
// buffer only when the socket is readable, uring lets the kernel pick a
// provided buffer only when bytes arrive. Bytes received past the request
// in flight (a pipelining client) are kept in a stash of at most one read
// (16 KiB epoll, 8 KiB uring); nothing more is read until the reply is out.
//
// # TLS
//
// ServeListener with ListenerOptions.TLS serves a TLS listener on any
// backend (tls.go). crypto/tls cannot resume a handshake that would block,
// so a goroutine accepts and runs each handshake on the blocking socket
// (bounded in time and in how many run at once); the handler never sees a
// connection whose handshake failed. On the event-loop backends the finished
// connection then moves to a loop: its tls.Conn sits on memConn, an in-
// memory net.Conn whose reads return the ciphertext the loop received (and a
// temporary "would block" error when it runs out, which crypto/tls keeps
// partial records across) and whose writes collect ciphertext. The loop
// decrypts straight into the frame being assembled, leaving plaintext past
// it inside the tls.Conn (no stash), and reads the socket only when no whole
// record is buffered, so backpressure is as for plaintext. A reply is sealed
// before it is written: byte parts and file regions are staged into 256 KiB
// of plaintext (file regions read with pread: sendfile cannot encrypt, as in
// Kafka), encrypted, and that chunk's ciphertext goes out as one byte part
// through the backend's usual write path; the next chunk is sealed when it
// is out. The cost: a copy and an encryption of every byte, user-space reads
// of record bytes, one chunk of ciphertext held per connection while it is
// written (sealed 256 KiB at a time, so a 50 MiB fetch never sits in memory
// whole; buffers up to 1 MiB are kept for the next reply), a 256 KiB staging
// buffer per reply in flight, recv never straight into a frame body, and no
// recv linked behind a send on uring. Kernel TLS would keep sendfile; it is
// not built (no tls module here).
package netpoll

import (
	"log/slog"
	"os"
	"runtime"
	"time"
)

// Reply is one response: parts written in order, each a byte slice or, when
// the slice is nil, a region of a file.
type Reply interface {
	NumParts() int
	PartAt(i int) (b []byte, f *os.File, off, n int64)
	// ShouldClose asks for the connection to close once the parts are out.
	ShouldClose() bool
	// Release is called once the reply has been written (or dropped).
	Release()
}

// TimedReply is an optional Reply interface: Written is called once the
// last part has been written, just before Release, with the time since
// the loop handed the request's frame to Serve. It is the broker's own
// share of a request's latency: from a complete frame to its answer on
// the socket, without the client, the network or the wait in the socket
// buffer before the loop read it. The event-loop backends and std call
// it for plaintext connections (a TLS reply is sealed into the
// connection's own Reply; its requests are not timed).
type TimedReply interface {
	Written(sinceFrame time.Duration)
}

// Handler creates the per-connection handlers.
type Handler interface {
	Open(info ConnInfo) ConnHandler
}

// BatchHandler is a Handler that gathers work across the connections of
// one event loop: what the loop served since it last waited is one batch
// (a produce handler appends the batch's records for one partition with
// one write, and answers them together). The uring and epoll backends use
// it when Serve runs on the loops (no Options.Workers); the std backend
// and workers call Open and never EndBatch.
type BatchHandler interface {
	Handler
	// BeginLoops is called once, before any connection, with the number
	// of loops.
	BeginLoops(n int)
	// OpenOnLoop is Open for a connection whose frames are served on
	// loop (0 <= loop < n), on that loop's goroutine.
	OpenOnLoop(info ConnInfo, loop int) ConnHandler
	// EndBatch is called on loop's goroutine before it writes the
	// replies it has and before it waits for more: a Serve that held its
	// reply back for the batch must give it now (from within EndBatch,
	// or later from elsewhere as any deferred reply).
	EndBatch(loop int)
}

// ConnHandler serves one connection's frames.
type ConnHandler interface {
	// Serve handles one request frame (size prefix stripped) and calls
	// reply exactly once, possibly later and from another goroutine; nil
	// means no response. The frame belongs to the handler until then.
	Serve(frame []byte, reply func(Reply))
	// Closed is called once when the connection is gone.
	Closed()
}

// Deadliner is an optional ConnHandler interface: a connection with no
// request in flight is closed once the time Deadline returns has passed
// (Unix nanoseconds; 0 for none). A SASL listener closes connections that
// have not authenticated in time, or whose session expired, with it.
// Deadline is called from the connection's loop or goroutine.
type Deadliner interface {
	Deadline() int64
}

// FrameLimiter is an optional ConnHandler interface: MaxFrame, when
// positive and below Options.MaxFrame, bounds the connection's next
// request (a SASL listener keeps unauthenticated peers to
// sasl.server.max.receive.size). It is asked before each request.
type FrameLimiter interface {
	MaxFrame() int32
}

// frameLimit is the bound of h's next request.
func frameLimit(h ConnHandler, max int32) int32 {
	if fl, ok := h.(FrameLimiter); ok {
		if n := fl.MaxFrame(); n > 0 && n < max {
			return n
		}
	}
	return max
}

// Options bound what a connection may cost.
type Options struct {
	// MaxFrame is the largest request accepted (socket.request.max.bytes);
	// a larger size prefix closes the connection before anything is
	// allocated.
	MaxFrame int32
	// IdleTimeout closes connections with no request for this long
	// (connections.max.idle.ms).
	IdleTimeout time.Duration
	// WriteTimeout reaps peers that stop reading (half-open connections).
	WriteTimeout time.Duration
	// SendBuffer, when positive, is SO_SNDBUF of accepted connections
	// (Kafka's socket.send.buffer.bytes); otherwise the kernel autotunes.
	SendBuffer int
	// ReceiveBuffer, when positive, is SO_RCVBUF of accepted connections
	// (Kafka's socket.receive.buffer.bytes); otherwise the kernel
	// autotunes.
	ReceiveBuffer int
	Logger        *slog.Logger
	// Loops is the number of event loops of the uring and epoll backends
	// (0: GOMAXPROCS).
	Loops int
	// Workers, when positive, runs ConnHandler.Serve on a pool of that many
	// goroutines instead of on the event loops (uring and epoll backends).
	Workers int
	// Accept chooses how the event-loop backends spread connections:
	// AcceptReusePort (one listening socket per loop; needs a listener
	// made by Listen), AcceptHandoff (one loop accepts and hands off
	// round-robin) or "" (reuseport when the listener allows it).
	Accept string
}

// Ways to spread connections over event loops (Options.Accept).
const (
	AcceptReusePort = "reuseport"
	AcceptHandoff   = "handoff"
)

func (o *Options) defaults() {
	if o.MaxFrame <= 0 {
		o.MaxFrame = 100 << 20
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 10 * time.Minute
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 2 * time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Loops <= 0 {
		o.Loops = runtime.GOMAXPROCS(0)
	}
}
