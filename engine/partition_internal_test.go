package engine

import (
	"encoding/binary"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// These tests drive Partition's waiting mechanisms through the real handler
// path (request frame in, response out) on a real broker and its logs. The
// callbacks run on the goroutine that moves the high watermark, so every
// check is made right after the call that should (or should not) have
// answered: nothing sleeps.

// produceFrame is a produce v8 request for two records on bench-0.
func produceFrame(t *testing.T, acks int16, timeoutMs int32) []byte {
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = acks, timeoutMs
	batch := BuildTestBatch(t, TestBatchOpts{ProducerID: -1}, TestRecord{Value: []byte("a")}, TestRecord{Value: []byte("b")})
	req.Topics = []kmsg.ProduceRequestTopic{{Topic: "bench", Partitions: []kmsg.ProduceRequestTopicPartition{{Records: batch}}}}
	return frame(req, 8)
}

// body reads a whole response frame (file regions included) and returns
// what follows the size and correlation id of a non-flexible header.
func body(t *testing.T, r *Response) []byte {
	t.Helper()
	var out []byte
	for i := 0; i < r.NumParts(); i++ {
		b, f, off, n := r.PartAt(i)
		if f != nil {
			b = make([]byte, n)
			if _, err := f.ReadAt(b, off); err != nil {
				t.Fatal(err)
			}
		}
		out = append(out, b...)
	}
	if len(out) < 8 || int64(binary.BigEndian.Uint32(out)) != r.Size-4 {
		t.Fatalf("bad frame of %d bytes", len(out))
	}
	return out[8:]
}

func produceAnswer(t *testing.T, r *Response) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	resp := kmsg.ProduceResponse{Version: 8}
	if err := resp.ReadFrom(body(t, r)); err != nil {
		t.Fatal(err)
	}
	return resp.Topics[0].Partitions[0]
}

// answered returns the response delivered to ch so far, or nil.
func answered(ch chan *Response) *Response {
	select {
	case r := <-ch:
		return r
	default:
		return nil
	}
}

// TestProduceAcksAllWaitsForHighWatermark: an acks=all produce is answered
// only once the high watermark passes its batch, by the goroutine that
// moves it; acks=1 is answered after the local append.
func TestProduceAcksAllWaitsForHighWatermark(t *testing.T) {
	br := benchBroker(t)
	p := br.Topic("bench").Partition(0)
	p.holdHighWatermark(true) // an in-sync follower that has not fetched yet
	answers := make(chan *Response, 1)
	br.Handle(&Session{}, produceFrame(t, -1, 600_000), func(r *Response) { answers <- r })
	if r := answered(answers); r != nil {
		t.Fatalf("acks=all answered before the high watermark moved: %+v", produceAnswer(t, r))
	}
	if hw, leo := p.HighWatermark(), p.LogEndOffset(); hw != 0 || leo != 2 {
		t.Fatalf("high watermark %d, log end %d; want 0, 2", hw, leo)
	}
	br.Handle(&Session{}, produceFrame(t, 1, 600_000), func(r *Response) { answers <- r })
	r := answered(answers)
	if r == nil {
		t.Fatal("acks=1 not answered after the local append")
	}
	if a := produceAnswer(t, r); a.ErrorCode != 0 || a.BaseOffset != 2 {
		t.Fatalf("acks=1: %+v", a)
	}
	p.holdHighWatermark(false)
	if r = answered(answers); r == nil {
		t.Fatal("acks=all not answered once the high watermark passed its batch")
	}
	if a := produceAnswer(t, r); a.ErrorCode != 0 || a.BaseOffset != 0 {
		t.Fatalf("acks=all: %+v", a)
	}
	if hw := p.HighWatermark(); hw != 4 {
		t.Fatalf("high watermark %d, want 4", hw)
	}
}

// TestProduceAcksAllTimesOut: a batch the high watermark does not reach
// within the request's timeout answers REQUEST_TIMED_OUT, with its offset.
func TestProduceAcksAllTimesOut(t *testing.T) {
	br := benchBroker(t)
	p := br.Topic("bench").Partition(0)
	p.holdHighWatermark(true)
	answers := make(chan *Response, 1)
	br.Handle(&Session{}, produceFrame(t, -1, 1), func(r *Response) { answers <- r })
	if a := produceAnswer(t, <-answers); a.ErrorCode != kerr.RequestTimedOut.Code || a.BaseOffset != 0 {
		t.Fatalf("%+v", a)
	}
	p.holdHighWatermark(false) // the stale waiter is dropped without a second answer
	if r := answered(answers); r != nil {
		t.Fatal("answered twice")
	}
}

