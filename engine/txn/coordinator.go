package txn

import (
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-broker/sluice/engine/group"
)

// Clock and Timer are the group coordinator's: one injected time source
// for both coordinators, and one FakeClock for their tests.
type (
	Clock = group.Clock
	Timer = group.Timer
)

// PartitionLog is the coordinator's view of one partition of
// __transaction_state: the same contract as the group coordinator's
// partition of __consumer_offsets (Append returns once the high watermark
// covers the batch; Replay reads in log order), so the engine adapts both
// with one type.
type PartitionLog = group.PartitionLog

// Defaults are Kafka's.
const (
	DefaultMaxTimeout          = 15 * time.Minute   // transaction.max.timeout.ms
	DefaultIDExpiration        = 7 * 24 * time.Hour // transactional.id.expiration.ms
	DefaultAbortCheckInterval  = 10 * time.Second   // transaction.abort.timed.out.transaction.cleanup.interval.ms
	DefaultExpireCheckInterval = time.Hour          // transaction.remove.expired.transaction.cleanup.interval.ms
	DefaultMarkerRetryBackoff  = 100 * time.Millisecond
)

// Config is the coordinator's share of the broker's configuration.
type Config struct {
	Partitions          int32         // transaction.state.log.num.partitions; > 0
	MaxTimeout          time.Duration // transaction.max.timeout.ms
	IDExpiration        time.Duration // transactional.id.expiration.ms
	AbortCheckInterval  time.Duration // how often timed-out transactions are aborted
	ExpireCheckInterval time.Duration // how often expired transactional ids are removed
	MarkerRetryBackoff  time.Duration // between rounds of markers that failed
	// NewProducerID hands out a producer id never used before.
	NewProducerID func() (int64, error)
	Markers       MarkerWriter // where the second phase's markers go
	Clock         Clock        // nil: group.RealClock
	Log           *slog.Logger // nil: slog.Default()
}

// TopicPartition names one partition of a transaction.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// Coordinator owns the transactional ids of the __transaction_state
// partitions loaded on this broker.
type Coordinator struct {
	cfg   Config
	clock Clock
	log   *slog.Logger

	mu struct {
		sync.Mutex
		// parts are the loaded partitions. Invariant: parts[PartitionFor(id)]
		// != nil and == txns[id].part for every id in txns.
		parts  map[int32]*partition
		txns   map[string]*txnMeta
		closed bool
		timers []Timer // the periodic sweeps; nil once closed
	}
}

// partition is one loaded partition of __transaction_state.
type partition struct {
	index int32
	epoch int32 // the coordinator epoch: the partition's leader epoch when loaded
	log   PartitionLog
	// appendMu serialises appends, so the records of one id land in the
	// order their transitions were decided.
	appendMu sync.Mutex
}

