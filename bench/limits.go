package bench

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Limits are the machine's own ceilings, measured without a broker: what a
// broker's fetch path and produce path could reach at best.
type Limits struct {
	// SendfileMBps is a page-cached file sent with sendfile(2) to a
	// 127.0.0.1 TCP socket whose reader discards it.
	SendfileMBps float64 `json:"sendfile_loopback_mb_per_sec"`
	// WriteMBps is sequential 1 MiB write(2)s to a file on the data disk
	// (into the page cache, as brokers write); WriteSyncMBps includes the
	// closing fdatasync.
	WriteMBps     float64 `json:"sequential_write_mb_per_sec"`
	WriteSyncMBps float64 `json:"sequential_write_fsync_mb_per_sec"`
	// SendfileCPUPerGB is the CPU seconds (user+system) the sending thread
	// of the sendfile stream spent per GB sent: the kernel's cost of a
	// zero-copy fetch over loopback without a broker. It is a scale, not a
	// floor: on loopback each end's TCP work runs in whichever thread
	// sends or reads at the moment (a window update read by one end
	// transmits what the other queued), so the split between the two ends
	// moves with their timing.
	SendfileCPUPerGB float64 `json:"sendfile_loopback_cpu_s_per_gb,omitempty"`
	// ReceiveWriteCPUPerGB is the CPU seconds per GB of a thread that
	// reads a loopback TCP stream into a 1 MiB buffer and writes each read
	// to a file (page cache): the kernel's part of a produce path (socket
	// copy plus page-cache copy) without a broker, at ReceiveWriteMBps;
	// a scale like SendfileCPUPerGB.
	ReceiveWriteCPUPerGB float64 `json:"receive_write_cpu_s_per_gb,omitempty"`
	ReceiveWriteMBps     float64 `json:"receive_write_mb_per_sec,omitempty"`
}

// MeasureLimits measures both limits using a scratch file in dir, for about
// d each.
func MeasureLimits(dir string, fileBytes int64, d time.Duration) (Limits, error) {
	var l Limits
	var err error
	if l.WriteMBps, l.WriteSyncMBps, err = SequentialWrite(dir, fileBytes, d); err != nil {
		return l, fmt.Errorf("sequential write: %w", err)
	}
	if l.SendfileMBps, l.SendfileCPUPerGB, err = SendfileLoopback(dir, fileBytes, d); err != nil {
		return l, fmt.Errorf("loopback sendfile: %w", err)
	}
	if l.ReceiveWriteMBps, l.ReceiveWriteCPUPerGB, err = ReceiveWrite(dir, fileBytes, d); err != nil {
		return l, fmt.Errorf("loopback receive and write: %w", err)
	}
	return l, nil
}

// threadCPU is the calling thread's CPU time so far (user+system); the
// caller is locked to its OS thread.
func threadCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuPerGB is CPU seconds per GB (1e9 bytes) moved.
func cpuPerGB(cpu time.Duration, bytes int64) float64 {
	if bytes <= 0 {
		return 0
	}
	return cpu.Seconds() / (float64(bytes) / 1e9)
}

const limitChunk = 1 << 20

// limitSendBuffer is SO_SNDBUF of the loopback sendfile stream: the
// brokers' socket.send.buffer.bytes.
const limitSendBuffer = 102400

func randomChunk() []byte {
	b := make([]byte, limitChunk)
	_, _ = rand.NewChaCha8([32]byte{'l', 'i', 'm', 'i', 't'}).Read(b)
	return b
}

