package bench

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/record"
)

// Raw produce: the broker's produce path with the client taken out of the
// way. Every connection's request frame is built once, with valid record
// batches (CRC-32C set, no producer id, so the same bytes may be sent again
// and again), and then only its correlation id is patched before each send.
// Requests are pipelined up to RawInFlight per connection; responses are
// read by a second goroutine that looks at nothing but the correlation id
// and the error codes. What the client spends per request is one write,
// one read and a few dozen bytes of parsing, whatever the batch size.

// rawProduceVersion is Produce v8: the last version before flexible
// encoding, served by Kafka 4.4 and Sluice alike, which keeps the response
// parser a dozen lines.
const rawProduceVersion = 8

// rawProducer is one connection of a raw-produce run.
type rawProducer struct {
	r     *run
	addr  string
	frame []byte // the request, size prefix included; bytes 8-11 are the correlation id
	// recs and valueBytes are what one acknowledged request adds.
	recs, valueBytes int64
}

// rawProduce runs the connections ps until Duration has passed (from
// r.start) or Records are acknowledged, and returns the produce throughput.
func (r *run) rawProduce(ctx context.Context, ps []*rawProducer) (Throughput, error) {
	var wg sync.WaitGroup
	errs := make(chan error, len(ps))
	for _, p := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- p.run(ctx, r.cfg.Rate/float64(len(ps)))
		}()
	}
	wg.Wait()
	close(errs)
	tp := newThroughput(r.produced.Load(), r.producedBytes.Load(), time.Since(r.start))
	for err := range errs {
		if err != nil {
			return tp, err
		}
	}
	return tp, nil
}

// rawProducers splits the partitions over the connections: with fewer
// connections than partitions each takes every n-th partition (one batch of
// each per request), with more each writes one partition. All of a
// connection's partitions must share a leader.
func (r *run) rawProducers(ctx context.Context) ([]*rawProducer, error) {
	leaders, err := partitionLeaders(ctx, r.cfg.Brokers[0], r.cfg.Topic, r.tls)
	if err != nil {
		return nil, err
	}
	n := r.cfg.Producers
	acks := int16(1)
	if r.cfg.Acks == "all" || r.cfg.Acks == "-1" {
		acks = -1
	}
	batch, err := rawBatch(r.cfg, r.runID)
	if err != nil {
		return nil, err
	}
	var ps []*rawProducer
	for i := 0; i < n; i++ {
		var parts []int32
		for p := i % r.cfg.Partitions; p < r.cfg.Partitions; p += n {
			parts = append(parts, int32(p))
		}
		addr := leaders[parts[0]]
		for _, p := range parts {
			if leaders[p] == "" || leaders[p] != addr {
				return nil, fmt.Errorf("raw produce: partitions %v of one connection do not share a leader", parts)
			}
		}
		req := kmsg.NewPtrProduceRequest()
		req.Version = rawProduceVersion
		req.Acks = acks
		req.TimeoutMillis = int32(drainTimeout / time.Millisecond)
		t := kmsg.NewProduceRequestTopic()
		t.Topic = r.cfg.Topic
		for _, p := range parts {
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition, rp.Records = p, batch
			t.Partitions = append(t.Partitions, rp)
		}
		req.Topics = append(req.Topics, t)
		f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("sluice-bench-raw"))
		recs := int64(len(parts) * r.cfg.rawBatchRecords())
		p := &rawProducer{r: r, addr: addr, frame: f.AppendRequest(nil, req, 0),
			recs: recs, valueBytes: recs * int64(r.cfg.RecordSize)}
		if r.cfg.RawPing {
			ping := kmsg.NewPtrApiVersionsRequest()
			ping.Version = 0
			p.frame, p.recs, p.valueBytes = f.AppendRequest(nil, ping, 0), 1, 0
		}
		ps = append(ps, p)
	}
	return ps, nil
}

// rawBatch builds the one batch every request carries: RawBatchRecords
// values of RecordSize random bytes, no key, uncompressed.
func rawBatch(cfg Config, runID uint64) ([]byte, error) {
	pl := newPayloads(cfg.RecordSize, runID, cfg.Compressible, 0)
	h := record.NewHeader()
	h.FirstTimestamp = time.Now().UnixMilli()
	var b record.Builder
	b.Reset(h)
	for i := 0; i < cfg.rawBatchRecords(); i++ {
		b.Add(&record.Record{OffsetDelta: int32(i), Value: pl.next(time.Now())})
	}
	return b.AppendTo(nil)
}

