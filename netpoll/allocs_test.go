package netpoll

import (
	"encoding/binary"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

var raceEnabled bool

// fixedReply is a Reply that is reused forever (its Release does nothing),
// so that a test measures only the network layer's allocations.
type fixedReply struct{ parts [2][]byte }

func (r *fixedReply) NumParts() int { return 2 }
func (r *fixedReply) PartAt(i int) ([]byte, *os.File, int64, int64) {
	return r.parts[i], nil, 0, int64(len(r.parts[i]))
}
func (r *fixedReply) ShouldClose() bool { return false }
func (r *fixedReply) Release()          {}

// rawClient is a blocking socket driven by bare syscalls, which allocate
// nothing, so AllocsPerRun counts the server side only.
type rawClient struct {
	fd  int
	req []byte
	buf []byte
}

func newRawClient(t testing.TB, addr string, body []byte) *rawClient {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	f, err := c.(*net.TCPConn).File()
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	t.Cleanup(func() { f.Close() })
	req := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
	return &rawClient{fd: int(f.Fd()), req: append(req, body...), buf: make([]byte, 64<<10)}
}

// roundTrip sends the request and reads a reply of want bytes.
func (c *rawClient) roundTrip(t testing.TB, want int) {
	if _, err := syscall.Write(c.fd, c.req); err != nil {
		t.Fatal(err)
	}
	for got := 0; got < want; {
		n, err := syscall.Read(c.fd, c.buf[got:want])
		if err != nil || n == 0 {
			t.Fatalf("read: %d %v", n, err)
		}
		got += n
	}
}

// TestServeAllocs pins the hot path: once warm, a request and its reply
// cost the network layer no allocation, whether the handler replies inline
// or from another goroutine.
func TestServeAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	reply := &fixedReply{parts: [2][]byte{binary.BigEndian.AppendUint32(nil, 100), make([]byte, 100)}}
	async := make(chan func(Reply), 1)
	go func() {
		for fn := range async {
			fn(reply)
		}
	}()
	defer close(async)
	path := filepath.Join(t.TempDir(), "seg")
	if err := os.WriteFile(path, make([]byte, 64<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	region := &fileReply{hdr: binary.BigEndian.AppendUint32(nil, 64<<10), f: f, n: 64 << 10}
	for _, mode := range []string{"inline", "async", "file"} {
		t.Run(mode, func(t *testing.T) {
			forEachBackend(t, func(t *testing.T, backend string) {
				h := handlerFunc(func(frame []byte, r func(Reply)) {
					switch mode {
					case "inline":
						r(reply)
					case "async":
						async <- r
					default:
						r(region)
					}
				})
				want := 104
				if mode == "file" {
					want = 4 + 64<<10
				}
				_, addr := startServer(t, backend, h, Options{Loops: 1})
				c := newRawClient(t, addr, make([]byte, 300))
				c.buf = make([]byte, want)
				for i := 0; i < 200; i++ {
					c.roundTrip(t, want) // warm the pools
				}
				allocs := testing.AllocsPerRun(2000, func() { c.roundTrip(t, want) })
				t.Logf("%s %s: %.2f allocations per request", backend, mode, allocs)
				if allocs > 0.05 {
					t.Fatalf("%s allocates %.2f per request", backend, allocs)
				}
			})
		})
	}
}
