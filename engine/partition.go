package engine

// Partition is the one owner of a partition's state on this broker. Request
// handlers, the group coordinator and the housekeeping loops reach the log
// only through it; nothing else holds the *storage.Log.
//
// It owns:
//   - the log (appends, reads, retention, rolls, compaction, close/delete);
//   - the high watermark and last stable offset, and the one place that
//     moves the high watermark (advanceHighWatermark), which wakes long-poll
//     fetches parked on the partition and acks=all produces waiting for it,
//     whoever appended: a produce, the group coordinator, later transaction
//     markers;
//   - its role: leader at epoch E, or follower of broker B at epoch E, with
//     the KIP-320 epoch fencing (checkLeader) and the NOT_LEADER_OR_FOLLOWER
//     answer handlers give when this broker does not lead it.
//
// Handlers see the narrow surface Redpanda's partition_proxy gives its
// handlers: is it the leader, its offsets, append with acks, read for a
// consumer or a follower, and the epoch lookups; the shape of the state
// follows kfake's partData, which carries leader, epoch and last stable
// offset from day one.
//
// How replication plugs in. A leader's high watermark is the smallest log
// end offset over the in-sync replicas; today the ISR is this broker alone,
// so highWatermarkTarget is the local log end offset. The replication work
// records each follower's fetch position (the offset a follower fetches
// from is its log end) in the partition, maintains the ISR, and calls
// advanceHighWatermark after each follower fetch: highWatermarkTarget becomes
// the minimum over the ISR, and everything waiting on the watermark works
// unchanged. checkMinInsync is where an acks=all append is refused with
// NOT_ENOUGH_REPLICAS when the ISR is smaller than min.insync.replicas. A
// follower (becomeFollower) refuses client appends and reads, keeps a fetch
// position in the leader's log (its own log end) and takes the high
// watermark the leader reports; becoming a follower releases every acks=all
// produce still waiting, with NOT_LEADER_OR_FOLLOWER, as Kafka does.

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-broker/sluice/storage"
)

// Partition is one partition of a topic on this broker.
type Partition struct {
	Topic *Topic
	Index int32

	// log is the partition's data. Never nil; only the methods of this
	// file use it.
	log *storage.Log
	// waiters holds the broker's parked long-poll fetches; a high
	// watermark move wakes those parked on this partition.
	waiters *fetchPurgatory
	// role is replaced whole (never mutated) under mu, so handlers read it
	// with one atomic load. Never nil after newPartition.
	role atomic.Pointer[partitionRole]

	mu struct {
		sync.Mutex
		// unreleased counts the bytes appended above the high watermark
		// since it last moved; a move hands them to the waiting fetches
		// as the bytes it made readable. Invariant: 0 whenever the high
		// watermark equals the log end offset.
		unreleased int64
		// hwWaiters are acks=all produces waiting for the high watermark.
		// Invariant: every waiter's offset is above the high watermark
		// (a move calls and drops those it reaches), and the list is
		// empty while the partition is not the leader.
		hwWaiters []hwWaiter
		// holdHW stands in, for tests, for an in-sync follower that has
		// not fetched yet: while set the high watermark does not move.
		holdHW bool
	}
}

// partitionRole says who leads the partition and at which epoch.
type partitionRole struct {
	leader bool // this broker leads the partition
	// leaderID is the broker a follower fetches from; -1 for a leader
	// (this broker) and before any role is set.
	leaderID int32
	// epoch is the leader epoch. Invariant: it never decreases from one
	// role of the partition to the next; -1 only before the first role.
	epoch int32
}

// hwWaiter is an acks=all produce waiting for the high watermark to reach
// offset (its batch's last offset + 1).
type hwWaiter struct {
	offset int64
	done   func(code int16) // 0, or why the wait ended without the offset
}

// fetchIsolation is how far a read may go, as Kafka's FetchIsolation.
type fetchIsolation int8

const (
	fetchHighWatermark fetchIsolation = iota // read_uncommitted consumers
	fetchTxnCommitted                        // read_committed consumers: up to the last stable offset
	fetchLogEnd                              // follower replicas: up to the log end offset
)

