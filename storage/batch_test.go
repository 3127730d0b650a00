package storage

import (
	"encoding/binary"
	"errors"
	"math"
	"testing"

	"github.com/sluice-broker/sluice/record"
)

func TestCheckBatch(t *testing.T) {
	good := buildBatch(spec(3, 10))
	recrc := func(b []byte) []byte {
		record.SetCRC(b)
		return b
	}
	mut := func(f func(b []byte) []byte) []byte {
		return f(append([]byte(nil), good...))
	}
	tests := []struct {
		name    string
		b       []byte
		maxSize int64
		want    error
	}{
		{"good", good, 0, nil},
		{"short header", good[:40], 0, ErrCorruptMessage},
		{"truncated body", good[:len(good)-1], 0, ErrCorruptMessage},
		{"length below header", mut(func(b []byte) []byte { binary.BigEndian.PutUint32(b[record.PosLength:], 10); return b }), 0, ErrCorruptMessage},
		{"bad magic", mut(func(b []byte) []byte { b[record.PosMagic] = 1; return b }), 0, ErrInvalidRecord},
		{"bad crc", mut(func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), 0, ErrCorruptMessage},
		{"too large", good, int64(len(good) - 1), ErrMessageTooLarge},
		{"exact max size", good, int64(len(good)), nil},
		{"delta mismatch", mut(func(b []byte) []byte { binary.BigEndian.PutUint32(b[record.PosLastOffsetDelta:], 5); return recrc(b) }), 0, ErrInvalidRecord},
		{"no records", mut(func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[record.PosNumRecords:], 0)
			binary.BigEndian.PutUint32(b[record.PosLastOffsetDelta:], math.MaxUint32)
			return recrc(b)
		}), 0, ErrInvalidRecord},
		{"bad codec", mut(func(b []byte) []byte { b[record.PosAttributes+1] |= 7; return recrc(b) }), 0, ErrInvalidRecord},
		{"pid without sequence", mut(func(b []byte) []byte { binary.BigEndian.PutUint64(b[record.PosProducerID:], 7); return recrc(b) }), 0, ErrInvalidRecord},
		{"txn without pid", mut(func(b []byte) []byte { b[record.PosAttributes+1] |= record.AttrTransactional; return recrc(b) }), 0, ErrInvalidRecord},
		{"offsets and epoch outside crc", mut(func(b []byte) []byte { record.SetBaseOffset(b, 1234); record.SetLeaderEpoch(b, 9); return b }), 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			size, err := checkBatch(tt.b, tt.maxSize)
			if tt.want == nil {
				if err != nil || size != int64(len(tt.b)) {
					t.Fatalf("got size %d err %v", size, err)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
		})
	}
}

func TestParseHeaderOfBuiltBatch(t *testing.T) {
	s := spec(5, 3)
	s.pid, s.epoch, s.seq, s.attrs = 42, 3, 100, 2
	b := buildBatch(s)
	record.SetBaseOffset(b, 77)
	h, err := record.ParseHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	if h.BaseOffset != 77 || h.Magic != 2 || h.NumRecords != 5 || h.LastOffsetDelta != 4 || h.LastOffset() != 81 ||
		h.ProducerID != 42 || h.ProducerEpoch != 3 || h.BaseSequence != 100 || h.LastSequence() != 104 ||
		h.Compression() != 2 || h.Size() != int64(len(b)) || h.MaxTimestamp != s.ts+4 {
		t.Fatalf("bad header %+v", h)
	}
	if _, err := record.ParseHeader(b[:60]); err != record.ErrShortHeader {
		t.Fatalf("short header: %v", err)
	}
}

func TestSequenceWraps(t *testing.T) {
	for _, tt := range []struct{ seq, delta, want int32 }{
		{0, 4, 4},
		{math.MaxInt32 - 4, 4, math.MaxInt32},
		{math.MaxInt32 - 1, 4, 2},
		{math.MaxInt32, 1, 0},
	} {
		if got := record.AddSequence(tt.seq, tt.delta); got != tt.want {
			t.Errorf("record.AddSequence(%d,%d) = %d, want %d", tt.seq, tt.delta, got, tt.want)
		}
	}
	if !inSequence(math.MaxInt32, 0) || !inSequence(4, 5) || inSequence(4, 6) || inSequence(math.MaxInt32, 1) {
		t.Fatal("inSequence")
	}
}

func TestSetLogAppendTimeKeepsCRCValid(t *testing.T) {
	b := buildBatch(spec(4, 8))
	record.SetLogAppendTime(b, 99)
	if _, err := checkBatch(b, 0); err != nil {
		t.Fatal(err)
	}
	h, _ := record.ParseHeader(b)
	if h.MaxTimestamp != 99 || h.Attributes&record.AttrLogAppendTime == 0 {
		t.Fatalf("%+v", h)
	}
}
