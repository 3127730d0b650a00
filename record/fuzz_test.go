package record_test

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/record"
)

// FuzzParseHeader: whatever bytes come, ParseHeader must not panic, must
// refuse exactly the short inputs, and must agree with kmsg and with
// AppendTo on the rest.
func FuzzParseHeader(f *testing.F) {
	var b record.Builder
	b.Reset(sampleHeader)
	b.Add(&record.Record{Value: []byte("v")})
	batch, _ := b.AppendTo(nil)
	f.Add(batch)
	f.Add(batch[:record.HeaderLen])
	f.Add(batch[:record.HeaderLen-1])
	f.Add(record.AppendMarkerBatch(nil, record.NewHeader(), record.Marker{Type: record.ControlCommit}))
	f.Add(bytes.Repeat([]byte{0xff}, record.HeaderLen))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := record.ParseHeader(b)
		if len(b) < record.HeaderLen {
			if err != record.ErrShortHeader {
				t.Fatalf("%d bytes: %v", len(b), err)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if got := h.AppendTo(nil); !bytes.Equal(got, b[:record.HeaderLen]) {
			t.Fatalf("AppendTo wrote %x from %x", got, b[:record.HeaderLen])
		}
		var kb kmsg.RecordBatch
		kb.ReadFrom(b[:record.HeaderLen]) // records absent: kmsg fills the header fields first
		if kb.FirstOffset != h.BaseOffset || kb.Length != h.Length || uint32(kb.CRC) != h.CRC || kb.Attributes != h.Attributes ||
			kb.LastOffsetDelta != h.LastOffsetDelta || kb.MaxTimestamp != h.MaxTimestamp || kb.FirstSequence != h.BaseSequence ||
			kb.NumRecords != h.NumRecords {
			t.Fatalf("kmsg read %+v, we %+v", kb, h)
		}
		_ = h.LastSequence()
		_, _ = record.Records(nil, b, h, 1<<20)
	})
}

// FuzzRecords: iterating any records section must not panic; whatever
// decodes must read the same with kmsg and encode to bytes that decode to
// the same record (not always the same bytes: a varint may be written
// longer than it needs).
func FuzzRecords(f *testing.F) {
	var all []byte
	for _, kr := range kmsgRecords {
		enc := kmsgRecord(kr)
		f.Add(enc)
		all = append(all, enc...)
	}
	f.Add(all)
	f.Add(all[:len(all)-2])
	f.Add([]byte{0})
	f.Add([]byte{2, 0, 0x80})
	f.Fuzz(func(t *testing.T, raw []byte) {
		it := record.NewIter(raw)
		for it.Next() {
			r := it.Record()
			enc := record.AppendRecord(nil, r)
			if back, n, err := record.ParseRecord(enc); err != nil || n != len(enc) || !sameRecord(&back, r) {
				t.Fatalf("re-encoded %x from %x: %+v %v", enc, it.Raw(), back, err)
			}
			var kr kmsg.Record
			if err := kr.ReadFrom(it.Raw()); err != nil {
				t.Fatalf("kmsg refuses %x: %v", it.Raw(), err)
			}
			if kr.OffsetDelta != r.OffsetDelta || kr.TimestampDelta64 != r.TimestampDelta ||
				!sameBytes(kr.Key, r.Key) || !sameBytes(kr.Value, r.Value) || len(kr.Headers) != r.NumHeaders {
				t.Fatalf("kmsg read %+v, we %+v", kr, r)
			}
			r.EachHeader(func(k, v []byte) {})
		}
	})
}

func sameRecord(a, b *record.Record) bool {
	return a.Attributes == b.Attributes && a.TimestampDelta == b.TimestampDelta && a.OffsetDelta == b.OffsetDelta &&
		sameBytes(a.Key, b.Key) && sameBytes(a.Value, b.Value) && a.NumHeaders == b.NumHeaders && bytes.Equal(a.Headers, b.Headers)
}
