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
	// fd is the .log descriptor, opened on demand (see logfiles.go); get
	// it with file.
	fd segFile
	// logDirty: bytes were written to the .log since its last fsync. Set
	// after each write, cleared before each fsync.
	logDirty atomic.Bool

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

	// unmade: the .log file does not exist yet. A new log's first
	// segment (newEmptySegment) creates it, empty, when it is first
	// opened (openFile: the first append), so that creating thousands of
	// partitions costs a directory each and no file. Cleared under fd's
	// lock once the file exists.
	unmade atomic.Bool

	// txnDirty: an entry was appended to the .txnindex since its last
	// fsync (txnindex.go).
	txnDirty atomic.Bool
	// hasTxnIndex: Open found a .txnindex file for the segment (only
	// loading reads it).
	hasTxnIndex bool
}

// segIndex is the mapping state of a segment's indexes. Readers, and the
// appender while it writes entries, hold the RWMutex shared; mapping and
// unmapping hold it exclusively, so a mapping is never pulled from under a
// search or a write.
type segIndex struct {
	sync.RWMutex
	mapped   bool        // off.buf and tim.buf are valid
	used     atomic.Bool // CLOCK reference bit, set by searches and appends
	off      offsetIndex
	writable bool // mapped read-write at preallocated size
	// active: the index files are a writer's (the active segment, or one
	// under recovery, truncation or cleaning), preallocated to offCap and
	// timCap bytes. The entry counts in off and tim stay valid while such
	// indexes are unmapped, so mapping them again scans nothing.
	// Invariant: writable => active.
	active         bool
	offCap, timCap int64
	// exact: the index files are as a clean close left them, trimmed to
	// their entries with the final time entry added and synced: an idle
	// partition's next close need not map, trim or sync them again. Set
	// by activateKnown, cleared by mapping them writable.
	exact bool
	// pinned: never evicted: a writer fills the mapping without holding
	// the lock (recovery, truncation, a cleaner output), or it is
	// heap-backed (tests).
	pinned bool
	cached bool // in mapCache.ring; guarded by mapCache.mu
	// dirty: entries were published since the index files were last
	// synced. Set after entries are written, cleared before a sync.
	dirty atomic.Bool
	tim   timeIndex
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

func newSegment(dir string, base int64) *segment {
	s := &segment{base: base, dir: dir, createdMs: time.Now().UnixMilli()}
	s.lastOff.Store(base - 1)
	s.maxTs.Store(-1)
	s.maxTsOff.Store(-1)
	return s
}

// createSegment makes a new empty active segment of l with preallocated,
// mapped indexes; its mappings and descriptor are in the caches.
// Leftover files of the same name (from a crash) are replaced.
func createSegment(l *Log, base int64, cfg Config) (*segment, error) {
	return createSegmentAs(l, base, cfg, "")
}

// createSegmentAs is createSegment for files named with the suffix tmp. A
// cleaner output (tmp != "") keeps its descriptor and mappings pinned
// until it is published (unpin) or discarded.
func createSegmentAs(l *Log, base int64, cfg Config, tmp string) (*segment, error) {
	s := newSegment(l.dir, base)
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
	s.mtimeMs = s.createdMs
	if tmp == "" {
		s.activateEmpty(cfg)
	} else if err := s.mapIndexes(cfg, true); err != nil {
		f.Close()
		return nil, err
	}
	if tmp != "" {
		s.fd.f.Store(newLogFile(f))
		s.fd.pinned = true
		return s, nil
	}
	s.unpinIndexes()
	s.fd.Lock()
	evicted := s.adoptFileLocked(f)
	s.fd.Unlock()
	retire(evicted)
	return s, nil
}

// newEmptySegment is the first segment of a new log (or of a directory
// without segments): active, empty, and without files until its first
// append creates the .log (openFile) and the indexes (activateEmpty). The
// directory and a log-start checkpoint, if any, are all a restart before
// that needs: a directory without segments opens as a new log at its log
// start. (Logs that start anew at an offset no checkpoint names yet, as
// truncation does, create their segment files at once: createSegment.)
func newEmptySegment(l *Log, base int64, cfg Config) *segment {
	s := newSegment(l.dir, base)
	s.mtimeMs = s.createdMs
	s.activateEmpty(cfg)
	s.unmade.Store(true)
	return s
}

// openSegment finds an existing segment of l; its log is opened and its
// indexes mapped when first used. Its bytes may not be durable (it may be
// a crashed process's tail), so the first flush fsyncs it.
func openSegment(l *Log, base int64) (*segment, error) {
	s := newSegment(l.dir, base)
	st, err := os.Stat(s.path(logSuffix))
	if err != nil {
		return nil, err
	}
	s.size.Store(st.Size())
	s.mtimeMs = st.ModTime().UnixMilli()
	s.logDirty.Store(true)
	return s, nil
}

// mapWritable maps both indexes read-write at their preallocated size and
// pins them, as a writer that fills them without the lock needs (recovery,
// truncation). Entries already in the files are kept as far as they are
// sane; recovery trims them further. An active segment's known entries are
// kept as they are.
func (s *segment) mapWritable(cfg Config) error { return s.mapIndexes(cfg, false) }

// mapIndexes is mapWritable; fresh says the index files were just created,
// so they hold no entries and the scan for a sane prefix (which touches
// their first pages) is skipped.
func (s *segment) mapIndexes(cfg Config, fresh bool) error {
	s.ix.Lock()
	defer s.ix.Unlock()
	if s.ix.active {
		if err := s.remapLocked(); err != nil {
			return err
		}
		cacheRemove(s)
		s.ix.pinned = true
		return nil
	}
	if s.ix.mapped {
		cacheRemove(s)
		s.unmapLocked()
	}
	offCap := max(cfg.offsetIndexCap(), roundUp(s.fileSize(indexSuffix), offsetEntrySize))
	timCap := max(cfg.timeIndexCap(), roundUp(s.fileSize(timeIndexSuffix), timeEntrySize))
	offBuf, offSize, err := mapFile(s.path(indexSuffix), offCap, true)
	if err != nil {
		return err
	}
	timBuf, timSize, err := mapFile(s.path(timeIndexSuffix), timCap, true)
	if err != nil {
		unmap(offBuf)
		return err
	}
	s.ix.off.buf, s.ix.tim.buf = offBuf, timBuf
	s.ix.offCap, s.ix.timCap = offCap, timCap
	s.ix.mapped, s.ix.writable, s.ix.pinned, s.ix.active = true, true, true, true
	if fresh {
		s.ix.off.truncate(0)
		s.ix.tim.truncate(0)
		return nil
	}
	s.ix.off.truncate(min(offSize/offsetEntrySize, s.ix.off.validPrefix(s.size.Load())))
	s.ix.tim.truncate(min(timSize/timeEntrySize, s.ix.tim.validPrefix(maxRel)))
	return nil
}

// activateKnown makes a cleanly closed segment the active one without
// touching its index files: a clean close trimmed them to exactly their
// entries, so the counts come from their sizes, and they are mapped (and
// grown back to their preallocated size) on the first append or search.
func (s *segment) activateKnown(cfg Config) {
	s.ix.Lock()
	defer s.ix.Unlock()
	offSize, timSize := s.fileSize(indexSuffix), s.fileSize(timeIndexSuffix)
	s.ix.offCap = max(cfg.offsetIndexCap(), roundUp(offSize, offsetEntrySize))
	s.ix.timCap = max(cfg.timeIndexCap(), roundUp(timSize, timeEntrySize))
	s.ix.off.truncate(offSize / offsetEntrySize)
	s.ix.tim.truncate(timSize / timeEntrySize)
	s.ix.active, s.ix.exact = true, true
}

// activateEmpty makes a new segment the active one without creating its
// index files: like Kafka's lazily created indexes, they come into being
// (preallocated, mapped) with the first append or search, so a partition
// that is created and never written costs one file, not three. Until then
// the segment is exact with no entries, so sealing or closing it touches
// no index file either.
func (s *segment) activateEmpty(cfg Config) {
	s.ix.Lock()
	defer s.ix.Unlock()
	s.ix.offCap, s.ix.timCap = cfg.offsetIndexCap(), cfg.timeIndexCap()
	s.ix.off.truncate(0)
	s.ix.tim.truncate(0)
	s.ix.active, s.ix.exact = true, true
}

// remapLocked maps an active segment's unmapped indexes again at their
// preallocated size; the entry counts were kept, so nothing is scanned.
// The caller holds s.ix exclusively and registers the mapping with the
// cache unless it pins it.
func (s *segment) remapLocked() error {
	if s.ix.mapped {
		return nil
	}
	offBuf, _, err := mapFile(s.path(indexSuffix), s.ix.offCap, true)
	if err != nil {
		return err
	}
	timBuf, _, err := mapFile(s.path(timeIndexSuffix), s.ix.timCap, true)
	if err != nil {
		unmap(offBuf)
		return err
	}
	s.ix.off.buf, s.ix.tim.buf = offBuf, timBuf
	s.ix.mapped, s.ix.writable, s.ix.exact = true, true, false // mapFile grew them
	return nil
}

// remapCachedLocked is remapLocked for a mapping the cache may evict.
func (s *segment) remapCachedLocked() error {
	if s.ix.mapped {
		return nil
	}
	if err := s.remapLocked(); err != nil {
		return err
	}
	cacheAdd(s)
	return nil
}

// unpinIndexes hands a writable mapping to the cache: from now on it is
// evicted when idle, and the appender holds it while writing entries.
func (s *segment) unpinIndexes() {
	s.ix.Lock()
	defer s.ix.Unlock()
	if !s.ix.pinned || !s.ix.writable {
		return // not mapped, or heap-backed (tests)
	}
	s.ix.pinned = false
	cacheAdd(s)
}

// holdIndexes maps the active segment's indexes if the cache let them go
// and holds them shared, so the appender can write entries; it releases
// them with s.ix.RUnlock.
func (s *segment) holdIndexes() error {
	for {
		s.ix.RLock()
		if s.ix.writable {
			if !s.ix.used.Load() {
				s.ix.used.Store(true)
			}
			return nil
		}
		active := s.ix.active
		s.ix.RUnlock()
		if !active {
			return errNotActive
		}
		if err := s.mapForSearch(); err != nil {
			return err
		}
	}
}

var errNotActive = errors.New("storage: segment is not writable")

const maxRel = 1<<32 - 1

func roundUp(n, unit int64) int64 { return (n + unit - 1) / unit * unit }

func (s *segment) fileSize(suffix string) int64 {
	st, err := os.Stat(s.path(suffix))
	if err != nil {
		return 0
	}
	return st.Size()
}

// mapForSearch maps the segment's indexes for searching and registers
// them with the mapping cache: a sealed segment's trimmed files read-only,
// an active segment's read-write as they were.
func (s *segment) mapForSearch() error {
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
	if s.ix.active {
		return s.remapCachedLocked()
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

// unmapLocked releases the mappings; an active segment keeps its entry
// counts for the next mapping. The caller holds s.ix exclusively and has
// taken s out of the cache.
func (s *segment) unmapLocked() {
	if !s.ix.mapped {
		return
	}
	if !s.ix.pinned || s.ix.writable {
		unmap(s.ix.off.buf)
		unmap(s.ix.tim.buf)
	}
	s.ix.off.buf, s.ix.tim.buf = nil, nil
	if !s.ix.active {
		s.ix.off.truncate(0)
		s.ix.tim.truncate(0)
	}
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
		if s.mapForSearch() != nil {
			return false
		}
	}
}

func (s *segment) release() { s.ix.RUnlock() }

// seal turns the active segment into an inactive one: the indexes are
// unmapped, trimmed to their real size (so kafka-dump-log and a later open
// see exactly the entries written) and fsynced (which writes their dirty
// pages, mapped or not). The log is not synced here.
func (s *segment) seal() error {
	s.ix.Lock()
	defer s.ix.Unlock()
	if !s.ix.active {
		return nil
	}
	if s.ix.exact {
		return s.trimLocked() // nothing to cut or sync
	}
	return errors.Join(s.trimLocked(),
		syncPath(s.path(indexSuffix)),
		syncPath(s.path(timeIndexSuffix)))
}

// trimLocked unmaps the writable indexes and cuts their files to the
// entries they hold; the segment is no longer active. The caller holds
// s.ix exclusively.
func (s *segment) trimLocked() error {
	offLen := s.ix.off.n.Load() * offsetEntrySize
	timLen := s.ix.tim.n.Load() * timeEntrySize
	exact := s.ix.exact
	cacheRemove(s)
	s.ix.active, s.ix.exact = false, false
	s.unmapLocked()
	if exact {
		return nil
	}
	return errors.Join(
		truncatePath(s.path(indexSuffix), offLen),
		truncatePath(s.path(timeIndexSuffix), timLen))
}

// syncIndexes makes the active segment's published index entries durable:
// an msync while they are mapped, an fsync of the files after the cache
// unmapped them (their dirty pages stay in the page cache).
func (s *segment) syncIndexes() error {
	s.ix.RLock()
	defer s.ix.RUnlock()
	if !s.ix.active || !s.ix.dirty.Swap(false) {
		return nil
	}
	var err error
	if s.ix.mapped {
		err = errors.Join(syncMapped(s.ix.off.buf), syncMapped(s.ix.tim.buf))
	} else {
		err = errors.Join(syncPath(s.path(indexSuffix)), syncPath(s.path(timeIndexSuffix)))
	}
	if err != nil {
		s.ix.dirty.Store(true)
	}
	return err
}

// syncLog fsyncs the .log if bytes were written since its last fsync,
// opening it if the cache closed it: the page cache kept those bytes.
func (s *segment) syncLog() error {
	if !s.logDirty.Swap(false) {
		return nil
	}
	f, err := s.file()
	if err != nil {
		s.logDirty.Store(true)
		if errors.Is(err, ErrClosed) || errors.Is(err, errSegmentDeleted) {
			return nil // closed or deleted meanwhile: nothing to make durable
		}
		return err
	}
	err = f.Sync()
	s.fileDone()
	if err != nil {
		s.logDirty.Store(true)
	}
	return err
}

// wrote notes that bytes were written to the log.
func (s *segment) wrote() {
	if !s.logDirty.Load() {
		s.logDirty.Store(true)
	}
}

func syncPath(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// close unmaps the indexes and closes the log file for good.
func (s *segment) close() error {
	s.ix.Lock()
	cacheRemove(s)
	s.ix.active = false
	s.unmapLocked()
	s.ix.Unlock()
	return s.closeFile()
}

var errSegmentDeleted = errors.New("storage: segment deleted")

// renameDeleted renames the segment's files to *.deleted; the log
// descriptor, pinned open first, keeps working for readers that found the
// segment before until removeDeleted (a Region holds its descriptor open
// itself until it is released). deleted is set under the index lock, so no
// reader maps the index files by name after this point (a cleaned segment
// may reuse the names).
func (s *segment) renameDeleted() error {
	s.pinFile() // best effort: without it, readers of the segment fail
	s.ix.Lock()
	s.deleted.Store(true)
	s.ix.Unlock()
	var errs []error
	for _, suf := range []string{logSuffix, indexSuffix, timeIndexSuffix, txnIndexSuffix} {
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
	for _, suf := range []string{logSuffix, indexSuffix, timeIndexSuffix, txnIndexSuffix} {
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
// inactive; kafka-dump-log and retention read it there. Writer only; it
// must not hold the indexes (holdIndexes).
func (s *segment) finalTimeEntry() error {
	ts := s.maxTs.Load()
	if ts < 0 {
		return nil
	}
	s.ix.Lock()
	defer s.ix.Unlock()
	if !s.ix.active || s.ix.exact { // exact: the clean close added it
		return nil
	}
	if !s.ix.pinned {
		if err := s.remapCachedLocked(); err != nil {
			return err
		}
	}
	if s.ix.tim.maybeAdd(ts, uint32(s.maxTsOff.Load()-s.base)) {
		s.ix.tim.publish()
		s.ix.dirty.Store(true)
	}
	return nil
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
	if s.ix.off.n.Load() == s.ix.off.pending && s.ix.tim.n.Load() == s.ix.tim.pending {
		return
	}
	s.ix.off.publish()
	s.ix.tim.publish()
	s.ix.dirty.Store(true)
}
