package engine

import (
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/storage"
)

// raceEnabled is set by race_test.go under the race detector.
var raceEnabled bool

// sampleProduce is a produce request with two topics, a null and an empty
// record set, and a transactional id when txn.
func sampleProduce(txn bool, nParts int) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	if txn {
		req.TransactionID = kmsg.StringPtr("txn-1")
	}
	req.Acks, req.TimeoutMillis = -1, 3000
	for _, name := range []string{"orders", "payments"} {
		t := kmsg.NewProduceRequestTopic()
		t.Topic = name
		for p := 0; p < nParts; p++ {
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition = int32(p)
			switch p {
			case 0:
				rp.Records = nil
			case 1:
				rp.Records = []byte{}
			default:
				rp.Records = []byte{byte(p), 1, 2, 3, 4, 5}
			}
			t.Partitions = append(t.Partitions, rp)
		}
		req.Topics = append(req.Topics, t)
	}
	return req
}

// sampleFetch is a fetch request using every field of every version.
func sampleFetchRequest(nParts int) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 3, 500, 1, 1<<20
	req.IsolationLevel, req.SessionID, req.SessionEpoch = 1, 77, 4
	req.ClusterID = kmsg.StringPtr("cluster-x")
	req.ReplicaState.ID, req.ReplicaState.Epoch = 3, 9
	req.Rack = "rack-a"
	for i, name := range []string{"orders", "payments"} {
		t := kmsg.NewFetchRequestTopic()
		t.Topic, t.TopicID = name, [16]byte{byte(i + 1), 2, 3}
		for p := 0; p < nParts; p++ {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.CurrentLeaderEpoch, rp.FetchOffset = int32(p), 5, int64(1000*p)
			rp.LastFetchedEpoch, rp.LogStartOffset, rp.PartitionMaxBytes = 4, 10, 1<<20
			t.Partitions = append(t.Partitions, rp)
		}
		req.Topics = append(req.Topics, t)
		ft := kmsg.NewFetchRequestForgottenTopic()
		ft.Topic, ft.TopicID, ft.Partitions = name+"-old", [16]byte{9, byte(i)}, []int32{7, 8}
		req.ForgottenTopics = append(req.ForgottenTopics, ft)
	}
	return req
}

// kmsgDecoded is what kmsg reads from req's encoding at version v.
func kmsgDecoded(t testing.TB, req kmsg.Request, v int16) (body []byte, want kmsg.Request) {
	req.SetVersion(v)
	body = req.AppendTo(nil)
	want = kmsg.RequestForKey(req.Key())
	want.SetVersion(v)
	if err := want.ReadFrom(body); err != nil {
		t.Fatalf("kmsg cannot read its own v%d encoding: %v", v, err)
	}
	return body, want
}

// hotDecoded is what the pooled decoder reads, into h as it was left.
func hotDecoded(h *hotRequest, key, v int16, body []byte) (kmsg.Request, error) {
	h.Key, h.Version = key, v
	msg := h.message()
	msg.SetVersion(v)
	return msg, h.decode(body)
}

// TestHotDecodersMatchKmsg decodes produce v3-12 and fetch v4-16 with the
// pooled decoders, first into a fresh object and then into one that just
// decoded a larger request, and expects kmsg's fields exactly.
func TestHotDecodersMatchKmsg(t *testing.T) {
	cases := []struct {
		key        int16
		lo, hi     int16
		big, small func() kmsg.Request
	}{
		{0, 0, 12, func() kmsg.Request { return sampleProduce(true, 5) }, func() kmsg.Request { return sampleProduce(false, 3) }},
		{1, 4, 16, func() kmsg.Request { return sampleFetchRequest(6) }, func() kmsg.Request { return sampleFetchRequest(2) }},
	}
	for _, c := range cases {
		for v := c.lo; v <= c.hi; v++ {
			h := new(hotRequest)
			for _, mk := range []func() kmsg.Request{c.big, c.small} {
				body, want := kmsgDecoded(t, mk(), v)
				got, err := hotDecoded(h, c.key, v, body)
				if err != nil {
					t.Fatalf("key %d v%d: %v", c.key, v, err)
				}
				if !sameFields(got, want) {
					t.Fatalf("key %d v%d:\n got %+v\nwant %+v", c.key, v, got, want)
				}
			}
		}
	}
}

