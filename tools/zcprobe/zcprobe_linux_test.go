package zcprobe

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// TestCountsSendfileApartFromWrites sends 4 MiB from a file with sendfile
// and 1 MiB from memory with write over loopback TCP from this very process,
// and expects the probe to tell them apart. It runs only as root on a kernel
// that lets us load BPF.
func TestCountsSendfileApartFromWrites(t *testing.T) {
	p, err := Attach(os.Getpid())
	if errors.Is(err, ErrNeedRoot) {
		t.Skip(err)
	}
	if err != nil {
		t.Skipf("BPF unavailable here: %v", err)
	}
	defer p.Close()
	t.Logf("attached: %v", p.Attached())
	if _, err := os.Stat("/sys/kernel/tracing/events/io_uring/io_uring_complete"); err == nil {
		if !slices.Contains(p.Attached(), "io_uring:io_uring_complete") {
			t.Errorf("io_uring tracepoints exist but were not attached")
		}
	}

	const fileBytes, memBytes = 4 << 20, 1 << 20
	path := filepath.Join(t.TempDir(), "seg")
	if err := os.WriteFile(path, bytes.Repeat([]byte("z"), fileBytes), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan int64, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- -1
			return
		}
		n, _ := io.Copy(io.Discard, c)
		c.Close()
		got <- n
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	before, err := p.Counts()
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := conn.(*net.TCPConn).SyscallConn()
	var off int64
	for off < fileBytes {
		var serr error
		if err := raw.Write(func(fd uintptr) bool {
			_, serr = unix.Sendfile(int(fd), int(f.Fd()), &off, fileBytes-int(off))
			return serr != unix.EAGAIN
		}); err != nil {
			t.Fatal(err)
		}
		if serr != nil {
			t.Fatal(serr)
		}
	}
	if _, err := conn.Write(make([]byte, memBytes)); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	if n := <-got; n != fileBytes+memBytes {
		t.Fatalf("receiver got %d bytes", n)
	}
	after, err := p.Counts()
	if err != nil {
		t.Fatal(err)
	}
	c := after.Sub(before)
	m, why := p.Method()
	t.Logf("method: %s (%s)", m, why)
	t.Logf("counts: %+v; fraction %.4f", c, c.Fraction())
	if c.SendfileBytes != fileBytes {
		t.Errorf("sendfile bytes = %d, want %d", c.SendfileBytes, fileBytes)
	}
	if c.WriteBytes < memBytes {
		t.Errorf("write-family bytes = %d, want at least %d", c.WriteBytes, memBytes)
	}
	if c.SocketWriteBytes+c.GoneWriteBytes < memBytes {
		t.Errorf("socket write bytes = %d (+%d on closed fds), want at least %d", c.SocketWriteBytes, c.GoneWriteBytes, memBytes)
	}
	if c.Method == MethodTCP {
		if c.TCPZeroCopyBytes != fileBytes || c.TCPCopiedBytes != memBytes {
			t.Errorf("tcp split: zero-copy %d copied %d, want %d and %d", c.TCPZeroCopyBytes, c.TCPCopiedBytes, fileBytes, memBytes)
		}
		if f := c.Fraction(); f != 0.8 {
			t.Errorf("fraction %v, want 0.8", f)
		}
	}
}

func TestListenerPID(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	pid, err := ListenerPID(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if pid != os.Getpid() {
		t.Fatalf("pid %d, want %d", pid, os.Getpid())
	}
}

func TestFractionFallsBackToSyscalls(t *testing.T) {
	c := Counts{SendfileBytes: 99, WriteBytes: 1001, SocketWriteBytes: 1, FileWriteBytes: 1000, Method: MethodSyscalls}
	if f := c.Fraction(); f != 0.99 {
		t.Fatalf("fraction %v", f)
	}
	if (Counts{}).Fraction() != 0 {
		t.Fatal("empty counts should give 0")
	}
}
