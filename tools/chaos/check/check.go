// Package check is the Jepsen-style checker of Sluice's fault tests
// (internal/testcluster's TestDurability and the chaos harness in
// tools/chaos). Clients record what they saw in a History — every value a
// producer sent and how it was answered, every record a consumer polled,
// every offset commit that succeeded — and after the faults have healed a
// fresh reader takes each partition from its start to its high watermark
// (ReadLogs). Check then compares the two and names each anomaly by kind;
// Replicas compares the replicas' .log bytes below the HW.
//
// Values are ints handed out by History.Send in increasing order, so
// "sent before" is "smaller" for one producer, and a value names the one
// producer, partition and send that made it.
package check

import (
	"bufio"
	"fmt"
	"io"
	"sort"
	"strconv"
	"sync"
	"time"
)

// Kind names an anomaly.
type Kind string

// The anomalies the checker knows: Jepsen's list for Kafka, plus what a
// dense, single-writer-per-value log allows us to see.
const (
	// Lost: an acknowledged value is not below the final HW.
	Lost Kind = "lost"
	// Moved: an acknowledged value is in the log at another offset than
	// the one it was acknowledged with.
	Moved Kind = "moved"
	// Duplicate: one value at two offsets.
	Duplicate Kind = "duplicate"
	// Reordered: two acknowledged values of one producer in a partition
	// appear in the log in the opposite order of their sends.
	Reordered Kind = "reordered"
	// Gap: the log's offsets below the HW are not dense (no transactions
	// or compaction run here, so every offset holds a record).
	Gap Kind = "gap"
	// Foreign: a value that was never sent to that partition.
	Foreign Kind = "foreign"
	// Inconsistent: one offset, two records — two acknowledgements of
	// different values at one offset, or a consumer that polled a record
	// at an offset where the final log (or another poll) has another one,
	// or at an offset at or above the final HW.
	Inconsistent Kind = "inconsistent"
	// NonMonotonic: within one assignment of a partition to a consumer,
	// a poll returned an offset at or below one it had returned before.
	NonMonotonic Kind = "nonmonotonic"
	// CommitBackwards: a successful offset commit of a partition below an
	// earlier successful one, or a final committed offset (OffsetFetch
	// after healing) below the last successful commit.
	CommitBackwards Kind = "commit-backwards"
	// Diverged: replicas whose batches below the HW are not byte-identical.
	Diverged Kind = "diverged"
	// DumpLog: Kafka's kafka-dump-log refused a replica's files.
	DumpLog Kind = "dump-log"
)

// Kinds lists every kind in report order.
var Kinds = []Kind{Lost, Moved, Duplicate, Reordered, Gap, Foreign, Inconsistent, NonMonotonic, CommitBackwards, Diverged, DumpLog}

// Anomalies are descriptions by kind.
type Anomalies map[Kind][]string

// Add appends descriptions of kind k.
func (a Anomalies) Add(k Kind, s ...string) {
	if len(s) > 0 {
		a[k] = append(a[k], s...)
	}
}

// Total is the number of anomalies of every kind.
func (a Anomalies) Total() int {
	n := 0
	for _, s := range a {
		n += len(s)
	}
	return n
}

// Attempt is what a producer knows of one value.
type Attempt struct {
	Producer  int
	Partition int32
	Acked     bool
	Failed    bool
	Offset    int64 // when Acked
	Sent      time.Time
	Done      time.Time // when answered
}

// Poll is one record a group consumer returned.
type Poll struct {
	// Consumer and Session name one continuous assignment: a consumer
	// bumps its session on every assignment change.
	Consumer, Session int
	Partition         int32
	Offset            int64
	Value             int
}

// Commit is one offset commit the coordinator answered without error.
type Commit struct {
	Consumer  int
	Partition int32
	Offset    int64
	// Stale: the consumer's assignment changed between the poll these
	// offsets come from and the commit's answer. A client commits under
	// its current generation (franz-go waits for a rejoin, then sends),
	// and Kafka's coordinator checks the member and generation, not who
	// owns the partition, so such a commit may legally put a partition's
	// offset below what its new owner committed.
	Stale bool
}

// History is what the clients saw, safe for concurrent use.
type History struct {
	mu struct {
		sync.Mutex
		attempts []Attempt // by value
		polls    []Poll
		commits  []Commit // in the order their answers arrived
	}
}

// NewHistory returns an empty history.
func NewHistory() *History { return &History{} }

// Send records that producer is about to send a new value to partition p
// and returns the value.
func (h *History) Send(producer int, p int32) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.mu.attempts = append(h.mu.attempts, Attempt{Producer: producer, Partition: p, Offset: -1, Sent: time.Now()})
	return len(h.mu.attempts) - 1
}

