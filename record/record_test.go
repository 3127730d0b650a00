package record_test

import (
	"bytes"
	"errors"
	"hash/crc32"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/record"
)

// kmsgRecord encodes r with franz-go, Kafka's encoding as a client writes
// it, filling in the length prefix.
func kmsgRecord(r kmsg.Record) []byte {
	r.Length = 0
	body := r.AppendTo(nil)[1:] // a zero length is one byte
	r.Length = int32(len(body))
	return r.AppendTo(nil)
}

var kmsgRecords = []kmsg.Record{
	{Key: []byte("k"), Value: []byte("v"), TimestampDelta64: 5},
	{OffsetDelta: 1, Value: []byte("no key"), TimestampDelta64: -2},
	{OffsetDelta: 2, Key: []byte{}, Value: []byte{}},               // empty, not null
	{OffsetDelta: 3, Key: []byte("tomb")},                          // null value
	{OffsetDelta: 300, TimestampDelta64: 1 << 40, Attributes: 0x7}, // multi-byte varints
	{OffsetDelta: 4, Key: []byte("h"), Value: []byte("v"), Headers: []kmsg.Header{
		{Key: "a", Value: []byte("1")}, {Key: "", Value: nil}, {Key: "c", Value: []byte{}},
	}},
}

// TestRecordMatchesKmsg pins the record encoding to Kafka's: what kmsg
// writes parses to the same fields, and AppendRecord writes the same bytes.
func TestRecordMatchesKmsg(t *testing.T) {
	for i, kr := range kmsgRecords {
		enc := kmsgRecord(kr)
		r, n, err := record.ParseRecord(append(enc, 0xff)) // trailing bytes are the next record's
		if err != nil || n != len(enc) {
			t.Fatalf("record %d: n=%d/%d %v", i, n, len(enc), err)
		}
		if r.Attributes != kr.Attributes || r.TimestampDelta != kr.TimestampDelta64 || r.OffsetDelta != kr.OffsetDelta ||
			!sameBytes(r.Key, kr.Key) || !sameBytes(r.Value, kr.Value) || r.NumHeaders != len(kr.Headers) {
			t.Fatalf("record %d: parsed %+v from %+v", i, r, kr)
		}
		var hs []kmsg.Header
		r.EachHeader(func(k, v []byte) { hs = append(hs, kmsg.Header{Key: string(k), Value: v}) })
		for j := range hs {
			if hs[j].Key != kr.Headers[j].Key || !sameBytes(hs[j].Value, kr.Headers[j].Value) {
				t.Fatalf("record %d header %d: %+v, want %+v", i, j, hs[j], kr.Headers[j])
			}
		}
		if got := record.AppendRecord([]byte("pre"), &r); !bytes.Equal(got[3:], enc) {
			t.Fatalf("record %d: AppendRecord wrote\n%x, kmsg\n%x", i, got[3:], enc)
		}
	}
}

