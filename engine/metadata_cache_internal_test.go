package engine

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// metadataBroker is benchBroker with topics topics of parts partitions.
func metadataBroker(tb testing.TB, topics int, parts int32) *Broker {
	br := benchBroker(tb)
	for i := range topics {
		if _, err := br.CreateTopic(fmt.Sprintf("md-%04d", i), parts, nil, false); err != nil {
			tb.Fatal(err)
		}
	}
	return br
}

// fullMetadataRequest is a decoded request for every topic at version v.
func fullMetadataRequest(br *Broker, v int16, done func(*Response)) *Request {
	req := kmsg.NewPtrMetadataRequest()
	req.Version = v
	return &Request{Key: req.Key(), Version: v, Msg: req, Session: &Session{Listener: "PLAINTEXT"},
		broker: br, done: done, Received: time.Now()}
}

// TestFullMetadataCacheHitAllocatesNothing pins the cached path: once a
// full Metadata body is cached, answering it again copies and allocates
// nothing (the decoded request aside, which the caller owns).
func TestFullMetadataCacheHitAllocatesNothing(t *testing.T) {
	br := metadataBroker(t, 20, 10)
	var size int64
	r := fullMetadataRequest(br, 12, func(resp *Response) { size = resp.Size; resp.Release() })
	br.handleMetadata(r) // builds and caches
	first := size
	allocs := testing.AllocsPerRun(200, func() { br.handleMetadata(r) })
	if allocs != 0 {
		t.Fatalf("a cached full Metadata answer allocates %.1f times, want 0", allocs)
	}
	if size != first || size < 20*10*20 {
		t.Fatalf("cached answer of %d bytes, first %d", size, first)
	}
}

// BenchmarkFullMetadata answers a full Metadata request at 10,000
// partitions (100 topics of 100) from the request frame on: cached (the
// steady state) and rebuilt every time (what each request cost before the
// cache).
func BenchmarkFullMetadata(b *testing.B) {
	br := metadataBroker(b, 100, 100)
	req := kmsg.NewPtrMetadataRequest()
	f := frame(req, 12)
	s := &Session{Listener: "PLAINTEXT"}
	b.Run("cached", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			br.Handle(s, f, func(r *Response) { r.Release() })
		}
	})
	b.Run("rebuilt", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			req.SetVersion(12)
			_ = br.fullMetadata(req, 12, "PLAINTEXT").AppendTo(nil)
		}
	})
}