// Done records the answer to value v: its offset, or an error (the value
// is then indeterminate: it may or may not be in the log).
func (h *History) Done(v int, offset int64, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	a := &h.mu.attempts[v]
	a.Done = time.Now()
	if err != nil {
		a.Failed = true
		return
	}
	a.Acked, a.Offset = true, offset
}

// Polled records a record a group consumer returned.
func (h *History) Polled(p Poll) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.mu.polls = append(h.mu.polls, p)
}

// Committed records a successful offset commit.
func (h *History) Committed(c Commit) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.mu.commits = append(h.mu.commits, c)
}

// Counts are the values sent, acknowledged and failed so far.
func (h *History) Counts() (sent, acked, failed int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, a := range h.mu.attempts {
		switch {
		case a.Acked:
			acked++
		case a.Failed:
			failed++
		}
	}
	return len(h.mu.attempts), acked, failed
}

// PollCount is the number of records consumers polled.
func (h *History) PollCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.mu.polls)
}

// FirstAck returns when the first value sent at or after since (to
// partition p, or to any when p < 0) was acknowledged: how long produce
// took to work again after a fault.
func (h *History) FirstAck(p int32, since time.Time) (time.Time, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var first time.Time
	for i := len(h.mu.attempts) - 1; i >= 0; i-- {
		a := h.mu.attempts[i]
		if a.Sent.Before(since) {
			break // sends are in value order
		}
		if a.Acked && (p < 0 || a.Partition == p) && (first.IsZero() || a.Done.Before(first)) {
			first = a.Done
		}
	}
	return first, !first.IsZero()
}

// Log is one partition as a reader found it after healing: the records
// below HW, offsets ascending. A value that is not a number is -1.
type Log struct {
	HW      int64
	Offsets []int64
	Values  []int
}

// Check compares the history with the final logs and, when committed is
// not nil, the group's final committed offsets.
func (h *History) Check(logs map[int32]*Log, committed map[int32]int64) Anomalies {
	h.mu.Lock()
	defer h.mu.Unlock()
	an := Anomalies{}
	at := h.checkLogs(an, logs)
	h.checkAcks(an, logs, at)
	h.checkPolls(an, logs)
	h.checkCommits(an, committed)
	return an
}

// checkLogs looks at the final logs alone (gaps, foreign values,
// duplicates, order) and returns where each value was found.
func (h *History) checkLogs(an Anomalies, logs map[int32]*Log) map[int]int64 {
	at := map[int]int64{} // value → offset found
	for _, p := range sortedParts(logs) {
		l := logs[p]
		lastAcked := map[int]int{} // producer → last acknowledged value seen
		prevOff := int64(-1)
		for i, v := range l.Values {
			off := l.Offsets[i]
			if off != prevOff+1 {
				an.Add(Gap, fmt.Sprintf("partition %d: offset %d after %d", p, off, prevOff))
			}
			prevOff = off
			if v < 0 || v >= len(h.mu.attempts) || h.mu.attempts[v].Partition != p {
				an.Add(Foreign, fmt.Sprintf("partition %d offset %d: value %d was not sent there", p, off, v))
				continue
			}
			if first, dup := at[v]; dup {
				an.Add(Duplicate, fmt.Sprintf("partition %d: value %d at offsets %d and %d", p, v, first, off))
				continue
			}
			at[v] = off
			a := h.mu.attempts[v]
			if !a.Acked {
				continue
			}
			if last, ok := lastAcked[a.Producer]; ok && v < last {
				an.Add(Reordered, fmt.Sprintf("partition %d offset %d: acked value %d after acked %d (producer %d)", p, off, v, last, a.Producer))
			}
			lastAcked[a.Producer] = v
		}
	}
	return at
}

// checkAcks: every acknowledged value is in the log where it was
// acknowledged, and no two acknowledgements share an offset.
func (h *History) checkAcks(an Anomalies, logs map[int32]*Log, at map[int]int64) {
	type pos struct {
		p   int32
		off int64
	}
	ackedAt := map[pos]int{}
	for v, a := range h.mu.attempts {
		if !a.Acked {
			continue
		}
		k := pos{a.Partition, a.Offset}
		if other, ok := ackedAt[k]; ok {
			an.Add(Inconsistent, fmt.Sprintf("partition %d offset %d: acknowledged for values %d and %d", a.Partition, a.Offset, other, v))
		}
		ackedAt[k] = v
		off, ok := at[v]
		switch {
		case !ok:
			hw := int64(-1)
			if l := logs[a.Partition]; l != nil {
				hw = l.HW
			}
			an.Add(Lost, fmt.Sprintf("value %d acked at %d-%d, not in the log (hw %d)", v, a.Partition, a.Offset, hw))
		case off != a.Offset:
			an.Add(Moved, fmt.Sprintf("value %d acked at %d-%d, found at offset %d", v, a.Partition, a.Offset, off))
		}
	}
}

