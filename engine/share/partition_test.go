package share

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

var t0 = time.Unix(1_700_000_000, 0)

func testCfg() PartitionConfig {
	return PartitionConfig{LockDuration: 30 * time.Second, DeliveryLimit: 3, MaxRecordLocks: 100}
}

func ranges(rs ...Range) []Range { return rs }

func TestAcquireNewRecordsAndAccept(t *testing.T) {
	p := NewPartition(testCfg(), 10)
	got := p.Acquire(nil, "a", t0, 10, 15, 100)
	if want := ranges(Range{10, 14, 1}); !slices.Equal(got, want) {
		t.Fatalf("acquired %v, want %v", got, want)
	}
	if off, ok := p.NextFetchOffset(t0); off != 15 || !ok {
		t.Fatalf("next fetch offset %d %v, want 15 true", off, ok)
	}
	if code := p.Acknowledge("a", 10, 12, []int8{AckAccept}, false, t0); code != 0 {
		t.Fatalf("ack: %v", kerr.ErrorForCode(code))
	}
	if p.StartOffset() != 13 || p.EndOffset() != 15 {
		t.Fatalf("SPSO %d SPEO %d, want 13 15", p.StartOffset(), p.EndOffset())
	}
}

func TestAcquiredRecordNotGivenToAnotherMember(t *testing.T) {
	p := NewPartition(testCfg(), 0)
	p.Acquire(nil, "a", t0, 0, 5, 100)
	if got := p.Acquire(nil, "b", t0.Add(time.Second), 0, 5, 100); len(got) != 0 {
		t.Fatalf("b acquired %v while a holds the locks", got)
	}
	got := p.Acquire(nil, "b", t0.Add(time.Second), 0, 8, 100)
	if want := ranges(Range{5, 7, 1}); !slices.Equal(got, want) {
		t.Fatalf("b acquired %v, want %v", got, want)
	}
	// b may not acknowledge a's records, nor a b's.
	if code := p.Acknowledge("b", 0, 0, []int8{AckAccept}, false, t0); code != kerr.InvalidRecordState.Code {
		t.Fatalf("b acknowledged a's record: code %d", code)
	}
	if code := p.Acknowledge("a", 4, 5, []int8{AckAccept}, false, t0); code != kerr.InvalidRecordState.Code {
		t.Fatalf("a acknowledged a range reaching b's record: code %d", code)
	}
	if st, _ := p.State(4); st != Acquired {
		t.Fatalf("a failed batch changed offset 4 to %d", st)
	}
}

func TestLockExpiryRedelivers(t *testing.T) {
	p := NewPartition(testCfg(), 0)
	p.Acquire(nil, "a", t0, 0, 3, 100)
	// Just before expiry nothing is available; at the deadline it is.
	if off, _ := p.NextFetchOffset(t0.Add(30*time.Second - time.Nanosecond)); off != 3 {
		t.Fatalf("next fetch before expiry %d, want 3", off)
	}
	late := t0.Add(30 * time.Second)
	if off, _ := p.NextFetchOffset(late); off != 0 {
		t.Fatalf("next fetch after expiry %d, want 0", off)
	}
	// a's lock is gone: its acknowledgement is refused.
	if code := p.Acknowledge("a", 0, 0, []int8{AckAccept}, false, late); code != kerr.InvalidRecordState.Code {
		t.Fatalf("ack after lock expiry: code %d", code)
	}
	got := p.Acquire(nil, "b", late, 0, 3, 100)
	if want := ranges(Range{0, 2, 2}); !slices.Equal(got, want) {
		t.Fatalf("redelivered %v, want %v", got, want)
	}
}

func TestDeliveryLimitArchives(t *testing.T) {
	p := NewPartition(testCfg(), 0) // limit 3
	now := t0
	for i := 1; i <= 3; i++ {
		got := p.Acquire(nil, "a", now, 0, 2, 100)
		if want := ranges(Range{0, 1, int16(i)}); !slices.Equal(got, want) {
			t.Fatalf("delivery %d: %v, want %v", i, got, want)
		}
		if i < 3 {
			p.Acknowledge("a", 0, 1, []int8{AckRelease}, false, now)
			continue
		}
		now = now.Add(time.Minute) // the third delivery's lock expires
	}
	if off, _ := p.NextFetchOffset(now); off != 2 || p.StartOffset() != 2 {
		t.Fatalf("after the limit: next %d SPSO %d, want both 2 (archived)", off, p.StartOffset())
	}
	if st, _ := p.State(1); st != Acknowledged {
		t.Fatalf("offset 1 below the SPSO reads %d", st)
	}
}

func TestRejectArchivesAndGapSettles(t *testing.T) {
	p := NewPartition(testCfg(), 0)
	p.Acquire(nil, "a", t0, 0, 4, 100)
	types := []int8{AckAccept, AckReject, AckGap, AckRelease}
	if code := p.Acknowledge("a", 0, 3, types, false, t0); code != 0 {
		t.Fatalf("ack: code %d", code)
	}
	if p.StartOffset() != 3 {
		t.Fatalf("SPSO %d, want 3", p.StartOffset())
	}
	if st, n := p.State(3); st != Available || n != 1 {
		t.Fatalf("released record: state %d count %d", st, n)
	}
}

