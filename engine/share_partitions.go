package engine

// Share-partitions on their topic partition's leader: loaded from the
// share coordinator (or started at share.auto.offset.reset) on a group's
// first use, read from the log and acquired for a member, written back
// after every change an acknowledgement or a release makes, and dropped
// when the partition's leader epoch moves on (another leader may have
// written since). ShareFetches waiting for records are parked on their
// partitions and woken by new records (the fetch purgatory) or released
// ones (wakeParked).

import (
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-broker/sluice/engine/share"
	"github.com/sluice-broker/sluice/record"
	"github.com/sluice-broker/sluice/storage"
)

// sharePart is one share-partition and the lock that orders its changes
// and their writes to the share coordinator.
type sharePart struct {
	mu    sync.Mutex
	key   share.SPKey
	sp    *share.Partition
	epoch int32 // the state epoch it was loaded at
	// leaderEpoch is the partition's leader epoch when it was loaded; a
	// share-partition is loaded again under a new one.
	leaderEpoch int32
	// persisted is the last state written (start offset and batches), so
	// only changes are written.
	persistedStart int64
	persisted      []share.StateBatch
}

// part returns the share-partition of key on p (led here), loading its
// state from the share coordinator or initializing it at
// share.auto.offset.reset.
func (s *shareBroker) part(key share.SPKey, p *Partition) (*sharePart, int16) {
	epoch := p.LeaderEpoch()
	s.mu.Lock()
	sp := s.mu.parts[key]
	if sp != nil && sp.leaderEpoch != epoch {
		// Leadership went away and came back: what is cached here may be
		// older than what another leader wrote meanwhile.
		delete(s.mu.parts, key)
		sp = nil
	}
	s.mu.Unlock()
	if sp != nil {
		return sp, 0
	}
	if code := s.ensureStates(); code != 0 {
		return nil, code
	}
	cfg := s.b.sharePartitionConfig(key.Group)
	snap, found, code := s.readState(key)
	if code != 0 {
		return nil, code
	}
	sp = &sharePart{key: key, leaderEpoch: epoch}
	if found {
		sp.sp = share.RestorePartition(cfg, snap.StartOffset, snap.Batches)
		sp.epoch = snap.StateEpoch
	} else {
		sp.epoch = snap.StateEpoch // past a deletion's, if any
		sp.sp = share.NewPartition(cfg, s.b.shareResetOffset(key.Group, p))
		if code := sp.persist(s); code != 0 {
			return nil, code
		}
	}
	sp.persistedStart, sp.persisted = sp.sp.Snapshot(nil)
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur := s.mu.parts[key]; cur != nil {
		return cur, 0
	}
	s.mu.parts[key] = sp
	return sp, 0
}

// shareResetOffset is where a new share-partition starts:
// share.auto.offset.reset (latest by default).
func (b *Broker) shareResetOffset(groupName string, p *Partition) int64 {
	v := b.GroupConfigs(groupName)["share.auto.offset.reset"]
	switch {
	case v == "earliest":
		return p.LogStartOffset()
	case strings.HasPrefix(v, "by_duration:"):
		d, ok := parseISODuration(strings.TrimPrefix(v, "by_duration:"))
		if ok {
			if off, _, found := p.offsetForTimestamp(time.Now().Add(-d).UnixMilli()); found {
				return off
			}
		}
	}
	return p.HighWatermark()
}

// parseISODuration reads the PnDTnHnMn.nS form checkShareAutoOffsetReset
// accepts.
func parseISODuration(s string) (time.Duration, bool) {
	m := isoDuration.FindStringSubmatch(s)
	if m == nil {
		return 0, false
	}
	var d time.Duration
	for _, part := range []struct {
		s    string
		unit time.Duration
	}{{m[1], 24 * time.Hour}, {m[3], time.Hour}, {m[4], time.Minute}, {m[5], time.Second}} {
		if part.s == "" {
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimRight(strings.ToUpper(part.s), "DHMS"), 64)
		if err != nil {
			return 0, false
		}
		d += time.Duration(f * float64(part.unit))
	}
	return d, true
}

