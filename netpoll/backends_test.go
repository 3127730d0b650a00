package netpoll

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// echo answers every frame with a copy of it, inline.
var echo = handlerFunc(func(frame []byte, reply func(Reply)) {
	reply(&testReply{parts: []testPart{{b: sizePrefixed(frame)}}})
})

func sizePrefixed(b []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)
}

func readFrameT(t testing.TB, c net.Conn) []byte {
	t.Helper()
	n := binary.BigEndian.Uint32(readN(t, c, 4))
	return readN(t, c, int(n))
}

func dial(t testing.TB, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestLargeFramesPipelined sends frames from 1 byte to 3 MiB back to back
// in one write (pipelined, so frames straddle reads and the stash), and
// expects every echo in order.
func TestLargeFramesPipelined(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		_, addr := startServer(t, backend, echo, Options{})
		c := dial(t, addr)
		sizes := []int{1, 3 << 20, 10, 70 << 10, 5, 1 << 20, 17, 9000}
		var wire []byte
		var want [][]byte
		for i, n := range sizes {
			body := bytes.Repeat([]byte{byte('a' + i)}, n)
			want = append(want, body)
			wire = append(wire, sizePrefixed(body)...)
		}
		go c.Write(wire)
		for i, w := range want {
			if got := readFrameT(t, c); !bytes.Equal(got, w) {
				t.Fatalf("frame %d: got %d bytes want %d", i, len(got), len(w))
			}
		}
	})
}

// TestPipelinedOrder: 500 requests written at once, answered by a handler
// that completes them out of order from other goroutines; replies must
// come back in request order.
func TestPipelinedOrder(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		var n atomic.Int64
		h := handlerFunc(func(frame []byte, reply func(Reply)) {
			body := sizePrefixed(append([]byte(nil), frame...))
			switch n.Add(1) % 3 {
			case 0:
				reply(&testReply{parts: []testPart{{b: body}}})
			case 1:
				go reply(&testReply{parts: []testPart{{b: body}}})
			default:
				time.AfterFunc(time.Duration(rand.Intn(200))*time.Microsecond, func() {
					reply(&testReply{parts: []testPart{{b: body}}})
				})
			}
		})
		_, addr := startServer(t, backend, h, Options{})
		c := dial(t, addr)
		var wire []byte
		for i := 0; i < 500; i++ {
			wire = append(wire, sizePrefixed([]byte(fmt.Sprint(i)))...)
		}
		go c.Write(wire)
		for i := 0; i < 500; i++ {
			if got := string(readFrameT(t, c)); got != fmt.Sprint(i) {
				t.Fatalf("reply %d: got %q", i, got)
			}
		}
	})
}

// TestSlowReaderBackpressure: a client that pipelines requests for big
// replies and does not read gets only as many requests served as fit in
// the socket buffers; the rest wait in the kernel, not in the broker.
func TestSlowReaderBackpressure(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		big := bytes.Repeat([]byte("x"), 1<<20)
		var served atomic.Int64
		h := handlerFunc(func(frame []byte, reply func(Reply)) {
			served.Add(1)
			tag := append([]byte(nil), frame...)
			reply(&testReply{parts: []testPart{{b: binary.BigEndian.AppendUint32(nil, uint32(len(big)+len(tag)))}, {b: big}, {b: tag}}})
		})
		_, addr := startServer(t, backend, h, Options{})
		c := dial(t, addr)
		const requests = 200
		var wire []byte
		for i := 0; i < requests; i++ {
			wire = append(wire, sizePrefixed([]byte(fmt.Sprintf("q%03d", i)))...)
		}
		if _, err := c.Write(wire); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
		stalled := served.Load()
		if stalled >= requests/2 {
			t.Fatalf("%d of %d requests served while the client was not reading", stalled, requests)
		}
		t.Logf("%d requests served before backpressure", stalled)
		// Regression: a reply must not be overtaken by the next request's
		// (uring once served a request received by a recv linked behind a
		// send the kernel had completed short, dropping the reply's rest).
		for i := 0; i < requests; i++ {
			got := readFrameT(t, c)
			if tag := fmt.Sprintf("q%03d", i); len(got) != len(big)+len(tag) || string(got[len(big):]) != tag {
				t.Fatalf("reply %d: %d bytes, tag %q", i, len(got), got[max(0, len(got)-4):])
			}
		}
	})
}

