package netpoll

import (
	"bytes"
	"encoding/binary"
	"io"
	"testing"
	"time"
)

// TestFileRegionsThroughSmallSendBuffer: with Kafka's 100 KiB send buffer
// every sendfile of a large region comes back short many times (the uring
// loop then waits for room instead of calling sendfile again); pipelined
// replies of file regions between byte parts still arrive whole and in
// order.
func TestFileRegionsThroughSmallSendBuffer(t *testing.T) {
	data, f := segmentFile(t, 6<<20, 3)
	forEachBackend(t, func(t *testing.T, backend string) {
		h := handlerFunc(func(frame []byte, reply func(Reply)) {
			i := int64(frame[0] - '0') // request i sends data[i*1000:] less i*1000 at the end
			off, n := i*1000, int64(len(data))-2*i*1000
			size := binary.BigEndian.AppendUint32(nil, uint32(n+1))
			reply(&testReply{parts: []testPart{{b: size}, {f: f, off: off, len: n}, {b: []byte{frame[0]}}}})
		})
		_, addr := startServer(t, backend, h, Options{SendBuffer: 102400})
		c := dial(t, addr)
		const requests = 4
		var wire []byte
		for i := 0; i < requests; i++ {
			wire = append(wire, sizePrefixed([]byte{byte('0' + i)})...)
		}
		if _, err := c.Write(wire); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		for i := 0; i < requests; i++ {
			var size [4]byte
			if _, err := io.ReadFull(c, size[:]); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, binary.BigEndian.Uint32(size[:]))
			for read := 0; read < len(got); { // small reads: the sender keeps filling the buffer
				k, err := c.Read(got[read:min(len(got), read+32<<10)])
				if err != nil {
					t.Fatal(err)
				}
				read += k
			}
			off := i * 1000
			want := append(append([]byte(nil), data[off:len(data)-off]...), byte('0'+i))
			if !bytes.Equal(got, want) {
				t.Fatalf("reply %d: %d bytes, not the region asked for", i, len(got))
			}
		}
	})
}
