package engine

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/storage"
)

// The hand-written Fetch encoder is checked against kmsg's decoder, which
// is generated from Kafka's own message specs: every version we serve must
// decode, field for field, to what the fetch held.

// regionFile is a file whose bytes the test regions point into.
func regionFile(t testing.TB) (*os.File, []byte) {
	data := bytes.Repeat([]byte("0123456789abcdef"), 64)
	path := filepath.Join(t.TempDir(), "segment.log")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f, data
}

func testBroker() *Broker {
	return &Broker{cfg: Config{NodeID: 7}, host: "broker.example", port: 9092}
}

// sampleFetch builds a fetch touching every encoder branch: two topics,
// records, an error, a diverging epoch, a named leader and an omitted
// partition.
func sampleFetch(b *Broker, file *os.File, version int16) *fetch {
	reg := func(pos, n int64) storage.Region { return storage.Region{File: file, Pos: pos, Len: n} }
	f := &fetch{b: b, version: version, isolation: committedIf(version%2 == 0), sessionID: 42}
	f.aborted = []storage.AbortedTxn{{ProducerID: 9, FirstOffset: 20, LastOffset: 40}, {ProducerID: 1 << 40, FirstOffset: 33, LastOffset: 90}}
	f.parts = []fetchPart{
		{topicName: "alpha", topicID: [16]byte{1}, partition: 0, hw: 100, lso: 95, logStart: 3, records: reg(16, 100), divergingEpoch: -1, leaderEpoch: -1, abortedTo: 2},
		{topicName: "alpha", topicID: [16]byte{1}, partition: 1, omit: true, divergingEpoch: -1, leaderEpoch: -1},
		{topicName: "alpha", topicID: [16]byte{1}, partition: 2, err: kerr.OffsetOutOfRange.Code, hw: -1, lso: -1, logStart: -1, divergingEpoch: -1, leaderEpoch: -1},
		{topicName: "beta", topicID: [16]byte{2}, partition: 5, hw: 7, lso: 7, logStart: 0, records: reg(0, 1), divergingEpoch: -1, leaderEpoch: -1, abortedFrom: 1, abortedTo: 2},
	}
	for i := range f.parts {
		f.parts[i].preferred = -1
	}
	if version >= 11 { // KIP-392: read elsewhere, no records
		f.parts = append(f.parts, fetchPart{topicName: "beta", topicID: [16]byte{2}, partition: 8, hw: 9, logStart: 1, divergingEpoch: -1, leaderEpoch: -1, preferred: 3})
	}
	if version >= 12 {
		f.parts = append(f.parts, fetchPart{topicName: "beta", topicID: [16]byte{2}, partition: 6, hw: 9, logStart: 1, divergingEpoch: 3, divergingEnd: 8, leaderEpoch: -1, preferred: -1})
	}
	if version >= 16 {
		f.parts = append(f.parts, fetchPart{topicName: "beta", topicID: [16]byte{2}, partition: 7, err: kerr.FencedLeaderEpoch.Code, hw: -1, logStart: -1, divergingEpoch: -1, leaderEpoch: 4, preferred: -1})
	}
	return f
}

// materialise encodes f and returns the body bytes with the regions read
// from their files, as a client would receive it after the header.
func materialise(t testing.TB, f *fetch) []byte {
	var w frameWriter
	w.begin(newResponse())
	f.encode(&w)
	resp := w.finish()
	var out []byte
	for i := 0; i < resp.NumParts(); i++ {
		b, file, off, n := resp.PartAt(i)
		if file == nil {
			out = append(out, b...)
			continue
		}
		buf := make([]byte, n)
		if _, err := file.ReadAt(buf, off); err != nil {
			t.Fatal(err)
		}
		out = append(out, buf...)
	}
	if got := int64(binary.BigEndian.Uint32(out)); got != resp.Size-4 {
		t.Fatalf("size prefix %d, frame has %d bytes after it", got, resp.Size-4)
	}
	return out[4:]
}

func decodeFetch(t testing.TB, version int16, body []byte) *kmsg.FetchResponse {
	resp := &kmsg.FetchResponse{Version: version}
	if err := resp.ReadFrom(body); err != nil {
		t.Fatalf("v%d: kmsg cannot decode our fetch response: %v", version, err)
	}
	return resp
}

