package storage

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

const (
	logSuffix       = ".log"
	indexSuffix     = ".index"
	timeIndexSuffix = ".timeindex"
	deletedSuffix   = ".deleted"
	cleanedSuffix   = ".cleaned" // a cleaner output being written
	swapSuffix      = ".swap"    // a complete cleaner output about to replace segments
)

// segment is one .log file and its two sparse indexes, holding the batches
// with offsets [base, next segment's base).
//
// The fields an offset lookup touches (base, size, lastOff, ix) come first,
// so a lookup in a cold segment costs few cache misses.
type segment struct {
	base int64

	// size is the number of committed bytes in log.
	// Invariant: [0, size) holds whole, valid batches; size only grows while
	// the segment is active and is final once it is not.
	size atomic.Int64

	// lastOff is the last committed offset, base-1 while empty. It only
	// serves as the interpolation hint of index searches.
	lastOff atomic.Int64

	ix segIndex

	// hints remember batch boundaries where reads stopped; see boundary.
	hints [boundaryHints]atomic.Uint64

	dir string
	log *os.File // open for the segment's whole life (Regions point at it)

	// tmp is appended to the segment's file names while it is a cleaner
	// output (cleanedSuffix, then swapSuffix); "" for every published
	// segment.
	tmp string

	// maxTs is the largest batch maxTimestamp in the segment and maxTsOff the
	// last offset of the batch carrying it; both -1 while there is none.
	maxTs, maxTsOff atomic.Int64

	// mtimeMs stands in for maxTs in retention when batches carry no
	// timestamps (maxTs < 0), as Kafka uses the file's modification time.
	mtimeMs int64

	// Writer state of the active segment, guarded by Log.mu.
	bytesSinceIndex int64 // log bytes appended since the last offset index entry
	createdMs       int64 // wall clock at creation or open, for segment.ms

	deleted atomic.Bool // set once renamed to .deleted
}

// segIndex is the mapping state of a segment's indexes. Readers hold the
// RWMutex shared while they search; mapping and unmapping hold it exclusively,
// so a mapping is never pulled from under a search.
type segIndex struct {
	sync.RWMutex
	mapped   bool        // off.buf and tim.buf are valid
	used     atomic.Bool // CLOCK reference bit, set by searches
	off      offsetIndex
	writable bool // mapped read-write at preallocated size (active or recovering)
	pinned   bool // never evicted: the active segment, or heap-backed in tests
	cached   bool // in mapCache.ring; guarded by mapCache.mu
	tim      timeIndex
}

func segmentName(base int64, suffix string) string { return fmt.Sprintf("%020d%s", base, suffix) }

func (s *segment) path(suffix string) string {
	return filepath.Join(s.dir, segmentName(s.base, suffix)+s.tmp)
}

// parseSegmentName returns the base offset of a "<20 digits>.log" name.
func parseSegmentName(name, suffix string) (int64, bool) {
	digits, ok := strings.CutSuffix(name, suffix)
	if !ok || len(digits) != 20 {
		return 0, false
	}
	base, err := strconv.ParseInt(digits, 10, 64)
	return base, err == nil && base >= 0
}

func newSegment(dir string, base int64, f *os.File) *segment {
	s := &segment{base: base, dir: dir, log: f, createdMs: time.Now().UnixMilli()}
	s.lastOff.Store(base - 1)
	s.maxTs.Store(-1)
	s.maxTsOff.Store(-1)
	return s
}

// createSegment makes a new empty active segment with preallocated, mapped
// indexes. Leftover files of the same name (from a crash) are replaced.
func createSegment(dir string, base int64, cfg Config) (*segment, error) {
	return createSegmentAs(dir, base, cfg, "")
}