// SequentialWrite writes 1 MiB chunks to a new file in dir until maxBytes or
// d, and returns MB/s into the page cache and MB/s including the final
// fdatasync. The file is removed.
func SequentialWrite(dir string, maxBytes int64, d time.Duration) (buffered, synced float64, err error) {
	f, err := os.CreateTemp(dir, "sluice-bench-write-*")
	if err != nil {
		return 0, 0, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	chunk := randomChunk()
	var n int64
	start := time.Now()
	for n < maxBytes && time.Since(start) < d {
		w, err := f.Write(chunk)
		if err != nil {
			return 0, 0, err
		}
		n += int64(w)
	}
	wrote := time.Since(start)
	if err := unix.Fdatasync(int(f.Fd())); err != nil {
		return 0, 0, err
	}
	all := time.Since(start)
	return float64(n) / wrote.Seconds() / 1e6, float64(n) / all.Seconds() / 1e6, nil
}

// SendfileLoopback fills a fileBytes file in dir (synced, so its pages are
// clean and cached like a broker's closed segments), then sends it over and
// over with sendfile(2) to a 127.0.0.1 TCP socket for d, and returns the MB/s
// the discarding reader received and the sending thread's CPU seconds per
// GB sent.
//
// Both ends use blocking sockets on threads of their own, outside Go's
// netpoller: this is the machine's ceiling, not a Go program's.
func SendfileLoopback(dir string, fileBytes int64, d time.Duration) (mbps, cpuGB float64, err error) {
	f, err := os.CreateTemp(dir, "sluice-bench-sendfile-*")
	if err != nil {
		return 0, 0, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	chunk := randomChunk()
	for n := int64(0); n < fileBytes; n += limitChunk {
		if _, err := f.Write(chunk); err != nil {
			return 0, 0, err
		}
	}
	if err := f.Sync(); err != nil {
		return 0, 0, err
	}
	size := fileBytes / limitChunk * limitChunk

	sender, reader, err := loopbackPair()
	if err != nil {
		return 0, 0, err
	}
	defer sender.close()
	var received atomic.Int64
	readDone := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		defer reader.close()
		buf := make([]byte, limitChunk)
		for {
			n, err := unix.Read(reader.fd, buf)
			if n > 0 {
				received.Add(int64(n))
			}
			if n == 0 || (err != nil && err != unix.EINTR) {
				readDone <- err
				return
			}
		}
	}()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	// The brokers' send buffer (socket.send.buffer.bytes, 102400 in both
	// Sluice and Kafka). Left to the kernel's autotuning (4 MiB on
	// loopback) this stream moved about half what both brokers then did
	// through one fetch connection (BENCHMARKS.md, "Socket receive buffer
	// and the fetch path"): it measured a slower setting, not a ceiling.
	if err := unix.SetsockoptInt(sender.fd, unix.SOL_SOCKET, unix.SO_SNDBUF, limitSendBuffer); err != nil {
		return 0, 0, err
	}
	src := int(f.Fd())
	cpu0 := threadCPU()
	start := time.Now()
	var off int64
	var sendErr error
	for time.Since(start) < d {
		if off >= size {
			off = 0
		}
		if _, err := unix.Sendfile(sender.fd, src, &off, int(min(size-off, 16*limitChunk))); err != nil && err != unix.EINTR {
			sendErr = err
			break
		}
	}
	elapsed := time.Since(start)
	cpu := threadCPU() - cpu0
	got := received.Load() // what arrived within d
	_ = unix.Shutdown(sender.fd, unix.SHUT_WR)
	if err := <-readDone; err != nil && sendErr == nil {
		sendErr = err
	}
	if sendErr != nil {
		return 0, 0, sendErr
	}
	return float64(got) / elapsed.Seconds() / 1e6, cpuPerGB(cpu, got), nil
}

// ReceiveWrite streams 1 MiB chunks over a 127.0.0.1 TCP connection for d
// to a thread that reads them into a 1 MiB buffer and writes every read to
// a new file in dir (page cache; emptied at fileBytes, so every write
// lands on fresh pages as a broker's appends do), and returns the MB/s
// written and that thread's CPU seconds per GB: a produce path's kernel
// part without a broker (socket copy into user space, then the copy into
// the page cache; Sluice and Kafka both do these two). The file is removed.
func ReceiveWrite(dir string, fileBytes int64, d time.Duration) (mbps, cpuGB float64, err error) {
	f, err := os.CreateTemp(dir, "sluice-bench-recvwrite-*")
	if err != nil {
		return 0, 0, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	sender, reader, err := loopbackPair()
	if err != nil {
		return 0, 0, err
	}
	sendDone := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		defer sender.close()
		chunk := randomChunk()
		for {
			if _, err := unix.Write(sender.fd, chunk); err != nil && err != unix.EINTR {
				sendDone <- err // the reader closed its end
				return
			}
		}
	}()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	written, cpu, elapsed, readErr := receiveWriteFor(reader.fd, int(f.Fd()), fileBytes, d)
	reader.close() // resets the sender out of a write the full window blocks
	if err := <-sendDone; readErr == nil && !errors.Is(err, unix.EPIPE) && !errors.Is(err, unix.ECONNRESET) {
		readErr = err
	}
	if readErr != nil {
		return 0, 0, readErr
	}
	return float64(written) / elapsed.Seconds() / 1e6, cpuPerGB(cpu, written), nil
}

// receiveWriteFor is ReceiveWrite's reading thread: read from fd, pwrite
// to dst, for d. It returns the bytes written, the thread's CPU time and
// the time taken.
func receiveWriteFor(fd, dst int, fileBytes int64, d time.Duration) (written int64, cpu, elapsed time.Duration, err error) {
	buf := make([]byte, limitChunk)
	var off int64
	cpu0 := threadCPU()
	start := time.Now()
	for time.Since(start) < d {
		n, err := unix.Read(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n == 0 {
			return 0, 0, 0, fmt.Errorf("read: %v (n=%d)", err, n)
		}
		if off+int64(n) > fileBytes {
			// Start over on fresh pages, as an appending broker writes;
			// the truncation's freeing is not the produce path's cost.
			t0 := threadCPU()
			if err := unix.Ftruncate(dst, 0); err != nil {
				return 0, 0, 0, err
			}
			cpu0 += threadCPU() - t0
			off = 0
		}
		w, err := unix.Pwrite(dst, buf[:n], off)
		if err != nil {
			return 0, 0, 0, err
		}
		off += int64(w)
		written += int64(w)
	}
	return written, threadCPU() - cpu0, time.Since(start), nil
}

// blockingSocket is one end of a loopback TCP connection as a blocking
// descriptor, outside Go's netpoller.
type blockingSocket struct {
	fd   int
	file *os.File // owns fd
}

func (s blockingSocket) close() { s.file.Close() }

// loopbackPair opens a 127.0.0.1 TCP connection and returns both ends as
// blocking descriptors (the net.Conns they were made from are closed: each
// descriptor is the socket's only one, so closing it resets the peer).
func loopbackPair() (dialed, accepted blockingSocket, err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return dialed, accepted, err
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return dialed, accepted, err
	}
	a, err := ln.Accept()
	if err != nil {
		c.Close()
		return dialed, accepted, err
	}
	if dialed, err = blockingSocketOf(c); err == nil {
		if accepted, err = blockingSocketOf(a); err != nil {
			dialed.close()
		}
	}
	return dialed, accepted, err
}

// blockingSocketOf returns a blocking duplicate of c's socket and closes c.
func blockingSocketOf(c net.Conn) (blockingSocket, error) {
	defer c.Close()
	file, err := c.(*net.TCPConn).File()
	if err != nil {
		return blockingSocket{}, err
	}
	fd := int(file.Fd())
	if err := unix.SetNonblock(fd, false); err != nil {
		file.Close()
		return blockingSocket{}, err
	}
	return blockingSocket{fd, file}, nil
}
