package record

import (
	"encoding/binary"
	"errors"
	"math"
)

// ErrBadRecord is the answer for a record that does not decode: a length
// or field that runs past its end, a varint that does not end, bytes left
// over after its headers.
var ErrBadRecord = errors.New("record: malformed record")

// Record is one record of a batch, decoded in place: its byte slices point
// into the records section it was parsed from.
type Record struct {
	Attributes     int8
	TimestampDelta int64 // timestamp - the batch's firstTimestamp
	OffsetDelta    int32 // offset - the batch's baseOffset; >= 0
	// Key and Value are nil when null (a null Value is a tombstone) and
	// non-nil, possibly empty, otherwise.
	Key, Value []byte
	// Headers are the NumHeaders encoded headers, after the count (see the
	// package doc); EachHeader walks them. ParseRecord has checked them.
	Headers    []byte
	NumHeaders int
}

// ParseRecord decodes the record at the start of b (length prefix
// included) and returns it with its size in bytes.
func ParseRecord(b []byte) (Record, int, error) {
	size, used := varint32(b)
	if used <= 0 || size < 1 || size > int64(len(b)-used) {
		return Record{}, 0, ErrBadRecord
	}
	n := used + int(size)
	r, ok := parseBody(b[used:n])
	if !ok {
		return Record{}, 0, ErrBadRecord
	}
	return r, n, nil
}

// parseBody decodes a record after its length prefix. The decoder keeps
// going past a bad field and answers once, at the end, as kbin does.
func parseBody(b []byte) (r Record, ok bool) {
	d := decoder{b: b[1:]}
	r.Attributes = int8(b[0])
	r.TimestampDelta = d.varlong()
	off := d.varint()
	r.Key = d.bytes()
	r.Value = d.bytes()
	count := d.varint()
	r.Headers = d.b
	for i := int64(0); i < count && !d.bad; i++ {
		if d.bytes() == nil { // a header key is never null
			d.bad = true
		}
		d.bytes()
	}
	r.Headers = r.Headers[:len(r.Headers)-len(d.b)]
	if d.bad || len(d.b) != 0 || off < 0 || count < 0 {
		return Record{}, false
	}
	r.OffsetDelta, r.NumHeaders = int32(off), int(count)
	return r, true
}

// EachHeader calls fn with the key and value (nil when null) of each of
// the record's headers, in order.
func (r *Record) EachHeader(fn func(key, value []byte)) {
	d := decoder{b: r.Headers}
	for i := 0; i < r.NumHeaders; i++ {
		k := d.bytes()
		fn(k, d.bytes())
	}
}

// IsTombstone reports a null value.
func (r *Record) IsTombstone() bool { return r.Value == nil }

// decoder reads varints and length-prefixed bytes; a failure sets bad,
// which sticks, and later reads return zero values.
type decoder struct {
	b   []byte
	bad bool
}

// varint reads an int32 field, varlong an int64 one.
func (d *decoder) varint() int64 {
	v, n := varint32(d.b)
	return d.advance(v, n)
}

func (d *decoder) varlong() int64 {
	v, n := binary.Varint(d.b)
	return d.advance(v, n)
}

// advance consumes a value of n bytes (n <= 0: none could be read).
func (d *decoder) advance(v int64, n int) int64 {
	if d.bad || n <= 0 {
		d.bad = true
		return 0
	}
	d.b = d.b[n:]
	return v
}

// varint32 is binary.Varint for the fields Kafka declares as varint (an
// int32): at most 5 bytes, as Kafka reads them, and a value in range.
func varint32(b []byte) (int64, int) {
	v, n := binary.Varint(b[:min(len(b), 5)])
	if n <= 0 || v < math.MinInt32 || v > math.MaxInt32 {
		return 0, -1
	}
	return v, n
}

// bytes reads a varint length and that many bytes: nil for -1, non-nil
// otherwise.
func (d *decoder) bytes() []byte {
	n := d.varint()
	switch {
	case d.bad:
		return nil
	case n == -1:
		return nil
	case n < -1 || n > int64(len(d.b)):
		d.bad = true
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

// Iter walks the records of an uncompressed records section without
// allocating:
//
//	it := record.NewIter(raw)
//	for it.Next() {
//		r := it.Record()
//		…
//	}
//	if err := it.Err(); err != nil { … }
type Iter struct {
	rest []byte
	cur  Record
	at   []byte // the current record, its length prefix included
	err  error
}

// NewIter starts an iteration over raw.
func NewIter(raw []byte) Iter { return Iter{rest: raw} }

// Next decodes the next record; it reports false at the end of the section
// or at a record that does not decode (then Err says so).
func (it *Iter) Next() bool {
	if len(it.rest) == 0 || it.err != nil {
		return false
	}
	r, n, err := ParseRecord(it.rest)
	if err != nil {
		it.err, it.rest = err, nil
		return false
	}
	it.cur, it.at, it.rest = r, it.rest[:n], it.rest[n:]
	return true
}

// Record is the record Next decoded; it stays valid until the next call.
func (it *Iter) Record() *Record { return &it.cur }

// Raw is the current record's encoding, its length prefix included.
func (it *Iter) Raw() []byte { return it.at }

// Err is the decoding error that stopped the iteration, if any.
func (it *Iter) Err() error { return it.err }

// AppendRecord appends r encoded, its length prefix included. Key and
// Value are written as null when nil.
func AppendRecord(dst []byte, r *Record) []byte {
	dst = AppendVarint(dst, int64(bodyLen(r)))
	dst = append(dst, byte(r.Attributes))
	dst = AppendVarint(dst, r.TimestampDelta)
	dst = AppendVarint(dst, int64(r.OffsetDelta))
	dst = appendBytes(dst, r.Key)
	dst = appendBytes(dst, r.Value)
	dst = AppendVarint(dst, int64(r.NumHeaders))
	return append(dst, r.Headers...)
}

// bodyLen is the size of r encoded, after its length prefix.
func bodyLen(r *Record) int {
	return 1 + VarintLen(r.TimestampDelta) + VarintLen(int64(r.OffsetDelta)) +
		bytesLen(r.Key) + bytesLen(r.Value) + VarintLen(int64(r.NumHeaders)) + len(r.Headers)
}

// AppendHeader appends one record header, for Record.Headers (the caller
// counts them in NumHeaders). A nil value is written as null.
func AppendHeader(dst, key, value []byte) []byte {
	dst = append(AppendVarint(dst, int64(len(key))), key...)
	return appendBytes(dst, value)
}

func appendBytes(dst, b []byte) []byte {
	if b == nil {
		return AppendVarint(dst, -1)
	}
	return append(AppendVarint(dst, int64(len(b))), b...)
}

func bytesLen(b []byte) int {
	if b == nil {
		return VarintLen(-1)
	}
	return VarintLen(int64(len(b))) + len(b)
}

// AppendVarint appends v as a zig-zag varint, the encoding of every
// variable-length field of a record.
func AppendVarint(dst []byte, v int64) []byte { return binary.AppendVarint(dst, v) }

// VarintLen is the size of v as a zig-zag varint.
func VarintLen(v int64) int {
	u := uint64(v<<1) ^ uint64(v>>63)
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}