// TestWriteTimeout closes a connection whose peer stops reading.
func TestWriteTimeout(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		big := bytes.Repeat([]byte("x"), 16<<20)
		closed := make(chan struct{})
		h := &closeNotify{serve: func(frame []byte, reply func(Reply)) {
			reply(&testReply{parts: []testPart{{b: big}}})
		}, closed: closed}
		_, addr := startServer(t, backend, h, Options{WriteTimeout: 200 * time.Millisecond})
		c := dial(t, addr)
		writeFrame(t, c, []byte("q"))
		select {
		case <-closed:
		case <-time.After(10 * time.Second):
			t.Fatal("connection of a peer that stopped reading was not closed")
		}
	})
}

// closeNotify is a Handler whose connections report Closed on a channel.
type closeNotify struct {
	serve  func([]byte, func(Reply))
	closed chan struct{}
	once   sync.Once
}

func (h *closeNotify) Open(ConnInfo) ConnHandler { return h }
func (h *closeNotify) Serve(f []byte, r func(Reply)) {
	h.serve(f, r)
}
func (h *closeNotify) Closed() { h.once.Do(func() { close(h.closed) }) }

// TestClosedAfterReply: when the client goes away while the engine holds
// its request (a long poll), Closed comes only after the reply, and the
// reply is released.
func TestClosedAfterReply(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		var replyFn func(Reply)
		got := make(chan struct{})
		var released sync.WaitGroup
		released.Add(1)
		var repliedYet atomic.Bool
		closedEarly := make(chan bool, 1)
		h := &closeNotify{serve: func(frame []byte, reply func(Reply)) {
			replyFn = reply
			close(got)
		}, closed: make(chan struct{})}
		_, addr := startServer(t, backend, h, Options{})
		c := dial(t, addr)
		writeFrame(t, c, []byte("poll"))
		<-got
		c.Close()
		go func() {
			<-h.closed
			closedEarly <- !repliedYet.Load()
		}()
		time.Sleep(100 * time.Millisecond)
		repliedYet.Store(true)
		replyFn(&testReply{parts: []testPart{{b: []byte("late")}}, released: &released})
		released.Wait()
		select {
		case early := <-closedEarly:
			if early {
				t.Fatal("Closed called before the request in flight was answered")
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Closed never called")
		}
	})
}

// TestGarbageIsolated: connections sending garbage (bad sizes, random
// bytes, resets mid-frame) are closed while a well-behaved connection on
// the same loops keeps working.
func TestGarbageIsolated(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		_, addr := startServer(t, backend, echo, Options{MaxFrame: 1 << 16, Loops: 1})
		good := dial(t, addr)
		rng := rand.New(rand.NewSource(1))
		for i := 0; i < 50; i++ {
			bad := dial(t, addr)
			junk := make([]byte, rng.Intn(1000)+4)
			rng.Read(junk)
			if i%3 == 0 {
				binary.BigEndian.PutUint32(junk, 0x7fffffff)
			}
			bad.Write(junk)
			if i%2 == 0 {
				bad.(*net.TCPConn).SetLinger(0)
				bad.Close()
			}
			writeFrame(t, good, []byte(fmt.Sprint(i)))
			if got := string(readFrameT(t, good)); got != fmt.Sprint(i) {
				t.Fatalf("good connection got %q", got)
			}
		}
	})
}

// TestPeerResetDuringFileReply: a client that resets while a large file
// region is going out does not disturb the server.
func TestPeerResetDuringFileReply(t *testing.T) {
	path := filepath.Join(t.TempDir(), "seg")
	if err := os.WriteFile(path, bytes.Repeat([]byte("0123456789abcdef"), 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() }) // after the servers' shutdown
	forEachBackend(t, func(t *testing.T, backend string) {
		h := handlerFunc(func(frame []byte, reply func(Reply)) {
			if string(frame) == "small" {
				reply(&testReply{parts: []testPart{{b: sizePrefixed([]byte("ok"))}}})
				return
			}
			reply(&testReply{parts: []testPart{{b: binary.BigEndian.AppendUint32(nil, 16<<20)}, {f: f, off: 0, len: 16 << 20}}})
		})
		_, addr := startServer(t, backend, h, Options{})
		for i := 0; i < 5; i++ {
			c := dial(t, addr)
			writeFrame(t, c, []byte("big"))
			readN(t, c, 1000)
			c.(*net.TCPConn).SetLinger(0)
			c.Close()
		}
		c := dial(t, addr)
		writeFrame(t, c, []byte("small"))
		if got := string(readFrameT(t, c)); got != "ok" {
			t.Fatalf("got %q", got)
		}
	})
}