// checkDecoded compares a decoded response with the fetch that produced it.
func checkDecoded(t testing.TB, f *fetch, data []byte, resp *kmsg.FetchResponse) {
	t.Helper()
	v := f.version
	if v >= 7 && (resp.SessionID != f.sessionID || resp.ErrorCode != f.errCode) {
		t.Fatalf("v%d: session %d error %d, want %d %d", v, resp.SessionID, resp.ErrorCode, f.sessionID, f.errCode)
	}
	var want []*fetchPart
	for i := range f.parts {
		if !f.parts[i].omit && f.errCode == 0 {
			want = append(want, &f.parts[i])
		}
	}
	var got []kmsg.FetchResponseTopicPartition
	for _, tp := range resp.Topics {
		for _, p := range tp.Partitions {
			fp := want[len(got)]
			if v >= 13 && tp.TopicID != fp.topicID || v < 13 && tp.Topic != fp.topicName {
				t.Fatalf("v%d: partition %d under topic %q/%x", v, p.Partition, tp.Topic, tp.TopicID)
			}
			got = append(got, p)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("v%d: %d partitions, want %d", v, len(got), len(want))
	}
	for i, p := range got {
		checkPartition(t, f, want[i], data, &p)
	}
	wantNodes := 0
	if v >= 16 {
		for _, fp := range want {
			if fp.leaderEpoch >= 0 {
				wantNodes = 1
			}
		}
	}
	if len(resp.Brokers) != wantNodes {
		t.Fatalf("v%d: %d node endpoints, want %d", v, len(resp.Brokers), wantNodes)
	}
	if wantNodes == 1 && (resp.Brokers[0].NodeID != f.b.cfg.NodeID || resp.Brokers[0].Host != f.b.host || resp.Brokers[0].Port != f.b.port) {
		t.Fatalf("v%d: node endpoint %+v", v, resp.Brokers[0])
	}
}

func checkPartition(t testing.TB, f *fetch, fp *fetchPart, data []byte, p *kmsg.FetchResponseTopicPartition) {
	t.Helper()
	v := f.version
	if p.Partition != fp.partition || p.ErrorCode != fp.err || p.HighWatermark != fp.hw || p.LastStableOffset != fp.lso {
		t.Fatalf("v%d: partition %+v, want %+v", v, p, fp)
	}
	if v >= 5 && p.LogStartOffset != fp.logStart {
		t.Fatalf("v%d: log start %d, want %d", v, p.LogStartOffset, fp.logStart)
	}
	wantNull := f.isolation != fetchTxnCommitted || fp.err != 0
	var wantAborted []storage.AbortedTxn
	if !wantNull {
		wantAborted = f.aborted[fp.abortedFrom:fp.abortedTo]
	}
	if (p.AbortedTransactions == nil) != wantNull || len(p.AbortedTransactions) != len(wantAborted) {
		t.Fatalf("v%d: aborted transactions %v, want null=%v, %v", v, p.AbortedTransactions, wantNull, wantAborted)
	}
	for i, a := range p.AbortedTransactions {
		if a.ProducerID != wantAborted[i].ProducerID || a.FirstOffset != wantAborted[i].FirstOffset {
			t.Fatalf("v%d: aborted transaction %d is %+v, want %+v", v, i, a, wantAborted[i])
		}
	}
	if v >= 11 && p.PreferredReadReplica != fp.preferred {
		t.Fatalf("v%d: preferred read replica %d, want %d", v, p.PreferredReadReplica, fp.preferred)
	}
	want := data[fp.records.Pos : fp.records.Pos+fp.records.Len]
	if !bytes.Equal(p.RecordBatches, want) || p.RecordBatches == nil {
		t.Fatalf("v%d: records %q, want %q", v, p.RecordBatches, want)
	}
	if v >= 12 && (p.DivergingEpoch.Epoch != fp.divergingEpoch || fp.divergingEpoch >= 0 && p.DivergingEpoch.EndOffset != fp.divergingEnd) {
		t.Fatalf("v%d: diverging epoch %+v, want %d/%d", v, p.DivergingEpoch, fp.divergingEpoch, fp.divergingEnd)
	}
	wantLeader := kmsg.NewFetchResponseTopicPartitionCurrentLeader()
	if fp.leaderEpoch >= 0 {
		wantLeader.LeaderID, wantLeader.LeaderEpoch = f.b.cfg.NodeID, fp.leaderEpoch
	}
	if v >= 12 && (p.CurrentLeader.LeaderID != wantLeader.LeaderID || p.CurrentLeader.LeaderEpoch != wantLeader.LeaderEpoch) {
		t.Fatalf("v%d: current leader %+v, want %+v", v, p.CurrentLeader, wantLeader)
	}
}

func TestFetchEncodeMatchesKmsg(t *testing.T) {
	file, data := regionFile(t)
	b := testBroker()
	for v := int16(4); v <= 16; v++ {
		f := sampleFetch(b, file, v)
		body := materialise(t, f)
		checkDecoded(t, f, data, decodeFetch(t, v, body))
	}
}

func TestFetchEncodeSessionError(t *testing.T) {
	file, data := regionFile(t)
	for v := int16(7); v <= 16; v++ {
		f := sampleFetch(testBroker(), file, v)
		f.errCode, f.sessionID = kerr.FetchSessionIDNotFound.Code, 0
		resp := decodeFetch(t, v, materialise(t, f))
		checkDecoded(t, f, data, resp)
		if len(resp.Topics) != 0 {
			t.Fatalf("v%d: topics in a session-error response", v)
		}
	}
}

// TestFetchEncodeAllocs pins the hot path: encoding a prepared fetch into a
// warmed-up response buffer allocates nothing.
func TestFetchEncodeAllocs(t *testing.T) {
	file, _ := regionFile(t)
	f := sampleFetch(testBroker(), file, 16)
	var w frameWriter
	r := newResponse()
	allocs := testing.AllocsPerRun(100, func() {
		r.buf, r.Parts = r.buf[:0], r.Parts[:0]
		w.begin(r)
		f.encode(&w)
		w.finish()
	})
	if allocs != 0 {
		t.Fatalf("encoding a fetch response allocates %.1f times", allocs)
	}
}

// FuzzFetchEncode drives the encoder with arbitrary partition layouts and
// checks that kmsg decodes every one to the same fields.
func FuzzFetchEncode(f *testing.F) {
	f.Add(int16(4), []byte{0, 1, 2, 3})
	f.Add(int16(12), []byte{9, 200, 17, 3, 3, 3, 1, 0})
	f.Add(int16(16), bytes.Repeat([]byte{5, 129, 7}, 20))
	file, data := regionFile(f)
	b := testBroker()
	f.Fuzz(func(t *testing.T, version int16, layout []byte) {
		if version < 4 || version > 16 {
			return
		}
		fz := fuzzFetch(b, file, version, layout)
		checkDecoded(t, fz, data, decodeFetch(t, version, materialise(t, fz)))
	})
}

// fuzzFetch turns each byte of layout into a partition; its bits choose the
// topic, whether it is omitted, errored, diverging or names a leader, and
// how many record bytes it carries.
func fuzzFetch(b *Broker, file *os.File, version int16, layout []byte) *fetch {
	f := &fetch{b: b, version: version, isolation: committedIf(len(layout)%2 == 1), sessionID: int32(len(layout))}
	names := []string{"a", "bb", "ccc", "a"}
	for i, c := range layout {
		topic := int(c>>6) & 3
		fp := fetchPart{topicName: names[topic], topicID: [16]byte{byte(topic + 1)}, partition: int32(i),
			hw: int64(c), lso: int64(c) - int64(i%3), logStart: int64(c / 2), divergingEpoch: -1, leaderEpoch: -1}
		// Some parts carry aborted transactions (c%5 of them).
		fp.abortedFrom = int32(len(f.aborted))
		for k := range int(c % 5) {
			f.aborted = append(f.aborted, storage.AbortedTxn{ProducerID: int64(c) << k, FirstOffset: int64(i * k)})
		}
		fp.abortedTo = int32(len(f.aborted))
		switch c & 7 {
		case 1:
			fp.omit = true
		case 2:
			fp.err, fp.hw, fp.logStart = kerr.UnknownTopicOrPartition.Code, -1, -1
		case 3:
			if version >= 12 {
				fp.divergingEpoch, fp.divergingEnd = int32(c), int64(i)
			}
		case 4:
			if version >= 16 {
				fp.err, fp.hw, fp.logStart, fp.leaderEpoch = kerr.FencedLeaderEpoch.Code, -1, -1, int32(i)
			}
		default:
			fp.records = storage.Region{File: file, Pos: int64(i % 64), Len: int64(c>>3) * 3}
		}
		f.parts = append(f.parts, fp)
	}
	return f
}

// committedIf is read_committed's isolation when c holds, else read_uncommitted's.
func committedIf(c bool) fetchIsolation {
	if c {
		return fetchTxnCommitted
	}
	return fetchHighWatermark
}
