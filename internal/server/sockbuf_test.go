package server_test

import (
	"net"
	"os/exec"
	"regexp"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-broker/sluice/internal/testbroker"
)

// TestSocketBufferKeysReachTheSockets: socket.send.buffer.bytes and
// socket.receive.buffer.bytes set in the broker's config are the SO_SNDBUF
// and SO_RCVBUF of a client's connection, as the kernel reports them (ss:
// twice the value asked for).
func TestSocketBufferKeysReachTheSockets(t *testing.T) {
	ss, err := exec.LookPath("ss")
	if err != nil {
		t.Skip("needs ss (iproute2)")
	}
	tb := testbroker.Start(t, set("socket.send.buffer.bytes", "81920", "socket.receive.buffer.bytes", "65536"))
	cl, err := kgo.NewClient(kgo.SeedBrokers(tb.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.Ping(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(tb.Addr)
	out, err := exec.Command(ss, "-tmnH", "state", "established", "sport", "=", ":"+port).Output()
	if err != nil {
		t.Fatalf("ss: %v", err)
	}
	rb := regexp.MustCompile(`rb(\d+)`).FindSubmatch(out)
	sb := regexp.MustCompile(`tb(\d+)`).FindSubmatch(out)
	if rb == nil || sb == nil {
		t.Fatalf("no buffers in ss's output: %q", out)
	}
	if n, _ := strconv.Atoi(string(rb[1])); n != 2*65536 {
		t.Errorf("receive buffer %d, want %d", n, 2*65536)
	}
	if n, _ := strconv.Atoi(string(sb[1])); n != 2*81920 {
		t.Errorf("send buffer %d, want %d", n, 2*81920)
	}
}