// persist writes the share-partition's state to the share coordinator if
// it changed since the last write; sp.mu is held (or sp unpublished).
func (sp *sharePart) persist(s *shareBroker) int16 {
	start, batches := sp.sp.Snapshot(nil)
	if start == sp.persistedStart && equalBatches(batches, sp.persisted) && sp.persisted != nil {
		return 0
	}
	_, settled := sp.sp.InFlight()
	v := share.SnapshotValue{StateEpoch: sp.epoch, LeaderEpoch: sp.leaderEpoch, StartOffset: start,
		DeliveryCompleteCount: int32(settled), Batches: batches}
	if code := s.writeState(sp.key, v); code != 0 {
		if code == kerr.FencedStateEpoch.Code {
			// An admin reset or delete happened since this state was
			// loaded: forget it; the next use loads the new one.
			s.dropParts(func(k share.SPKey) bool { return k == sp.key })
		}
		return code
	}
	sp.persistedStart, sp.persisted = start, batches
	if sp.persisted == nil {
		sp.persisted = []share.StateBatch{}
	}
	return 0
}

// equalBatches compares persisted states, ignoring delivery counts of
// Available records (an acquisition is not written, as in Kafka).
func equalBatches(a, b []share.StateBatch) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.First != y.First || x.Last != y.Last || x.State != y.State || (x.State != share.Available && x.Count != y.Count) {
			return false
		}
	}
	return true
}

// memberGone releases what a member that left holds in every
// share-partition of its group, and drops its share session.
func (s *shareBroker) memberGone(groupName, member string) {
	s.mu.Lock()
	delete(s.mu.sessions, shareSessionKey{groupName, member})
	var parts []*sharePart
	for k, sp := range s.mu.parts {
		if k.Group == groupName {
			parts = append(parts, sp)
		}
	}
	s.mu.Unlock()
	for _, sp := range parts {
		s.releaseMember(sp, member)
	}
}

// releaseMember releases what member holds in sp and wakes the fetches
// parked on its partition.
func (s *shareBroker) releaseMember(sp *sharePart, member string) {
	sp.mu.Lock()
	n := sp.sp.ReleaseMember(member)
	if n > 0 {
		sp.persist(s)
	}
	sp.mu.Unlock()
	if n == 0 {
		return
	}
	if p, code := s.b.sharePartitionLed(shareTP{sp.key.TopicID, sp.key.Partition}); code == 0 {
		s.wakeParked(p)
	}
}

// dropParts forgets share-partitions (their leadership moved, the group
// or its offsets were deleted, an admin reset).
func (s *shareBroker) dropParts(match func(share.SPKey) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.mu.parts {
		if match(k) {
			delete(s.mu.parts, k)
		}
	}
}

// ---- reading records to acquire ----

// acquire acquires for member the records a read of p from the
// share-partition's next fetch offset covers, and returns them as the
// log's file region (spliced into the answer), cut after the batch of
// the last offset acquired. A read_committed group
// (share.isolation.level) reads to the last stable offset; when aborted
// transactions fall in the read, the records are read into *buf instead
// (returned as bytes), so that their batches can be archived at once,
// never delivered.
func (s *shareBroker) acquire(sp *sharePart, p *Partition, member string, maxBytes int32, maxRecords int, buf *[]byte) (shareRecords, []share.Range, int16) {
	iso := s.b.shareIsolation(sp.key.Group)
	sp.mu.Lock()
	defer sp.mu.Unlock()
	now := time.Now()
	sp.sp.AdvanceStart(p.LogStartOffset())
	from, ok := sp.sp.NextFetchOffset(now)
	if !ok || from >= p.fetchableOffset(iso) {
		sp.persist(s) // expired locks may have archived records
		return shareRecords{}, nil, 0
	}
	reg, err := p.read(from, maxBytes, iso)
	if err != nil || reg.Len == 0 {
		return shareRecords{}, nil, ErrorCode(err)
	}
	if iso == fetchTxnCommitted && len(p.abortedTxns(nil, from, reg.NextOffset)) > 0 {
		defer reg.Release() // read into *buf
		return s.acquireCommitted(sp, p, member, reg, from, maxRecords, buf, now)
	}
	ranges := sp.sp.Acquire(nil, member, now, from, reg.NextOffset, maxRecords)
	if len(ranges) == 0 {
		reg.Release()
		return shareRecords{}, nil, 0
	}
	return shareRecords{region: cutRegion(p, reg, ranges[len(ranges)-1].Last, iso)}, ranges, 0
}

