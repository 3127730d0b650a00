package bench

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Raw fetch sizing: a response carries up to rawPartitionMaxBytes per
// partition, as a consumer with a large max.partition.fetch.bytes would ask.
const (
	rawPartitionMaxBytes = 4 << 20
	rawMaxBytes          = 50 << 20
)

// RawFetch reads every partition of topic from start up to end with hand-made
// Fetch requests over n connections (partitions split between them) and
// returns the bytes of the response frames per second (over TLS if tc is
// not nil). Record batches are
// never decoded: only their 61-byte headers are looked at, to learn where
// the next fetch starts. records and bytes are raised as data arrives.
func RawFetch(ctx context.Context, brokers []string, tc *tls.Config, topic string, n int, start, end map[int32]int64, records, bytes *atomic.Int64) (Throughput, error) {
	leaders, err := partitionLeaders(ctx, brokers[0], topic, tc)
	if err != nil {
		return Throughput{}, err
	}
	type job struct {
		addr  string
		parts map[int32]int64
	}
	var jobs []job
	for i := 0; i < n; i++ {
		byLeader := map[string]map[int32]int64{}
		for p, off := range start {
			if int(p)%n != i || off >= end[p] {
				continue
			}
			addr, ok := leaders[p]
			if !ok {
				return Throughput{}, fmt.Errorf("raw fetch: partition %d has no leader", p)
			}
			if byLeader[addr] == nil {
				byLeader[addr] = map[int32]int64{}
			}
			byLeader[addr][p] = off
		}
		for addr, parts := range byLeader {
			jobs = append(jobs, job{addr, parts})
		}
	}
	t0 := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, len(jobs))
	var recs0, bytes0 = records.Load(), bytes.Load()
	for _, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- rawFetchLoop(ctx, j.addr, tc, topic, j.parts, end, records, bytes)
		}()
	}
	wg.Wait()
	close(errs)
	tp := newThroughput(records.Load()-recs0, bytes.Load()-bytes0, time.Since(t0))
	for err := range errs {
		if err != nil {
			return tp, err
		}
	}
	return tp, nil
}

// rawConn is one framed Kafka connection.
type rawConn struct {
	c    net.Conn
	r    *bufio.Reader
	f    *kmsg.RequestFormatter
	corr int32
	out  []byte
	in   []byte
}

func dialRaw(ctx context.Context, addr string, tc *tls.Config) (*rawConn, error) {
	c, err := dialConn(ctx, addr, tc)
	if err != nil {
		return nil, err
	}
	return &rawConn{c: c, r: bufio.NewReaderSize(c, 1<<20), f: kmsg.NewRequestFormatter(kmsg.FormatterClientID("sluice-bench-raw"))}, nil
}

// roundTrip sends req and returns the response body (after the response
// header), valid until the next call.
func (rc *rawConn) roundTrip(req kmsg.Request) ([]byte, error) {
	rc.corr++
	rc.out = rc.f.AppendRequest(rc.out[:0], req, rc.corr)
	if _, err := rc.c.Write(rc.out); err != nil {
		return nil, err
	}
	var size [4]byte
	if _, err := io.ReadFull(rc.r, size[:]); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint32(size[:]))
	if n < 4 || n > 1<<30 {
		return nil, fmt.Errorf("raw fetch: bad response size %d", n)
	}
	if cap(rc.in) < n {
		rc.in = make([]byte, n)
	}
	body := rc.in[:n]
	if _, err := io.ReadFull(rc.r, body); err != nil {
		return nil, err
	}
	if got := int32(binary.BigEndian.Uint32(body)); got != rc.corr {
		return nil, fmt.Errorf("raw fetch: correlation id %d, want %d", got, rc.corr)
	}
	body = body[4:]
	// Flexible responses carry a tagged-field section in the header
	// (ApiVersions never does, whatever its version).
	if req.IsFlexible() && req.Key() != kmsg.ApiVersions.Int16() {
		var err error
		if body, err = skipTags(body); err != nil {
			return nil, err
		}
	}
	return body, nil
}

func skipTags(b []byte) ([]byte, error) {
	n, w := binary.Uvarint(b)
	if w <= 0 {
		return nil, errors.New("raw fetch: bad tag count")
	}
	b = b[w:]
	for i := uint64(0); i < n; i++ {
		if _, w = binary.Uvarint(b); w <= 0 {
			return nil, errors.New("raw fetch: bad tag")
		}
		b = b[w:]
		size, w2 := binary.Uvarint(b)
		if w2 <= 0 || uint64(len(b)-w2) < size {
			return nil, errors.New("raw fetch: bad tag size")
		}
		b = b[w2+int(size):]
	}
	return b, nil
}