// isolationFor is the isolation of a fetch by a follower replica or by a
// consumer with the given isolation level (1 = read_committed).
func isolationFor(follower bool, isolationLevel int8) fetchIsolation {
	switch {
	case follower:
		return fetchLogEnd
	case isolationLevel == 1:
		return fetchTxnCommitted
	}
	return fetchHighWatermark
}

// newPartition wraps an opened log. The partition has no role until
// becomeLeader or becomeFollower; single-node Sluice makes every partition
// it opens the leader (openPartition).
func newPartition(t *Topic, index int32, l *storage.Log, waiters *fetchPurgatory) *Partition {
	p := &Partition{Topic: t, Index: index, log: l, waiters: waiters}
	p.role.Store(&partitionRole{leaderID: -1, epoch: -1})
	return p
}

// storedEpoch is the latest leader epoch the log recorded (0 for a new
// log): the epoch a single node leads at after a restart.
func (p *Partition) storedEpoch() int32 { return max(p.log.LatestEpoch(), 0) }

// ---- role ----

// becomeLeader makes this broker the partition's leader at epoch. As
// Kafka's leader does when it takes over, the high watermark moves to what
// the ISR has reached at once; with one replica that is the recovered log
// end, and without this move every acknowledged record above a lagging
// checkpointed watermark (an unclean stop) would stay invisible.
func (p *Partition) becomeLeader(epoch int32) {
	p.mu.Lock()
	p.role.Store(&partitionRole{leader: true, leaderID: -1, epoch: max(epoch, p.role.Load().epoch)})
	p.mu.Unlock()
	p.advanceHighWatermark()
}

// becomeFollower makes the partition follow broker leaderID at epoch: it
// refuses client appends and reads, and the acks=all produces waiting on
// it are answered NOT_LEADER_OR_FOLLOWER.
func (p *Partition) becomeFollower(leaderID, epoch int32) {
	p.mu.Lock()
	p.role.Store(&partitionRole{leaderID: leaderID, epoch: max(epoch, p.role.Load().epoch)})
	due := p.mu.hwWaiters
	p.mu.hwWaiters = nil
	p.mu.Unlock()
	for _, w := range due {
		w.done(kerr.NotLeaderForPartition.Code)
	}
}

// isLeader reports whether this broker leads the partition.
func (p *Partition) isLeader() bool { return p.role.Load().leader }

// LeaderEpoch is the partition's current leader epoch.
func (p *Partition) LeaderEpoch() int32 { return p.role.Load().epoch }

// checkLeader is the check of every handler that needs the leader:
// NOT_LEADER_OR_FOLLOWER when this broker is not, then KIP-320 fencing of
// a request that names a leader epoch: an older epoch than the partition's
// means the client's metadata is stale (FENCED_LEADER_EPOCH), a newer one
// that this broker is behind (UNKNOWN_LEADER_EPOCH). -1 skips the fencing.
func (p *Partition) checkLeader(epoch int32) int16 {
	r := p.role.Load()
	if !r.leader {
		return kerr.NotLeaderForPartition.Code
	}
	switch {
	case epoch < 0:
		return 0
	case epoch < r.epoch:
		return kerr.FencedLeaderEpoch.Code
	case epoch > r.epoch:
		return kerr.UnknownLeaderEpoch.Code
	}
	return 0
}

// acceptsFollower reports whether broker replicaID is an assigned follower
// allowed to fetch the partition. Single-node Sluice assigns none; the
// replication work answers from the partition's replica set.
func (p *Partition) acceptsFollower(replicaID int32) bool { return false }

// ---- offsets ----

// HighWatermark is the offset below which every record is committed.
func (p *Partition) HighWatermark() int64 { return p.log.HighWatermark() }

// LastStableOffset is the offset below which no transaction is open; it
// equals the high watermark until transactions exist.
func (p *Partition) LastStableOffset() int64 { return p.log.HighWatermark() }

// LogStartOffset is the first offset still in the log.
func (p *Partition) LogStartOffset() int64 { return p.log.LogStartOffset() }

// LogEndOffset is the offset the next append gets.
func (p *Partition) LogEndOffset() int64 { return p.log.LogEndOffset() }

