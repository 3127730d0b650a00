package netpoll

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// BenchmarkRoundTrip measures small request/response round trips per
// backend with an echo-like handler (the network layer alone, no engine),
// from 1 and 64 concurrent client connections. The clients use bare
// syscalls; they share the machine with the server.
//
//	go test -run XXX -bench RoundTrip ./netpoll/
func BenchmarkRoundTrip(b *testing.B) {
	reply := &fixedReply{parts: [2][]byte{binary.BigEndian.AppendUint32(nil, 100), make([]byte, 100)}}
	h := handlerFunc(func(frame []byte, r func(Reply)) { r(reply) })
	for _, conns := range []int{1, 64} {
		for _, backend := range backends {
			b.Run(fmt.Sprintf("%s/conns=%d", backend, conns), func(b *testing.B) {
				if got, why := resolveBackend(backend); got != backend {
					b.Skip(why)
				}
				_, addr := startServer(b, backend, h, Options{})
				clients := make([]*rawClient, conns)
				for i := range clients {
					clients[i] = newRawClient(b, addr, make([]byte, 60))
					clients[i].roundTrip(b, 104)
				}
				b.ResetTimer()
				var wg sync.WaitGroup
				per := b.N/conns + 1
				for _, c := range clients {
					wg.Add(1)
					go func(c *rawClient) {
						defer wg.Done()
						for i := 0; i < per; i++ {
							c.roundTrip(b, 104)
						}
					}(c)
				}
				wg.Wait()
			})
		}
	}
}

// BenchmarkFileRegion measures a reply made of a 4 MiB page-cached file
// region (sendfile) per backend.
func BenchmarkFileRegion(b *testing.B) {
	const size = 4 << 20
	path := filepath.Join(b.TempDir(), "seg")
	if err := os.WriteFile(path, make([]byte, size), 0o644); err != nil {
		b.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	reply := &fileReply{hdr: binary.BigEndian.AppendUint32(nil, size), f: f, n: size}
	h := handlerFunc(func(frame []byte, r func(Reply)) { r(reply) })
	for _, backend := range backends {
		b.Run(backend, func(b *testing.B) {
			if got, why := resolveBackend(backend); got != backend {
				b.Skip(why)
			}
			_, addr := startServer(b, backend, h, Options{})
			c := newRawClient(b, addr, []byte("x"))
			c.buf = make([]byte, size+4)
			b.SetBytes(size)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				c.roundTrip(b, size+4)
			}
		})
	}
}

// fileReply is a reusable reply of a size prefix and one file region.
type fileReply struct {
	hdr []byte
	f   *os.File
	n   int64
}

func (r *fileReply) NumParts() int { return 2 }
func (r *fileReply) PartAt(i int) ([]byte, *os.File, int64, int64) {
	if i == 0 {
		return r.hdr, nil, 0, int64(len(r.hdr))
	}
	return nil, r.f, 0, r.n
}
func (r *fileReply) ShouldClose() bool { return false }
func (r *fileReply) Release()          {}
