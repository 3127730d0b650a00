package netpoll

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// testReply is a Reply of literal parts.
type testReply struct {
	parts    []testPart
	close    bool
	released *sync.WaitGroup
}

type testPart struct {
	b        []byte
	f        *os.File
	off, len int64
}

func (r *testReply) NumParts() int { return len(r.parts) }
func (r *testReply) PartAt(i int) ([]byte, *os.File, int64, int64) {
	p := r.parts[i]
	return p.b, p.f, p.off, p.len
}
func (r *testReply) ShouldClose() bool { return r.close }
func (r *testReply) Release() {
	if r.released != nil {
		r.released.Done()
	}
}

// handlerFunc answers every frame with serve(frame).
type handlerFunc func(frame []byte, reply func(Reply))

func (h handlerFunc) Open(ConnInfo) ConnHandler { return connFunc(h) }

type connFunc handlerFunc

func (c connFunc) Serve(frame []byte, reply func(Reply)) { c(frame, reply) }
func (c connFunc) Closed()                               {}

// backends is the test matrix: every test below runs once per backend.
var backends = []string{BackendStd, BackendEpoll, BackendUring}

// uringCompat is the uring backend as it runs on older kernels: no
// provided-buffer rings, single-shot accepts, no DEFER/COOP_TASKRUN. The
// test matrix includes it so those fallbacks are exercised here too.
const uringCompat = "uring-compat"

// epollBlocking is the epoll backend with its loops blocking in epoll_wait
// on locked threads (SLUICE_NET_PARK=0) instead of parking in the runtime:
// the matrix keeps that mode tested too.
const epollBlocking = "epoll-blocking"

// forEachBackend runs test as a subtest per backend the host can run.
func forEachBackend(t *testing.T, test func(t *testing.T, backend string)) {
	for _, b := range append(backends, uringCompat, epollBlocking) {
		t.Run(b, func(t *testing.T) {
			real := b
			switch b {
			case uringCompat:
				real = BackendUring
				uringCompatForTest = true
				t.Cleanup(func() { uringCompatForTest = false })
			case epollBlocking:
				real = BackendEpoll
				parks := epollParks
				epollParks = false
				t.Cleanup(func() { epollParks = parks })
			}
			if got, why := resolveBackend(real); got != real {
				t.Skipf("%s backend unavailable here: %s", real, why)
			}
			test(t, real)
		})
	}
}

func startServer(t testing.TB, backend string, h Handler, opts Options) (Server, string) {
	t.Helper()
	ln, err := Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if opts.Logger == nil && testing.Verbose() {
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	s, err := New(backend, h, opts)
	if err != nil {
		t.Fatal(err)
	}
	if s.Backend() != backend {
		t.Fatalf("asked for %s, got %s", backend, s.Backend())
	}
	go s.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	})
	return s, ln.Addr().String()
}

func writeFrame(t testing.TB, c net.Conn, body []byte) {
	t.Helper()
	buf := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
	if _, err := c.Write(append(buf, body...)); err != nil {
		t.Fatal(err)
	}
}

func readN(t testing.TB, c net.Conn, n int) []byte {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, n)
	if _, err := io.ReadFull(c, buf); err != nil {
		t.Fatal(err)
	}
	return buf
}

// TestMixedParts checks that byte slices and file regions come out in
// order, and that pipelined requests are answered in request order.
func TestMixedParts(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		path := filepath.Join(t.TempDir(), "seg")
		if err := os.WriteFile(path, []byte("0123456789abcdef"), 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() }) // after the server's shutdown
		h := handlerFunc(func(frame []byte, reply func(Reply)) {
			tag := append([]byte(nil), frame...)
			// Complete later from another goroutine, like a long-polling fetch.
			go reply(&testReply{parts: []testPart{{b: []byte("<")}, {f: f, off: 4, len: 6}, {b: tag}, {b: []byte(">")}}})
		})
		_, addr := startServer(t, backend, h, Options{})
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		writeFrame(t, c, []byte("A"))
		writeFrame(t, c, []byte("B"))
		got := readN(t, c, 2*9)
		if want := "<456789A><456789B>"; string(got) != want {
			t.Fatalf("got %q want %q", got, want)
		}
	})
}