// FuzzHotDecoders feeds arbitrary bodies to both decoders: ours must not
// panic, and wherever kmsg reads a body we read the same fields.
func FuzzHotDecoders(f *testing.F) {
	for v := int16(3); v <= 12; v++ {
		f.Add(int16(0), v, sampleProduce(v%2 == 0, 3).AppendTo(nil))
	}
	for v := int16(4); v <= 16; v++ {
		req := sampleFetchRequest(2)
		req.SetVersion(v)
		f.Add(int16(1), v, req.AppendTo(nil))
	}
	h := new(hotRequest)
	f.Fuzz(func(t *testing.T, key, v int16, body []byte) {
		key &= 1
		if key == 0 {
			v = (v & 0x7fff) % 13
		} else {
			v = 4 + (v&0x7fff)%13
		}
		got, err := hotDecoded(h, key, v, body)
		want := kmsg.RequestForKey(key)
		want.SetVersion(v)
		if want.ReadFrom(body) != nil {
			return
		}
		if err != nil {
			t.Fatalf("key %d v%d: kmsg reads the body, we fail: %v", key, v, err)
		}
		if !sameFields(got, want) {
			t.Fatalf("key %d v%d:\n got %+v\nwant %+v", key, v, got, want)
		}
	})
}

// sameFields compares two decoded messages as the handlers see them: an
// empty slice is a nil one, and unknown tags (which the pooled decoders
// skip) are not compared.
func sameFields(a, b kmsg.Request) bool {
	a, b = normalized(a), normalized(b)
	return reflect.DeepEqual(a, b)
}

func normalized(m kmsg.Request) kmsg.Request {
	c := reflect.New(reflect.TypeOf(m).Elem())
	c.Elem().Set(reflect.ValueOf(m).Elem())
	normalize(c.Elem())
	return c.Interface().(kmsg.Request)
}

func normalize(v reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).Name == "UnknownTags" {
				v.Field(i).SetZero()
				continue
			}
			normalize(v.Field(i))
		}
	case reflect.Slice:
		if v.Len() == 0 {
			v.SetZero()
			return
		}
		if v.Type().Elem().Kind() != reflect.Struct {
			return
		}
		c := reflect.MakeSlice(v.Type(), v.Len(), v.Len()) // do not touch the decoder's slices
		reflect.Copy(c, v)
		for i := 0; i < c.Len(); i++ {
			normalize(c.Index(i))
		}
		v.Set(c)
	}
}

// TestHandleProduceAllocatesNothing pins the produce path, frame in and
// response out: decoding, appending and answering allocate nothing.
func TestHandleProduceAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under the race detector")
	}
	br := benchBroker(t)
	batch := BuildTestBatch(t, TestBatchOpts{ProducerID: -1}, TestRecord{Value: make([]byte, 100)})
	for _, v := range []int16{7, 9, 12} {
		req := kmsg.NewPtrProduceRequest()
		req.Acks = 1
		req.Topics = []kmsg.ProduceRequestTopic{{Topic: "bench", Partitions: []kmsg.ProduceRequestTopicPartition{{Records: batch}}}}
		req.SetVersion(v)
		f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("alloc-test")).AppendRequest(nil, req, 1)[4:]
		work := make([]byte, len(f))
		s := &Session{}
		var size int64
		done := func(r *Response) { size = r.Size; r.Release() }
		allocs := testing.AllocsPerRun(500, func() {
			copy(work, f) // the broker rewrites the batch in place
			br.Handle(s, work, done)
		})
		if size == 0 || allocs != 0 {
			t.Fatalf("produce v%d: answered %d bytes, %.1f allocations per request", v, size, allocs)
		}
	}
}

// TestHandleFetchAllocatesNothing pins the fetch path of a consumer
// reading records that are there (no long poll).
func TestHandleFetchAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under the race detector")
	}
	br := benchBroker(t)
	batch := BuildTestBatch(t, TestBatchOpts{ProducerID: -1}, TestRecord{Value: make([]byte, 100)})
	p := br.Topic("bench").Partition(0)
	for i := 0; i < 5; i++ {
		if err := p.append(testEntries(batch), 1, 0); err != nil {
			t.Fatal(err)
		}
	}
	for _, v := range []int16{4, 11, 12} {
		req := kmsg.NewPtrFetchRequest()
		req.MaxBytes, req.MaxWaitMillis, req.SessionEpoch = 1<<20, 500, -1
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.PartitionMaxBytes = 1 << 20
		req.Topics = []kmsg.FetchRequestTopic{{Topic: "bench", Partitions: []kmsg.FetchRequestTopicPartition{fp}}}
		req.SetVersion(v)
		f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("alloc-test")).AppendRequest(nil, req, 1)[4:]
		s := &Session{}
		var size int64
		done := func(r *Response) { size = r.Size; r.Release() }
		allocs := testing.AllocsPerRun(500, func() { br.Handle(s, f, done) })
		if size < 500 || allocs != 0 {
			t.Fatalf("fetch v%d: answered %d bytes, %.1f allocations per request", v, size, allocs)
		}
	}
}

// testEntries is one append entry holding a copy of batch.
func testEntries(batch []byte) []storage.AppendEntry {
	return []storage.AppendEntry{{Records: append([]byte(nil), batch...)}}
}
