package engine

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// batchProduceFrame is a Produce v9 request frame of one batch per partition.
func batchProduceFrame(t testing.TB, acks int16, topic string, batches map[int32][]byte) []byte {
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = acks, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	for p := int32(0); p < int32(len(batches)); p++ {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = p, batches[p]
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return frame(req, 9)
}

// answers collects the responses of one session's requests.
type answers struct{ got []*kmsg.ProduceResponse }

func (a *answers) done(t testing.TB) func(*Response) {
	return func(r *Response) {
		if r == nil {
			a.got = append(a.got, nil)
			return
		}
		var body []byte
		for _, p := range r.Parts {
			body = append(body, p.Bytes...)
		}
		resp := kmsg.NewPtrProduceResponse()
		resp.Version = 9
		if err := resp.ReadFrom(body[4+4+1:]); err != nil { // size, correlation id, header tags
			t.Fatal(err)
		}
		a.got = append(a.got, resp)
		r.Release()
	}
}

// TestProduceBatchAppendsTogether: requests from three connections that
// share an event loop's batch are answered only at Flush, then all of
// them, with the offsets of one append per partition and acks class; a
// bad batch among them fails alone.
func TestProduceBatchAppendsTogether(t *testing.T) {
	br := benchBroker(t)
	if _, err := br.CreateTopic("batched", 2, nil, false); err != nil {
		t.Fatal(err)
	}
	batch := NewProduceBatch()
	rec := func(v string) []byte {
		return BuildTestBatch(t, TestBatchOpts{ProducerID: -1}, TestRecord{Value: []byte(v)}, TestRecord{Value: []byte(v + "2")})
	}
	bad := rec("bad")
	bad[len(bad)-1] ^= 1
	reqs := []struct {
		acks    int16
		batches map[int32][]byte
	}{
		{1, map[int32][]byte{0: rec("a"), 1: rec("b")}},
		{-1, map[int32][]byte{0: rec("c")}},
		{1, map[int32][]byte{0: bad}},
		{1, map[int32][]byte{0: rec("d"), 1: rec("e")}},
	}
	got := make([]answers, len(reqs))
	for i, rq := range reqs {
		s := &Session{ID: uint64(i), Batch: batch}
		br.Handle(s, batchProduceFrame(t, rq.acks, "batched", rq.batches), got[i].done(t))
	}
	for i := range got {
		if len(got[i].got) != 0 {
			t.Fatalf("request %d answered before the batch was flushed", i)
		}
	}
	if !batch.Pending() {
		t.Fatal("the batch holds nothing")
	}
	batch.Flush()
	if batch.Pending() {
		t.Fatal("requests still pending after Flush")
	}
	offsets := func(i int) []int64 {
		if len(got[i].got) != 1 {
			t.Fatalf("request %d answered %d times", i, len(got[i].got))
		}
		var out []int64
		for _, p := range got[i].got[0].Topics[0].Partitions {
			if p.ErrorCode != 0 {
				out = append(out, -int64(p.ErrorCode))
				continue
			}
			out = append(out, p.BaseOffset)
		}
		return out
	}
	// Partition 0's acks=1 record sets go first (a, d; the bad one
	// fails alone), then its acks=all group (c): requests of different
	// connections are concurrent, so any order between them is Kafka's.
	want := [][]int64{{0, 0}, {4}, {-int64(kerr.CorruptMessage.Code)}, {2, 2}}
	for i, w := range want {
		if o := offsets(i); !equalInts(o, w) {
			t.Fatalf("request %d: offsets %v, want %v", i, o, w)
		}
	}
	p0 := br.Topic("batched").Partition(0)
	if hw := p0.HighWatermark(); hw != 6 {
		t.Fatalf("partition 0 high watermark %d, want 6", hw)
	}
	reg, err := p0.read(0, 1<<20, isolationFor(false, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Release()
	stored := make([]byte, reg.Len)
	if _, err := reg.File.ReadAt(stored, reg.Pos); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"a", "c", "d"} {
		if !bytes.Contains(stored, []byte(v+"2")) {
			t.Fatalf("record %q missing from partition 0", v)
		}
	}
}

// TestProduceBatchAcksZero: an acks=0 request in a batch gets no answer,
// and one that failed closes its connection, at Flush.
func TestProduceBatchAcksZero(t *testing.T) {
	br := benchBroker(t)
	batch := NewProduceBatch()
	good := BuildTestBatch(t, TestBatchOpts{ProducerID: -1}, TestRecord{Value: []byte("x")})
	bad := bytes.Clone(good)
	bad[len(bad)-1] ^= 1
	var answers []*Response
	done := func(r *Response) { answers = append(answers, r) }
	br.Handle(&Session{Batch: batch}, batchProduceFrame(t, 0, "bench", map[int32][]byte{0: good}), done)
	br.Handle(&Session{Batch: batch}, batchProduceFrame(t, 0, "bench", map[int32][]byte{0: bad}), done)
	if len(answers) != 0 {
		t.Fatal("answered before Flush")
	}
	batch.Flush()
	if len(answers) != 2 || answers[0] != nil || answers[1] == nil || !answers[1].Close {
		t.Fatalf("answers %+v: want no response, then a close", answers)
	}
}

// TestProduceBatchAllocatesNothing pins the batched path too: 4 requests
// through one batch and a Flush allocate nothing once warm.
func TestProduceBatchAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under the race detector")
	}
	br := benchBroker(t)
	batch := NewProduceBatch()
	b := BuildTestBatch(t, TestBatchOpts{ProducerID: -1}, TestRecord{Value: make([]byte, 100)})
	f := batchProduceFrame(t, 1, "bench", map[int32][]byte{0: b})
	var work [4][]byte
	var sess [4]Session
	for i := range work {
		work[i] = make([]byte, len(f))
		sess[i].Batch = batch
	}
	answered := 0
	done := func(r *Response) { answered++; r.Release() }
	allocs := testing.AllocsPerRun(300, func() {
		for i := range work {
			copy(work[i], f)
			br.Handle(&sess[i], work[i], done)
		}
		batch.Flush()
	})
	if answered == 0 || allocs != 0 {
		t.Fatalf("%d answered, %.1f allocations per 4 requests and a flush", answered, allocs)
	}
}

func equalInts(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestProduceOffLoopSkipsBatch: a produce served on a goroutine of its own
// (a cluster's transactional produce, txn_verify.go) must not join the
// loop's batch, which only the loop flushes: it is answered at once.
func TestProduceOffLoopSkipsBatch(t *testing.T) {
	br := benchBroker(t)
	batch := NewProduceBatch()
	f := batchProduceFrame(t, 1, "bench", map[int32][]byte{0: BuildTestBatch(t, TestBatchOpts{ProducerID: -1}, TestRecord{Value: []byte("x")})})
	var a answers
	r := newRequest(f)
	r.Session, r.broker, r.done = &Session{Batch: batch}, br, a.done(t)
	body, err := r.parseHeader(f)
	if err != nil {
		t.Fatal(err)
	}
	if r.Msg, err = r.decode(body); err != nil {
		t.Fatal(err)
	}
	r.offLoop = true
	br.serve(r, lookupAPI(r.Key))
	if batch.Pending() || len(a.got) != 1 || a.got[0].Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("pending %v, %d answers", batch.Pending(), len(a.got))
	}
}
