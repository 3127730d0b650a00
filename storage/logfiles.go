package storage

import (
	"errors"
	"os"
	"sync"
	"sync/atomic"
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
// never closes one in use and never waits for a user.
//
// Each open descriptor is a logFile with a reference count. Its segment
// holds one reference while the descriptor is the segment's (cached or
// pinned), and every Region of it that Read hands out holds one more
// until Region.Release. Eviction, closing a segment and removing a deleted
// segment's files only drop the segment's reference.
//
// Invariant: a descriptor is closed exactly when its last reference goes,
// so a Region reads the bytes of its own file, whatever was evicted,
// closed or removed meanwhile, until it is released — never a closed
// descriptor, never one whose number was reused by another open. Nothing
// about it is timed: file.delete.delay.ms delays the removal of deleted
// segments' files (so that readers that found the segment before its
// deletion still read it), not the close of a descriptor that no one
// holds any more.
//
// The price is that every Region must be released, exactly once, by
// whoever holds it last: the network layer through Response.Release once
// the bytes are on the socket (or the connection is gone), and anyone who
// reads a Region itself when it is done. A leaked Region keeps its
// descriptor open and counted.
//
// Descriptors the cache let go that Regions still hold ("lending") are
// bounded too: while maxOpen of them are open and the cache is full,
// opening another fails with ErrTooManyOpenFiles, a retriable error,
// rather than take the descriptors sockets need. So at most 2*maxOpen are
// open, plus those in use at that moment and the pinned ones (deleted
// segments waiting for their removal, cleaner outputs).
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

// logFile is one open .log descriptor and its references: the segment's
// while it is the segment's descriptor, and one per unreleased Region.
type logFile struct {
	f *os.File
	// refs counts the references. Invariant: refs > 0 while f is open; a
	// Region's reference is only taken while the segment's is held (under
	// segFile's shared lock), so it never revives a closed descriptor.
	refs atomic.Int64
}

func newLogFile(f *os.File) *logFile {
	lf := &logFile{f: f}
	lf.refs.Store(1) // the segment's
	return lf
}

// drop gives up the segment's reference, once the segment no longer
// refers to lf: f closes now, or with the last Region of it. Until then
// it counts as lending.
func (lf *logFile) drop() error {
	fileCache.lending.Add(1)
	return lf.unref()
}

// unref gives up one reference and closes f with the last one.
func (lf *logFile) unref() error {
	switch n := lf.refs.Add(-1); {
	case n > 0:
		return nil
	case n < 0:
		panic("storage: a Region of a segment file was released twice")
	}
	fileCache.lending.Add(-1)
	if err := lf.f.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
		return err
	}
	return nil
}

// segFile is a segment's .log descriptor and its cache state.
type segFile struct {
	// Users of f hold the RWMutex shared (segment.file); opening, evicting
	// and closing hold it exclusively, so f never changes under a user.
	sync.RWMutex
	f    atomic.Pointer[logFile]
	used atomic.Bool // CLOCK reference bit, set by users
	// cached: in fileCache.ring; guarded by fileCache.mu.
	cached bool
	// pinned: f stays the segment's until the segment is closed (deleted
	// segments keep serving readers until their files are removed; a
	// cleaner output is written before it is published). Guarded by the
	// exclusive lock.
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
	// lending counts the descriptors whose segment let them go (evicted
	// or closed) and that Regions still hold open.
	lending atomic.Int64
}

// file returns the segment's open .log descriptor, opening it if needed,
// held shared: the caller calls fileDone when it no longer uses it.
func (s *segment) file() (*os.File, error) {
	for {
		s.fd.RLock()
		if lf := s.fd.f.Load(); lf != nil {
			if !s.fd.used.Load() {
				s.fd.used.Store(true)
			}
			return lf.f, nil
		}
		s.fd.RUnlock()
		if err := s.openFile(); err != nil {
			return nil, err
		}
	}
}

func (s *segment) fileDone() { s.fd.RUnlock() }

