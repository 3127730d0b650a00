package main

// End-to-end tests of the sluice binary: built once, started as a real
// process on a free 127.0.0.1 port, driven with franz-go over real sockets.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var binPath string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sluice-bin")
	if err != nil {
		panic(err)
	}
	binPath = filepath.Join(dir, "sluice")
	build := exec.Command("go", "build", "-o", binPath, ".")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building sluice:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// proc is a running sluice process.
type proc struct {
	cmd    *exec.Cmd
	addr   string
	dir    string
	stderr *syncBuffer
	exited chan error
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startProc runs `sluice serve` with args plus --listen/--data-dir unless
// given, and waits until it answers ApiVersions.
func startProc(t *testing.T, dir, addr string, args ...string) *proc {
	t.Helper()
	full := append([]string{"serve", "--listen", addr, "--data-dir", dir}, args...)
	p := &proc{cmd: exec.Command(binPath, full...), addr: addr, dir: dir, stderr: &syncBuffer{}, exited: make(chan error, 1)}
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exited <- p.cmd.Wait() }()
	t.Cleanup(func() { p.kill() })
	if err := waitReady(addr, p.exited); err != nil {
		t.Fatalf("broker not ready: %v\nstderr:\n%s", err, p.stderr)
	}
	return p
}

// waitLog waits (up to 10 s) until the broker's stderr contains substr.
func (p *proc) waitLog(substr string) {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if strings.Contains(p.stderr.String(), substr) {
			return
		}
	}
}

func (p *proc) kill() {
	if p.cmd.ProcessState == nil {
		p.cmd.Process.Kill()
		select {
		case <-p.exited:
		case <-time.After(5 * time.Second):
		}
	}
}

// waitReady polls until an ApiVersions round trip succeeds.
func waitReady(addr string, exited chan error) error {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			exited <- err
			return fmt.Errorf("process exited: %v", err)
		default:
		}
		if err := apiVersionsRoundTrip(addr); err == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("timeout")
}

func apiVersionsRoundTrip(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 0
	if _, err := c.Write(frameRequest(req, 1)); err != nil {
		return err
	}
	_, err = readResponse(c)
	return err
}

func frameRequest(req kmsg.Request, corr int32) []byte {
	var f kmsg.RequestFormatter
	return f.AppendRequest(nil, req, corr)
}

func readResponse(c net.Conn) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		return nil, err
	}
	body := make([]byte, binary.BigEndian.Uint32(hdr[:]))
	_, err := io.ReadFull(c, body)
	return body, err
}

func client(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// TestSIGKILLLosesNoAckedRecord: records acknowledged with acks=all before
// a SIGKILL are all there, at their offsets, after a restart.
func TestSIGKILLLosesNoAckedRecord(t *testing.T) {
	dir, addr := t.TempDir(), freeAddr(t)
	p := startProc(t, dir, addr)
	adm := kadm.NewClient(client(t, addr))
	if _, err := adm.CreateTopic(context.Background(), 3, 1, nil, "crash"); err != nil {
		t.Fatal(err)
	}
	cl := client(t, addr, kgo.DefaultProduceTopic("crash"), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordRetries(1), kgo.ProduceRequestTimeout(2*time.Second))
	var mu sync.Mutex
	acked := map[string]*kgo.Record{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			r := &kgo.Record{Key: []byte(fmt.Sprint(i % 7)), Value: []byte(fmt.Sprintf("v%d", i))}
			cl.Produce(context.Background(), r, func(r *kgo.Record, err error) {
				if err == nil {
					mu.Lock()
					acked[string(r.Value)] = r
					mu.Unlock()
				}
			})
			if i%64 == 63 {
				time.Sleep(time.Millisecond)
			}
		}
	}()
	time.Sleep(1500 * time.Millisecond)
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
	p.exited <- nil
	close(stop)
	wg.Wait()
	cl.Close()
	mu.Lock()
	n := len(acked)
	mu.Unlock()
	if n == 0 {
		t.Fatal("nothing was acknowledged before the kill")
	}
	startProc(t, dir, addr)
	got := consumeAll(t, addr, "crash", n)
	for v, r := range acked {
		g, ok := got[v]
		if !ok {
			t.Fatalf("acked record %s (partition %d offset %d) lost after SIGKILL", v, r.Partition, r.Offset)
		}
		if g.Partition != r.Partition || g.Offset != r.Offset {
			t.Fatalf("record %s moved from %d/%d to %d/%d", v, r.Partition, r.Offset, g.Partition, g.Offset)
		}
	}
	t.Logf("%d acked records all present after SIGKILL and restart", n)
}

// consumeAll reads the topic from the start until at least want records
// were seen and the log ends are reached.
func consumeAll(t *testing.T, addr, topic string, want int) map[string]*kgo.Record {
	t.Helper()
	cl := client(t, addr, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := map[string]*kgo.Record{}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for len(got) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records before timeout", len(got), want)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Logf("fetch %s/%d: %v", tp, p, err) })
		fs.EachRecord(func(r *kgo.Record) { got[string(r.Value)] = r })
	}
	return got
}

