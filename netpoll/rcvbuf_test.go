package netpoll

import (
	"net"
	"os/exec"
	"regexp"
	"strconv"
	"testing"
)

// TestReceiveBufferApplied: Options.ReceiveBuffer (socket.receive.buffer.bytes)
// is the accepted sockets' SO_RCVBUF on every backend, as the kernel
// reports it (ss's skmem rb: twice the value asked for), and a request
// larger than the buffer still arrives whole.
func TestReceiveBufferApplied(t *testing.T) {
	ss, err := exec.LookPath("ss")
	if err != nil {
		t.Skip("needs ss (iproute2)")
	}
	forEachBackend(t, func(t *testing.T, backend string) {
		echo := handlerFunc(func(frame []byte, reply func(Reply)) {
			reply(&testReply{parts: []testPart{{b: frame[:4]}}})
		})
		_, addr := startServer(t, backend, echo, Options{ReceiveBuffer: 102400, MaxFrame: 4 << 20})
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		big := make([]byte, 1<<20) // ten times the buffer
		copy(big, "ping")
		writeFrame(t, c, big)
		if got := readN(t, c, 4); string(got[len(got)-4:]) != "ping" {
			t.Fatalf("reply %q", got)
		}
		_, port, _ := net.SplitHostPort(addr)
		out, err := exec.Command(ss, "-tmnH", "state", "established", "sport", "=", ":"+port).Output()
		if err != nil {
			t.Fatalf("ss: %v", err)
		}
		m := regexp.MustCompile(`rb(\d+)`).FindSubmatch(out)
		if m == nil {
			t.Fatalf("no receive buffer in ss's output: %q", out)
		}
		if rb, _ := strconv.Atoi(string(m[1])); rb != 2*102400 {
			t.Fatalf("server socket's receive buffer %d, want %d (SO_RCVBUF 102400)", rb, 2*102400)
		}
	})
}
