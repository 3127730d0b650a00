package netpoll

import (
	"net"
	"os/exec"
	"regexp"
	"strconv"
	"testing"
)

// TestSendBufferApplied: Options.SendBuffer (socket.send.buffer.bytes) is
// the accepted sockets' SO_SNDBUF on every backend, as the kernel reports
// it (ss's skmem tb: twice the value asked for, the kernel's bookkeeping
// share included).
func TestSendBufferApplied(t *testing.T) {
	ss, err := exec.LookPath("ss")
	if err != nil {
		t.Skip("needs ss (iproute2)")
	}
	forEachBackend(t, func(t *testing.T, backend string) {
		echo := handlerFunc(func(frame []byte, reply func(Reply)) {
			reply(&testReply{parts: []testPart{{b: frame}}})
		})
		_, addr := startServer(t, backend, echo, Options{SendBuffer: 102400})
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		writeFrame(t, c, []byte("ping"))
		readN(t, c, 4)
		_, port, _ := net.SplitHostPort(addr)
		out, err := exec.Command(ss, "-tmnH", "state", "established", "sport", "=", ":"+port).Output()
		if err != nil {
			t.Fatalf("ss: %v", err)
		}
		m := regexp.MustCompile(`tb(\d+)`).FindSubmatch(out)
		if m == nil {
			t.Fatalf("no send buffer in ss's output: %q", out)
		}
		if tb, _ := strconv.Atoi(string(m[1])); tb != 2*102400 {
			t.Fatalf("server socket's send buffer %d, want %d (SO_SNDBUF 102400)", tb, 2*102400)
		}
	})
}
