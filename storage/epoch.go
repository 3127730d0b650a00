package storage

import (
	"path/filepath"
	"sync"
	"sync/atomic"
)

// epochEntry says that leader epoch starts at offset start.
type epochEntry struct {
	epoch int32
	start int64
}

// epochCache is the partition's leader-epoch history, persisted in
// leader-epoch-checkpoint in Kafka's text format:
//
//	0            version
//	2            number of entries
//	0 0          epoch startOffset
//	3 1200
type epochCache struct {
	dir string
	// unsaved: epochs were assigned by appends since the file was last
	// written. Appends do not write the file (two fsyncs: they made the
	// first write to each of thousands of partitions cost milliseconds);
	// the flush that next writes a recovery point saves it first, and
	// recovery assigns the epochs of the batches it scans past the
	// recovery point again, as Kafka's does. Set after an assign, cleared
	// before a save.
	unsaved atomic.Bool
	// saveMu serialises writes of the file: flushes save it under
	// flushMu, truncation and retention under Log.mu, and two writers
	// would race on its temporary file.
	saveMu sync.Mutex
	mu     struct {
		sync.RWMutex
		// entries is sorted with strictly increasing epoch and
		// non-decreasing start.
		entries []epochEntry
	}
}

func loadEpochCache(dir string) (*epochCache, error) {
	c := &epochCache{dir: dir}
	rows, err := readCheckpoint(filepath.Join(dir, epochFile), 2)
	if err != nil {
		return nil, err
	}
	for _, r := range rows {
		c.mu.entries = append(c.mu.entries, epochEntry{epoch: int32(r[0]), start: r[1]})
	}
	return c, nil
}

func (c *epochCache) latest() int32 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if len(c.mu.entries) == 0 {
		return -1
	}
	return c.mu.entries[len(c.mu.entries)-1].epoch
}

// assign records that epoch starts at start and reports whether the history
// changed (the caller then persists it). Older or equal epochs are ignored:
// an epoch's start never moves once known.
func (c *epochCache) assign(epoch int32, start int64) bool {
	if epoch < 0 {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.mu.entries
	if len(e) > 0 && e[len(e)-1].epoch >= epoch {
		return false
	}
	// An epoch starting at or before a newer-looking entry's start replaces
	// it (a leader that never wrote anything in its epoch).
	for len(e) > 0 && e[len(e)-1].start >= start {
		e = e[:len(e)-1]
	}
	c.mu.entries = append(e, epochEntry{epoch, start})
	return true
}

// endOffsetFor answers OffsetForLeaderEpoch as Kafka does: the end offset of
// epoch is the start of the next higher epoch, or leo for the latest one.
// The epoch returned is the largest known epoch <= the requested one.
func (c *epochCache) endOffsetFor(epoch int32, leo int64) (int32, int64) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	e := c.mu.entries
	if epoch < 0 || len(e) == 0 {
		return -1, -1
	}
	if e[len(e)-1].epoch == epoch {
		return epoch, leo
	}
	i := 0 // first entry with a higher epoch
	for i < len(e) && e[i].epoch <= epoch {
		i++
	}
	if i == len(e) {
		return -1, -1 // requested epoch is newer than anything known
	}
	if i == 0 {
		return epoch, e[0].start // older than the whole history
	}
	return e[i-1].epoch, e[i].start
}

// truncateFromEnd drops epochs starting at or after end (log truncation).
func (c *epochCache) truncateFromEnd(end int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.mu.entries
	n := len(e)
	for n > 0 && e[n-1].start >= end {
		n--
	}
	c.mu.entries = e[:n]
	return n != len(e)
}

// truncateFromStart forgets history below the log start offset: the epoch
// covering start is kept, moved to begin at start.
func (c *epochCache) truncateFromStart(start int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.mu.entries
	i := 0 // entries [0, i) start at or below start
	for i < len(e) && e[i].start <= start {
		i++
	}
	if i == 0 || (i == 1 && e[0].start == start) {
		return false
	}
	kept := append([]epochEntry{{e[i-1].epoch, start}}, e[i:]...)
	c.mu.entries = kept
	return true
}

func (c *epochCache) snapshot() [][]int64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	rows := make([][]int64, len(c.mu.entries))
	for i, e := range c.mu.entries {
		rows[i] = []int64{int64(e.epoch), e.start}
	}
	return rows
}

func (c *epochCache) persist() error {
	c.saveMu.Lock()
	defer c.saveMu.Unlock()
	c.unsaved.Store(false)
	err := writeFileAtomic(c.dir, epochFile, formatCheckpoint(c.snapshot()))
	if err != nil {
		c.unsaved.Store(true)
	}
	return err
}

// saveIfAssigned persists the history if appends changed it since it was
// last saved.
func (c *epochCache) saveIfAssigned() error {
	if !c.unsaved.Load() {
		return nil
	}
	return c.persist()
}

// clear forgets the whole history (the log was dropped).
func (c *epochCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.entries = nil
}