// shareRecords are a partition's records in a ShareFetch answer: a file
// region, or bytes read into a pooled buffer.
type shareRecords struct {
	region storage.Region
	bytes  []byte
}

// cutRegion ends reg after the batch holding offset last (a read of one
// byte from it returns that batch whole), when that batch is in reg. The
// result holds reg's reference.
func cutRegion(p *Partition, reg storage.Region, last int64, iso fetchIsolation) storage.Region {
	b, err := p.read(last, 1, iso)
	defer b.Release()
	if err != nil || b.File != reg.File || b.Pos < reg.Pos || b.Pos+b.Len > reg.Pos+reg.Len {
		return reg
	}
	reg.Len, reg.NextOffset = b.Pos+b.Len-reg.Pos, b.NextOffset
	return reg
}

// acquireCommitted is acquire through memory for a read_committed read
// with aborted transactions in it. sp.mu is held.
func (s *shareBroker) acquireCommitted(sp *sharePart, p *Partition, member string, reg storage.Region, from int64, maxRecords int, buf *[]byte, now time.Time) (shareRecords, []share.Range, int16) {
	if int64(cap(*buf)) < reg.Len {
		*buf = make([]byte, reg.Len)
	}
	b := (*buf)[:reg.Len]
	if n, err := reg.File.ReadAt(b, reg.Pos); n < len(b) {
		s.b.log.Warn("share fetch read", "err", err)
		return shareRecords{}, nil, kerr.UnknownServerError.Code
	}
	lo, hi := batchSpan(b)
	ranges := sp.sp.Acquire(nil, member, now, max(lo, from), hi, maxRecords)
	if len(ranges) > 0 {
		ranges = s.archiveAborted(sp, p, member, b, ranges, now)
	}
	if len(ranges) == 0 {
		return shareRecords{}, nil, 0
	}
	return shareRecords{bytes: trimBatches(b, ranges[0].First, ranges[len(ranges)-1].Last)}, ranges, 0
}

// shareReadBufs are the buffers ShareFetch reads records into; one
// larger than maxPooledShareRead is not kept.
var shareReadBufs = sync.Pool{New: func() any { return new([]byte) }}

const maxPooledShareRead = 1 << 20

// shareIsolation is how far a group's share-partitions read.
func (b *Broker) shareIsolation(group string) fetchIsolation {
	if b.GroupConfigs(group)["share.isolation.level"] == "read_committed" {
		return fetchTxnCommitted
	}
	return fetchHighWatermark
}

// archiveAborted archives the acquired records of aborted transactions
// in buf (member holds them: it rejects them in its place) and returns
// the ranges without them.
func (s *shareBroker) archiveAborted(sp *sharePart, p *Partition, member string, buf []byte, ranges []share.Range, now time.Time) []share.Range {
	aborted := p.abortedTxns(nil, ranges[0].First, ranges[len(ranges)-1].Last+1)
	if len(aborted) == 0 {
		return ranges
	}
	for b := buf; len(b) >= record.HeaderLen; {
		h, err := record.ParseHeader(b)
		if err != nil || h.Size() > int64(len(b)) || h.Size() < record.HeaderLen {
			break
		}
		b = b[h.Size():]
		if !h.IsTransactional() || h.IsControl() || !inAborted(aborted, h.ProducerID, h.BaseOffset) {
			continue
		}
		for _, r := range ranges {
			first, last := max(r.First, h.BaseOffset), min(r.Last, h.LastOffset())
			if first <= last {
				sp.sp.Acknowledge(member, first, last, []int8{share.AckReject}, false, now)
			}
		}
	}
	return heldRanges(sp.sp, ranges)
}

