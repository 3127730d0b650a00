package server_test

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"

	"github.com/sluice-broker/sluice/internal/testbroker"
	"github.com/sluice-broker/sluice/netpoll"
)

// rawClient speaks the Kafka protocol on one connection with pre-encoded
// requests, cheaply enough to run thousands of them in one test.
type rawClient struct {
	c    net.Conn
	corr int32
	buf  []byte
}

var formatter = kmsg.NewRequestFormatter(kmsg.FormatterClientID("conns-test"))

// roundTrip sends req and decodes the response into a new response of the
// same kind.
func (rc *rawClient) roundTrip(req kmsg.Request) (kmsg.Response, error) {
	rc.corr++
	rc.buf = formatter.AppendRequest(rc.buf[:0], req, rc.corr)
	if _, err := rc.c.Write(rc.buf); err != nil {
		return nil, err
	}
	var hdr [8]byte
	if _, err := io.ReadFull(rc.c, hdr[:]); err != nil {
		return nil, err
	}
	size := int(binary.BigEndian.Uint32(hdr[:4]))
	if corr := int32(binary.BigEndian.Uint32(hdr[4:])); corr != rc.corr {
		return nil, fmt.Errorf("correlation %d, want %d", corr, rc.corr)
	}
	body := make([]byte, size-4)
	if _, err := io.ReadFull(rc.c, body); err != nil {
		return nil, err
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if resp.IsFlexible() && req.Key() != kmsg.ApiVersions.Int16() {
		body = body[1:] // response header v1: empty tagged fields
	}
	return resp, resp.ReadFrom(body)
}

// raiseFdLimit lifts the soft RLIMIT_NOFILE to the hard limit (Go does it
// at start-up too; raising the hard limit needs CAP_SYS_RESOURCE, which a
// test cannot count on) and returns it.
func raiseFdLimit(t *testing.T) int {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	want := lim
	want.Cur = max(lim.Max, 65536)
	want.Max = max(lim.Max, want.Cur)
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &want); err != nil {
		want = unix.Rlimit{Cur: lim.Max, Max: lim.Max}
		unix.Setrlimit(unix.RLIMIT_NOFILE, &want)
	}
	return int(want.Cur)
}

func openFds() int {
	ents, _ := os.ReadDir("/proc/self/fd")
	return len(ents)
}

// brokerBytes is the Go memory in use after a collection.
func brokerBytes() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse + ms.StackInuse
}

const connsTotal = 10_000

// TestTenThousandConnections: 10,000 connections are open at once against
// a real broker, on each network backend, and every one completes
// ApiVersions and Metadata. The clients run in a child process (each side
// needs 10,000 descriptors). Afterwards the broker's descriptors and
// goroutines are back where they started.
func TestTenThousandConnections(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 connections: skipped under -short")
	}
	if raceEnabled {
		t.Skip("the race detector allows at most 8128 live goroutines")
	}
	if lim := raiseFdLimit(t); lim < connsTotal+500 {
		t.Skipf("RLIMIT_NOFILE %d is too low for %d connections", lim, connsTotal)
	}
	for _, backend := range []string{netpoll.BackendStd, netpoll.BackendEpoll, netpoll.BackendUring} {
		t.Run(backend, func(t *testing.T) {
			b := testbroker.StartNet(t, backend)
			baseFds, baseG, baseMem := openFds(), runtime.NumGoroutine(), brokerBytes()
			start := time.Now()
			child := startClients(t, b.Addr)
			perConn := float64(brokerBytes()-baseMem) / connsTotal
			t.Logf("%s: %d connections served in %v; broker holds %d fds, %.1f KiB of Go memory per connection",
				b.Net, connsTotal, time.Since(start).Round(time.Millisecond), openFds()-baseFds, perConn/1024)
			child.finish(t)
			deadline := time.Now().Add(30 * time.Second)
			for openFds() > baseFds+10 || runtime.NumGoroutine() > baseG+10 {
				if time.Now().After(deadline) {
					t.Fatalf("after closing: %d fds (was %d), %d goroutines (was %d)", openFds(), baseFds, runtime.NumGoroutine(), baseG)
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}

type clientProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bytes.Buffer
}

// startClients runs TestConnsClientProcess in a child and waits until all
// its connections have been served.
func startClients(t *testing.T, addr string) *clientProc {
	cmd := exec.Command(os.Args[0], "-test.run=^TestConnsClientProcess$", "-test.v")
	cmd.Env = append(os.Environ(), "SLUICE_CONNS_ADDR="+addr)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &clientProc{cmd: cmd, stdin: stdin, out: &bytes.Buffer{}}
	cmd.Stderr = p.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		p.out.WriteString(line + "\n")
		if strings.HasPrefix(line, "READY") {
			go io.Copy(io.Discard, stdout)
			return p
		}
	}
	cmd.Wait()
	t.Fatalf("client process failed:\n%s", p.out)
	return nil
}

func (p *clientProc) finish(t *testing.T) {
	p.stdin.Close()
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("client process: %v\n%s", err, p.out)
	}
}

// TestConnsClientProcess is the client half of TestTenThousandConnections,
// run in a child process; it is skipped otherwise.
func TestConnsClientProcess(t *testing.T) {
	addr := os.Getenv("SLUICE_CONNS_ADDR")
	if addr == "" {
		t.Skip("helper process for TestTenThousandConnections")
	}
	raiseFdLimit(t)
	conns := openAndServe(t, addr, connsTotal)
	fmt.Println("READY", len(conns))
	io.Copy(io.Discard, os.Stdin) // hold them open until the parent is done
	for _, c := range conns {
		c.Close()
	}
}

// openAndServe opens n connections (keeping them all open) and runs
// ApiVersions and Metadata on each.
func openAndServe(t *testing.T, addr string, n int) []net.Conn {
	const workers = 100
	conns := make([]net.Conn, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	deadline := time.Now().Add(2 * time.Minute)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				c, err := serveOne(addr, deadline)
				if err != nil {
					errs <- fmt.Errorf("connection %d: %w", i, err)
					return
				}
				conns[i] = c
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
		t.Fatal(err)
	}
	return conns
}

func serveOne(addr string, deadline time.Time) (net.Conn, error) {
	var c net.Conn
	var err error
	for attempt := 0; ; attempt++ {
		c, err = net.DialTimeout("tcp", addr, 10*time.Second)
		if err == nil || attempt == 3 {
			break
		}
		time.Sleep(50 * time.Millisecond) // SYN backlog full: retry
	}
	if err != nil {
		return nil, err
	}
	c.SetDeadline(deadline)
	rc := &rawClient{c: c}
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 3
	av.ClientSoftwareName, av.ClientSoftwareVersion = "conns-test", "1"
	resp, err := rc.roundTrip(av)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("ApiVersions: %w", err)
	}
	if code := resp.(*kmsg.ApiVersionsResponse).ErrorCode; code != 0 {
		c.Close()
		return nil, fmt.Errorf("ApiVersions error %d", code)
	}
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12
	resp, err = rc.roundTrip(md)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("Metadata: %w", err)
	}
	if len(resp.(*kmsg.MetadataResponse).Brokers) != 1 {
		c.Close()
		return nil, fmt.Errorf("Metadata lists %d brokers", len(resp.(*kmsg.MetadataResponse).Brokers))
	}
	return c, nil
}
