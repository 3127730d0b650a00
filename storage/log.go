package storage

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Region is a byte range of a segment file, returned by reads instead of
// bytes. A Region of Len > 0 holds a reference to its descriptor (see
// logfiles.go): File stays open, and is the file the Region was read from,
// until the Region is released, whatever the descriptor cache, retention,
// truncation or closing the log do meanwhile. So an in-flight sendfile
// never hits a closed descriptor or one whose number was reused.
//
// Whoever holds a Region last releases it, exactly once: the network
// layer after sending it (engine.Response.Release), a reader after
// reading it. A copy of a Region shares its reference; Retain makes a
// copy that holds its own.
type Region struct {
	File *os.File
	Pos  int64 // byte position in File
	Len  int64 // 0 means nothing to read
	// NextOffset is the offset that follows the region's last batch (where
	// the next read continues), or -1 when Len is 0. It lets the caller
	// count what it sends without reading the batches.
	NextOffset int64

	ref *logFile // nil for an empty Region or one made by hand
}

// Release gives up the Region's reference to its descriptor and clears
// the Region; File must not be used after it. Releasing an empty or
// cleared Region does nothing; releasing two copies of one reference
// panics (logfiles.go).
func (r *Region) Release() {
	if r.ref != nil {
		r.ref.unref()
	}
	*r = Region{}
}

// Retain returns a copy of r with a reference of its own, to be released
// separately. r must hold its reference (not be released yet).
func (r Region) Retain() Region {
	if r.ref != nil {
		r.ref.refs.Add(1)
	}
	return r
}

// Log is one partition's log: a directory of segments. Appends are
// serialised by mu; reads take no lock (see Read).
type Log struct {
	dir string
	// recovered: Open scanned the log because it was not closed cleanly
	// (set once, before Open returns).
	recovered bool

	// Published state for lock-free readers.
	segs     atomic.Pointer[segList]
	leo      endMark      // log end offset; written under mu
	hw       endMark      // high watermark; written under hwMu
	logStart atomic.Int64 // Invariant: segs[0].base <= logStart <= hw <= leo
	size     atomic.Int64 // sum of segment sizes
	closed   atomic.Bool
	// truncGen is odd while a truncation cuts bytes or swaps segments and
	// counts truncations; a Read that saw it change is retried (see
	// truncate.go).
	truncGen atomic.Uint64

	epochs    *epochCache
	producers *producerState // its own lock; updated only under mu

	hwMu sync.Mutex // one writer at a time for the hw and unstable seqlocks

	// unstable is the first unstable offset (txn.go), math.MaxInt64 when
	// no transaction is open; stored under hwMu before the high watermark
	// that passes it. Invariant: a batch boundary, or math.MaxInt64.
	unstable endMark
	// unreplicated are the transactions decided by a marker the high
	// watermark has not passed yet (txn.go).
	unreplicated decidedTxns
	// aborted is the transaction index of every segment (txnindex.go).
	aborted abortedIndex

	mu struct {
		sync.Mutex
		cfg    Config
		err    error       // sticky: the first failed write or fsync
		onFail func(error) // told once, when err is first set (SetFailureHook)
		closed bool
		active *segment // == segs.last()

		// nextOffset is the offset the next batch gets. Invariant: equals
		// leo.off except inside Append, where it runs ahead of what is
		// written.
		nextOffset int64
		pending    int64 // bytes staged for the current write
		iov        []unix.Iovec
		undo       []producerUndo

		unflushedMsgs int64
		lastFlushMs   int64

		// held is the active segment while the appender holds its index
		// mappings and descriptor (holdActiveLocked), heldFile that
		// descriptor; nil otherwise.
		held     *segment
		heldFile *os.File

		// The cleaner checkpoint (compact.go): offsets below cleanPoint
		// may be compacted; cleanHorizon is the earliest delete horizon
		// of a kept tombstone, math.MaxInt64 if none.
		cleanPoint, cleanHorizon int64
	}

	// cleanMu serialises compactions. Close and Delete hold it from just
	// after setting closed, which a compaction checks between batches, so
	// they wait for a running pass to stop and no new pass starts.
	cleanMu sync.Mutex
	// compactHook, if set (tests), is called at each stage of a swap; an
	// error stops the pass there, leaving the files as a crash would.
	compactHook func(stage string) error
	// truncateHook, if set (tests), is called at each step of a
	// truncation; an error stops it there, leaving the files as a crash
	// would.
	truncateHook func(stage string) error

	// flushMu serialises flushes: fsyncs and checkpoint writes.
	flushMu sync.Mutex
	flushed struct { // guarded by flushMu
		rp           recoveryPoint // everything before it is fsynced
		diskRP       recoveryPoint // the recovery point in the checkpoint file
		checkpointMs int64         // when diskRP was written
		snapshotOff  int64         // offset of the newest producer snapshot, -1 if none
	}
	// durableBase is flushed.diskRP.base, readable without flushMu (which
	// is held across fsyncs): the cleaner never rewrites that segment or
	// later ones, since recovery resumes scanning inside it.
	durableBase atomic.Int64

	removals removals // delayed file removals (file.delete.delay.ms)
}