func TestAcknowledgeBadBatches(t *testing.T) {
	p := NewPartition(testCfg(), 0)
	p.Acquire(nil, "a", t0, 0, 4, 100)
	for _, c := range []struct {
		first, last int64
		types       []int8
		want        int16
	}{
		{2, 1, []int8{1}, kerr.InvalidRequest.Code},
		{0, 3, []int8{1, 1}, kerr.InvalidRequest.Code},
		{0, 0, nil, kerr.InvalidRequest.Code},
		{0, 0, []int8{9}, kerr.InvalidRequest.Code},
		{0, 0, []int8{AckRenew}, kerr.InvalidRequest.Code}, // renew not enabled
		{3, 4, []int8{1}, kerr.InvalidRecordState.Code},    // past the SPEO
	} {
		if got := p.Acknowledge("a", c.first, c.last, c.types, false, t0); got != c.want {
			t.Errorf("ack %d-%d %v: code %d, want %d", c.first, c.last, c.types, got, c.want)
		}
	}
}

func TestRenewExtendsLock(t *testing.T) {
	p := NewPartition(testCfg(), 0)
	p.Acquire(nil, "a", t0, 0, 1, 100)
	mid := t0.Add(20 * time.Second)
	if code := p.Acknowledge("a", 0, 0, []int8{AckRenew}, true, mid); code != 0 {
		t.Fatalf("renew: code %d", code)
	}
	if off, _ := p.NextFetchOffset(t0.Add(45 * time.Second)); off != 1 {
		t.Fatalf("renewed lock expired early: next %d", off)
	}
	if off, _ := p.NextFetchOffset(mid.Add(30 * time.Second)); off != 0 {
		t.Fatalf("renewed lock did not expire: next %d", off)
	}
}

func TestMaxRecordLocksBoundsWindow(t *testing.T) {
	cfg := testCfg()
	cfg.MaxRecordLocks = 3
	p := NewPartition(cfg, 0)
	if got := p.Acquire(nil, "a", t0, 0, 10, 100); !slices.Equal(got, ranges(Range{0, 2, 1})) {
		t.Fatalf("acquired %v past the window", got)
	}
	if _, ok := p.NextFetchOffset(t0); ok {
		t.Fatal("a full window reports acquirable records")
	}
	p.Acknowledge("a", 0, 0, []int8{AckAccept}, false, t0)
	if got := p.Acquire(nil, "b", t0, 3, 10, 100); !slices.Equal(got, ranges(Range{3, 3, 1})) {
		t.Fatalf("after settling one: %v", got)
	}
}

func TestMaxRecordsPerAcquire(t *testing.T) {
	p := NewPartition(testCfg(), 0)
	if got := p.Acquire(nil, "a", t0, 0, 10, 4); !slices.Equal(got, ranges(Range{0, 3, 1})) {
		t.Fatalf("acquired %v, want 4 records", got)
	}
}

// Members acknowledging interleaved ranges: the SPSO moves only past the
// settled front, whoever settled it.
func TestInterleavedAcknowledgements(t *testing.T) {
	p := NewPartition(testCfg(), 0)
	p.Acquire(nil, "a", t0, 0, 2, 100)
	p.Acquire(nil, "b", t0, 0, 4, 100)
	p.Acquire(nil, "c", t0, 0, 6, 100)
	steps := []struct {
		member      string
		first, last int64
		wantSPSO    int64
	}{
		{"c", 4, 5, 0}, {"b", 2, 3, 0}, {"a", 1, 1, 0}, {"a", 0, 0, 6},
	}
	for _, s := range steps {
		if code := p.Acknowledge(s.member, s.first, s.last, []int8{AckAccept}, false, t0); code != 0 {
			t.Fatalf("%s %d-%d: code %d", s.member, s.first, s.last, code)
		}
		if p.StartOffset() != s.wantSPSO {
			t.Fatalf("after %s %d-%d: SPSO %d, want %d", s.member, s.first, s.last, p.StartOffset(), s.wantSPSO)
		}
	}
}

func TestReleaseMember(t *testing.T) {
	p := NewPartition(testCfg(), 0)
	p.Acquire(nil, "a", t0, 0, 2, 100)
	p.Acquire(nil, "b", t0, 0, 4, 100)
	if n := p.ReleaseMember("a"); n != 2 {
		t.Fatalf("released %d, want 2", n)
	}
	if got := p.Acquire(nil, "c", t0, 0, 4, 100); !slices.Equal(got, ranges(Range{0, 1, 2})) {
		t.Fatalf("c acquired %v", got)
	}
}