// run sends until the run is over, at rate requests' worth of records per
// second (0: as fast as the in-flight window allows).
func (p *rawProducer) run(ctx context.Context, rate float64) error {
	c, err := dialConn(ctx, p.addr, p.r.tls)
	if err != nil {
		return err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	inflight := max(p.r.cfg.RawInFlight, 1)
	sent := make(chan sendTimes, inflight) // in request order
	window := make(chan struct{}, inflight)
	readErr := make(chan error, 1)
	readDone := make(chan struct{})
	go func() {
		defer close(readDone) // a reader that gave up must not leave the sender waiting
		readErr <- p.readResponses(c, sent, window)
	}()
	werr := p.send(ctx, c, rate, sent, window, readDone)
	close(sent)
	rerr := <-readErr
	if werr != nil && ctx.Err() == nil {
		return werr
	}
	return rerr
}

// sendTimes are when a request was due (its schedule, or when the sender
// got to it) and when it was written.
type sendTimes struct{ due, at time.Time }

// send writes requests while the run lasts; each waits for room in the
// window, which the reader frees as responses come back.
func (p *rawProducer) send(ctx context.Context, c net.Conn, rate float64, sent chan<- sendTimes, window chan<- struct{}, readDone <-chan struct{}) error {
	cfg := &p.r.cfg
	deadline := p.r.start.Add(cfg.Duration)
	for corr := int32(1); ctx.Err() == nil; corr++ {
		due := time.Now()
		if rate > 0 {
			due = p.r.start.Add(time.Duration(float64(int64(corr-1)*p.recs) / rate * float64(time.Second)))
			if wait := time.Until(due); wait > 0 {
				time.Sleep(wait)
			}
		}
		if cfg.Records <= 0 && time.Now().After(deadline) {
			return nil
		}
		if cfg.Records > 0 && p.r.claimed.Add(p.recs)-p.recs >= cfg.Records {
			return nil
		}
		binary.BigEndian.PutUint32(p.frame[8:], uint32(corr))
		select {
		case window <- struct{}{}: // blocks while the window is full
		case <-readDone:
			return errors.New("raw produce: the response reader stopped")
		}
		at := time.Now()
		if rate > 0 {
			// The client's own part of the latency: how late the send
			// left against its schedule (timer overshoot, scheduling).
			p.r.lag.Record(at.Sub(due))
		}
		if _, err := c.Write(p.frame); err != nil {
			return err
		}
		sent <- sendTimes{due, at} // never blocks: the window bounds it
		p.r.reqs.produce.Add(1)
	}
	return ctx.Err()
}

// readResponses reads one response per send time, in order, until sent is
// closed and drained.
func (p *rawProducer) readResponses(c net.Conn, sent <-chan sendTimes, window <-chan struct{}) error {
	br := bufio.NewReaderSize(c, 64<<10)
	var buf []byte
	corr := int32(0)
	for st := range sent {
		corr++
		var size [4]byte
		if _, err := io.ReadFull(br, size[:]); err != nil {
			return err
		}
		n := int(binary.BigEndian.Uint32(size[:]))
		if n < 4 || n > 1<<24 {
			return fmt.Errorf("raw produce: bad response size %d", n)
		}
		if cap(buf) < n {
			buf = make([]byte, n)
		}
		body := buf[:n]
		if _, err := io.ReadFull(br, body); err != nil {
			return err
		}
		if got := int32(binary.BigEndian.Uint32(body)); got != corr {
			return fmt.Errorf("raw produce: correlation id %d, want %d", got, corr)
		}
		now := time.Now()
		<-window
		if err := p.responseError(body[4:]); err != nil {
			p.r.fail(err)
			continue
		}
		p.r.ack.Record(now.Sub(st.due))
		p.r.rtt.Record(now.Sub(st.at))
		p.r.produced.Add(p.recs)
		p.r.producedBytes.Add(p.valueBytes)
	}
	return nil
}

// responseError checks a response body (after the correlation id).
func (p *rawProducer) responseError(b []byte) error {
	if !p.r.cfg.RawPing {
		return produceResponseError(b)
	}
	d := rawDecoder{b: b} // ApiVersions v0: error code first
	if code := d.int16(); d.bad || code != 0 {
		return fmt.Errorf("raw ping: ApiVersions error %d", code)
	}
	return nil
}

// produceResponseError returns the first partition error of a Produce v8
// response body, or an error if the body is malformed.
//
//	[topics: name string, [partitions: partition int32, error int16,
//	 base offset, log append time, log start offset int64,
//	 [record errors: int32, nullable string], error message nullable string]]
//	throttle int32
func produceResponseError(b []byte) error {
	d := rawDecoder{b: b}
	for t := d.int32(); t > 0 && !d.bad; t-- {
		d.skipString()
		for p := d.int32(); p > 0 && !d.bad; p-- {
			part, code := d.int32(), d.int16()
			d.skip(24)
			for e := d.int32(); e > 0 && !d.bad; e-- {
				d.skip(4)
				d.skipString()
			}
			d.skipString()
			if err := kerr.ErrorForCode(code); err != nil && !d.bad {
				return fmt.Errorf("raw produce partition %d: %w", part, err)
			}
		}
	}
	if d.bad {
		return errors.New("raw produce: malformed response")
	}
	return nil
}

// rawDecoder reads big-endian fields, remembering (not returning) running
// out of bytes.
type rawDecoder struct {
	b   []byte
	bad bool
}

func (d *rawDecoder) skip(n int) {
	if n < 0 || len(d.b) < n {
		d.bad, d.b = true, nil
		return
	}
	d.b = d.b[n:]
}

func (d *rawDecoder) int32() int32 {
	if len(d.b) < 4 {
		d.bad = true
		return 0
	}
	v := int32(binary.BigEndian.Uint32(d.b))
	d.b = d.b[4:]
	return v
}

func (d *rawDecoder) int16() int16 {
	if len(d.b) < 2 {
		d.bad = true
		return 0
	}
	v := int16(binary.BigEndian.Uint16(d.b))
	d.b = d.b[2:]
	return v
}

// skipString skips a (nullable) string with an int16 length.
func (d *rawDecoder) skipString() {
	if n := d.int16(); n > 0 {
		d.skip(int(n))
	}
}