// lend takes a reference to the descriptor for a Region of it; the caller
// holds it (file), so it is the descriptor file returned.
func (s *segment) lend() *logFile {
	lf := s.fd.f.Load()
	lf.refs.Add(1)
	return lf
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
	defer retire(s.adoptFileLocked(f)) // after the unlock: closing takes time
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

// adoptFileLocked makes f the segment's cached descriptor; the caller
// holds s.fd exclusively and f is not set. The caller retires the evicted
// descriptors it returns once it holds no segment or cache lock.
func (s *segment) adoptFileLocked(f *os.File) []*logFile {
	s.fd.f.Store(newLogFile(f))
	s.fd.used.Store(true)
	return fileCacheAdd(s)
}

// pinFile keeps the descriptor the segment's (opening it if needed) until
// the segment is closed. It fails only if the file cannot be opened.
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
		s.fd.f.Store(newLogFile(f))
	}
	s.fd.pinned = true
	fileCacheRemove(s)
	return nil
}

// pinnedFile is the descriptor of a pinned segment (a cleaner output
// being written), which no one else closes.
func (s *segment) pinnedFile() *os.File { return s.fd.f.Load().f }

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

// closeFile lets the descriptor go for good (the segment is closed or its
// files removed): it waits for current users, and the descriptor closes
// now or, if Regions of it are still out, with the last of them.
func (s *segment) closeFile() error {
	s.fd.Lock()
	defer s.fd.Unlock()
	s.fd.gone = true
	fileCacheRemove(s)
	lf := s.fd.f.Swap(nil)
	if lf == nil {
		return nil
	}
	return lf.drop()
}

// ErrTooManyOpenFiles says a segment's log cannot be opened now: the
// cache is full and as many descriptors it let go are still held open by
// Regions not yet sent. Opening more would eat into the descriptors left
// for sockets; the request is retried once some Regions are released.
var ErrTooManyOpenFiles = errors.New("storage: segment descriptors exhausted by Regions in flight; retry")

// fileBudgetLeft reports whether one more descriptor may be opened: the
// cache has room, or the lending ones are within their bound (so at most
// 2*maxOpen, plus those in use at once).
func fileBudgetLeft() bool {
	fileCache.mu.Lock()
	defer fileCache.mu.Unlock()
	return int64(len(fileCache.ring)) < maxOpen.Load() || fileCache.lending.Load() < maxOpen.Load()
}

// fileCacheAdd records that s opened its descriptor, evicting others while
// the ring is at its bound, and returns the evicted descriptors. The caller
// holds s.fd exclusively.
func fileCacheAdd(s *segment) (out []*logFile) {
	fileCache.mu.Lock()
	defer fileCache.mu.Unlock()
	for int64(len(fileCache.ring)) >= maxOpen.Load() {
		lf, ok := evictFile()
		if !ok {
			break
		}
		if lf != nil {
			out = append(out, lf)
		}
	}
	s.fd.cached = true
	fileCache.ring = append(fileCache.ring, s)
	return out
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
func evictFile() (*logFile, bool) {
	for tries := 0; tries < 2*len(fileCache.ring); tries++ {
		if fileCache.hand >= len(fileCache.ring) {
			fileCache.hand = 0
		}
		v := fileCache.ring[fileCache.hand]
		if v.fd.used.Swap(false) || !v.fd.TryLock() {
			fileCache.hand++
			continue
		}
		lf := v.fd.f.Swap(nil)
		removeFileRing(fileCache.hand)
		v.fd.Unlock()
		return lf, true
	}
	return nil, false
}

// retire drops the segments' references to evicted descriptors: those
// that lent no Region still out close now, the others with their last
// Region. The caller holds no segment or cache lock.
func retire(evicted []*logFile) {
	for _, lf := range evicted {
		lf.drop()
	}
}

// OpenLogFiles reports the segment .log descriptors open now: those in the
// cache (pinned ones not counted), and those the cache or a closed segment
// let go that Regions still hold.
func OpenLogFiles() (cached, lending int) {
	fileCache.mu.Lock()
	defer fileCache.mu.Unlock()
	return len(fileCache.ring), int(fileCache.lending.Load())
}
