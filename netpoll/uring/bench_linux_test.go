package uring

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkFileToSocket compares ways to send a page-cached file region to
// a TCP socket over loopback: sendfile(2) from the calling thread, and
// io_uring splices file→pipe→socket, linked, in pipe-sized steps (which the
// kernel runs on io-wq worker threads, since a regular file cannot be
// spliced without blocking). The uring backend uses sendfile; this is why.
//
//	go test -run XXX -bench FileToSocket ./netpoll/uring/
func BenchmarkFileToSocket(b *testing.B) {
	const size = 8 << 20
	path := filepath.Join(b.TempDir(), "seg")
	if err := os.WriteFile(path, make([]byte, size), 0o644); err != nil {
		b.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	drain := func(fd int) {
		buf := make([]byte, 1<<20)
		for {
			if n, err := unix.Read(fd, buf); n <= 0 || err != nil {
				return
			}
		}
	}
	b.Run("sendfile", func(b *testing.B) {
		a, c := tcpPair(b)
		go drain(c)
		b.SetBytes(size)
		defer reportCPU(b, size)()
		for i := 0; i < b.N; i++ {
			off := int64(0)
			for off < size {
				if _, err := unix.Sendfile(a, int(f.Fd()), &off, int(size-off)); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	for _, pipeSize := range []int{64 << 10, 1 << 20} {
		b.Run("uring-splice-pipe="+itoa(pipeSize>>10)+"KiB", func(b *testing.B) {
			r := newRing(b, Params{Entries: 8})
			if p, _ := r.Probe(); !p.Supports(OpSplice) {
				b.Skip("no IORING_OP_SPLICE")
			}
			a, c := tcpPair(b)
			go drain(c)
			var pfd [2]int
			if err := unix.Pipe2(pfd[:], unix.O_CLOEXEC); err != nil {
				b.Fatal(err)
			}
			defer unix.Close(pfd[0])
			defer unix.Close(pfd[1])
			if _, err := unix.FcntlInt(uintptr(pfd[1]), unix.F_SETPIPE_SZ, pipeSize); err != nil {
				b.Skipf("F_SETPIPE_SZ %d: %v", pipeSize, err)
			}
			b.SetBytes(size)
			defer reportCPU(b, size)()
			for i := 0; i < b.N; i++ {
				for off := int64(0); off < size; {
					n := uint32(min(size-off, int64(pipeSize)-off%4096))
					s := r.GetSQE()
					s.PrepSplice(int(f.Fd()), off, pfd[1], -1, n, 0)
					s.Flags |= SQEIOLink
					s.UserData = 1
					s = r.GetSQE()
					s.PrepSplice(pfd[0], -1, a, -1, n, 0)
					s.UserData = 2
					got := waitCQEs(b, r, 2)
					if got[1].Res != int32(n) || got[2].Res != int32(n) {
						b.Fatalf("splice %d: in %d out %d", n, got[1].Res, got[2].Res)
					}
					off += int64(n)
				}
			}
		})
	}
}

// reportCPU adds the process's CPU time per GB sent (reader included, and
// io-wq workers, which count as the process's threads).
func reportCPU(b *testing.B, size int) func() {
	var r0 unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &r0)
	return func() {
		var r1 unix.Rusage
		unix.Getrusage(unix.RUSAGE_SELF, &r1)
		cpu := float64(r1.Utime.Nano()+r1.Stime.Nano()-r0.Utime.Nano()-r0.Stime.Nano()) / 1e6
		b.ReportMetric(cpu/(float64(b.N)*float64(size)/1e9), "cpu-ms/GB")
	}
}

// BenchmarkSendLarge compares IORING_OP_SEND with IORING_OP_SEND_ZC for a
// 1 MiB in-memory buffer over loopback. Loopback delivery copies zero-copy
// pages anyway (the receiving socket cannot hold the sender's pages), so
// SEND_ZC only adds its notification; Sluice's in-memory reply parts are
// response headers of a few KiB at most (record bytes are file regions),
// so the backend sends them with plain send/sendmsg.
//
//	go test -run XXX -bench SendLarge ./netpoll/uring/
func BenchmarkSendLarge(b *testing.B) {
	const size = 1 << 20
	buf := make([]byte, size)
	for _, zc := range []bool{false, true} {
		name := "send"
		if zc {
			name = "send_zc"
		}
		b.Run(name, func(b *testing.B) {
			r := newRing(b, Params{Entries: 8})
			if p, _ := r.Probe(); zc && !p.Supports(OpSendZC) {
				b.Skip("no IORING_OP_SEND_ZC")
			}
			a, c := tcpPair(b)
			go func() {
				rb := make([]byte, 1<<20)
				for {
					if n, err := unix.Read(c, rb); n <= 0 || err != nil {
						return
					}
				}
			}()
			b.SetBytes(size)
			defer reportCPU(b, size)()
			for i := 0; i < b.N; i++ {
				for off := 0; off < size; {
					s := r.GetSQE()
					if zc {
						s.PrepSendZC(a, buf[off:], unix.MSG_NOSIGNAL)
					} else {
						s.PrepSend(a, buf[off:], unix.MSG_NOSIGNAL)
					}
					s.UserData = 1
					res := waitCQE(b, r)
					if res.Res <= 0 {
						b.Fatalf("send: %d", res.Res)
					}
					if zc && res.More() { // wait for the notification
						if n := waitCQE(b, r); n.Flags&CQEFNotif == 0 {
							b.Fatalf("expected a notification, got %+v", n)
						}
					}
					off += int(res.Res)
				}
			}
		})
	}
}
