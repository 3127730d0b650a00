package storage

import (
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Segment .log descriptors are opened on demand and held by a process-wide
// CLOCK cache of at most maxOpen segments, so a broker's descriptors do not
// grow with its partitions and segments (RLIMIT_NOFILE on some hosts is a
// hard 20,000; Kafka keeps every segment open). Index files cost no
// descriptor at all (see mapFile).
//
// Everything that reads or writes a segment's log gets the descriptor
// through one accessor, segment.file, which holds it shared until
// fileDone: eviction takes the descriptor exclusively with TryLock, so it
// never closes one in use and never waits for a user. Besides the cache
// bound, a descriptor is open while
//   - a Region of it may still be sent: an evicted descriptor that lent a
//     Region (Read returned one) is closed file.delete.delay.ms after that
//     Region (at once if that has passed), through
//     its log's removals, as a deleted segment's files are; under descriptor
//     pressure (maxOpen of those pending) the oldest close earlier, but
//     never sooner than minLendMs after their last Region. When even that
//     leaves no room (one fetch spanning more partitions than the budget),
//     opening fails with ErrTooManyOpenFiles, a retriable error, rather
//     than take the descriptors sockets need;
//   - its segment is deleted and its files wait for removal (pinned).
//
// Closing a descriptor with unsynced bytes loses nothing: the page cache
// belongs to the file, not the descriptor, so the next flush reopens it and
// its fsync writes them (segment.logDirty says which segments need it), and
// since Linux 4.16 a writeback error nobody has seen yet is reported to a
// descriptor opened after it.
var maxOpen atomic.Int64

func init() { maxOpen.Store(4096) }

// SetMaxOpenLogFiles sets how many segment .log descriptors may stay open
// for reuse (process-wide). n < 2 is treated as 2.
func SetMaxOpenLogFiles(n int) { maxOpen.Store(int64(max(n, 2))) }

// minLendMs is the shortest time an evicted descriptor that lent a Region
// stays open, even under descriptor pressure: a Region is sent right after
// the Read that made it.
const minLendMs = 5000

// segFile is a segment's .log descriptor and its cache state.
type segFile struct {
	// Users of f hold the RWMutex shared (segment.file); opening, evicting
	// and closing hold it exclusively, so f never changes under a user.
	sync.RWMutex
	f    atomic.Pointer[os.File]
	used atomic.Bool // CLOCK reference bit, set by users
	// lentMs is when Read last returned a Region of f (Unix ms), 0 if it
	// never did since f was opened.
	lentMs atomic.Int64
	cached bool // in fileCache.ring; guarded by fileCache.mu
	// pinned: f stays open until the segment is closed (deleted segments
	// keep serving Regions and readers until their files are removed).
	// Guarded by the exclusive lock.
	pinned bool
	// gone: the segment was closed; f is never reopened. Guarded by the
	// exclusive lock.
	gone bool
}

// fileCache is the CLOCK ring of segments whose .log descriptor is open
// and not pinned.
var fileCache struct {
	mu   sync.Mutex
	ring []*segment // Invariant: s in ring <=> s.fd.cached
	hand int
	// lending are evicted descriptors that lent a Region, oldest first,
	// waiting for their delayed close.
	lending []*lentFile
	pending atomic.Int64 // lentFiles not closed yet
}

// lentFile is an evicted descriptor whose close is delayed.
type lentFile struct {
	f      *os.File
	lentMs int64 // when its last Region was returned
	closed atomic.Bool
}

func (e *lentFile) close() {
	if !e.closed.Swap(true) {
		e.f.Close()
		fileCache.pending.Add(-1)
	}
}

// file returns the segment's open .log descriptor, opening it if needed,
// held shared: the caller calls fileDone when it no longer uses it.
func (s *segment) file() (*os.File, error) {
	for {
		s.fd.RLock()
		if f := s.fd.f.Load(); f != nil {
			if !s.fd.used.Load() {
				s.fd.used.Store(true)
			}
			return f, nil
		}
		s.fd.RUnlock()
		if err := s.openFile(); err != nil {
			return nil, err
		}
	}
}

func (s *segment) fileDone() { s.fd.RUnlock() }

// lend notes that a Region of f is handed out: an eviction must then keep
// f open for a while. The caller holds the descriptor (file).
func (s *segment) lend() {
	if now := time.Now().UnixMilli(); s.fd.lentMs.Load() != now {
		s.fd.lentMs.Store(now)
	}
}

// openFile opens the .log file by name and registers it with the cache.
func (s *segment) openFile() error {
	s.fd.Lock()
	defer s.fd.Unlock()
	if s.fd.f.Load() != nil {
		return nil
	}
	if s.fd.gone {
		return ErrClosed
	}
	if s.deleted.Load() {
		// Renamed: a cleaned segment may have taken its name.
		return errSegmentDeleted
	}
	if !fileBudgetLeft() {
		return ErrTooManyOpenFiles
	}
	f, err := s.openLocked()
	if err != nil {
		return err
	}
	defer retire(s.adoptFileLocked(f)) // after the unlock: it may take a log's removals lock
	return nil
}

// openLocked opens the .log file by name, creating it if the segment is
// unmade. The caller holds s.fd exclusively.
func (s *segment) openLocked() (*os.File, error) {
	if !s.unmade.Load() {
		return os.OpenFile(s.path(logSuffix), os.O_RDWR, 0)
	}
	f, err := os.OpenFile(s.path(logSuffix), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err == nil {
		s.unmade.Store(false)
	}
	return f, err
}

// adoptFileLocked makes f the segment's descriptor; the caller holds s.fd
// exclusively and f is not set. The caller retires the evicted descriptors
// it returns once it holds no segment or cache lock.
func (s *segment) adoptFileLocked(f *os.File) []evicted {
	s.fd.f.Store(f)
	s.fd.lentMs.Store(0)
	s.fd.used.Store(true)
	return fileCacheAdd(s)
}

// pinFile keeps the descriptor open (opening it if needed) until the
// segment is closed. It fails only if the file cannot be opened.
func (s *segment) pinFile() error {
	s.fd.Lock()
	defer s.fd.Unlock()
	if s.fd.gone {
		return ErrClosed
	}
	if s.fd.f.Load() == nil {
		f, err := s.openLocked()
		if err != nil {
			return err
		}
		s.fd.f.Store(f)
	}
	s.fd.pinned = true
	fileCacheRemove(s)
	return nil
}

// unpinFile hands a pinned descriptor (a cleaner output's, now
// published) to the cache.
func (s *segment) unpinFile() {
	s.fd.Lock()
	if !s.fd.pinned || s.fd.gone || s.fd.f.Load() == nil {
		s.fd.Unlock()
		return
	}
	s.fd.pinned = false
	s.fd.used.Store(true)
	evicted := fileCacheAdd(s)
	s.fd.Unlock()
	retire(evicted)
}

// closeFile closes the descriptor for good (the segment is closed or its
// files removed). It waits for current users.
func (s *segment) closeFile() error {
	s.fd.Lock()
	defer s.fd.Unlock()
	s.fd.gone = true
	fileCacheRemove(s)
	f := s.fd.f.Swap(nil)
	if f == nil {
		return nil
	}
	if err := f.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
		return err
	}
	return nil
}

// ErrTooManyOpenFiles says a segment's log cannot be opened now: the
// cache is full and as many evicted descriptors still lend Regions, none
// for long enough to close early. Opening more would eat into the
// descriptors left for sockets; the request is retried once some close.
var ErrTooManyOpenFiles = errors.New("storage: segment descriptors exhausted by Regions in flight; retry")

// fileBudgetLeft reports whether one more descriptor may be opened: the
// cache has room, or an eviction would leave the lending ones within
// their bound (so at most 2*maxOpen, plus those in use at once).
func fileBudgetLeft() bool {
	fileCache.mu.Lock()
	defer fileCache.mu.Unlock()
	relieveLending()
	return int64(len(fileCache.ring)) < maxOpen.Load() || fileCache.pending.Load() < maxOpen.Load()
}

// fileCacheAdd records that s opened its descriptor, evicting others while
// the ring is at its bound, and returns the evicted descriptors. The caller
// holds s.fd exclusively.
func fileCacheAdd(s *segment) (out []evicted) {
	fileCache.mu.Lock()
	defer fileCache.mu.Unlock()
	for int64(len(fileCache.ring)) >= maxOpen.Load() {
		e, ok := evictFile()
		if !ok {
			break
		}
		out = append(out, e)
	}
	s.fd.cached = true
	fileCache.ring = append(fileCache.ring, s)
	relieveLending()
	return out
}

// evicted is a descriptor taken from its segment by the cache, to close.
type evicted struct {
	s      *segment
	f      *os.File
	lentMs int64 // segFile.lentMs
}

// fileCacheRemove drops s from the ring; the caller holds s.fd exclusively.
func fileCacheRemove(s *segment) {
	fileCache.mu.Lock()
	defer fileCache.mu.Unlock()
	if !s.fd.cached {
		return
	}
	for i, v := range fileCache.ring {
		if v == s {
			removeFileRing(i)
			return
		}
	}
}

func removeFileRing(i int) {
	r := fileCache.ring
	r[i].fd.cached = false
	copy(r[i:], r[i+1:])
	r[len(r)-1] = nil
	fileCache.ring = r[:len(r)-1]
	if fileCache.hand > i {
		fileCache.hand--
	}
}

// evictFile takes one descriptor not used since the hand last passed it
// (second chance) from its segment, skipping those in use (TryLock fails),
// so eviction never waits and cannot deadlock with users that are
// themselves opening. It reports false when nothing could be evicted.
func evictFile() (evicted, bool) {
	for tries := 0; tries < 2*len(fileCache.ring); tries++ {
		if fileCache.hand >= len(fileCache.ring) {
			fileCache.hand = 0
		}
		v := fileCache.ring[fileCache.hand]
		if v.fd.used.Swap(false) || !v.fd.TryLock() {
			fileCache.hand++
			continue
		}
		e := evicted{v, v.fd.f.Swap(nil), v.fd.lentMs.Load()}
		removeFileRing(fileCache.hand)
		v.fd.Unlock()
		return e, true
	}
	return evicted{}, false
}

// retire closes evicted descriptors: at once unless they lent a Region
// less than their log's file.delete.delay.ms ago, else when that delay
// has passed since the Region. The caller holds no segment or cache lock.
func retire(es []evicted) {
	now := time.Now().UnixMilli()
	for _, e := range es {
		if e.f == nil {
			continue
		}
		var delayMs int64
		if e.s.owner != nil {
			delayMs = e.s.owner.deleteDelayMs.Load()
		}
		left := e.lentMs + delayMs - now
		if e.lentMs == 0 || left <= 0 {
			e.f.Close()
			continue
		}
		lf := &lentFile{f: e.f, lentMs: e.lentMs}
		fileCache.mu.Lock()
		fileCache.pending.Add(1)
		fileCache.lending = append(fileCache.lending, lf)
		fileCache.mu.Unlock()
		e.s.owner.removals.after(time.Duration(left)*time.Millisecond, lf.close)
	}
}

// relieveLending forgets closed lentFiles at the head of the queue and,
// while maxOpen or more are still open, closes the oldest ones whose last
// Region is minLendMs old. fileCache.mu is held.
func relieveLending() {
	now := time.Now().UnixMilli()
	q := fileCache.lending
	i := 0
	for ; i < len(q); i++ {
		e := q[i]
		if !e.closed.Load() {
			if fileCache.pending.Load() < maxOpen.Load() || now-e.lentMs < minLendMs {
				break
			}
			e.close()
		}
		q[i] = nil
	}
	fileCache.lending = q[i:]
	if len(fileCache.lending) == 0 {
		fileCache.lending = nil // let the array go
	}
}

// OpenLogFiles reports the segment .log descriptors open now: those in the
// cache, pinned ones not counted, and evicted ones waiting for a delayed
// close.
func OpenLogFiles() (cached, lending int) {
	fileCache.mu.Lock()
	defer fileCache.mu.Unlock()
	return len(fileCache.ring), int(fileCache.pending.Load())
}