// TestRejectsBadFrameSize: a size prefix over the limit (or negative)
// closes the connection before anything is allocated, and the server keeps
// serving others.
func TestRejectsBadFrameSize(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		echo := handlerFunc(func(frame []byte, reply func(Reply)) {
			reply(&testReply{parts: []testPart{{b: append([]byte(nil), frame...)}}})
		})
		_, addr := startServer(t, backend, echo, Options{MaxFrame: 1024})
		for _, size := range []uint32{1025, 0, 0xFFFFFFFF} {
			bad, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			bad.Write(binary.BigEndian.AppendUint32(nil, size))
			bad.SetReadDeadline(time.Now().Add(5 * time.Second))
			if n, err := bad.Read(make([]byte, 1)); err == nil {
				t.Fatalf("size %d: connection still open, read %d bytes", size, n)
			}
			bad.Close()
		}
		good, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer good.Close()
		writeFrame(t, good, []byte("ok"))
		if got := readN(t, good, 2); !bytes.Equal(got, []byte("ok")) {
			t.Fatalf("got %q", got)
		}
	})
}

// TestNoReplyAndClose covers a request without response (acks=0) and a
// reply that closes the connection.
func TestNoReplyAndClose(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		h := handlerFunc(func(frame []byte, reply func(Reply)) {
			switch string(frame) {
			case "quiet":
				reply(nil)
			case "bye":
				reply(&testReply{parts: []testPart{{b: []byte("bye")}}, close: true})
			default:
				reply(&testReply{parts: []testPart{{b: []byte("hi")}}})
			}
		})
		_, addr := startServer(t, backend, h, Options{})
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		writeFrame(t, c, []byte("quiet"))
		writeFrame(t, c, []byte("x"))
		if got := readN(t, c, 2); string(got) != "hi" {
			t.Fatalf("got %q", got)
		}
		writeFrame(t, c, []byte("bye"))
		if got := readN(t, c, 3); string(got) != "bye" {
			t.Fatalf("got %q", got)
		}
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err != io.EOF {
			t.Fatalf("want EOF after close reply, got %v", err)
		}
	})
}

// TestIdleTimeout reaps a connection that sends nothing.
func TestIdleTimeout(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		_, addr := startServer(t, backend, handlerFunc(func([]byte, func(Reply)) {}), Options{IdleTimeout: 100 * time.Millisecond})
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err != io.EOF {
			t.Fatalf("want EOF from idle reaping, got %v", err)
		}
	})
}

// TestShutdownFinishesInFlight: a request being served when Shutdown
// starts still gets its reply.
func TestShutdownFinishesInFlight(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		started := make(chan struct{})
		h := handlerFunc(func(frame []byte, reply func(Reply)) {
			close(started)
			go func() {
				time.Sleep(200 * time.Millisecond)
				reply(&testReply{parts: []testPart{{b: []byte("done")}}})
			}()
		})
		s, addr := startServer(t, backend, h, Options{})
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		writeFrame(t, c, []byte("x"))
		<-started
		shut := make(chan error, 1)
		go func() { shut <- s.Shutdown(context.Background()) }()
		if got := readN(t, c, 4); string(got) != "done" {
			t.Fatalf("got %q", got)
		}
		if err := <-shut; err != nil {
			t.Fatal(err)
		}
	})
}

func TestReadFrameAllocs(t *testing.T) {
	body := bytes.Repeat([]byte{7}, 3000)
	wire := append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
	var hdr [4]byte
	r := bytes.NewReader(wire)
	allocs := testing.AllocsPerRun(1000, func() {
		r.Reset(wire)
		f, err := readFrame(r, hdr[:], 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		putFrame(f)
	})
	if allocs > 0 {
		t.Fatalf("readFrame allocates %.1f per frame", allocs)
	}
}

func FuzzReadFrame(f *testing.F) {
	f.Add([]byte{0, 0, 0, 3, 'a', 'b', 'c'})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0, 0, 0, 0})
	f.Add([]byte{0, 0, 0x10, 0, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		var hdr [4]byte
		r := bytes.NewReader(data)
		for {
			frame, err := readFrame(r, hdr[:], 4096)
			if err != nil {
				return
			}
			if len(*frame) == 0 || len(*frame) > 4096 {
				t.Fatalf("frame of %d bytes escaped the bound", len(*frame))
			}
			putFrame(frame)
		}
	})
}
