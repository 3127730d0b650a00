package txn

import (
	"slices"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Description is DescribeTransactions' view of one transactional id.
type Description struct {
	State         State
	TimeoutMs     int32
	StartMs       int64 // -1 with no transaction open
	ProducerID    int64
	ProducerEpoch int16
	Partitions    []TopicPartition // sorted
}

// Describe answers DescribeTransactions for one id: NOT_COORDINATOR when
// it is not coordinated here, TRANSACTIONAL_ID_NOT_FOUND when unknown.
func (c *Coordinator) Describe(id string) (Description, int16) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m, _, code := c.lookupLocked(id)
	if code != 0 {
		return Description{}, code
	}
	if m == nil || m.epoch == noEpoch {
		return Description{}, kerr.TransactionalIDNotFound.Code
	}
	d := Description{State: m.state, TimeoutMs: m.timeoutMs, StartMs: -1, ProducerID: m.pid, ProducerEpoch: m.epoch, Partitions: m.sortedParts()}
	if m.state == Ongoing || m.state.preparing() {
		d.StartMs = m.startMs
	}
	if m.state.preparing() && m.waiting != nil {
		d.Partitions = slices.Clone(m.waiting) // the markers still to write
	}
	return d, 0
}

// Listing is one id of ListTransactions.
type Listing struct {
	TransactionalID string
	ProducerID      int64
	State           State
}

// ListFilter selects ids: each non-empty filter must match; MinDurationMs
// (ListTransactions v1+) keeps transactions open at least that long, 0
// or less keeps all.
type ListFilter struct {
	States        []State
	ProducerIDs   []int64
	MinDurationMs int64
}

// List answers ListTransactions over the partitions loaded here, sorted
// by transactional id.
func (c *Coordinator) List(f ListFilter) []Listing {
	now := c.clock.Now().UnixMilli()
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Listing
	for id, m := range c.mu.txns {
		if m.epoch != noEpoch && f.matches(m, now) {
			out = append(out, Listing{id, m.pid, m.state})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].TransactionalID < out[j].TransactionalID })
	return out
}

func (f ListFilter) matches(m *txnMeta, now int64) bool {
	if len(f.States) > 0 && !contains(f.States, m.state) || len(f.ProducerIDs) > 0 && !contains(f.ProducerIDs, m.pid) {
		return false
	}
	if f.MinDurationMs > 0 {
		open := m.state == Ongoing || m.state.preparing()
		return open && now-m.startMs >= f.MinDurationMs
	}
	return true
}

func contains[T comparable](list []T, v T) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}