// fetchVersion picks the highest Fetch version in 4..12 the broker serves:
// 12 is the last that names topics (13 on use topic ids).
func fetchVersion(rc *rawConn) (int16, error) {
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 0
	body, err := rc.roundTrip(req)
	if err != nil {
		return 0, err
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	if err := resp.ReadFrom(body); err != nil {
		return 0, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return 0, err
	}
	for _, k := range resp.ApiKeys {
		if k.ApiKey == kmsg.Fetch.Int16() {
			v := min(k.MaxVersion, 12)
			if v < 4 || v < k.MinVersion {
				return 0, fmt.Errorf("raw fetch: broker serves Fetch v%d-%d, need one of 4-12", k.MinVersion, k.MaxVersion)
			}
			return v, nil
		}
	}
	return 0, errors.New("raw fetch: broker does not serve Fetch")
}

// partitionLeaders maps each partition of topic to its leader's address.
func partitionLeaders(ctx context.Context, seed, topic string, tc *tls.Config) (map[int32]string, error) {
	rc, err := dialRaw(ctx, seed, tc)
	if err != nil {
		return nil, err
	}
	defer rc.c.Close()
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 4
	t := kmsg.NewMetadataRequestTopic()
	t.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, t)
	body, err := rc.roundTrip(req)
	if err != nil {
		return nil, err
	}
	resp := kmsg.NewPtrMetadataResponse()
	resp.Version = req.Version
	if err := resp.ReadFrom(body); err != nil {
		return nil, err
	}
	addrs := map[int32]string{}
	for _, b := range resp.Brokers {
		addrs[b.NodeID] = net.JoinHostPort(b.Host, fmt.Sprint(b.Port))
	}
	out := map[int32]string{}
	for _, mt := range resp.Topics {
		if err := kerr.ErrorForCode(mt.ErrorCode); err != nil {
			return nil, fmt.Errorf("metadata %s: %w", topic, err)
		}
		for _, p := range mt.Partitions {
			if a, ok := addrs[p.Leader]; ok {
				out[p.Partition] = a
			}
		}
	}
	return out, nil
}

// rawFetchLoop fetches parts (partition → next offset) from one broker until
// each reaches end.
func rawFetchLoop(ctx context.Context, addr string, tc *tls.Config, topic string, parts map[int32]int64, end map[int32]int64, records, bytes *atomic.Int64) error {
	rc, err := dialRaw(ctx, addr, tc)
	if err != nil {
		return err
	}
	defer rc.c.Close()
	stop := context.AfterFunc(ctx, func() { rc.c.Close() })
	defer stop()
	version, err := fetchVersion(rc)
	if err != nil {
		return err
	}
	req := kmsg.NewPtrFetchRequest()
	req.Version = version
	req.ReplicaID = -1
	req.MaxWaitMillis = 500
	req.MinBytes = 1
	req.MaxBytes = rawMaxBytes
	req.SessionEpoch = -1 // no fetch session: every request is full
	resp := kmsg.NewPtrFetchResponse()
	deadline := time.Now().Add(drainTimeout)
	for len(parts) > 0 {
		if time.Now().After(deadline) {
			return fmt.Errorf("raw fetch: %d partitions unfinished after %v", len(parts), drainTimeout)
		}
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = topic
		for p, off := range parts {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition = p
			rp.FetchOffset = off
			rp.PartitionMaxBytes = rawPartitionMaxBytes
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics[:0], rt)
		body, err := rc.roundTrip(req)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		bytes.Add(int64(len(body) + 8)) // + size prefix and correlation id
		resp.Default()
		resp.Version = version
		if err := resp.UnsafeReadFrom(body); err != nil {
			return fmt.Errorf("raw fetch: response: %w", err)
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return fmt.Errorf("raw fetch: %w", err)
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					return fmt.Errorf("raw fetch %s/%d: %w", topic, p.Partition, err)
				}
				next, n := skipBatches(p.RecordBatches, parts[p.Partition])
				records.Add(n)
				if next >= end[p.Partition] {
					delete(parts, p.Partition)
				} else {
					parts[p.Partition] = next
				}
			}
		}
	}
	return nil
}

// skipBatches walks record-batch headers without decoding records and
// returns the offset after the last whole batch (at least from) and the
// records it holds. A batch cut off at the end of the response is left for
// the next fetch.
//
//	batch: baseOffset int64 | batchLength int32 | … | lastOffsetDelta int32 at byte 23 | …
func skipBatches(b []byte, from int64) (next, records int64) {
	next = from
	for len(b) >= 27 {
		base := int64(binary.BigEndian.Uint64(b[0:8]))
		size := int(int32(binary.BigEndian.Uint32(b[8:12]))) + 12
		if size < 27 || size > len(b) {
			break
		}
		last := base + int64(int32(binary.BigEndian.Uint32(b[23:27])))
		if last >= next {
			records += last + 1 - max(base, next)
			next = last + 1
		}
		b = b[size:]
	}
	return next, records
}