// TestSIGTERMIsClean: SIGTERM exits 0 within seconds and data survives.
func TestSIGTERMIsClean(t *testing.T) {
	dir, addr := t.TempDir(), freeAddr(t)
	p := startProc(t, dir, addr)
	cl := client(t, addr, kgo.DefaultProduceTopic("term"), kgo.AllowAutoTopicCreation())
	for i := 0; i < 100; i++ {
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cl.Close()
	start := time.Now()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.exited:
		p.exited <- err
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, p.stderr)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("broker did not exit within 15s of SIGTERM")
	}
	t.Logf("clean exit in %v", time.Since(start))
	if !strings.Contains(p.stderr.String(), "broker stopped cleanly") {
		t.Fatalf("no clean-stop log line:\n%s", p.stderr)
	}
	startProc(t, dir, addr)
	if got := consumeAll(t, addr, "term", 100); len(got) != 100 {
		t.Fatalf("got %d records", len(got))
	}
}

// TestConfigFile: Kafka keys are read, unknown ones warned about, flags
// override the file, bad values stop startup naming the key.
func TestConfigFile(t *testing.T) {
	dir, addr := t.TempDir(), freeAddr(t)
	props := filepath.Join(t.TempDir(), "server.properties")
	os.WriteFile(props, []byte("# test\nnum.partitions=3\nlisteners=PLAINTEXT://127.0.0.1:1\nlog.dirs="+dir+"\nsome.unknown.key=1\n"), 0o644)
	p := startProc(t, dir, addr, "--config", props)
	if !strings.Contains(p.stderr.String(), "some.unknown.key") {
		t.Errorf("unknown key not warned about:\n%s", p.stderr)
	}
	cl := client(t, addr, kgo.DefaultProduceTopic("auto3"), kgo.AllowAutoTopicCreation())
	if err := cl.ProduceSync(context.Background(), &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	td, err := kadm.NewClient(cl).ListTopics(context.Background(), "auto3")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(td["auto3"].Partitions); n != 3 {
		t.Fatalf("auto-created topic has %d partitions, want num.partitions=3", n)
	}

	bad := filepath.Join(t.TempDir(), "bad.properties")
	os.WriteFile(bad, []byte("log.retention.ms=soon\n"), 0o644)
	out, err := exec.Command(binPath, "serve", "--config", bad, "--data-dir", t.TempDir(), "--listen", freeAddr(t)).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "log.retention.ms") {
		t.Fatalf("bad value accepted or not named: err=%v\n%s", err, out)
	}
}

// TestMalformedFramesLeaveBrokerServing sends garbage, oversized and
// truncated frames; the broker closes those connections and serves others.
func TestMalformedFramesLeaveBrokerServing(t *testing.T) {
	dir, addr := t.TempDir(), freeAddr(t)
	startProc(t, dir, addr)
	garbage := [][]byte{
		{0xff, 0xff, 0xff, 0xff},                           // negative size
		{0x7f, 0xff, 0xff, 0xff, 1, 2, 3},                  // over socket.request.max.bytes
		{0, 0, 0, 4, 0, 0x7f, 0, 0},                        // truncated header
		{0, 0, 0, 12, 0, 99, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0}, // unknown api key
		append([]byte{0, 0, 0, 20, 0, 3, 0, 9, 0, 0, 0, 1, 0, 0}, bytes.Repeat([]byte{0xff}, 10)...), // metadata v9 garbage body
		[]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
	}
	for i, g := range garbage {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.Write(g)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		// Closed means EOF, or a reset when the broker closed with our
		// unread bytes still in its receive buffer; a timeout means the
		// broker kept the connection open.
		if _, err := io.ReadAll(bufio.NewReader(c)); err != nil && !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("case %d: connection not closed: %v", i, err)
		}
		c.Close()
	}
	if err := apiVersionsRoundTrip(addr); err != nil {
		t.Fatalf("broker stopped serving after garbage: %v", err)
	}
}

// TestManyConcurrentClients: a few hundred clients at once.
func TestManyConcurrentClients(t *testing.T) {
	dir, addr := t.TempDir(), freeAddr(t)
	startProc(t, dir, addr)
	adm := kadm.NewClient(client(t, addr))
	if _, err := adm.CreateTopic(context.Background(), 4, 1, nil, "many"); err != nil {
		t.Fatal(err)
	}
	const clients = 300
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("many"))
			if err != nil {
				errs <- err
				return
			}
			defer cl.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
				errs <- fmt.Errorf("client %d: %w", i, err)
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := consumeAll(t, addr, "many", clients); len(got) != clients {
		t.Fatalf("got %d records", len(got))
	}
}

// TestMetricsEndpoint: --metrics serves Prometheus text with request
// counts, latency histograms and per-topic byte counters.
func TestMetricsEndpoint(t *testing.T) {
	dir, addr, maddr := t.TempDir(), freeAddr(t), freeAddr(t)
	startProc(t, dir, addr, "--metrics", maddr)
	cl := client(t, addr, kgo.DefaultProduceTopic("metered"), kgo.AllowAutoTopicCreation())
	if err := cl.ProduceSync(context.Background(), &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	consumeAll(t, addr, "metered", 1)
	resp, err := http.Get("http://" + maddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`sluice_requests_total{api="Produce"}`, `sluice_request_duration_seconds_bucket{api="Metadata"`,
		`sluice_topic_bytes_in_total{topic="metered"}`, `sluice_topic_records_in_total{topic="metered"} 1`,
		`sluice_topic_records_out_total{topic="metered"} 1`, `sluice_open_connections`} {
		if !bytes.Contains(body, []byte(want)) {
			t.Errorf("metrics lack %s", want)
		}
	}
}