// checkPolls: consumers saw the records the final log holds, each
// assignment in ascending offsets.
func (h *History) checkPolls(an Anomalies, logs map[int32]*Log) {
	type assignment struct {
		consumer, session int
		p                 int32
	}
	last := map[assignment]int64{}
	for _, pl := range h.mu.polls {
		k := assignment{pl.Consumer, pl.Session, pl.Partition}
		if prev, ok := last[k]; ok && pl.Offset <= prev {
			an.Add(NonMonotonic, fmt.Sprintf("consumer %d session %d partition %d: offset %d polled after %d", pl.Consumer, pl.Session, pl.Partition, pl.Offset, prev))
		}
		last[k] = pl.Offset
		if s := pollConflict(logs[pl.Partition], pl); s != "" {
			an.Add(Inconsistent, s)
		}
	}
}

// pollConflict describes how a polled record disagrees with the final
// log, or is "".
func pollConflict(l *Log, pl Poll) string {
	if l == nil || pl.Offset >= l.HW {
		return fmt.Sprintf("partition %d offset %d: consumer %d polled value %d, at or above the final hw", pl.Partition, pl.Offset, pl.Consumer, pl.Value)
	}
	i := sort.Search(len(l.Offsets), func(i int) bool { return l.Offsets[i] >= pl.Offset })
	if i == len(l.Offsets) || l.Offsets[i] != pl.Offset {
		return fmt.Sprintf("partition %d offset %d: consumer %d polled value %d, the final log has no such offset", pl.Partition, pl.Offset, pl.Consumer, pl.Value)
	}
	if l.Values[i] != pl.Value {
		return fmt.Sprintf("partition %d offset %d: consumer %d polled value %d, the final log has %d", pl.Partition, pl.Offset, pl.Consumer, pl.Value, l.Values[i])
	}
	return ""
}

// checkCommits: successful commits of a partition never go down, and the
// group's final committed offset is not below the last of them. A stale
// commit may legally go down: it sets the offset later commits are
// compared with.
func (h *History) checkCommits(an Anomalies, committed map[int32]int64) {
	high := map[int32]Commit{}
	for _, c := range h.mu.commits {
		if prev, ok := high[c.Partition]; ok && c.Offset < prev.Offset && !c.Stale {
			an.Add(CommitBackwards, fmt.Sprintf("partition %d: consumer %d committed %d after consumer %d committed %d", c.Partition, c.Consumer, c.Offset, prev.Consumer, prev.Offset))
			continue
		}
		high[c.Partition] = c
	}
	if committed == nil {
		return
	}
	for _, p := range sortedParts(high) {
		if got, ok := committed[p]; !ok || got < high[p].Offset {
			an.Add(CommitBackwards, fmt.Sprintf("partition %d: final committed offset %s, below the last successful commit %d", p, offsetString(got, ok), high[p].Offset))
		}
	}
}

func offsetString(off int64, ok bool) string {
	if !ok {
		return "none"
	}
	return strconv.FormatInt(off, 10)
}

func sortedParts[V any](m map[int32]V) []int32 {
	out := make([]int32, 0, len(m))
	for p := range m {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Dump writes the history as text, one event a line — sends with their
// answers, then polls and commits in the order they were recorded — for
// reading next to the broker logs when a run finds an anomaly.
func (h *History) Dump(w io.Writer) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	bw := bufio.NewWriter(w)
	for v, a := range h.mu.attempts {
		state := "unanswered"
		switch {
		case a.Acked:
			state = fmt.Sprintf("acked offset %d", a.Offset)
		case a.Failed:
			state = "failed"
		}
		fmt.Fprintf(bw, "send value %d producer %d partition %d at %s: %s at %s\n", v, a.Producer, a.Partition,
			a.Sent.UTC().Format("15:04:05.000"), state, a.Done.UTC().Format("15:04:05.000"))
	}
	for _, p := range h.mu.polls {
		fmt.Fprintf(bw, "poll consumer %d session %d partition %d offset %d value %d\n", p.Consumer, p.Session, p.Partition, p.Offset, p.Value)
	}
	for _, c := range h.mu.commits {
		fmt.Fprintf(bw, "commit consumer %d partition %d offset %d stale %v\n", c.Consumer, c.Partition, c.Offset, c.Stale)
	}
	return bw.Flush()
}
