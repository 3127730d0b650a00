package share

// A share-partition: one share group's view of one topic partition, kept
// by the partition's leader. Offsets below the share-partition start
// offset (SPSO) are settled; offsets from the end offset (SPEO) on were
// never handed out. Between them every record has a state:
//
//	          acquire (count+1, lock until now+lock.duration)
//	Available ───────────────────────────────────────────────▶ Acquired
//	    ▲        release, lock expiry (count < limit)              │
//	    └──────────────────────────────────────────────────────────┤
//	                 accept, gap                                   │
//	Acknowledged ◀─────────────────────────────────────────────────┤
//	                 reject; release or expiry at count = limit    │
//	Archived ◀─────────────────────────────────────────────────────┘
//
// A record is Acquired by at most one member at a time (so it is never
// delivered to two consumers while its lock is held), and only the member
// holding it may acknowledge it; Acknowledged and Archived are final (no
// acknowledged record is delivered again). The SPSO moves past every
// settled record at the front. The window SPEO-SPSO is bounded by
// share.partition.max.record.locks: no record past it is acquired until
// the front settles.

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// RecordState is a record's state; the numbers are Kafka's, persisted as
// the DeliveryState of a state batch (Acquired is never persisted: a lock
// does not survive a restart).
type RecordState int8

const (
	Available    RecordState = 0
	Acquired     RecordState = 1
	Acknowledged RecordState = 2
	Archived     RecordState = 4
)

// Acknowledge types of ShareFetch and ShareAcknowledge.
const (
	AckGap     int8 = 0 // no record at the offset (compacted, control): settled
	AckAccept  int8 = 1
	AckRelease int8 = 2 // give it back for redelivery
	AckReject  int8 = 3 // unprocessable: archive
	AckRenew   int8 = 4 // KIP-1222: keep the lock another lock duration
)

// PartitionConfig is what a share-partition takes from its group's configs.
type PartitionConfig struct {
	LockDuration   time.Duration // share.record.lock.duration.ms; > 0
	DeliveryLimit  int16         // share.delivery.count.limit; >= 1
	MaxRecordLocks int           // share.partition.max.record.locks; >= 1
}

// inflight is one record between the SPSO and the SPEO.
type inflight struct {
	state    RecordState
	count    int16  // deliveries so far
	member   string // holder; set only while Acquired
	deadline int64  // lock expiry in Unix ns; set only while Acquired
}

// Partition is one share-partition's in-flight state. It is not safe for
// concurrent use: its owner serialises calls.
type Partition struct {
	cfg   PartitionConfig
	start int64 // the SPSO
	// recs[i] is the record at start+i; the SPEO is start+len(recs).
	// Invariant: recs[0] is Available or Acquired (settled records at the
	// front are dropped at once), and len(recs) <= cfg.MaxRecordLocks
	// unless the limit was lowered while records were in flight.
	recs []inflight
	// nextExpiry is no later than the earliest lock deadline (Unix ns);
	// math.MaxInt64-like when nothing is Acquired.
	nextExpiry int64
}

const noExpiry = int64(^uint64(0) >> 1)

// NewPartition starts a share-partition whose first record to deliver is
// at start.
func NewPartition(cfg PartitionConfig, start int64) *Partition {
	return &Partition{cfg: cfg, start: start, nextExpiry: noExpiry}
}

// SetConfig applies changed group configs; records in flight keep their
// locks and counts.
func (p *Partition) SetConfig(cfg PartitionConfig) { p.cfg = cfg }

// StartOffset is the SPSO.
func (p *Partition) StartOffset() int64 { return p.start }

// EndOffset is the SPEO: the first offset never acquired.
func (p *Partition) EndOffset() int64 { return p.start + int64(len(p.recs)) }

// State reports a record's state and delivery count; offsets below the
// SPSO are Acknowledged or Archived (reported as Acknowledged), those from
// the SPEO on Available with no delivery.
func (p *Partition) State(offset int64) (RecordState, int16) {
	switch {
	case offset < p.start:
		return Acknowledged, 0
	case offset >= p.EndOffset():
		return Available, 0
	}
	r := &p.recs[offset-p.start]
	return r.state, r.count
}

// InFlight counts the records between the SPSO and SPEO that are not
// settled yet, and those settled (Kafka's DeliveryCompleteCount).
func (p *Partition) InFlight() (pending, settled int) {
	for i := range p.recs {
		if s := p.recs[i].state; s == Acknowledged || s == Archived {
			settled++
		} else {
			pending++
		}
	}
	return pending, settled
}

