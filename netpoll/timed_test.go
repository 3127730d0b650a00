package netpoll

import (
	"sync"
	"testing"
	"time"
)

// timedReply records what the server reports through TimedReply.
type timedReply struct {
	testReply
	mu      *sync.Mutex
	written *[]time.Duration
}

func (r *timedReply) Written(d time.Duration) {
	r.mu.Lock()
	*r.written = append(*r.written, d)
	r.mu.Unlock()
}

// TestTimedReplyWritten: every backend reports each reply's broker-side
// time once, after its bytes are out, including the time the handler held
// the request (a reply given later from another goroutine).
func TestTimedReplyWritten(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		var mu sync.Mutex
		var written []time.Duration
		const hold = 2 * time.Millisecond
		h := handlerFunc(func(frame []byte, reply func(Reply)) {
			r := &timedReply{testReply: testReply{parts: []testPart{{b: sizePrefixed(append([]byte(nil), frame...))}}}, mu: &mu, written: &written}
			time.AfterFunc(hold, func() { reply(r) })
		})
		_, addr := startServer(t, backend, h, Options{})
		c := dial(t, addr)
		const n = 5
		for i := 0; i < n; i++ {
			if _, err := c.Write(sizePrefixed([]byte("ping"))); err != nil {
				t.Fatal(err)
			}
			readFrameT(t, c)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			mu.Lock()
			got := append([]time.Duration(nil), written...)
			mu.Unlock()
			if len(got) == n {
				for i, d := range got {
					if d < hold {
						t.Fatalf("reply %d: reported %v, less than the %v the handler held it", i, d, hold)
					}
				}
				t.Logf("%s: broker-side times %v", backend, got)
				return
			}
			if len(got) > n || time.Now().After(deadline) {
				t.Fatalf("%d replies reported for %d written", len(got), n)
			}
			time.Sleep(time.Millisecond)
		}
	})
}
