package engine_test

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/engine"
	"github.com/sluice-broker/sluice/internal/testbroker"
)

// rawConn speaks the Kafka protocol at exactly the version a test asks for,
// which a real client would negotiate away.
type rawConn struct {
	t    testing.TB
	c    net.Conn
	corr int32
	fmt  *kmsg.RequestFormatter
}

func dialRaw(t testing.TB, addr string) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, c: c, fmt: kmsg.NewRequestFormatter(kmsg.FormatterClientID("raw-test"))}
}

// send writes req at its set version without waiting for an answer.
func (rc *rawConn) send(req kmsg.Request) {
	rc.t.Helper()
	rc.corr++
	if _, err := rc.c.Write(rc.fmt.AppendRequest(nil, req, rc.corr)); err != nil {
		rc.t.Fatal(err)
	}
}

// recv reads the answer to the last request into resp (of the same
// version), returning the raw body too.
func (rc *rawConn) recv(resp kmsg.Response) []byte {
	rc.t.Helper()
	body, err := rc.readFrame()
	if err != nil {
		rc.t.Fatalf("reading %s response: %v", kmsg.NameForKey(resp.Key()), err)
	}
	if got := int32(binary.BigEndian.Uint32(body)); got != rc.corr {
		rc.t.Fatalf("correlation %d, want %d", got, rc.corr)
	}
	body = body[4:]
	if resp.IsFlexible() {
		body = body[1:] // empty header tags
	}
	if err := resp.ReadFrom(body); err != nil {
		rc.t.Fatalf("decoding %s v%d: %v", kmsg.NameForKey(resp.Key()), resp.GetVersion(), err)
	}
	return body
}

func (rc *rawConn) readFrame() ([]byte, error) {
	rc.c.SetReadDeadline(time.Now().Add(15 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(rc.c, size[:]); err != nil {
		return nil, err
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	_, err := io.ReadFull(rc.c, body)
	return body, err
}

// do sends req at version v and decodes the answer into a fresh response.
func do[R kmsg.Response](rc *rawConn, req kmsg.Request, v int16) R {
	rc.t.Helper()
	req.SetVersion(v)
	rc.send(req)
	resp := req.ResponseKind()
	resp.SetVersion(v)
	rc.recv(resp)
	return resp.(R)
}

func makeTopic(t testing.TB, tb *testbroker.Broker, name string, partitions int32, configs map[string]string) *engine.Topic {
	t.Helper()
	topic, err := tb.Broker.CreateTopic(name, partitions, configs, false)
	if err != nil {
		t.Fatal(err)
	}
	return topic
}

// produceRaw sends one batch to one partition and returns the partition's
// answer.
func produceRaw(rc *rawConn, v int16, acks int16, topic string, partition int32, batch []byte) kmsg.ProduceResponseTopicPartition {
	rc.t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = acks, 5000
	req.Topics = []kmsg.ProduceRequestTopic{{Topic: topic, Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: partition, Records: batch}}}}
	resp := do[*kmsg.ProduceResponse](rc, req, v)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		rc.t.Fatalf("produce response shape %+v", resp)
	}
	return resp.Topics[0].Partitions[0]
}

// fetchReq builds a sessionless fetch of the given partitions from offset.
func fetchReq(topic string, id [16]byte, offsets map[int32]int64) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 0, 1, 1<<20
	ft := kmsg.FetchRequestTopic{Topic: topic, TopicID: id}
	for p := int32(0); p < int32(len(offsets)+64); p++ {
		off, ok := offsets[p]
		if !ok {
			continue
		}
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes = p, off, 1<<20
		ft.Partitions = append(ft.Partitions, fp)
	}
	req.Topics = []kmsg.FetchRequestTopic{ft}
	return req
}

// consumeAll reads n records from topic with a franz-go consumer.
func consumeAll(t testing.TB, tb *testbroker.Broker, topic string, n int) []*kgo.Record {
	t.Helper()
	cl := tb.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records: %v", len(out), n, err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		out = append(out, fs.Records()...)
	}
	return out
}