// NextFetchOffset expires the locks due by now and returns where the next
// acquisition starts: the first Available record in flight, else the SPEO.
// ok is false when nothing can be acquired: no record is Available and
// the window is full.
func (p *Partition) NextFetchOffset(now time.Time) (offset int64, ok bool) {
	p.Expire(now)
	for i := range p.recs {
		if p.recs[i].state == Available {
			return p.start + int64(i), true
		}
	}
	return p.EndOffset(), len(p.recs) < p.cfg.MaxRecordLocks
}

// Range is a run of acquired offsets, first to last inclusive, all
// delivered Count times (this delivery included).
type Range struct {
	First, Last int64
	Count       int16
}

// Acquire gives member the acquirable records in [lo, hi) — the offsets
// the batches read from the log cover — up to max records: Available
// records in flight first, then new ones from the SPEO while the window
// has room. Each gets a lock until now + the lock duration. The ranges
// are in offset order and appended to dst.
func (p *Partition) Acquire(dst []Range, member string, now time.Time, lo, hi int64, max int) []Range {
	p.Expire(now)
	deadline := now.Add(p.cfg.LockDuration).UnixNano()
	lo = maxInt64(lo, p.start)
	for off := lo; off < hi && max > 0; off++ {
		i := off - p.start
		if i == int64(len(p.recs)) {
			if len(p.recs) >= p.cfg.MaxRecordLocks {
				break
			}
			p.recs = append(p.recs, inflight{})
		}
		r := &p.recs[i]
		if r.state != Available {
			continue
		}
		r.state, r.member, r.deadline = Acquired, member, deadline
		r.count++
		max--
		dst = appendRange(dst, off, r.count)
	}
	p.nextExpiry = min(p.nextExpiry, deadline)
	return dst
}

// appendRange adds off to the last range when it continues it.
func appendRange(dst []Range, off int64, count int16) []Range {
	if n := len(dst); n > 0 && dst[n-1].Last == off-1 && dst[n-1].Count == count {
		dst[n-1].Last = off
		return dst
	}
	return append(dst, Range{First: off, Last: off, Count: count})
}

// Acknowledge applies one acknowledgement batch of member: types holds one
// type for every offset from first to last, or a single type for all.
// Every record must be Acquired by member (its lock not expired by now),
// else nothing changes and the answer is INVALID_RECORD_STATE; a malformed
// batch is INVALID_REQUEST. renew says whether RENEW is allowed.
func (p *Partition) Acknowledge(member string, first, last int64, types []int8, renew bool, now time.Time) int16 {
	if code := checkAckBatch(first, last, types, renew); code != 0 {
		return code
	}
	p.Expire(now)
	if first < p.start || last >= p.EndOffset() {
		return kerr.InvalidRecordState.Code
	}
	for off := first; off <= last; off++ {
		r := &p.recs[off-p.start]
		if r.state != Acquired || r.member != member {
			return kerr.InvalidRecordState.Code
		}
	}
	deadline := now.Add(p.cfg.LockDuration).UnixNano()
	for off := first; off <= last; off++ {
		p.settle(&p.recs[off-p.start], ackType(types, off-first), deadline)
	}
	p.advance()
	return 0
}

// checkAckBatch validates an acknowledgement batch's shape.
func checkAckBatch(first, last int64, types []int8, renew bool) int16 {
	if first < 0 || last < first || len(types) == 0 ||
		(len(types) != 1 && int64(len(types)) != last-first+1) {
		return kerr.InvalidRequest.Code
	}
	for _, t := range types {
		if t < AckGap || t > AckRenew || (t == AckRenew && !renew) {
			return kerr.InvalidRequest.Code
		}
	}
	return 0
}

func ackType(types []int8, i int64) int8 {
	if len(types) == 1 {
		return types[0]
	}
	return types[i]
}

// settle applies one acknowledgement to an Acquired record.
func (p *Partition) settle(r *inflight, t int8, renewTo int64) {
	switch t {
	case AckGap, AckAccept:
		*r = inflight{state: Acknowledged, count: r.count}
	case AckReject:
		*r = inflight{state: Archived, count: r.count}
	case AckRelease:
		p.release(r)
	case AckRenew:
		r.deadline = renewTo
		p.nextExpiry = min(p.nextExpiry, renewTo)
	}
}