// removals are the file removals a log has scheduled for later, so that
// reads that found a segment before its deletion still work until then
// (Regions hold their descriptors until released, see logfiles.go). Close
// runs the pending ones at once and waits for those already running: no
// one reads a closed log's files, and the next Open would remove the same
// *.deleted files anyway.
type removals struct {
	mu      sync.Mutex
	pending map[*removal]bool // guarded by mu; scheduled, not started
	done    bool              // guarded by mu; set by runAll: run at once from then on
	running sync.WaitGroup    // removals whose timer fired and that are still running
}

type removal struct {
	timer *time.Timer // set under removals.mu
	run   func()
}

// after runs remove once delay has passed, or now if delay <= 0 or the log
// is closed.
func (r *removals) after(delay time.Duration, remove func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if delay <= 0 || r.done {
		remove()
		return
	}
	if r.pending == nil {
		r.pending = map[*removal]bool{}
	}
	e := &removal{run: remove}
	e.timer = time.AfterFunc(delay, func() { r.fire(e) })
	r.pending[e] = true
}

func (r *removals) fire(e *removal) {
	r.mu.Lock()
	ok := r.pending[e]
	delete(r.pending, e)
	if ok {
		r.running.Add(1)
	}
	r.mu.Unlock()
	if ok {
		defer r.running.Done()
		e.run()
	}
}

// runAll runs every pending removal now, waits for the running ones, and
// makes later ones run at once.
func (r *removals) runAll() {
	r.mu.Lock()
	pending := r.pending
	r.pending, r.done = nil, true
	r.mu.Unlock()
	for e := range pending {
		e.timer.Stop()
		e.run()
	}
	r.running.Wait()
}

// endMark is an offset with the byte position it corresponds to, published
// as a seqlock so readers see a consistent (offset, segment, position)
// triple without a lock or an allocation per append.
type endMark struct {
	seq  atomic.Uint64 // odd while a write is in progress
	off  atomic.Int64
	base atomic.Int64 // base offset of the segment pos refers to
	pos  atomic.Int64
}

type mark struct{ off, base, pos int64 }

// store is called by one writer at a time.
func (m *endMark) store(v mark) {
	m.seq.Add(1)
	m.off.Store(v.off)
	m.base.Store(v.base)
	m.pos.Store(v.pos)
	m.seq.Add(1)
}

func (m *endMark) load() mark {
	for {
		s := m.seq.Load()
		if s&1 == 0 {
			v := mark{m.off.Load(), m.base.Load(), m.pos.Load()}
			if m.seq.Load() == s {
				return v
			}
		}
		runtime.Gosched()
	}
}

// segList is an immutable, sorted list of segments; appends that change the
// set of segments publish a new one.
type segList struct {
	segs []*segment
	// ents[i] = {segs[i].base, segs[i]}: a search reads bases from one
	// dense array, and the segment pointer sits on the same cache line as
	// the base it found.
	ents []segEntry
}

type segEntry struct {
	base int64
	seg  *segment
}

func newSegList(segs []*segment) *segList {
	l := &segList{segs: segs, ents: make([]segEntry, len(segs))}
	for i, s := range segs {
		l.ents[i] = segEntry{s.base, s}
	}
	return l
}

// at returns segment i, as found by find.
func (l *segList) at(i int) *segment { return l.ents[i].seg }

// find returns the index of the segment that would hold offset (the last one
// with base <= offset), or -1. Segments tend to hold similar numbers of
// offsets, so the search interpolates its first probe (see searchLE).
func (l *segList) find(offset int64) int {
	n := int64(len(l.ents))
	if n == 0 || offset < l.ents[0].base {
		return -1
	}
	first, last := l.ents[0].base, l.ents[n-1].base
	guess := n - 1
	if offset < last {
		guess = int64(float64(offset-first) / float64(last-first+1) * float64(n-1))
	}
	return int(gallopLE(n, offset, guess, l.baseAt))
}

func (l *segList) baseAt(i int64) int64 { return l.ents[i].base }

func (l *segList) last() *segment { return l.segs[len(l.segs)-1] }

