// Package netpoll is Sluice's network layer: it accepts connections, reads
// size-prefixed request frames, hands each to a Handler and writes back the
// reply, made of byte slices (writev) and file regions (sendfile), so that
// record bytes fetched from segment files never enter user space.
//
// It knows nothing of Kafka beyond the 4-byte big-endian frame size. The
// backend here is StdServer, one goroutine per connection on Go's net
// package: the reference every other backend is tested against.
//
// Requests on one connection are served one at a time (Kafka's model: a
// connection is muted while its request is in flight), so replies leave in
// request order and pipelined requests wait in the socket buffer, which is
// also the backpressure on a client that sends faster than it reads.
package netpoll

import (
	"log/slog"
	"net"
	"os"
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

// Handler creates the per-connection handlers.
type Handler interface {
	Open(remote net.Addr) ConnHandler
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
	Logger       *slog.Logger
}

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
}
