package netpoll

import (
	"bytes"
	"sync"
	"sync/atomic"
	"testing"
)

// batcher is a BatchHandler that answers nothing in Serve: every frame's
// echo waits for its loop's EndBatch.
type batcher struct {
	loops   [][]func() // held replies, by loop; touched only on that loop
	served  atomic.Int64
	batched atomic.Int64 // EndBatch calls that answered more than one frame
	begun   atomic.Int64
}

type batchConn struct {
	b    *batcher
	loop int
}

func (b *batcher) BeginLoops(n int)          { b.loops = make([][]func(), n); b.begun.Add(1) }
func (b *batcher) Open(ConnInfo) ConnHandler { panic("Open called on a batching handler") }
func (b *batcher) OpenOnLoop(_ ConnInfo, loop int) ConnHandler {
	return &batchConn{b: b, loop: loop}
}

func (b *batcher) EndBatch(loop int) {
	held := b.loops[loop]
	if len(held) > 1 {
		b.batched.Add(1)
	}
	for i, answer := range held {
		answer()
		held[i] = nil
	}
	b.loops[loop] = held[:0]
}

func (c *batchConn) Serve(frame []byte, reply func(Reply)) {
	body := sizePrefixed(append([]byte(nil), frame...))
	c.b.loops[c.loop] = append(c.b.loops[c.loop], func() {
		reply(&testReply{parts: []testPart{{b: body}}})
	})
	c.b.served.Add(1)
}

func (c *batchConn) Closed() {}

// TestBatchHandlerAnswersHeldReplies: with a handler that holds every reply
// until EndBatch, 20 connections doing 100 round trips each all finish
// (no loop waits while it holds a reply), in order, on every backend.
func TestBatchHandlerAnswersHeldReplies(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		if backend == BackendStd {
			t.Skip("the std backend has no loops: it calls Open")
		}
		h := &batcher{}
		_, addr := startServer(t, backend, h, Options{Loops: 2})
		var wg sync.WaitGroup
		errs := make(chan string, 20)
		for i := 0; i < 20; i++ {
			c := dial(t, addr)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := 0; j < 100; j++ {
					body := []byte{byte(i), byte(j), 7}
					if _, err := c.Write(sizePrefixed(body)); err != nil {
						errs <- err.Error()
						return
					}
					if got := readFrameT(t, c); !bytes.Equal(got, body) {
						errs <- "reply out of order"
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Fatal(e)
		}
		if h.begun.Load() != 1 || h.served.Load() != 2000 {
			t.Fatalf("BeginLoops called %d times, %d frames served", h.begun.Load(), h.served.Load())
		}
		t.Logf("%s: %d loop iterations answered more than one frame", backend, h.batched.Load())
	})
}

// TestBatchHandlerWithWorkers: with Options.Workers, Serve runs off the
// loops, so a batching handler is opened with Open and never batched.
func TestBatchHandlerWithWorkers(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		h := &workersOnly{}
		_, addr := startServer(t, backend, h, Options{Workers: 2})
		c := dial(t, addr)
		writeFrame(t, c, []byte("hi"))
		if got := readFrameT(t, c); string(got) != "hi" {
			t.Fatalf("got %q", got)
		}
	})
}

type workersOnly struct{}

func (w *workersOnly) BeginLoops(int)                       { panic("BeginLoops with workers") }
func (w *workersOnly) OpenOnLoop(ConnInfo, int) ConnHandler { panic("OpenOnLoop with workers") }
func (w *workersOnly) EndBatch(int)                         { panic("EndBatch with workers") }
func (w *workersOnly) Open(info ConnInfo) ConnHandler       { return echo.Open(info) }