func (l *segList) with(s *segment) *segList {
	return newSegList(append(slices.Clip(l.segs), s))
}

// Open opens or creates the log in dir and recovers it if it was not shut
// down cleanly. A log that CloseAll closed is known clean only through its
// data directory's record: open those through TakeCleanShutdown's Open.
func Open(dir string, cfg Config) (*Log, error) { return open(dir, cfg, false) }

// open is Open; dirClean says the data directory's clean-shutdown record
// named the log.
func open(dir string, cfg Config, dirClean bool) (*Log, error) {
	cfg = cfg.normalized()
	made, err := makeDir(dir)
	if err != nil {
		return nil, err
	}
	l := &Log{dir: dir}
	l.mu.cfg = cfg
	l.mu.lastFlushMs = time.Now().UnixMilli()
	load := func() error { return l.load(dirClean) }
	if made {
		load = l.loadNew
	}
	if err := load(); err != nil {
		l.closeSegments()
		return nil, fmt.Errorf("storage: open %s: %w", dir, err)
	}
	return l, nil
}

// makeDir creates dir (and its parents) and reports whether dir is new.
func makeDir(dir string) (made bool, err error) {
	err = os.Mkdir(dir, 0o755)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrExist):
		return false, nil
	case errors.Is(err, fs.ErrNotExist):
		return true, os.MkdirAll(dir, 0o755)
	}
	return false, err
}

// Recovered reports whether Open had to recover the log: it was not
// closed cleanly (or its clean close was not recorded).
func (l *Log) Recovered() bool { return l.recovered }

// Dir is the partition directory.
func (l *Log) Dir() string { return l.dir }

// SetConfig changes the configuration; new segment sizes apply from the next
// roll, retention from the next EnforceRetention.
func (l *Log) SetConfig(cfg Config) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.cfg = cfg.normalized()
}

func (l *Log) config() Config {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.cfg
}

// LogStartOffset is the first offset that may be read.
func (l *Log) LogStartOffset() int64 { return l.logStart.Load() }

// LogEndOffset is the offset the next appended record gets.
func (l *Log) LogEndOffset() int64 { return l.leo.load().off }

// HighWatermark is the end of what consumers may read.
func (l *Log) HighWatermark() int64 { return l.hw.load().off }

// Size is the number of bytes in all segments.
func (l *Log) Size() int64 { return l.size.Load() }

// LatestEpoch is the newest leader epoch in the log, or -1.
func (l *Log) LatestEpoch() int32 { return l.epochs.latest() }

// EndOffsetForEpoch answers OffsetForLeaderEpoch: the end offset of the
// largest epoch <= epoch, or (-1, -1) if it is unknown.
func (l *Log) EndOffsetForEpoch(epoch int32) (foundEpoch int32, endOffset int64) {
	return l.epochs.endOffsetFor(epoch, l.LogEndOffset())
}

// Producers lists the idempotent producers with state in this partition.
func (l *Log) Producers() []ProducerInfo { return l.producers.infos() }

// SetHighWatermark sets the high watermark, clamped to [log start, LEO].
func (l *Log) SetHighWatermark(offset int64) {
	l.hwMu.Lock()
	defer l.hwMu.Unlock()
	l.setHighWatermarkLocked(offset)
}

func (l *Log) setHighWatermarkLocked(offset int64) {
	leo := l.leo.load()
	offset = max(min(offset, leo.off), l.logStart.Load())
	l.refreshUnstableLocked(offset) // before readers can see the new watermark
	if offset == leo.off {
		l.hw.store(leo)
		return
	}
	if m, ok := l.markFor(offset); ok {
		l.hw.store(m)
	}
}

// markFor finds the position of the batch holding offset, the position the
// high watermark refers to. Reads below the high watermark then stop at
// that batch's start, as Kafka's do.
func (l *Log) markFor(offset int64) (mark, bool) {
	segs := l.segs.Load()
	i := segs.find(offset)
	if i < 0 {
		return mark{}, false
	}
	s := segs.at(i)
	end := s.size.Load()
	if offset == s.base {
		return mark{offset, s.base, 0}, true
	}
	pos, _, err := s.findBatchOpen(offset, end)
	if err != nil {
		return mark{offset, s.base, end}, err == errBeyondEnd
	}
	return mark{offset, s.base, pos}, true
}

// MaxTimestamp returns the offset and timestamp of the batch with the
// largest timestamp (ListOffsets -3), or (-1, -1) when the log is empty.
func (l *Log) MaxTimestamp() (offset, timestamp int64) {
	offset, timestamp = -1, -1
	for _, s := range l.segs.Load().segs {
		if ts := s.maxTs.Load(); ts > timestamp {
			offset, timestamp = s.maxTsOff.Load(), ts
		}
	}
	return offset, timestamp
}