// segmentFile writes size random bytes (from seed) to a file and returns
// them and the file open for reading, closed after the test's servers.
func segmentFile(t *testing.T, size int, seed int64) ([]byte, *os.File) {
	t.Helper()
	data := make([]byte, size)
	rand.New(rand.NewSource(seed)).Read(data)
	path := filepath.Join(t.TempDir(), "seg")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() }) // after the servers' shutdown
	return data, f
}

// TestFileRegionsLarge checks sendfile's partial progress: a 16 MiB region
// at an odd offset, read slowly.
func TestFileRegionsLarge(t *testing.T) {
	data, f := segmentFile(t, 16<<20, 2)
	const off = 12345
	n := int64(len(data) - off - 777)
	forEachBackend(t, func(t *testing.T, backend string) {
		h := handlerFunc(func(frame []byte, reply func(Reply)) {
			go reply(&testReply{parts: []testPart{{b: []byte("<")}, {f: f, off: off, len: n}, {b: []byte(">")}}})
		})
		_, addr := startServer(t, backend, h, Options{})
		c := dial(t, addr)
		writeFrame(t, c, []byte("x"))
		c.SetReadDeadline(time.Now().Add(20 * time.Second))
		got := make([]byte, n+2)
		r := io.Reader(c)
		for read := 0; read < len(got); {
			k, err := r.Read(got[read:min(len(got), read+64<<10)])
			if err != nil {
				t.Fatal(err)
			}
			read += k
		}
		if got[0] != '<' || got[len(got)-1] != '>' || !bytes.Equal(got[1:len(got)-1], data[off:off+n]) {
			t.Fatal("file region corrupted")
		}
	})
}

// TestAcceptModes spreads connections over two loops by SO_REUSEPORT and by
// hand-off, with Serve on the loops and on workers.
func TestAcceptModes(t *testing.T) {
	for _, mode := range []struct {
		name    string
		accept  string
		workers int
	}{{"reuseport", AcceptReusePort, 0}, {"handoff", AcceptHandoff, 0}, {"workers", "", 4}} {
		t.Run(mode.name, func(t *testing.T) {
			forEachBackend(t, func(t *testing.T, backend string) {
				_, addr := startServer(t, backend, echo, Options{Loops: 2, Accept: mode.accept, Workers: mode.workers})
				var wg sync.WaitGroup
				errs := make(chan error, 40)
				for i := 0; i < 40; i++ {
					wg.Add(1)
					go func(i int) {
						defer wg.Done()
						c, err := net.Dial("tcp", addr)
						if err != nil {
							errs <- err
							return
						}
						defer c.Close()
						for j := 0; j < 20; j++ {
							msg := fmt.Sprintf("%d/%d", i, j)
							c.Write(sizePrefixed([]byte(msg)))
							c.SetReadDeadline(time.Now().Add(5 * time.Second))
							var hdr [4]byte
							if _, err := io.ReadFull(c, hdr[:]); err != nil {
								errs <- err
								return
							}
							body := make([]byte, binary.BigEndian.Uint32(hdr[:]))
							if _, err := io.ReadFull(c, body); err != nil || string(body) != msg {
								errs <- fmt.Errorf("got %q want %q (%v)", body, msg, err)
								return
							}
						}
					}(i)
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					t.Fatal(err)
				}
			})
		})
	}
}