// sameBytes compares two byte slices, null and empty being different.
func sameBytes(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

func TestAppendHeader(t *testing.T) {
	kr := kmsgRecords[len(kmsgRecords)-1]
	r := record.Record{OffsetDelta: kr.OffsetDelta, Key: kr.Key, Value: kr.Value, NumHeaders: len(kr.Headers)}
	for _, h := range kr.Headers {
		r.Headers = record.AppendHeader(r.Headers, []byte(h.Key), h.Value)
	}
	if got := record.AppendRecord(nil, &r); !bytes.Equal(got, kmsgRecord(kr)) {
		t.Fatalf("record with headers\n%x, kmsg\n%x", got, kmsgRecord(kr))
	}
}

func TestParseRecordRejects(t *testing.T) {
	good := kmsgRecord(kmsgRecords[5])
	withBody := func(body ...byte) []byte { return append(record.AppendVarint(nil, int64(len(body))), body...) }
	for name, b := range map[string][]byte{
		"empty":               {},
		"zero length":         {0},
		"negative length":     {1},
		"length past end":     good[:len(good)-1],
		"unterminated varint": withBody(0, 0x80, 0x80),
		"key past end":        withBody(0, 0, 0, 10, 'k'),
		"key length -2":       withBody(0, 0, 0, 3),
		"negative offset":     withBody(0, 0, 1, 1, 1, 0),
		"offset over int32":   withBody(0, 0, 0xfe, 0xff, 0xff, 0xff, 0x1f, 1, 1, 0),
		"missing headers":     withBody(0, 0, 0, 1, 1),
		"negative headers":    withBody(0, 0, 0, 1, 1, 1),
		"header past end":     withBody(0, 0, 0, 1, 1, 2, 2, 'a'),
		"null header key":     withBody(0, 0, 0, 1, 1, 2, 1, 1),
		"trailing bytes":      withBody(0, 0, 0, 1, 1, 0, 0),
		"record over length":  append(record.AppendVarint(nil, 2), 0, 0),
		"ok then bad headers": withBody(0, 0, 0, 1, 1, 2, 0, 1, 0),
	} {
		if _, _, err := record.ParseRecord(b); !errors.Is(err, record.ErrBadRecord) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestIter(t *testing.T) {
	var raw []byte
	for _, kr := range kmsgRecords {
		raw = append(raw, kmsgRecord(kr)...)
	}
	it := record.NewIter(raw)
	var got []int32
	var joined []byte
	for it.Next() {
		got = append(got, it.Record().OffsetDelta)
		joined = append(joined, it.Raw()...)
	}
	if it.Err() != nil || len(got) != len(kmsgRecords) || !bytes.Equal(joined, raw) {
		t.Fatalf("iterated %v (%v)", got, it.Err())
	}
	it = record.NewIter(raw[:len(raw)-3])
	n := 0
	for it.Next() {
		n++
	}
	if !errors.Is(it.Err(), record.ErrBadRecord) || n != len(kmsgRecords)-1 {
		t.Fatalf("truncated section: %d records, %v", n, it.Err())
	}
}

// TestIterAllocs pins the read path at no allocation per batch.
func TestIterAllocs(t *testing.T) {
	var raw []byte
	for _, kr := range kmsgRecords {
		raw = append(raw, kmsgRecord(kr)...)
	}
	var sum int64
	allocs := testing.AllocsPerRun(100, func() {
		it := record.NewIter(raw)
		for it.Next() {
			r := it.Record()
			sum += int64(r.OffsetDelta) + int64(len(r.Key))
			r.EachHeader(func(k, v []byte) { sum += int64(len(k)) })
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per iteration", allocs)
	}
}

var sampleHeader = record.Header{
	BaseOffset: 1 << 33, PartitionLeaderEpoch: 7, Magic: 2, Attributes: int16(record.Gzip) | record.AttrTransactional,
	FirstTimestamp: 1_700_000_000_000, ProducerID: 99, ProducerEpoch: 3, BaseSequence: 1 << 30,
}

// TestBuilderMatchesKmsg builds the same batch with Builder and with kmsg
// (plus the CRC a Kafka client computes) and wants the same bytes for
// every codec but the ones whose output is not unique.
func TestBuilderMatchesKmsg(t *testing.T) {
	for _, codec := range []record.Codec{record.None, record.Snappy, record.Zstd} {
		h := sampleHeader
		h.Attributes = h.Attributes&^record.AttrCompressionMask | int16(codec)
		var b record.Builder
		b.Reset(h)
		var raw []byte
		maxTs := h.FirstTimestamp
		for _, kr := range kmsgRecords {
			enc := kmsgRecord(kr)
			r, _, _ := record.ParseRecord(enc)
			b.Add(&r)
			raw = append(raw, enc...)
			maxTs = max(maxTs, h.FirstTimestamp+kr.TimestampDelta64)
		}
		got, err := b.AppendTo([]byte("pre"))
		if err != nil {
			t.Fatal(err)
		}
		got = got[3:]
		section, _ := codec.Compress(nil, raw)
		kb := kmsg.RecordBatch{
			FirstOffset: h.BaseOffset, Length: int32(49 + len(section)), PartitionLeaderEpoch: h.PartitionLeaderEpoch, Magic: 2,
			Attributes: h.Attributes, LastOffsetDelta: kmsgRecords[len(kmsgRecords)-1].OffsetDelta,
			FirstTimestamp: h.FirstTimestamp, MaxTimestamp: maxTs, ProducerID: h.ProducerID, ProducerEpoch: h.ProducerEpoch,
			FirstSequence: h.BaseSequence, NumRecords: int32(len(kmsgRecords)), Records: section,
		}
		want := kb.AppendTo(nil)
		kb.CRC = int32(crc32.Checksum(want[21:], crc32.MakeTable(crc32.Castagnoli)))
		want = kb.AppendTo(nil)
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: builder wrote\n%x\nkmsg\n%x", codec, got, want)
		}
		ph, err := record.ParseHeader(got)
		if err != nil || ph.CRC != record.Checksum(got) || ph.Size() != int64(len(got)) || b.NumRecords() != len(kmsgRecords) {
			t.Fatalf("%s: header %+v %v", codec, ph, err)
		}
		back, err := record.Records(nil, got, ph, record.DefaultDecompressLimit)
		if err != nil || !bytes.Equal(back, raw) {
			t.Fatalf("%s: records do not read back: %v", codec, err)
		}
	}
}

func TestParseHeaderMatchesKmsg(t *testing.T) {
	kb := kmsg.RecordBatch{
		FirstOffset: -5, Length: 49, PartitionLeaderEpoch: -1, Magic: 2, CRC: -2, Attributes: 0x7fff,
		LastOffsetDelta: 1<<31 - 1, FirstTimestamp: -1, MaxTimestamp: 1 << 62, ProducerID: -1, ProducerEpoch: -1,
		FirstSequence: -1, NumRecords: 1 << 31 >> 1,
	}
	b := kb.AppendTo(nil)
	h, err := record.ParseHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	want := record.Header{
		BaseOffset: -5, Length: 49, PartitionLeaderEpoch: -1, Magic: 2, CRC: 0xfffffffe, Attributes: 0x7fff,
		LastOffsetDelta: 1<<31 - 1, FirstTimestamp: -1, MaxTimestamp: 1 << 62, ProducerID: -1, ProducerEpoch: -1,
		BaseSequence: -1, NumRecords: 1 << 30,
	}
	if h != want {
		t.Fatalf("parsed %+v\nwant   %+v", h, want)
	}
	if got := h.AppendTo(nil); !bytes.Equal(got, b) {
		t.Fatalf("AppendTo wrote %x, kmsg %x", got, b)
	}
	if _, err := record.ParseHeader(b[:record.HeaderLen-1]); err != record.ErrShortHeader {
		t.Fatalf("short header: %v", err)
	}
}

func TestHeaderMethods(t *testing.T) {
	h := record.Header{BaseOffset: 100, Length: 100, LastOffsetDelta: 4, BaseSequence: 1<<31 - 2, ProducerID: 0,
		Attributes: int16(record.LZ4) | record.AttrControl | record.AttrLogAppendTime | record.AttrDeleteHorizon}
	for name, ok := range map[string]bool{
		"codec":        h.Compression() == record.LZ4,
		"size":         h.Size() == 112,
		"last offset":  h.LastOffset() == 104 && h.NextOffset() == 105,
		"control":      h.IsControl() && !h.IsTransactional(),
		"append time":  h.IsLogAppendTime() && h.HasDeleteHorizon(),
		"producer id":  h.HasProducerID(),
		"sequence":     h.LastSequence() == 2, // MaxInt32-1, MaxInt32, 0, 1, 2
		"no producer":  !record.NewHeader().HasProducerID(),
		"add sequence": record.AddSequence(5, 3) == 8,
	} {
		if !ok {
			t.Errorf("%s: wrong for %+v", name, h)
		}
	}
}

// TestSetters checks the in-place rewrites keep the batch valid.
func TestSetters(t *testing.T) {
	var b record.Builder
	b.Reset(record.NewHeader())
	b.Add(&record.Record{Value: []byte("v")})
	batch, _ := b.AppendTo(nil)
	record.SetBaseOffset(batch, 42)
	record.SetLeaderEpoch(batch, 9)
	h, _ := record.ParseHeader(batch)
	if h.BaseOffset != 42 || h.PartitionLeaderEpoch != 9 || h.CRC != record.Checksum(batch) {
		t.Fatalf("after offset/epoch rewrite %+v", h)
	}
	record.SetLogAppendTime(batch, 1234)
	h, _ = record.ParseHeader(batch)
	if !h.IsLogAppendTime() || h.MaxTimestamp != 1234 || h.CRC != record.Checksum(batch) {
		t.Fatalf("after LogAppendTime %+v", h)
	}
	if record.BaseOffset(batch) != 42 || record.LastOffsetDelta(batch) != 0 || record.LastOffset(batch) != 42 ||
		record.Attributes(batch) != h.Attributes || record.MaxTimestamp(batch) != 1234 ||
		record.NumRecords(batch) != 1 || record.Size(batch) != int64(len(batch)) || record.Size(batch[:11]) != 0 {
		t.Fatal("field readers disagree with the header")
	}
}

// TestRebuild re-encodes a batch with every codec: only the codec bits,
// the length and the CRC may change.
func TestRebuild(t *testing.T) {
	raw := sampleRecords()
	for _, from := range codecs {
		h := sampleHeader
		h.Attributes = h.Attributes&^record.AttrCompressionMask | int16(from)
		h.NumRecords, h.LastOffsetDelta, h.MaxTimestamp = 200, 199, h.FirstTimestamp+3
		orig, err := record.AppendBatch(nil, &h, raw)
		if err != nil {
			t.Fatal(err)
		}
		for _, to := range codecs {
			nh := h
			out, err := record.Rebuild([]byte("pre"), &nh, raw, to)
			if err != nil {
				t.Fatalf("%s->%s: %v", from, to, err)
			}
			out = out[3:]
			var kb kmsg.RecordBatch
			if err := kb.ReadFrom(out); err != nil || int(kb.Length)+12 != len(out) || uint32(kb.CRC) != record.Checksum(out) {
				t.Fatalf("%s->%s: not a valid batch: %v", from, to, err)
			}
			oh, _ := record.ParseHeader(orig)
			if ph, _ := record.ParseHeader(out); ph != nh {
				t.Fatalf("%s->%s: Rebuild left the header %+v, wrote %+v", from, to, nh, ph)
			}
			if nh.Compression() != to {
				t.Fatalf("%s->%s: codec %s", from, to, nh.Compression())
			}
			if got, err := record.Records(nil, out, nh, record.DefaultDecompressLimit); err != nil || !bytes.Equal(got, raw) {
				t.Fatalf("%s->%s: records changed: %v", from, to, err)
			}
			oh.Attributes = oh.Attributes&^record.AttrCompressionMask | int16(to)
			oh.Length, oh.CRC = nh.Length, nh.CRC
			if !reflect.DeepEqual(oh, nh) {
				t.Fatalf("%s->%s: header %+v, want %+v", from, to, nh, oh)
			}
		}
	}
}

func TestRecordsBadLength(t *testing.T) {
	nh := record.NewHeader()
	batch, _ := record.AppendBatch(nil, &nh, nil)
	h, _ := record.ParseHeader(batch)
	for _, n := range []int32{h.Length + 1, record.HeaderLen - record.LogOverhead - 1} {
		h.Length = n
		if _, err := record.Records(nil, batch, h, 1<<20); err != record.ErrBadLength {
			t.Errorf("length %d: %v", n, err)
		}
	}
}

// TestMarker pins control records to kmsg's ControlRecordKey and
// EndTxnMarker.
func TestMarker(t *testing.T) {
	for _, m := range []record.Marker{{Type: record.ControlCommit, CoordinatorEpoch: 5}, {Type: record.ControlAbort, CoordinatorEpoch: -1}} {
		h := record.NewHeader()
		h.BaseOffset, h.ProducerID, h.ProducerEpoch, h.FirstTimestamp = 10, 4, 2, 777
		batch := record.AppendMarkerBatch(nil, h, m)
		ph, err := record.ParseHeader(batch)
		if err != nil || !ph.IsControl() || !ph.IsTransactional() || ph.NumRecords != 1 || ph.LastOffsetDelta != 0 ||
			ph.ProducerID != 4 || ph.ProducerEpoch != 2 || ph.BaseSequence != -1 || ph.MaxTimestamp != 777 ||
			ph.CRC != record.Checksum(batch) || ph.Size() != int64(len(batch)) {
			t.Fatalf("marker batch header %+v %v", ph, err)
		}
		raw, _ := record.Records(nil, batch, ph, 1<<20)
		r, _, err := record.ParseRecord(raw)
		if err != nil {
			t.Fatal(err)
		}
		var kk kmsg.ControlRecordKey
		var kv kmsg.EndTxnMarker
		if err := kk.ReadFrom(r.Key); err != nil || kk.Version != 0 || int16(kk.Type) != int16(m.Type) {
			t.Fatalf("key %+v %v", kk, err)
		}
		if err := kv.ReadFrom(r.Value); err != nil || kv.Version != 0 || kv.CoordinatorEpoch != m.CoordinatorEpoch {
			t.Fatalf("value %+v %v", kv, err)
		}
		if got, err := record.ParseMarker(&r); err != nil || got != m {
			t.Fatalf("ParseMarker %+v %v, want %+v", got, err, m)
		}
	}
	for name, r := range map[string]record.Record{
		"short key":    {Key: []byte{0, 0, 0}, Value: []byte{0, 0, 0, 0, 0, 0}},
		"short value":  {Key: []byte{0, 0, 0, 1}, Value: []byte{0, 0, 0, 0, 0}},
		"unknown type": {Key: []byte{0, 0, 0, 2}, Value: []byte{0, 0, 0, 0, 0, 0}},
		"bad version":  {Key: []byte{0xff, 0xff, 0, 1}, Value: []byte{0, 0, 0, 0, 0, 0}},
	} {
		if _, err := record.ParseMarker(&r); err != record.ErrNotMarker {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestVarintLen(t *testing.T) {
	for _, v := range []int64{0, -1, 1, 63, -64, 64, -65, 1 << 20, -1 << 40, 1<<63 - 1, -1 << 63} {
		if got, want := record.VarintLen(v), len(record.AppendVarint(nil, v)); got != want {
			t.Errorf("VarintLen(%d) = %d, want %d", v, got, want)
		}
	}
}

func BenchmarkRebuildZstd(b *testing.B) {
	var rb record.Builder
	rb.Reset(record.NewHeader())
	rb.Add(&record.Record{Value: bytes.Repeat([]byte("payload "), 2000)})
	orig, _ := rb.AppendTo(nil)
	h, _ := record.ParseHeader(orig)
	raw, _ := record.Records(nil, orig, h, record.DefaultDecompressLimit)
	var dst []byte
	b.ReportAllocs()
	for b.Loop() {
		nh := h
		dst, _ = record.Rebuild(dst[:0], &nh, raw, record.Zstd)
	}
}

func BenchmarkIter(b *testing.B) {
	raw := sampleRecords()
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		it := record.NewIter(raw)
		for it.Next() {
		}
		if it.Err() != nil {
			b.Fatal(it.Err())
		}
	}
}