// Close flushes everything, trims the active segment's indexes, writes a
// producer snapshot and the checkpoints, and leaves a clean-shutdown marker
// so the next Open skips recovery. Segments deleted earlier lose their
// files now rather than when their file.delete.delay.ms runs out.
func (l *Log) Close() error {
	if l.closed.Swap(true) {
		return nil
	}
	l.cleanMu.Lock() // wait for a running compaction to stop
	defer l.cleanMu.Unlock()
	l.removals.runAll()
	err := l.flush(flushFinal)
	l.mu.Lock()
	l.mu.closed = true
	stickyErr := l.mu.err
	if stickyErr == nil && err == nil {
		err = l.sealActiveLocked()
	}
	l.mu.Unlock()
	if stickyErr == nil && err == nil {
		err = os.WriteFile(filepath.Join(l.dir, cleanShutdownFile), nil, 0o644)
		if err == nil {
			err = syncDir(l.dir)
		}
	}
	return errors.Join(err, l.closeSegments())
}

// sealActiveLocked trims the active segment's indexes for a clean close,
// after adding the final time index entry.
func (l *Log) sealActiveLocked() error {
	s := l.mu.active
	if s == nil {
		return nil
	}
	return errors.Join(s.finalTimeEntry(), s.seal())
}

func (l *Log) closeSegments() error {
	segs := l.segs.Load()
	if segs == nil {
		return nil
	}
	var errs []error
	for _, s := range segs.segs {
		if !s.deleted.Load() {
			errs = append(errs, s.close())
		}
	}
	return errors.Join(errs...)
}

// Delete closes the log and removes its directory. The directory is first
// renamed aside and removed after FileDeleteDelayMs, so reads that found its
// segments before still work (Regions hold their descriptors until released).
func (l *Log) Delete() error {
	l.closed.Store(true)
	l.cleanMu.Lock() // wait for a running compaction to stop
	defer l.cleanMu.Unlock()
	l.mu.Lock()
	l.mu.closed = true
	delay := time.Duration(l.mu.cfg.FileDeleteDelayMs) * time.Millisecond
	l.mu.Unlock()
	l.flushMu.Lock() // wait for a background flush; later ones see closed
	defer l.flushMu.Unlock()
	aside := fmt.Sprintf("%s.%x%s", strings.TrimSuffix(l.dir, string(filepath.Separator)), time.Now().UnixNano(), deletedDirSuffix)
	if err := os.Rename(l.dir, aside); err != nil {
		return errors.Join(err, l.closeSegments())
	}
	syncDir(filepath.Dir(aside))
	remove := func() {
		l.closeSegments()
		os.RemoveAll(aside)
	}
	l.removals.after(delay, remove)
	return nil
}

// deletedDirSuffix ends the name a deleted log's directory is renamed to
// ("<dir>.<hex nanos>-delete", Kafka's own convention).
const deletedDirSuffix = "-delete"

// RemoveDeleted removes what Delete renamed aside in parent and a stop
// kept from removing (its file.delete.delay.ms had not run out). Nothing
// reads those directories once their log is deleted, so a starting broker
// removes them at once, as Kafka's log manager does.
func RemoveDeleted(parent string) error {
	ents, err := os.ReadDir(parent)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range ents {
		if e.IsDir() && strings.HasSuffix(e.Name(), deletedDirSuffix) {
			errs = append(errs, os.RemoveAll(filepath.Join(parent, e.Name())))
		}
	}
	return errors.Join(errs...)
}

// stickyErr returns the error that stops appends, if any.
func (l *Log) stickyErr() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.err
}

// setErr records the first I/O failure; later appends fail with it, because
// appending after a failed write could leave a hole in the log.
func (l *Log) setErr(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.setErrLocked(err)
}

func (l *Log) setErrLocked(err error) {
	if l.mu.err == nil && err != nil {
		l.mu.err = fmt.Errorf("storage: %s: log failed, refusing writes: %w", l.dir, err)
		if fn := l.mu.onFail; fn != nil {
			go fn(l.mu.err) // off the lock: the hook may stop the broker
		}
	}
}

// SetFailureHook sets the function told, once, when the log fails (a write
// or fsync error makes it refuse writes; see setErr). The owner of the
// data dir decides what a failed log means for the process: Kafka takes
// the log dir offline, and halts when it was the last one.
func (l *Log) SetFailureHook(fn func(error)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.onFail = fn
}

// isNotExist is errors.Is(err, fs.ErrNotExist).
func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