// release gives an Acquired record back: Available for redelivery, or
// Archived once it has been delivered DeliveryLimit times.
func (p *Partition) release(r *inflight) {
	if r.count >= p.cfg.DeliveryLimit {
		*r = inflight{state: Archived, count: r.count}
		return
	}
	*r = inflight{state: Available, count: r.count}
}

// Expire releases every record whose lock is due by now and reports how
// many it released.
func (p *Partition) Expire(now time.Time) int {
	ns := now.UnixNano()
	if ns < p.nextExpiry {
		return 0
	}
	n, next := 0, noExpiry
	for i := range p.recs {
		r := &p.recs[i]
		if r.state != Acquired {
			continue
		}
		if r.deadline <= ns {
			p.release(r)
			n++
			continue
		}
		next = min(next, r.deadline)
	}
	p.nextExpiry = next
	p.advance()
	return n
}

// ReleaseMember releases every record member holds (it left the group or
// closed its share session) and reports how many.
func (p *Partition) ReleaseMember(member string) int {
	n := 0
	for i := range p.recs {
		if r := &p.recs[i]; r.state == Acquired && r.member == member {
			p.release(r)
			n++
		}
	}
	p.advance()
	return n
}

// AdvanceStart moves the SPSO to at least offset (the log start moved past
// it, or an admin reset forward): records below it are gone.
func (p *Partition) AdvanceStart(offset int64) {
	if offset <= p.start {
		return
	}
	drop := min(offset-p.start, int64(len(p.recs)))
	p.recs = p.recs[drop:]
	p.start = offset
	if len(p.recs) == 0 {
		p.recs = nil
	}
	p.advance()
}

// Reset starts the share-partition over at offset, forgetting every
// record in flight (AlterShareGroupOffsets on an empty group).
func (p *Partition) Reset(offset int64) {
	p.start, p.recs, p.nextExpiry = offset, nil, noExpiry
}

// advance moves the SPSO past the settled records at the front.
func (p *Partition) advance() {
	i := 0
	for i < len(p.recs) && (p.recs[i].state == Acknowledged || p.recs[i].state == Archived) {
		i++
	}
	if i == 0 {
		return
	}
	p.start += int64(i)
	p.recs = p.recs[i:]
	if len(p.recs) == 0 {
		p.recs = nil // let the array go
	}
}

// StateBatch is a run of records with one persisted state and delivery
// count, as Kafka's share coordinator stores them.
type StateBatch struct {
	First, Last int64
	State       RecordState // Available, Acknowledged or Archived
	Count       int16
}

// Snapshot returns the SPSO and the state batches of the records in
// flight, appended to dst. An Acquired record is persisted as Available
// with its count: its lock does not outlive this leader.
func (p *Partition) Snapshot(dst []StateBatch) (int64, []StateBatch) {
	for i := range p.recs {
		r := &p.recs[i]
		st := r.state
		if st == Acquired {
			st = Available
		}
		off := p.start + int64(i)
		if n := len(dst); n > 0 && dst[n-1].Last == off-1 && dst[n-1].State == st && dst[n-1].Count == r.count {
			dst[n-1].Last = off
			continue
		}
		dst = append(dst, StateBatch{First: off, Last: off, State: st, Count: r.count})
	}
	return p.start, dst
}

// RestorePartition rebuilds a share-partition from a snapshot. Batches
// below start are ignored; an Acquired state is read as Available.
// Offsets between batches are Available, never delivered.
func RestorePartition(cfg PartitionConfig, start int64, batches []StateBatch) *Partition {
	p := NewPartition(cfg, start)
	for _, b := range batches {
		if b.Last < start || b.Last < b.First {
			continue
		}
		for int64(len(p.recs)) <= b.Last-start {
			p.recs = append(p.recs, inflight{})
		}
		st := b.State
		if st != Acknowledged && st != Archived {
			st = Available
		}
		for off := maxInt64(b.First, start); off <= b.Last; off++ {
			p.recs[off-start] = inflight{state: st, count: b.Count}
		}
	}
	p.trimTail()
	p.advance()
	return p
}

// trimTail drops never-delivered Available records at the end: they are
// the same as records past the SPEO.
func (p *Partition) trimTail() {
	n := len(p.recs)
	for n > 0 && p.recs[n-1].state == Available && p.recs[n-1].count == 0 {
		n--
	}
	p.recs = p.recs[:n]
}

func maxInt64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}
