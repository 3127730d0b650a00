package engine

import (
	"encoding/binary"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/storage"
)

// countReleases counts pooled requests going back to the pool for the
// rest of the test, and fails it if any was released twice.
func countReleases(t *testing.T) *atomic.Int64 {
	var n atomic.Int64
	releaseHook = func(*hotRequest) { n.Add(1) }
	before := doubleReleases.Load()
	t.Cleanup(func() {
		releaseHook = nil
		if d := doubleReleases.Load() - before; d != 0 {
			t.Errorf("%d pooled requests released twice", d)
		}
	})
	return &n
}

// TestPooledRequestReleasedOnceWhenAnsweredInDispatch: a pooled request is
// answered from inside dispatch (acks=1 produce, answered by its handler;
// a long-polling fetch woken while dispatch may still be serving it) or
// after dispatch returned (a produce held for the loop's batch; a fetch
// woken later). Whoever comes last returns it to the pool, exactly once.
// Run with -race: the fetch case races the waking append against
// dispatch's end on purpose.
func TestPooledRequestReleasedOnceWhenAnsweredInDispatch(t *testing.T) {
	br := benchBroker(t)
	released := countReleases(t)
	batch := BuildTestBatch(t, TestBatchOpts{ProducerID: -1}, TestRecord{Value: make([]byte, 100)})
	produce := kmsg.NewPtrProduceRequest()
	produce.Acks = 1
	produce.Topics = []kmsg.ProduceRequestTopic{{Topic: "bench", Partitions: []kmsg.ProduceRequestTopicPartition{{Records: batch}}}}
	pf := frame(produce, 9)
	var answered atomic.Int64
	done := func(r *Response) {
		answered.Add(1)
		r.Release()
	}
	const n = 200

	// Answered inside dispatch, by the handler itself.
	for i := 0; i < n; i++ {
		br.Handle(&Session{}, append([]byte(nil), pf...), done)
	}
	// Held for the batch: answered by Flush, after dispatch returned.
	pb := NewProduceBatch()
	for i := 0; i < n; i++ {
		br.Handle(&Session{Batch: pb}, append([]byte(nil), pf...), done)
		pb.Flush()
	}
	if a, r := answered.Load(), released.Load(); a != 2*n || r != 2*n {
		t.Fatalf("produce: %d answered, %d released; want %d each", a, r, 2*n)
	}

	// Long-polling fetches woken by an append on another goroutine,
	// which may answer before dispatch is done with the request.
	answered.Store(0)
	released.Store(0)
	p := br.Topic("bench").Partition(0)
	f, at := parkingFetchFrame(t, 10*time.Second)
	for i := 0; i < n; i++ {
		fr := append([]byte(nil), f...)
		binary.BigEndian.PutUint64(fr[at:], uint64(p.HighWatermark()))
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			entries := []storage.AppendEntry{{Records: append([]byte(nil), batch...)}}
			if err := p.append(entries, 1, 0); err != nil {
				t.Error(err)
			}
		}()
		br.Handle(&Session{}, fr, done)
		wg.Wait()
		deadline := time.Now().Add(10 * time.Second)
		for answered.Load() != int64(i+1) && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond) // the answer may still be on its way from the waker
		}
	}
	// The last release may follow the last answer by a moment (dispatch
	// returning on the other goroutine); wait for the count, not a time.
	deadline := time.Now().Add(10 * time.Second)
	for released.Load() != n && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if a, r := answered.Load(), released.Load(); a != n || r != n {
		t.Fatalf("fetch: %d answered, %d released; want %d each", a, r, n)
	}
}