func TestSnapshotRestore(t *testing.T) {
	p := NewPartition(testCfg(), 100)
	p.Acquire(nil, "a", t0, 100, 110, 100)
	p.Acknowledge("a", 101, 102, []int8{AckAccept}, false, t0)
	p.Acknowledge("a", 103, 103, []int8{AckReject}, false, t0)
	p.Acknowledge("a", 104, 104, []int8{AckRelease}, false, t0)
	start, batches := p.Snapshot(nil)
	want := []StateBatch{
		{100, 100, Available, 1}, {101, 102, Acknowledged, 1}, {103, 103, Archived, 1}, {104, 109, Available, 1},
	}
	if start != 100 || !slices.Equal(batches, want) {
		t.Fatalf("snapshot %d %v, want 100 %v", start, batches, want)
	}
	q := RestorePartition(testCfg(), start, batches)
	// Nothing is locked after a restore: every unsettled record is
	// delivered again, the acknowledged ones never.
	got := q.Acquire(nil, "b", t0, 100, 120, 100)
	wantR := ranges(Range{100, 100, 2}, Range{104, 109, 2}, Range{110, 119, 1})
	if !slices.Equal(got, wantR) {
		t.Fatalf("after restore acquired %v, want %v", got, wantR)
	}
}

func TestAdvanceStartDropsRecords(t *testing.T) {
	p := NewPartition(testCfg(), 0)
	p.Acquire(nil, "a", t0, 0, 5, 100)
	p.AdvanceStart(3)
	if p.StartOffset() != 3 || p.EndOffset() != 5 {
		t.Fatalf("SPSO %d SPEO %d", p.StartOffset(), p.EndOffset())
	}
	p.AdvanceStart(20)
	if p.StartOffset() != 20 || p.EndOffset() != 20 {
		t.Fatalf("past the end: SPSO %d SPEO %d", p.StartOffset(), p.EndOffset())
	}
}

// FuzzPartition drives a share-partition with random acquisitions,
// acknowledgements, releases and clock moves from three members and
// checks Kafka's guarantees after every step: a record is held by at most
// one member, never past its lock; an acknowledged or archived record is
// never acquired again; the SPSO only moves forward; delivery counts stay
// within the limit.
func FuzzPartition(f *testing.F) {
	f.Add([]byte{0, 10, 1, 2, 3, 0, 5, 4, 1, 2})
	f.Add([]byte{0, 20, 0, 20, 3, 255, 0, 20, 2, 7, 1, 1})
	f.Fuzz(func(t *testing.T, ops []byte) {
		cfg := PartitionConfig{LockDuration: 10 * time.Second, DeliveryLimit: 3, MaxRecordLocks: 16}
		p := NewPartition(cfg, 0)
		now := t0
		settled := map[int64]bool{}
		holder := map[int64]string{}
		members := []string{"a", "b", "c"}
		lastStart := int64(0)
		for len(ops) >= 2 {
			op, arg := ops[0], ops[1]
			ops = ops[2:]
			m := members[int(arg)%3]
			switch op % 5 {
			case 0: // acquire up to arg offsets past the SPSO
				from, _ := p.NextFetchOffset(now)
				for _, r := range p.Acquire(nil, m, now, from, p.StartOffset()+int64(arg%40), int(arg%7)+1) {
					for off := r.First; off <= r.Last; off++ {
						if settled[off] {
							t.Fatalf("settled offset %d acquired again", off)
						}
						if h, held := holder[off]; held {
							t.Fatalf("offset %d acquired by %s while %s holds it", off, m, h)
						}
						if r.Count > cfg.DeliveryLimit {
							t.Fatalf("offset %d delivered %d times", off, r.Count)
						}
						holder[off] = m
					}
				}
			case 1, 2: // acknowledge one offset with a type
				off := p.StartOffset() + int64(arg%8)
				typ := []int8{AckAccept, AckRelease, AckReject, AckGap}[int(op/5)%4]
				held := holder[off] == m
				if st, _ := p.State(off); st != Acquired {
					held = false
				}
				code := p.Acknowledge(m, off, off, []int8{typ}, false, now)
				if (code == 0) != held {
					t.Fatalf("ack of %d by %s (holder %q): code %d", off, m, holder[off], code)
				}
				if code == 0 {
					delete(holder, off)
					if typ != AckRelease {
						settled[off] = true
					}
				}
			case 3: // time passes; expired locks lose their holder
				now = now.Add(time.Duration(arg%12) * time.Second)
				p.Expire(now)
				for off := range holder {
					if st, _ := p.State(off); st != Acquired {
						delete(holder, off)
					}
				}
			case 4: // a member leaves
				p.ReleaseMember(m)
				for off, h := range holder {
					if h == m {
						delete(holder, off)
					}
				}
			}
			if p.StartOffset() < lastStart {
				t.Fatalf("SPSO moved back from %d to %d", lastStart, p.StartOffset())
			}
			lastStart = p.StartOffset()
			for off := range holder {
				if st, _ := p.State(off); st != Acquired {
					t.Fatalf("offset %d: held by %s but state %d", off, holder[off], st)
				}
			}
		}
	})
}
