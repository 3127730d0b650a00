package storage

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/sluice-broker/sluice/record"
)

// withHeader is an entry whose caller parsed the header, as the produce
// path does.
func withHeader(t testing.TB, b []byte) AppendEntry {
	h, err := record.ParseHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	return AppendEntry{Records: b, Header: h, HasHeader: true}
}

// TestAppendWithCallerHeader checks that a header handed in by the caller
// does not relax validation: every damaged batch fails with the error it
// fails with when Append parses the header itself.
func TestAppendWithCallerHeader(t *testing.T) {
	good := idemBatch(5, 0, 0, 3)
	mut := func(f func(b []byte)) []byte {
		b := append([]byte(nil), good...)
		f(b)
		return b
	}
	be := binary.BigEndian
	cases := map[string][]byte{
		"bad crc":             mut(func(b []byte) { b[len(b)-1] ^= 1 }),
		"bad magic":           mut(func(b []byte) { b[record.PosMagic] = 1 }),
		"length below header": mut(func(b []byte) { be.PutUint32(b[record.PosLength:], 10) }),
		"length past end":     mut(func(b []byte) { be.PutUint32(b[record.PosLength:], uint32(len(b))) }),
		"delta mismatch":      mut(func(b []byte) { be.PutUint32(b[record.PosLastOffsetDelta:], 7); record.SetCRC(b) }),
		"control from client": mut(func(b []byte) { b[record.PosAttributes+1] |= record.AttrControl; record.SetCRC(b) }),
		"too large":           good,
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			cfg := testConfig()
			if name == "too large" {
				cfg.MaxMessageBytes = int32(len(b) - 1)
			}
			l := mustOpen(t, t.TempDir(), cfg)
			defer l.Close()
			plain := []AppendEntry{{Records: append([]byte(nil), b...)}}
			parsed := []AppendEntry{withHeader(t, append([]byte(nil), b...))}
			l.Append(plain, AppendOptions{})
			l.Append(parsed, AppendOptions{})
			if plain[0].Err == nil || parsed[0].Err != plain[0].Err {
				t.Fatalf("with header: %v, without: %v", parsed[0].Err, plain[0].Err)
			}
		})
	}
}

// TestAppendWithCallerHeaderIdempotence checks the producer checks run on
// the caller's header: a retry is a duplicate, a gap is out of sequence.
func TestAppendWithCallerHeaderIdempotence(t *testing.T) {
	l := mustOpen(t, t.TempDir(), testConfig())
	defer l.Close()
	append1 := func(b []byte) AppendEntry {
		e := []AppendEntry{withHeader(t, b)}
		if err := l.Append(e, AppendOptions{}); err != nil {
			t.Fatal(err)
		}
		return e[0]
	}
	if e := append1(idemBatch(9, 0, 0, 4)); e.Err != nil || e.Result.FirstOffset != 0 || e.Result.LastOffset != 3 {
		t.Fatalf("first batch: %+v", e)
	}
	if e := append1(idemBatch(9, 0, 0, 4)); e.Err != nil || !e.Result.Duplicate || e.Result.FirstOffset != 0 {
		t.Fatalf("retry: %+v", e)
	}
	if e := append1(idemBatch(9, 0, 8, 1)); !errors.Is(e.Err, ErrOutOfOrderSequence) {
		t.Fatalf("gap: %+v", e)
	}
	if e := append1(idemBatch(9, 0, 4, 2)); e.Err != nil || e.Result.FirstOffset != 4 || e.Result.LastOffset != 5 {
		t.Fatalf("next batch: %+v", e)
	}
}

// TestAppendWithCallerHeaderAllocatesNothing pins the produce path's form
// of Append (an idempotent batch, header given) at zero allocations.
func TestAppendWithCallerHeaderAllocatesNothing(t *testing.T) {
	l := mustOpen(t, t.TempDir(), testConfig())
	defer l.Close()
	seq := int32(0)
	b := idemBatch(11, 0, 0, 4)
	entries := []AppendEntry{withHeader(t, b)}
	l.Append(entries, AppendOptions{})
	allocs := testing.AllocsPerRun(200, func() {
		seq += 4
		setSequenceForTest(b, seq)
		entries[0] = withHeader(t, b)
		if err := l.Append(entries, AppendOptions{}); err != nil || entries[0].Err != nil {
			t.Fatal(err, entries[0].Err)
		}
	})
	if allocs != 0 {
		t.Fatalf("Append with a parsed header allocates %v per call", allocs)
	}
}

// BenchmarkAppendParsedHeader is BenchmarkAppend/1-set as the produce path
// calls it, with the header already parsed.
func BenchmarkAppendParsedHeader(b *testing.B) {
	l := mustOpen(b, b.TempDir(), DefaultConfig())
	defer l.Close()
	entries := []AppendEntry{withHeader(b, benchBatch())}
	b.SetBytes(int64(len(entries[0].Records)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := l.Append(entries, AppendOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}
