package engine

import (
	"io"
	"log/slog"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/storage"
)

// Benchmarks of the whole handler path, request frame in, response out,
// without a network: they show what produce and fetch allocate per request
// (kmsg's request decoding included).

func benchBroker(tb testing.TB) *Broker {
	cfg := DefaultConfig()
	cfg.DataDir = tb.TempDir()
	cfg.Listen = "127.0.0.1:9092"
	b, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { b.Close() })
	if _, err := b.CreateTopic("bench", 1, nil, false); err != nil {
		tb.Fatal(err)
	}
	return b
}

func frame(req kmsg.Request, v int16) []byte {
	req.SetVersion(v)
	return kmsg.NewRequestFormatter().AppendRequest(nil, req, 1)[4:]
}

func BenchmarkHandleProduce(b *testing.B) {
	br := benchBroker(b)
	batch := BuildTestBatch(b, TestBatchOpts{ProducerID: -1}, TestRecord{Value: make([]byte, 1000)})
	req := kmsg.NewPtrProduceRequest()
	req.Acks = 1
	req.Topics = []kmsg.ProduceRequestTopic{{Topic: "bench", Partitions: []kmsg.ProduceRequestTopicPartition{{Records: batch}}}}
	f := frame(req, 12)
	s := &Session{}
	work := make([]byte, len(f))
	b.SetBytes(int64(len(batch)))
	done := func(r *Response) { r.Release() }
	b.ReportAllocs()
	for b.Loop() {
		copy(work, f) // the broker rewrites the batch in place
		br.Handle(s, work, done)
	}
}

func BenchmarkHandleFetch(b *testing.B) {
	br := benchBroker(b)
	batch := BuildTestBatch(b, TestBatchOpts{ProducerID: -1}, TestRecord{Value: make([]byte, 1000)})
	for i := 0; i < 10; i++ {
		p := br.Topic("bench").Partition(0)
		e := []storage.AppendEntry{{Records: append([]byte(nil), batch...)}}
		if err := p.append(e, 1, 0); err != nil {
			b.Fatal(err)
		}
	}
	req := kmsg.NewPtrFetchRequest()
	req.MaxBytes = 1 << 20
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	req.Topics = []kmsg.FetchRequestTopic{{Topic: "bench", Partitions: []kmsg.FetchRequestTopicPartition{fp}}}
	f := frame(req, 12)
	s := &Session{}
	done := func(r *Response) {
		if r.Size < 10000 {
			b.Fatalf("fetch answered %d bytes", r.Size)
		}
		r.Release()
	}
	b.ReportAllocs()
	for b.Loop() {
		br.Handle(s, f, done)
	}
}
