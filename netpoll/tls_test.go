package netpoll

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"
)

// testCert makes a self-signed certificate for 127.0.0.1 with the given
// common name; it also serves as its own CA.
func testCert(t testing.TB, cn string) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

type tlsFixture struct {
	addr   string
	client *tls.Config
	mu     sync.Mutex
	infos  []ConnInfo
}

// startTLSServer serves h behind a TLS listener named "SSL" that requires
// a client certificate.
func startTLSServer(t *testing.T, backend string, serve func(frame []byte, reply func(Reply)), lo ListenerOptions) *tlsFixture {
	t.Helper()
	srvCert, srvPool := testCert(t, "broker")
	cliCert, cliPool := testCert(t, "alice")
	fx := &tlsFixture{client: &tls.Config{RootCAs: srvPool, Certificates: []tls.Certificate{cliCert}, ServerName: "127.0.0.1"}}
	lo.Name = "SSL"
	lo.TLS = &tls.Config{Certificates: []tls.Certificate{srvCert}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: cliPool}
	h := infoHandler{fx: fx, serve: serve}
	ln, err := Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(backend, h, Options{})
	if err != nil {
		t.Fatal(err)
	}
	go s.ServeListener(ln, lo)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	})
	fx.addr = ln.Addr().String()
	return fx
}

type infoHandler struct {
	fx    *tlsFixture
	serve func([]byte, func(Reply))
}

func (h infoHandler) Open(info ConnInfo) ConnHandler {
	h.fx.mu.Lock()
	h.fx.infos = append(h.fx.infos, info)
	h.fx.mu.Unlock()
	return connFunc(h.serve)
}

// TestTLSRecordLayer runs pipelined requests (one larger than a TLS
// record, one larger than the read buffers) through TLS on every backend,
// answered with byte parts and a multi-megabyte file region, and checks
// every byte and the connection's listener and client certificate.
func TestTLSRecordLayer(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		data := make([]byte, 3<<20+17)
		rand.Read(data)
		path := filepath.Join(t.TempDir(), "seg")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		serve := func(frame []byte, reply func(Reply)) {
			n := int64(binary.BigEndian.Uint32(frame))
			tag := append([]byte(nil), frame[:8]...)
			go reply(&testReply{parts: []testPart{{b: []byte("<")}, {b: tag}, {f: f, off: 5, len: n}, {b: []byte(">")}}})
		}
		fx := startTLSServer(t, backend, serve, ListenerOptions{})
		c, err := tls.Dial("tcp", fx.addr, fx.client)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		sizes := []int{8, 40 << 10, 8, 2 << 20, 100}
		regions := []int64{0, 10, 3 << 20, 1, 70000}
		var out bytes.Buffer
		for i, sz := range sizes {
			body := make([]byte, sz)
			binary.BigEndian.PutUint32(body, uint32(regions[i]))
			binary.BigEndian.PutUint32(body[4:], uint32(i))
			out.Write(sizePrefixed(body))
		}
		go c.Write(out.Bytes()) // pipelined, all at once
		c.SetReadDeadline(time.Now().Add(20 * time.Second))
		for i := range sizes {
			want := []byte("<")
			want = binary.BigEndian.AppendUint32(want, uint32(regions[i]))
			want = binary.BigEndian.AppendUint32(want, uint32(i))
			want = append(want, data[5:5+regions[i]]...)
			want = append(want, '>')
			got := make([]byte, len(want))
			if _, err := io.ReadFull(c, got); err != nil {
				t.Fatalf("reply %d: %v", i, err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("reply %d differs (%d bytes)", i, len(want))
			}
		}
		fx.mu.Lock()
		defer fx.mu.Unlock()
		if len(fx.infos) != 1 || fx.infos[0].Listener != "SSL" || fx.infos[0].TLS == nil ||
			len(fx.infos[0].TLS.PeerCertificates) == 0 || fx.infos[0].TLS.PeerCertificates[0].Subject.CommonName != "alice" {
			t.Fatalf("conn info: %+v", fx.infos)
		}
	})
}

// TestTLSGarbageAndHalfHandshakes feeds a TLS listener garbage, a client
// hello cut short and a client that never speaks: each is closed (the
// stalled ones after the handshake timeout), none reaches the handler,
// and a real client is served meanwhile.
func TestTLSGarbageAndHalfHandshakes(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		echo := func(frame []byte, reply func(Reply)) {
			reply(&testReply{parts: []testPart{{b: sizePrefixed(append([]byte(nil), frame...))}}})
		}
		fx := startTLSServer(t, backend, echo, ListenerOptions{HandshakeTimeout: 300 * time.Millisecond})
		hello := clientHelloBytes(t)
		before := runtime.NumGoroutine()
		bad := [][]byte{
			[]byte("\x00\x00\x00\x0aGET / HTTP/1.1\r\n\r\n"),
			bytes.Repeat([]byte{0x16, 0x03, 0x01, 0xff, 0xff}, 100),
			hello[:len(hello)/2],
			nil, // connects and says nothing
		}
		var conns []net.Conn
		for _, b := range bad {
			c, err := net.Dial("tcp", fx.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.Write(b)
			conns = append(conns, c)
		}
		good, err := tls.Dial("tcp", fx.addr, fx.client)
		if err != nil {
			t.Fatal(err)
		}
		defer good.Close()
		writeFrame(t, good, []byte("still served"))
		if got := readFrameT(t, good); string(got) != "still served" {
			t.Fatalf("echo: %q", got)
		}
		for i, c := range conns {
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			if _, err := io.Copy(io.Discard, c); err != nil {
				t.Fatalf("bad client %d: not closed by the server: %v", i, err)
			}
		}
		fx.mu.Lock()
		defer fx.mu.Unlock()
		if len(fx.infos) != 1 {
			t.Fatalf("%d connections reached the handler, want only the good one", len(fx.infos))
		}
		// The handshake goroutines of the bad clients are gone: nothing
		// leaks but the good connection's own (std: one goroutine).
		for i := 0; runtime.NumGoroutine() > before+1; i++ {
			if i == 200 {
				t.Fatalf("%d goroutines, %d before the bad clients", runtime.NumGoroutine(), before)
			}
			time.Sleep(25 * time.Millisecond)
		}
	})
}