func inAborted(aborted []storage.AbortedTxn, pid, offset int64) bool {
	for _, t := range aborted {
		if t.ProducerID == pid && offset >= t.FirstOffset && offset < t.LastOffset {
			return true
		}
	}
	return false
}

// heldRanges keeps the offsets of ranges still Acquired.
func heldRanges(sp *share.Partition, ranges []share.Range) []share.Range {
	var out []share.Range
	for _, r := range ranges {
		for off := r.First; off <= r.Last; off++ {
			if st, _ := sp.State(off); st != share.Acquired {
				continue
			}
			if n := len(out); n > 0 && out[n-1].Last == off-1 && out[n-1].Count == r.Count {
				out[n-1].Last = off
				continue
			}
			out = append(out, share.Range{First: off, Last: off, Count: r.Count})
		}
	}
	return out
}

// batchSpan is the offsets the whole batches in b cover: the first base
// offset and the offset after the last batch.
func batchSpan(b []byte) (lo, hi int64) {
	lo, hi = -1, -1
	for len(b) >= record.HeaderLen {
		h, err := record.ParseHeader(b)
		if err != nil || h.Size() > int64(len(b)) || h.Size() < record.HeaderLen {
			break
		}
		if lo < 0 {
			lo = h.BaseOffset
		}
		hi = h.NextOffset()
		b = b[h.Size():]
	}
	return lo, hi
}

// trimBatches keeps the batches of b that hold offsets in [first, last].
func trimBatches(b []byte, first, last int64) []byte {
	start, end := -1, 0
	pos := 0
	for pos+record.HeaderLen <= len(b) {
		h, err := record.ParseHeader(b[pos:])
		if err != nil || h.Size() > int64(len(b)-pos) || h.Size() < record.HeaderLen {
			break
		}
		size := int(h.Size())
		if h.NextOffset() > first && h.BaseOffset <= last {
			if start < 0 {
				start = pos
			}
			end = pos + size
		}
		pos += size
	}
	if start < 0 {
		return nil
	}
	return b[start:end]
}

// parkedFetch is a ShareFetch parked in the fetch purgatory, listed so
// that released records wake it. Its fields are guarded by
// shareBroker.mu.
type parkedFetch struct {
	w    *fetchWaiter
	done bool // its answer started: not to be listed again
}

// parkAlso lists a parked ShareFetch under its partitions, unless its
// answer already started.
func (s *shareBroker) parkAlso(parts []*Partition, tok *parkedFetch, w *fetchWaiter) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if tok.done {
		return
	}
	tok.w = w
	for _, p := range parts {
		s.mu.parked[p] = append(s.mu.parked[p], tok)
	}
}

// unpark removes a ShareFetch whose answer is starting.
func (s *shareBroker) unpark(parts []*Partition, tok *parkedFetch) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tok.done = true
	for _, p := range parts {
		ws := slices.DeleteFunc(s.mu.parked[p], func(o *parkedFetch) bool { return o == tok })
		if len(ws) == 0 {
			delete(s.mu.parked, p)
			continue
		}
		s.mu.parked[p] = ws
	}
}

// wakeParked answers the ShareFetches parked on p: records there were
// released and may be acquired again.
func (s *shareBroker) wakeParked(p *Partition) {
	s.mu.Lock()
	ws := make([]*fetchWaiter, 0, len(s.mu.parked[p]))
	for _, tok := range s.mu.parked[p] {
		ws = append(ws, tok.w)
	}
	s.mu.Unlock()
	for _, w := range ws {
		w.complete()
	}
}
