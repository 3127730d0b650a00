package main

import (
	"encoding/binary"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Bulk transfers: produce, fetch of page-cached data, and the raw loopback
// sendfile of the same file bytes that fetch is compared with.

const (
	batchRecords = 1000
	recordSize   = 1000
	fetchBatches = 256 // ~256 MB in the fetch topic
	fetchSpan    = 8   // batches per fetch response (8 MB)
	bulkConns    = 2
)

// loadFetchTopic fills topic "fetch" with fetchBatches batches and returns
// the size of one batch (all are equal, stored byte for byte).
func loadFetchTopic(addr string) (int, error) {
	if err := createTopic(addr, "fetch", nil); err != nil {
		return 0, err
	}
	batch := recordBatch(batchRecords, recordSize)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	req := encode(produceRequest("fetch", batch))
	buf := make([]byte, 4096)
	for i := 0; i < fetchBatches; i++ {
		if _, err := c.Write(req); err != nil {
			return 0, err
		}
		if buf, err = readResponse(c, buf); err != nil {
			return 0, err
		}
	}
	return len(batch), nil
}

// bulkResult is one timed bulk run.
type bulkResult struct {
	MBps   float64 // 1e6 bytes per second
	CPUms  float64 // broker CPU per GB (ms), for fetch
	Bytes  int64
	Second float64
}

// runFetch has bulkConns consumers fetch fetchSpan-batch windows of the
// page-cached topic for d and measures MB/s and the broker's CPU per GB.
func runFetch(b *brokerProc, d time.Duration, batchSize int) (bulkResult, error) {
	var reqs [][]byte
	for k := 0; k+fetchSpan <= fetchBatches; k += fetchSpan {
		reqs = append(reqs, encode(fetchRequest("fetch", int64(k*batchRecords), int32(fetchSpan*batchSize))))
	}
	return bulkRun(b, d, func(c net.Conn, i int) []byte { return reqs[i%len(reqs)] })
}

// runProduce has bulkConns producers send one ~1 MB batch per request
// (acks=1) for d.
func runProduce(b *brokerProc, d time.Duration) (bulkResult, error) {
	req := encode(produceRequest("produce", recordBatch(batchRecords, recordSize)))
	return bulkRun(b, d, func(net.Conn, int) []byte { return req })
}

// bulkRun drives closed request/response loops on bulkConns connections
// and counts response bytes (fetch) or request bytes (produce, where the
// request is the big side).
func bulkRun(b *brokerProc, d time.Duration, next func(net.Conn, int) []byte) (bulkResult, error) {
	var total atomic.Int64
	var firstErr atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < bulkConns; w++ {
		c, err := net.Dial("tcp", b.addr)
		if err != nil {
			return bulkResult{}, err
		}
		defer c.Close()
		wg.Add(1)
		go func(w int, c net.Conn) {
			defer wg.Done()
			buf := make([]byte, 1<<20)
			for i := w * 7; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				req := next(c, i)
				if _, err := c.Write(req); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				n, err := drainFrame(c, buf)
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				total.Add(max(n, int64(len(req))))
			}
		}(w, c)
	}
	time.Sleep(time.Second) // warm-up
	bytes0, cpu0, t0 := total.Load(), b.cpu(), time.Now()
	time.Sleep(d)
	bytes1, cpu1, el := total.Load(), b.cpu(), time.Since(t0)
	close(stop)
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return bulkResult{}, err
	}
	moved := bytes1 - bytes0
	return bulkResult{
		MBps:   float64(moved) / el.Seconds() / 1e6,
		CPUms:  float64((cpu1 - cpu0).Milliseconds()) / (float64(moved) / 1e9),
		Bytes:  moved,
		Second: el.Seconds(),
	}, nil
}

// drainFrame reads one size-prefixed frame through buf and returns its
// size including the prefix.
func drainFrame(r io.Reader, buf []byte) (int64, error) {
	if _, err := io.ReadFull(r, buf[:4]); err != nil {
		return 0, err
	}
	n := int64(binary.BigEndian.Uint32(buf))
	for left := n; left > 0; {
		k, err := r.Read(buf[:min(int64(len(buf)), left)])
		if err != nil {
			return 0, err
		}
		left -= int64(k)
	}
	return n + 4, nil
}

// rawSendfile serves the same windows of the same segment file over
// loopback with nothing but a 4-byte request, a 4-byte size and sendfile:
// the ceiling a fetch can approach on this machine.
type rawSendfile struct {
	ln        net.Listener
	file      *os.File
	batchSize int64
}

func startRawSendfile(dataDir string, batchSize int) (*rawSendfile, error) {
	f, err := os.Open(filepath.Join(dataDir, "fetch-0", "00000000000000000000.log"))
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Close()
		return nil, err
	}
	r := &rawSendfile{ln: ln, file: f, batchSize: int64(batchSize)}
	go r.serve()
	return r, nil
}

func (r *rawSendfile) close() { r.ln.Close(); r.file.Close() }

func (r *rawSendfile) serve() {
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		go r.conn(c.(*net.TCPConn))
	}
}

func (r *rawSendfile) conn(c *net.TCPConn) {
	defer c.Close()
	f, err := c.File() // blocking fd
	if err != nil {
		return
	}
	defer f.Close()
	fd := int(f.Fd())
	var req [4]byte
	for {
		if _, err := io.ReadFull(f, req[:]); err != nil {
			return
		}
		k := int64(binary.BigEndian.Uint32(req[:]))
		off, n := k*r.batchSize, int64(fetchSpan)*r.batchSize
		var hdr [4]byte
		binary.BigEndian.PutUint32(hdr[:], uint32(n))
		if _, err := unix.Write(fd, hdr[:]); err != nil {
			return
		}
		for n > 0 {
			w, err := unix.Sendfile(fd, int(r.file.Fd()), &off, int(n))
			if err != nil || w == 0 {
				return
			}
			n -= int64(w)
		}
	}
}

// runRaw measures the raw transfer like runFetch measures the broker.
func runRaw(r *rawSendfile, d time.Duration) (bulkResult, error) {
	fake := &brokerProc{addr: r.ln.Addr().String(), cmd: nil}
	var reqs [][]byte
	for k := 0; k+fetchSpan <= fetchBatches; k += fetchSpan {
		reqs = append(reqs, binary.BigEndian.AppendUint32(nil, uint32(k)))
	}
	res, err := bulkRun(fake, d, func(c net.Conn, i int) []byte { return reqs[i%len(reqs)] })
	res.CPUms = 0
	return res, err
}