// clientHelloBytes captures the first flight of a real TLS client.
func clientHelloBytes(t *testing.T) []byte {
	a, b := net.Pipe()
	go func() {
		tls.Client(a, &tls.Config{InsecureSkipVerify: true}).Handshake()
	}()
	buf := make([]byte, 4096)
	b.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := b.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	a.Close()
	b.Close()
	if n < 10 {
		t.Fatal(fmt.Errorf("short client hello: %d", n))
	}
	return buf[:n]
}

// TestSealChunksBounded seals a 5 MiB file-region reply on the loop side
// and checks that no chunk of ciphertext exceeds one sealChunk of
// plaintext (plus record overhead), and that the client decrypts exactly
// the reply.
func TestSealChunksBounded(t *testing.T) {
	cert, pool := testCert(t, "broker")
	srvRaw, cliRaw := net.Pipe()
	defer srvRaw.Close()
	defer cliRaw.Close()
	mc := &memConn{sock: srvRaw}
	srv := tls.Server(mc, &tls.Config{Certificates: []tls.Certificate{cert}})
	cli := tls.Client(cliRaw, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
	errs := make(chan error, 1)
	go func() { errs <- cli.Handshake() }()
	if err := srv.Handshake(); err != nil {
		t.Fatal(err)
	}
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	mc.sock = nil
	layer := &tlsLayer{tc: srv, mc: mc}

	data := make([]byte, 5<<20)
	rand.Read(data)
	path := filepath.Join(t.TempDir(), "seg")
	os.WriteFile(path, data, 0o644)
	f, _ := os.Open(path)
	defer f.Close()
	reply := layer.seal(&testReply{parts: []testPart{{b: []byte("head")}, {f: f, off: 0, len: int64(len(data))}, {b: []byte("tail")}}})
	want := append(append([]byte("head"), data...), "tail"...)
	got := make(chan []byte, 1)
	go func() {
		buf := make([]byte, len(want))
		io.ReadFull(cli, buf)
		got <- buf
	}()
	chunks := 0
	for {
		b, _, _, _ := reply.PartAt(0)
		if len(b) > sealChunk+sealChunk/50 {
			t.Fatalf("a chunk of %d bytes of ciphertext", len(b))
		}
		if _, err := srvRaw.Write(b); err != nil {
			t.Fatal(err)
		}
		chunks++
		if !layer.reply.refill() {
			break
		}
	}
	reply.Release()
	if !bytes.Equal(<-got, want) || chunks < 20 {
		t.Fatalf("decrypted reply differs, or too few chunks (%d)", chunks)
	}
}

// BenchmarkFileRegionTLS is BenchmarkFileRegion over TLS 1.3
// (AES-128-GCM): the 4 MiB region is read with pread in 256 KiB chunks and
// encrypted instead of sendfile. The client decrypts in the same process,
// so the figure is both ends' cost on the machine.
//
//	go test -run XXX -bench 'FileRegion' ./netpoll/
func BenchmarkFileRegionTLS(b *testing.B) {
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
	cert, pool := testCert(b, "broker")
	for _, backend := range backends {
		b.Run(backend, func(b *testing.B) {
			if got, why := resolveBackend(backend); got != backend {
				b.Skip(why)
			}
			ln, err := Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			s, err := New(backend, handlerFunc(func(frame []byte, r func(Reply)) { r(reply) }), Options{})
			if err != nil {
				b.Fatal(err)
			}
			go s.ServeListener(ln, ListenerOptions{Name: "SSL", TLS: &tls.Config{Certificates: []tls.Certificate{cert}}})
			defer s.Shutdown(context.Background())
			c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			buf := make([]byte, size+4)
			req := sizePrefixed([]byte("x"))
			b.SetBytes(size)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := c.Write(req); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(c, buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestTLSShutdownClosesHandshakes: a client stuck mid-handshake does not
// outlive the server's Shutdown (its handshake timeout is an hour here).
func TestTLSShutdownClosesHandshakes(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		cert, _ := testCert(t, "broker")
		ln, err := Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		s, err := New(backend, echo, Options{})
		if err != nil {
			t.Fatal(err)
		}
		served := make(chan error, 1)
		go func() {
			served <- s.ServeListener(ln, ListenerOptions{Name: "SSL", HandshakeTimeout: time.Hour,
				TLS: &tls.Config{Certificates: []tls.Certificate{cert}}})
		}()
		c := dial(t, ln.Addr().String())
		c.Write(clientHelloBytes(t)[:10]) // a record header and the start of a hello
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		// EOF, or a reset if Shutdown came before the accept: closed either way.
		if _, err := io.Copy(io.Discard, c); err != nil && !isPeerGone(err) {
			t.Fatalf("the half-handshaken client was not closed by Shutdown: %v", err)
		}
		if err := <-served; err != nil {
			t.Fatal(err)
		}
	})
}
