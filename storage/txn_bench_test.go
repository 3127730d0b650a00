package storage

import "testing"

// BenchmarkAbortedTxns looks up the aborted transactions of a fetch range
// in a log holding 100,000 of them (a read_committed fetch does one per
// partition).
func BenchmarkAbortedTxns(b *testing.B) {
	l := &Log{}
	list := make([]AbortedTxn, 100_000)
	for i := range list {
		o := int64(i) * 10
		list[i] = AbortedTxn{ProducerID: int64(i % 7), FirstOffset: o, LastOffset: o + 5, LastStableOffset: o + 6}
	}
	l.aborted.set(list)
	dst := make([]AbortedTxn, 0, 16)
	b.ReportAllocs()
	i := int64(0)
	for b.Loop() {
		from := (i * 7919 % 100_000) * 10
		dst = l.AbortedTxns(dst[:0], from, from+40)
		i++
	}
	if len(dst) == 0 {
		b.Fatal("found nothing")
	}
}

// BenchmarkReadCommitted compares a read_committed Read (to the LSO) with
// a read_uncommitted one (to the HW) over a log with an open transaction
// near its end.
func BenchmarkReadCommitted(b *testing.B) {
	l := mustOpen(b, b.TempDir(), testConfig())
	defer l.Close()
	for i := range 200 {
		appendHW(b, l, buildBatch(spec(10, 100)))
		if i == 150 {
			appendHW(b, l, txnBatch(1, 0, 0, 2))
		}
	}
	for _, bc := range []struct {
		name string
		read func(int64) (Region, error)
	}{
		{"uncommitted", func(o int64) (Region, error) { return l.Read(o, 16<<10, false) }},
		{"committed", func(o int64) (Region, error) { return l.ReadCommitted(o, 16<<10) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			i := int64(0)
			for b.Loop() {
				r, err := bc.read(i * 97 % 1500)
				if err != nil {
					b.Fatal(err)
				}
				r.Release()
				i++
			}
		})
	}
}

// BenchmarkAppendMarker writes commit and abort markers alternately, each
// after one transactional batch of its producer.
func BenchmarkAppendMarker(b *testing.B) {
	l := mustOpen(b, b.TempDir(), testConfig())
	defer l.Close()
	batch := txnBatch(1, 0, 0, 1)
	seq := int32(0)
	b.ReportAllocs()
	for b.Loop() {
		setSequenceForTest(batch, seq)
		seq++
		appendOne(b, l, batch)
		if _, err := l.AppendMarker(1, 0, 0, seq%2 == 0, AppendOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}