// TestProduceAcksAllLosesLeadership: a produce waiting on a partition that
// stops being led here answers NOT_LEADER_OR_FOLLOWER, and the partition
// then refuses appends.
func TestProduceAcksAllLosesLeadership(t *testing.T) {
	br := benchBroker(t)
	p := br.Topic("bench").Partition(0)
	p.holdHighWatermark(true)
	answers := make(chan *Response, 2)
	br.Handle(&Session{}, produceFrame(t, -1, 600_000), func(r *Response) { answers <- r })
	p.becomeFollower(7, 1)
	r := answered(answers)
	if r == nil {
		t.Fatal("not answered when leadership moved")
	}
	if a := produceAnswer(t, r); a.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("%+v", a)
	}
	br.Handle(&Session{}, produceFrame(t, 1, 600_000), func(r *Response) { answers <- r })
	if a := produceAnswer(t, <-answers); a.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("append to a follower: %+v", a)
	}
	if code := p.checkLeader(-1); code != kerr.NotLeaderForPartition.Code {
		t.Fatalf("checkLeader on a follower: %d", code)
	}
}

// TestGroupLogMovedHighWatermarkWithoutWakingFetch is the regression test
// of a bug: the group coordinator's log append set the high watermark
// itself, so a long-poll fetch parked on a __consumer_offsets partition
// slept through new records until its max wait ran out. An internal append
// must wake it like a produce does.
func TestGroupLogMovedHighWatermarkWithoutWakingFetch(t *testing.T) {
	br := benchBroker(t)
	p := br.Topic("bench").Partition(0)
	req := kmsg.NewPtrFetchRequest()
	req.MinBytes, req.MaxBytes, req.MaxWaitMillis = 1, 1<<20, 600_000
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	req.Topics = []kmsg.FetchRequestTopic{{Topic: "bench", Partitions: []kmsg.FetchRequestTopicPartition{fp}}}
	answers := make(chan *Response, 1)
	br.Handle(&Session{}, frame(req, 11), func(r *Response) { answers <- r })
	if answered(answers) != nil {
		t.Fatal("an empty partition answered a long poll at once")
	}
	batch := BuildTestBatch(t, TestBatchOpts{ProducerID: -1}, TestRecord{Key: []byte("k"), Value: []byte("v")})
	if _, err := p.appendInternal(batch, 0); err != nil {
		t.Fatal(err)
	}
	r := answered(answers)
	if r == nil {
		t.Fatal("the internal append left the fetch parked")
	}
	resp := kmsg.FetchResponse{Version: 11}
	if err := resp.ReadFrom(body(t, r)); err != nil {
		t.Fatal(err)
	}
	if got := resp.Topics[0].Partitions[0]; got.ErrorCode != 0 || got.HighWatermark != 1 || len(got.RecordBatches) == 0 {
		t.Fatalf("fetch answered %+v", got)
	}
}

// BenchmarkHandleProduceAcksAll is BenchmarkHandleProduce with acks=all:
// with one replica it must allocate no more than acks=1.
func BenchmarkHandleProduceAcksAll(b *testing.B) {
	br := benchBroker(b)
	batch := BuildTestBatch(b, TestBatchOpts{ProducerID: -1}, TestRecord{Value: make([]byte, 1000)})
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 30_000
	req.Topics = []kmsg.ProduceRequestTopic{{Topic: "bench", Partitions: []kmsg.ProduceRequestTopicPartition{{Records: batch}}}}
	f := frame(req, 12)
	s := &Session{}
	work := make([]byte, len(f))
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	for b.Loop() {
		copy(work, f)
		br.Handle(s, work, func(r *Response) { r.Release() })
	}
}

// TestProduceAcksAllAllocatesNoMore pins that waiting for the high
// watermark costs the common path nothing: with one replica an acks=all
// produce allocates what an acks=1 produce does (request decoding only).
func TestProduceAcksAllAllocatesNoMore(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under the race detector (sync.Pool drops items at random)")
	}
	br := benchBroker(t)
	allocs := func(acks int16) float64 {
		f := produceFrame(t, acks, 30_000)
		work := make([]byte, len(f))
		return testing.AllocsPerRun(200, func() {
			copy(work, f)
			br.Handle(&Session{}, work, func(r *Response) { r.Release() })
		})
	}
	if one, all := allocs(1), allocs(-1); all > one {
		t.Fatalf("acks=all allocates %v per produce, acks=1 %v", all, one)
	}
}