// createSegmentAs is createSegment for files named with the suffix tmp.
func createSegmentAs(dir string, base int64, cfg Config, tmp string) (*segment, error) {
	s := newSegment(dir, base, nil)
	s.tmp = tmp
	for _, suf := range []string{indexSuffix, timeIndexSuffix} {
		if err := os.Remove(s.path(suf)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	f, err := os.OpenFile(s.path(logSuffix), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	s.log = f
	if err := s.mapIndexes(cfg, true); err != nil {
		f.Close()
		return nil, err
	}
	s.mtimeMs = s.createdMs
	return s, nil
}

// openSegment opens an existing segment's log; its indexes stay unmapped.
func openSegment(dir string, base int64) (*segment, error) {
	s := newSegment(dir, base, nil)
	f, err := os.OpenFile(s.path(logSuffix), os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	s.log = f
	s.size.Store(st.Size())
	s.mtimeMs = st.ModTime().UnixMilli()
	return s, nil
}

// mapWritable maps both indexes read-write at their preallocated size, as
// the active segment (and a segment under recovery) needs. Entries already
// in the files are kept as far as they are sane; recovery trims them further.
func (s *segment) mapWritable(cfg Config) error { return s.mapIndexes(cfg, false) }

// mapIndexes is mapWritable; fresh says the index files were just created,
// so they hold no entries and the scan for a sane prefix (which touches
// their first pages) is skipped.
func (s *segment) mapIndexes(cfg Config, fresh bool) error {
	s.ix.Lock()
	defer s.ix.Unlock()
	if s.ix.mapped {
		if s.ix.writable {
			return nil
		}
		cacheRemove(s)
		s.unmapLocked()
	}
	offBuf, offSize, err := mapFile(s.path(indexSuffix), max(cfg.offsetIndexCap(), roundUp(s.fileSize(indexSuffix), offsetEntrySize)), true)
	if err != nil {
		return err
	}
	timBuf, timSize, err := mapFile(s.path(timeIndexSuffix), max(cfg.timeIndexCap(), roundUp(s.fileSize(timeIndexSuffix), timeEntrySize)), true)
	if err != nil {
		unmap(offBuf)
		return err
	}
	s.ix.off.buf, s.ix.tim.buf = offBuf, timBuf
	s.ix.mapped, s.ix.writable, s.ix.pinned = true, true, true
	if fresh {
		s.ix.off.truncate(0)
		s.ix.tim.truncate(0)
		return nil
	}
	s.ix.off.truncate(min(offSize/offsetEntrySize, s.ix.off.validPrefix(s.size.Load())))
	s.ix.tim.truncate(min(timSize/timeEntrySize, s.ix.tim.validPrefix(maxRel)))
	return nil
}

const maxRel = 1<<32 - 1

func roundUp(n, unit int64) int64 { return (n + unit - 1) / unit * unit }

func (s *segment) fileSize(suffix string) int64 {
	st, err := os.Stat(s.path(suffix))
	if err != nil {
		return 0
	}
	return st.Size()
}

// mapReadOnly maps a sealed segment's trimmed index files for searching and
// registers them with the mapping cache.
func (s *segment) mapReadOnly() error {
	s.ix.Lock()
	defer s.ix.Unlock()
	if s.ix.mapped {
		return nil
	}
	if s.deleted.Load() {
		// Its files are renamed, and a cleaned segment may have taken its
		// index names: never map by name again.
		return errSegmentDeleted
	}
	offBuf, _, err := mapFile(s.path(indexSuffix), 0, false)
	if err != nil {
		return err
	}
	timBuf, _, err := mapFile(s.path(timeIndexSuffix), 0, false)
	if err != nil {
		unmap(offBuf)
		return err
	}
	s.ix.off.buf = offBuf[:len(offBuf)/offsetEntrySize*offsetEntrySize]
	s.ix.tim.buf = timBuf[:len(timBuf)/timeEntrySize*timeEntrySize]
	s.ix.off.truncate(s.ix.off.validPrefix(s.size.Load()))
	s.ix.tim.truncate(s.ix.tim.validPrefix(maxRel))
	s.ix.mapped, s.ix.writable = true, false
	cacheAdd(s)
	return nil
}

// unmapLocked releases the mappings; the caller holds s.ix exclusively.
func (s *segment) unmapLocked() {
	if !s.ix.mapped {
		return
	}
	if !s.ix.pinned || s.ix.writable {
		unmap(s.ix.off.buf)
		unmap(s.ix.tim.buf)
	}
	s.ix.off.buf, s.ix.tim.buf = nil, nil
	s.ix.off.truncate(0)
	s.ix.tim.truncate(0)
	s.ix.mapped, s.ix.writable, s.ix.pinned = false, false, false
}

// acquire makes the indexes searchable and holds them shared; release ends
// the search. It reports false if they cannot be mapped (for example, files
// of a deleted segment already removed): callers then scan from position 0.
func (s *segment) acquire() bool {
	for {
		s.ix.RLock()
		if s.ix.mapped {
			if !s.ix.used.Load() {
				s.ix.used.Store(true)
			}
			return true
		}
		s.ix.RUnlock()
		if s.mapReadOnly() != nil {
			return false
		}
	}
}

func (s *segment) release() { s.ix.RUnlock() }

// seal turns the active segment into an inactive one: the indexes are synced,
// unmapped and trimmed to their real size (so kafka-dump-log and a later open
// see exactly the entries written). The log is not synced here.
func (s *segment) seal() error {
	s.ix.Lock()
	defer s.ix.Unlock()
	if !s.ix.writable {
		return nil
	}
	err := errors.Join(syncMapped(s.ix.off.buf), syncMapped(s.ix.tim.buf))
	return errors.Join(err, s.trimLocked(),
		syncPath(s.path(indexSuffix)),
		syncPath(s.path(timeIndexSuffix)))
}

// trimLocked unmaps the writable indexes and cuts their files to the
// entries they hold. The caller holds s.ix exclusively.
func (s *segment) trimLocked() error {
	offLen := s.ix.off.n.Load() * offsetEntrySize
	timLen := s.ix.tim.n.Load() * timeEntrySize
	s.unmapLocked()
	return errors.Join(
		truncatePath(s.path(indexSuffix), offLen),
		truncatePath(s.path(timeIndexSuffix), timLen))
}

// syncIndexes flushes the active segment's index mappings.
func (s *segment) syncIndexes() error {
	s.ix.RLock()
	defer s.ix.RUnlock()
	if !s.ix.writable {
		return nil
	}
	return errors.Join(syncMapped(s.ix.off.buf), syncMapped(s.ix.tim.buf))
}

func syncPath(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// close unmaps the indexes and closes the log file.
func (s *segment) close() error {
	s.ix.Lock()
	cacheRemove(s)
	s.unmapLocked()
	s.ix.Unlock()
	return s.log.Close()
}

var errSegmentDeleted = errors.New("storage: segment deleted")

// renameDeleted renames the segment's files to *.deleted; the open log
// descriptor keeps working for in-flight Regions. deleted is set under the
// index lock, so no reader maps the index files by name after this point
// (a cleaned segment may reuse the names).
func (s *segment) renameDeleted() error {
	s.ix.Lock()
	s.deleted.Store(true)
	s.ix.Unlock()
	var errs []error
	for _, suf := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
		err := os.Rename(s.path(suf), s.path(suf)+deletedSuffix)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// removeDeleted closes the segment and removes its *.deleted files.
func (s *segment) removeDeleted() {
	s.close()
	for _, suf := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
		os.Remove(s.path(suf) + deletedSuffix)
	}
}

// largestTimestamp is what retention.ms compares against.
func (s *segment) largestTimestamp() int64 {
	if ts := s.maxTs.Load(); ts >= 0 {
		return ts
	}
	return s.mtimeMs
}

// finalTimeEntry adds the segment's largest timestamp to the time index if
// it is not its last entry yet, as Kafka does when a segment becomes
// inactive; kafka-dump-log and retention read it there. Writer only.
func (s *segment) finalTimeEntry() {
	ts := s.maxTs.Load()
	if ts < 0 || !s.ix.writable {
		return
	}
	if s.ix.tim.maybeAdd(ts, uint32(s.maxTsOff.Load()-s.base)) {
		s.ix.tim.publish()
	}
}

// trackBatch updates the indexes and timestamp state for a batch placed at
// pos, following Kafka's rule: an offset index entry (and a time index entry
// if the largest timestamp grew) once more than interval bytes were
// appended since the last entry. The entries are staged; the caller
// publishes them once the batch is written. Writer only.
func (s *segment) trackBatch(pos, size, lastOffset, maxTs int64, interval int32) {
	if maxTs > s.maxTs.Load() {
		s.maxTs.Store(maxTs)
		s.maxTsOff.Store(lastOffset)
	}
	s.lastOff.Store(lastOffset)
	if s.bytesSinceIndex > int64(interval) {
		s.ix.off.add(uint32(lastOffset-s.base), uint32(pos))
		if !s.ix.tim.full(1) {
			s.ix.tim.maybeAdd(s.maxTs.Load(), uint32(s.maxTsOff.Load()-s.base))
		}
		s.bytesSinceIndex = 0
	}
	s.bytesSinceIndex += size
}

func (s *segment) publishIndexes() {
	s.ix.off.publish()
	s.ix.tim.publish()
}