// TestFallbackWhenUringUnavailable: the default backend falls back to epoll
// and says why.
func TestFallbackWhenUringUnavailable(t *testing.T) {
	if !epollAvailable {
		t.Skip("no epoll here")
	}
	uringDisabledForTest = errors.New("io_uring_setup: operation not permitted (kernel.io_uring_disabled=2)")
	defer func() { uringDisabledForTest = nil }()
	var logs bytes.Buffer
	opts := Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	s, err := New("", echo, opts)
	if err != nil {
		t.Fatal(err)
	}
	if s.Backend() != BackendEpoll {
		t.Fatalf("fell back to %s", s.Backend())
	}
	if !strings.Contains(logs.String(), "io_uring_disabled=2") {
		t.Fatalf("fallback not explained in the log: %s", logs.String())
	}
	s.Shutdown(context.Background())
	if _, err := New("carrier-pigeon", echo, opts); err == nil {
		t.Fatal("unknown backend accepted")
	}
}

// TestServeAfterShutdown returns at once and closes the listener.
func TestServeAfterShutdown(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		s, err := New(backend, echo, Options{})
		if err != nil {
			t.Fatal(err)
		}
		s.Shutdown(context.Background())
		ln, _ := Listen("tcp", "127.0.0.1:0")
		done := make(chan error)
		go func() { done <- s.Serve(ln) }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Serve after Shutdown did not return")
		}
	})
}

// TestShutdownForced: a request the engine never answers does not hold
// Shutdown past its context.
func TestShutdownForced(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		started := make(chan struct{})
		var held func(Reply)
		h := handlerFunc(func(frame []byte, reply func(Reply)) { held = reply; close(started) })
		s, addr := startServer(t, backend, h, Options{})
		t.Cleanup(func() { held(nil) }) // runs before the server's cleanup
		c := dial(t, addr)
		writeFrame(t, c, []byte("never"))
		<-started
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		if err := s.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Shutdown: %v", err)
		}
	})
}

// TestShutdownRacingServe: Shutdown called while Serve is still creating
// the loops must wait for them, stop them all and leave no goroutine
// behind. It raced before (Shutdown read the loop list Serve was writing,
// and a loop created after Shutdown's wake-up never heard of it), found by
// a broker stopped right after it started.
func TestShutdownRacingServe(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		for i := 0; i < 20; i++ {
			s, err := New(backend, echo, Options{Loops: 2})
			if err != nil {
				t.Fatal(err)
			}
			ln, err := Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			served := make(chan error, 1)
			go func() { served <- s.Serve(ln) }()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := s.Shutdown(ctx); err != nil {
				t.Fatalf("round %d: shutdown: %v", i, err)
			}
			cancel()
			select {
			case err := <-served:
				if err != nil {
					t.Fatalf("round %d: serve: %v", i, err)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("round %d: Serve did not return after Shutdown", i)
			}
		}
	})
}

// TestStdShutdownRightAfterAReply: Shutdown that starts just after a
// connection wrote a reply, while it has not yet begun waiting for the next
// request, returns at once. It used to lose the race: the connection set its
// next read deadline (the idle timeout) over the one Shutdown had set to the
// past, and waited for a request that never came — a broker stop in a CI
// run took its whole 20 s budget and failed. The hook widens the window the
// race needed a preemption to hit.
func TestStdShutdownRightAfterAReply(t *testing.T) {
	for _, first := range []bool{false, true} {
		t.Run(fmt.Sprintf("first-request=%v", first), func(t *testing.T) {
			s, addr := startServer(t, BackendStd, echo, Options{IdleTimeout: time.Hour})
			paused := make(chan struct{}, 1)
			resume := make(chan struct{})
			hook := func(served int) {
				if served == 1 || (first && served == 0) {
					paused <- struct{}{}
					<-resume
				}
			}
			stdBeforeReadForTest.Store(&hook)
			t.Cleanup(func() { stdBeforeReadForTest.Store(nil) })
			c := dial(t, addr)
			if !first {
				writeFrame(t, c, []byte("ping"))
				readFrameT(t, c)
			}
			<-paused
			shut := make(chan error, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				defer cancel()
				shut <- s.Shutdown(ctx)
			}()
			waitClosing(t, s.(*StdServer))
			close(resume)
			if err := <-shut; err != nil {
				t.Fatalf("shutdown: %v", err)
			}
		})
	}
}

// waitClosing waits until Shutdown has begun on s.
func waitClosing(t *testing.T, s *StdServer) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !s.isClosing(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("Shutdown did not begin")
		}
	}
}