// fetchableOffset is the end of what a reader with isolation iso may read.
func (p *Partition) fetchableOffset(iso fetchIsolation) int64 {
	switch iso {
	case fetchLogEnd:
		return p.LogEndOffset()
	case fetchTxnCommitted:
		return p.LastStableOffset()
	}
	return p.HighWatermark()
}

// latestEpoch is the newest leader epoch in the log's epoch file, -1 if none.
func (p *Partition) latestEpoch() int32 { return p.log.LatestEpoch() }

// endOffsetForEpoch is the largest epoch <= epoch the log knows and the
// offset where it ended (the log end for the latest), or -1, -1.
func (p *Partition) endOffsetForEpoch(epoch int32) (int32, int64) {
	return p.log.EndOffsetForEpoch(epoch)
}

// epochForOffset is the leader epoch that wrote offset: the smallest epoch
// whose end offset lies past it, found by binary search over the epochs the
// log knows (endOffsetForEpoch is monotonic in the epoch asked). -1 when the
// log has no epochs.
func (p *Partition) epochForOffset(offset int64) int32 {
	latest := p.latestEpoch()
	if latest < 0 {
		return -1
	}
	lo, hi := int32(0), latest
	for lo < hi {
		mid := lo + (hi-lo)/2
		if _, end := p.endOffsetForEpoch(mid); end > offset {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	found, _ := p.endOffsetForEpoch(lo)
	return found
}

// offsetForTimestamp is the base offset and max timestamp of the first
// batch whose max timestamp is >= ts.
func (p *Partition) offsetForTimestamp(ts int64) (offset, timestamp int64, ok bool) {
	return p.log.OffsetForTimestamp(ts)
}

// maxTimestamp is the offset of the batch holding the largest timestamp.
func (p *Partition) maxTimestamp() (offset, timestamp int64) { return p.log.MaxTimestamp() }

// size is the bytes the log's segments hold.
func (p *Partition) size() int64 { return p.log.Size() }

// producers lists the idempotent producers the log tracks.
func (p *Partition) producers() []storage.ProducerInfo { return p.log.Producers() }

// ---- append ----

// minInsyncReplicas is min.insync.replicas, fixed at 1 until replication
// (topicconfig.go reports it as a constant).
const minInsyncReplicas = 1

// isrSize is how many replicas are in sync: this broker alone until the
// replication work keeps an ISR.
func (p *Partition) isrSize() int { return 1 }

// checkMinInsync is the one place an acks=all append is refused because
// too few replicas are in sync (NOT_ENOUGH_REPLICAS, as Kafka's leader).
func (p *Partition) checkMinInsync(acks int16) error {
	if acks == -1 && p.isrSize() < minInsyncReplicas {
		return kerr.NotEnoughReplicas
	}
	return nil
}

// append writes a client's record sets as the leader (storage.Append
// semantics: each entry gets its Result or Err) and moves the high
// watermark. acks=-1 callers then wait for it with awaitHighWatermark.
func (p *Partition) append(entries []storage.AppendEntry, acks int16, nowMs int64) error {
	return p.appendAs(entries, storage.AppendOptions{NowMs: nowMs}, acks)
}

// appendInternal writes one batch of the broker's own (a coordinator's
// record, e.g. __consumer_offsets) and moves the high watermark, waking the
// fetches waiting on the partition, exactly as a produce does.
func (p *Partition) appendInternal(batch []byte, nowMs int64) (storage.AppendResult, error) {
	entries := []storage.AppendEntry{{Records: batch}}
	if err := p.appendAs(entries, storage.AppendOptions{NowMs: nowMs}, 1); err != nil {
		return storage.AppendResult{}, err
	}
	return entries[0].Result, entries[0].Err
}

// appendAs appends under mu, so that the bytes it counts as unreleased are
// exactly those between the high watermark and the log end it leaves.
func (p *Partition) appendAs(entries []storage.AppendEntry, opt storage.AppendOptions, acks int16) error {
	if err := p.appendable(acks); err != nil {
		for i := range entries {
			entries[i].Err = err
		}
		return err
	}
	p.mu.Lock()
	opt.LeaderEpoch = p.LeaderEpoch()
	err := p.log.Append(entries, opt)
	for i := range entries {
		if e := &entries[i]; e.Err == nil && !e.Result.Duplicate {
			p.mu.unreleased += int64(len(e.Records))
		}
	}
	moved, due := p.moveHighWatermarkLocked()
	p.mu.Unlock()
	p.released(moved, due)
	return err
}

func (p *Partition) appendable(acks int16) error {
	if !p.isLeader() {
		return kerr.NotLeaderForPartition
	}
	return p.checkMinInsync(acks)
}

// ---- high watermark ----

// highWatermarkTarget is the offset every in-sync replica has reached:
// the local log end while the ISR is this broker alone. The replication
// work makes it the minimum over the ISR's log end offsets.
func (p *Partition) highWatermarkTarget() int64 { return p.log.LogEndOffset() }

// advanceHighWatermark moves the high watermark to what the ISR has
// reached and wakes what waits on it. Anything that may have let the ISR
// progress calls it: an append, a leader change, later a follower fetch.
func (p *Partition) advanceHighWatermark() {
	p.mu.Lock()
	moved, due := p.moveHighWatermarkLocked()
	p.mu.Unlock()
	p.released(moved, due)
}

// moveHighWatermarkLocked moves the watermark up (never down: reading the
// target and storing it are one step under mu, so racing appenders cannot
// store an older end after a newer one). It returns the bytes it made
// readable (0 if it did not move) and the acks=all waiters it satisfied.
func (p *Partition) moveHighWatermarkLocked() (readable int64, due []hwWaiter) {
	old, target := p.log.HighWatermark(), p.highWatermarkTarget()
	if p.mu.holdHW || !p.isLeader() || target <= old {
		return 0, nil
	}
	p.log.SetHighWatermark(target)
	// A move made at least one byte readable, even one whose bytes were
	// appended before the partition was opened.
	readable = max(p.mu.unreleased, 1)
	if target == p.log.LogEndOffset() {
		p.mu.unreleased = 0
	}
	if len(p.mu.hwWaiters) > 0 {
		due = p.takeReachedLocked(target)
	}
	return readable, due
}

// takeReachedLocked removes and returns the waiters whose offset is at or
// below hw.
func (p *Partition) takeReachedLocked(hw int64) []hwWaiter {
	var due []hwWaiter
	keep := p.mu.hwWaiters[:0]
	for _, w := range p.mu.hwWaiters {
		if w.offset <= hw {
			due = append(due, w)
		} else {
			keep = append(keep, w)
		}
	}
	clear(p.mu.hwWaiters[len(keep):])
	p.mu.hwWaiters = keep
	return due
}

// released tells the waiters of a high watermark move about it, outside
// mu: their callbacks read the partition and answer requests.
func (p *Partition) released(readable int64, due []hwWaiter) {
	if readable > 0 && p.waiters != nil {
		p.waiters.wake(p, readable)
	}
	for _, w := range due {
		w.done(0)
	}
}

// awaitHighWatermark waits for the high watermark to reach offset (an
// acks=all produce: its batch's last offset + 1). When it cannot wait it
// returns waiting false with the answer: 0 if the watermark is there
// already, NOT_LEADER_OR_FOLLOWER if the partition is not led here.
// Otherwise done is called exactly once, from the goroutine that moves the
// watermark (code 0) or that takes the leadership away (its error code).
func (p *Partition) awaitHighWatermark(offset int64, done func(code int16)) (code int16, waiting bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case !p.isLeader():
		return kerr.NotLeaderForPartition.Code, false
	case p.log.HighWatermark() >= offset:
		return 0, false
	}
	p.mu.hwWaiters = append(p.mu.hwWaiters, hwWaiter{offset: offset, done: done})
	return 0, true
}

// holdHighWatermark stops (hold) or resumes high watermark moves; tests use
// it to stand for an in-sync follower that has not caught up.
func (p *Partition) holdHighWatermark(hold bool) {
	p.mu.Lock()
	p.mu.holdHW = hold
	p.mu.Unlock()
	if !hold {
		p.advanceHighWatermark()
	}
}

// ---- read ----

// read returns the batches from the one holding offset, up to maxBytes
// (the first batch whole, KIP-74) and no further than iso allows, as a
// region of the segment file: the fetch path splices it to the socket.
// The last stable offset equals the high watermark until transactions
// exist; with them, storage.Read takes the limit offset.
func (p *Partition) read(offset int64, maxBytes int32, iso fetchIsolation) (storage.Region, error) {
	return p.log.Read(offset, maxBytes, iso == fetchLogEnd)
}

// checkFetchOffset validates where a reader fetches from: an offset outside
// [log start, log end] is OFFSET_OUT_OF_RANGE, as in Kafka.
func (p *Partition) checkFetchOffset(offset int64) int16 {
	if offset < p.LogStartOffset() || offset > p.LogEndOffset() {
		return kerr.OffsetOutOfRange.Code
	}
	return 0
}

// scan feeds the log from its start to its end to fn, in chunks of whole
// batches of up to chunk bytes (a larger batch comes alone); fn returns the
// offset after the last batch it used, where the next chunk starts. The
// group coordinator replays __consumer_offsets with it.
func (p *Partition) scan(chunk int32, fn func(batches []byte) (next int64, err error)) error {
	off, end := p.LogStartOffset(), p.LogEndOffset()
	var buf []byte
	for off < end {
		reg, err := p.read(off, chunk, fetchLogEnd)
		if err != nil {
			return fmt.Errorf("read offset %d: %w", off, err)
		}
		if reg.Len == 0 {
			return fmt.Errorf("read offset %d: nothing before end offset %d", off, end)
		}
		if int64(cap(buf)) < reg.Len {
			buf = make([]byte, reg.Len)
		}
		buf = buf[:reg.Len]
		if n, err := reg.File.ReadAt(buf, reg.Pos); n < len(buf) {
			return fmt.Errorf("read offset %d: %w", off, errors.Join(err, io.ErrUnexpectedEOF))
		}
		next, err := fn(buf)
		if err != nil {
			return fmt.Errorf("batch at offset %d: %w", off, err)
		}
		if next <= off {
			return fmt.Errorf("no progress at offset %d", off)
		}
		off = next
	}
	return nil
}

// ---- housekeeping ----

// setConfig applies new topic settings to the log.
func (p *Partition) setConfig(cfg storage.Config) { p.log.SetConfig(cfg) }

// maybeRoll rolls the active segment if segment.ms says so.
func (p *Partition) maybeRoll(nowMs int64) error { return p.log.MaybeRoll(nowMs) }

// enforceRetention deletes the segments retention.ms/bytes let go.
func (p *Partition) enforceRetention(nowMs int64) (deletedSegments int, err error) {
	return p.log.EnforceRetention(nowMs)
}

// deleteRecordsBefore moves the log start up to offset (-1: the high
// watermark) and returns the new log start (DeleteRecords).
func (p *Partition) deleteRecordsBefore(offset int64) (int64, error) {
	return p.log.DeleteRecordsBefore(offset)
}

// compactionDue reports whether the log cleaner should compact the log now.
func (p *Partition) compactionDue(nowMs int64) bool { return p.log.CompactionDue(nowMs) }

// compact runs one log-cleaner pass over the log.
func (p *Partition) compact(nowMs int64) (storage.CompactStats, error) {
	return p.log.Compact(nowMs)
}

// close gives up the partition (answering its waiting produces) and closes
// its log.
func (p *Partition) close() error {
	p.becomeFollower(-1, p.LeaderEpoch())
	return p.log.Close()
}

// delete gives up the partition and removes its data.
func (p *Partition) delete() error {
	p.becomeFollower(-1, p.LeaderEpoch())
	return p.log.Delete()
}

// lookupPartition returns partition idx of t, or UNKNOWN_TOPIC_OR_PARTITION
// when t is nil or has no such partition.
func lookupPartition(t *Topic, idx int32) (*Partition, int16) {
	if t == nil {
		return nil, kerr.UnknownTopicOrPartition.Code
	}
	if p := t.Partition(idx); p != nil {
		return p, 0
	}
	return nil, kerr.UnknownTopicOrPartition.Code
}