// New returns a coordinator with no partition loaded; the sweeps for
// timed-out transactions and expired ids start at once.
func New(cfg Config) *Coordinator {
	if cfg.Clock == nil {
		cfg.Clock = group.RealClock{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	cfg.MaxTimeout = orDefault(cfg.MaxTimeout, DefaultMaxTimeout)
	cfg.IDExpiration = orDefault(cfg.IDExpiration, DefaultIDExpiration)
	cfg.AbortCheckInterval = orDefault(cfg.AbortCheckInterval, DefaultAbortCheckInterval)
	cfg.ExpireCheckInterval = orDefault(cfg.ExpireCheckInterval, DefaultExpireCheckInterval)
	cfg.MarkerRetryBackoff = orDefault(cfg.MarkerRetryBackoff, DefaultMarkerRetryBackoff)
	c := &Coordinator{cfg: cfg, clock: cfg.Clock, log: cfg.Log}
	c.mu.parts = map[int32]*partition{}
	c.mu.txns = map[string]*txnMeta{}
	c.mu.timers = []Timer{
		c.every(cfg.AbortCheckInterval, c.AbortTimedOut),
		c.every(cfg.ExpireCheckInterval, c.ExpireIDs),
	}
	return c
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// every runs fn each interval until Close.
func (c *Coordinator) every(interval time.Duration, fn func()) Timer {
	var t Timer
	t = c.clock.AfterFunc(interval, func() {
		fn()
		c.mu.Lock()
		defer c.mu.Unlock()
		if !c.mu.closed {
			t.Reset(interval)
		}
	})
	return t
}

// Close unloads every partition as a shutdown begins; later calls answer
// NOT_COORDINATOR. Markers in flight are abandoned: the next coordinator
// of each partition finds the Prepare record and sends them again.
func (c *Coordinator) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.closed {
		return
	}
	c.mu.closed = true
	for _, t := range c.mu.timers {
		t.Stop()
	}
	c.mu.timers = nil
	c.mu.parts = map[int32]*partition{}
	c.mu.txns = map[string]*txnMeta{}
}

// PartitionFor is the __transaction_state partition of a transactional id:
// Kafka's abs(id.hashCode()) % partitions.
func (c *Coordinator) PartitionFor(id string) int32 { return group.PartitionFor(id, c.cfg.Partitions) }

// Owns reports whether this broker coordinates the id (its partition is
// loaded here).
func (c *Coordinator) Owns(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.mu.closed && c.mu.parts[c.PartitionFor(id)] != nil
}

// Loaded reports whether partition p is loaded.
func (c *Coordinator) Loaded(p int32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.parts[p] != nil
}

// LoadPartition replays partition p of __transaction_state from log and
// takes ownership of its transactional ids; coordinatorEpoch goes on every
// marker sent for them. A record that cannot be decoded fails the load and
// nothing is attached. Transactions found preparing are completed.
func (c *Coordinator) LoadPartition(p, coordinatorEpoch int32, log PartitionLog) (int, error) {
	if p < 0 || p >= c.cfg.Partitions {
		return 0, fmt.Errorf("partition %d of %d", p, c.cfg.Partitions)
	}
	loaded := map[string]*txnMeta{}
	if err := log.Replay(func(key, value []byte) error { return loadRecord(loaded, key, value) }); err != nil {
		return 0, err
	}
	part := &partition{index: p, epoch: coordinatorEpoch, log: log}
	resume, err := c.attach(part, loaded)
	if err != nil {
		return 0, err
	}
	for _, m := range resume {
		c.sendMarkers(m) // finish what the last coordinator began
	}
	return len(loaded), nil
}

// attach makes the loaded ids the coordinator's and returns those whose
// commit or abort is to be finished.
func (c *Coordinator) attach(part *partition, loaded map[string]*txnMeta) ([]*txnMeta, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.closed || c.mu.parts[part.index] != nil {
		return nil, fmt.Errorf("partition %d: already loaded, or coordinator closed", part.index)
	}
	c.mu.parts[part.index] = part
	var resume []*txnMeta
	for id, m := range loaded {
		if c.PartitionFor(id) != part.index {
			delete(loaded, id) // not ours (a record in the wrong partition)
			continue
		}
		m.part = part
		c.mu.txns[id] = m
		if m.state.preparing() {
			m.pending = true
			resume = append(resume, m)
		}
	}
	return resume, nil
}

// UnloadPartition gives up partition p: its ids are forgotten. Writes and
// markers in flight for them find the partition gone and stop.
func (c *Coordinator) UnloadPartition(p int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	part := c.mu.parts[p]
	if part == nil {
		return
	}
	delete(c.mu.parts, p)
	for id, m := range c.mu.txns {
		if m.part == part {
			delete(c.mu.txns, id)
		}
	}
}

// ownedLocked reports whether m is still the coordinator's (its partition
// not unloaded since m was looked up). c.mu is held.
func (c *Coordinator) ownedLocked(m *txnMeta) bool {
	return !c.mu.closed && c.mu.parts[m.part.index] == m.part && c.mu.txns[m.id] == m
}

// lookupLocked finds an id's metadata. Without one, code says why:
// NOT_COORDINATOR when its partition is not loaded here, else 0 (the id
// is unknown). c.mu is held.
func (c *Coordinator) lookupLocked(id string) (m *txnMeta, part *partition, code int16) {
	if c.mu.closed {
		return nil, nil, kerr.NotCoordinator.Code
	}
	part = c.mu.parts[c.PartitionFor(id)]
	if part == nil {
		return nil, nil, kerr.NotCoordinator.Code
	}
	return c.mu.txns[id], part, 0
}

// PartitionForID is the partition of a transactional id in a
// __transaction_state of n partitions.
func PartitionForID(id string, n int32) int32 { return group.PartitionFor(id, n) }
