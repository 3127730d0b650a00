package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluice-broker/sluice/record"
)

// Recovery.
//
// A clean Close leaves the clean-shutdown marker and a recovery point equal
// to the log end; Open then trusts every segment and only maps the active
// segment's indexes. Otherwise Open recovers: segments (and the part of the
// recovery point's segment) below the recovery point were fsynced, with
// their index entries, before the point was written, so they are trusted;
// everything after it is read batch by batch, CRC-checked, and its index
// entries are rebuilt.
//
// Damage rule. Let P be the position of the first batch that fails (short
// header, length beyond the end of the file, bad length, magic or CRC,
// offsets going backwards). Then:
//
//   - If no valid batch can be found anywhere after P (in this segment, and
//     no later segment holds data), the damage is a torn or zeroed tail: the
//     write that was in flight at the crash. The segment is truncated to P.
//     This covers a header or batch cut at any byte, a bit flip in the last
//     batch (which runs to EOF), and zeros left by a crash after the file
//     grew but before its data reached the disk.
//   - If a valid batch follows P (found by scanning every byte position after
//     P for a header whose magic, length, offsets and CRC all check out), or
//     a later segment holds data, the damage is corruption in the middle of
//     the log: Open fails with a *CorruptError naming the file and P, and
//     nothing is truncated. Acknowledged records after P are never dropped
//     silently; an operator decides.

// load opens or creates the log's segments, recovers them if needed, and
// publishes the result.
func (l *Log) load(dirClean bool) error {
	var err error
	if l.epochs, err = loadEpochCache(l.dir); err != nil {
		return err
	}
	l.initEmptyState()
	if l.mu.cleanPoint, l.mu.cleanHorizon, err = readCleanerCheckpoint(l.dir); err != nil {
		return err
	}
	_, statErr := os.Stat(filepath.Join(l.dir, cleanShutdownFile))
	clean := statErr == nil || dirClean // its own marker (Close), or the data directory's record (CloseAll)
	segs, fresh, err := l.openSegments()
	if err != nil {
		return err
	}
	rp, haveRP, err := readRecoveryPoint(l.dir)
	if err != nil {
		return err
	}
	last := segs[len(segs)-1]
	var next int64
	trusted := clean && haveRP && rp.base == last.base && rp.pos == last.size.Load()
	if fresh {
		// Nothing to recover, and scanning would create the empty
		// segment's index files (activateEmpty leaves them for the
		// first append).
		next = last.base
		l.flushed.rp = recoveryPoint{offset: next, base: next}
	} else if trusted {
		l.flushed.rp, l.flushed.diskRP = rp, rp
		l.durableBase.Store(rp.base)
		next, err = l.openClean(segs, rp)
	} else {
		l.recovered = true
		segs, next, err = l.recoverSegments(segs, rp, haveRP)
	}
	if err != nil {
		return err
	}
	if err := l.publishLoaded(segs, next); err != nil {
		return err
	}
	if !trusted && !fresh { // write the transaction index entries recovery rebuilt
		if err := l.persistRecovered(l.flushed.rp.offset); err != nil {
			return err
		}
	}
	segs[len(segs)-1].unpinIndexes() // recovery is done writing them without the lock
	if err := os.Remove(filepath.Join(l.dir, cleanShutdownFile)); err == nil {
		err = syncDir(l.dir) // a crash from now on must be seen as unclean
		if err != nil {
			return err
		}
	}
	if !clean && !fresh {
		return l.flush(flushFinal) // make the recovered tail durable and checkpoint it
	}
	return nil
}

// loadNew is load for a directory Open just created: there is nothing to
// read, recover or remove, so a new partition costs its directory and one
// segment file, without the dozen lookups of files that cannot be there.
func (l *Log) loadNew() error {
	l.epochs = &epochCache{dir: l.dir}
	l.initEmptyState()
	l.mu.cleanPoint, l.mu.cleanHorizon = 0, math.MaxInt64 // as readCleanerCheckpoint without a file
	l.flushed.rp = recoveryPoint{}
	return l.publishLoaded([]*segment{newEmptySegment(l, 0, l.mu.cfg)}, 0)
}

// initEmptyState sets the state both load and loadNew start from before
// anything is read: no producers, no open transaction, no snapshot.
func (l *Log) initEmptyState() {
	l.producers = newProducerState()
	l.unstable.store(noUnstable)
	l.flushed.snapshotOff = -1
}

// openSegments removes leftovers (deleted segments, temporary files, index
// files without a log) and opens every segment, creating the first one in an
// empty directory (fresh).
func (l *Log) openSegments() (segs []*segment, fresh bool, err error) {
	if err := l.completeSwaps(); err != nil {
		return nil, false, err
	}
	ents, err := os.ReadDir(l.dir)
	if err != nil {
		return nil, false, err
	}
	var bases []int64
	have, txn := map[int64]bool{}, map[int64]bool{}
	for _, e := range ents {
		if base, ok := parseSegmentName(e.Name(), logSuffix); ok {
			bases = append(bases, base)
			have[base] = true
		} else if base, ok := parseSegmentName(e.Name(), txnIndexSuffix); ok {
			txn[base] = true
		}
	}
	for _, e := range ents {
		name := e.Name()
		if strings.HasSuffix(name, deletedSuffix) || strings.HasSuffix(name, tmpSuffix) {
			os.Remove(filepath.Join(l.dir, name))
		}
		for _, suf := range []string{indexSuffix, timeIndexSuffix, txnIndexSuffix} {
			if base, ok := parseSegmentName(name, suf); ok && !have[base] {
				os.Remove(filepath.Join(l.dir, name))
			}
		}
	}
	slices.Sort(bases)
	if len(bases) == 0 {
		start, err := readOffsetFile(l.dir, logStartFile, 0)
		if err != nil {
			return nil, false, err
		}
		// No file and no directory fsync: an empty log a crash loses is
		// created again by the next Open at the same log start, and the
		// first flush to write a recovery point fsyncs the directory
		// (writeFileAtomic) after the log file it covers. Here they were
		// most of what creating a partition cost, and a CreateTopics of
		// thousands paid them thousands of times.
		return []*segment{newEmptySegment(l, max(start, 0), l.mu.cfg)}, true, nil
	}
	segs = make([]*segment, 0, len(bases))
	for _, base := range bases {
		s, err := openSegment(l, base)
		if err != nil {
			closeAll(segs)
			return nil, false, err
		}
		s.hasTxnIndex = txn[base] // so that loading reads only the .txnindex files there are
		segs = append(segs, s)
	}
	return segs, false, nil
}

// completeSwaps finishes or discards a compaction that a crash cut short
// (see compact.go), before the segments are opened, as Kafka's log loading
// does:
//
//   - ".cleaned" files are an output still being written: removed.
//   - "<base>.log.swap" is a complete, fsynced output: it replaces every
//     segment whose base offset lies in [base, its next offset) and takes
//     the final names. Its index files were renamed to ".swap" before it,
//     so a missing one has already taken its final name.
//   - index ".swap" files without a log ".swap" belong to an output whose
//     log never became ".swap": removed.
func (l *Log) completeSwaps() error {
	ents, err := os.ReadDir(l.dir)
	if err != nil {
		return err
	}
	var swaps, logs []int64
	changed := false
	for _, e := range ents {
		name := e.Name()
		if strings.HasSuffix(name, cleanedSuffix) {
			os.Remove(filepath.Join(l.dir, name))
			changed = true
		}
		if base, ok := parseSegmentName(name, logSuffix+swapSuffix); ok {
			swaps = append(swaps, base)
		}
		if base, ok := parseSegmentName(name, logSuffix); ok {
			logs = append(logs, base)
		}
	}
	slices.Sort(swaps)
	for _, base := range swaps {
		if err := l.completeSwap(base, logs); err != nil {
			return err
		}
		changed = true
	}
	if ents, err = os.ReadDir(l.dir); err != nil {
		return err
	}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), indexSuffix+swapSuffix) || strings.HasSuffix(e.Name(), timeIndexSuffix+swapSuffix) ||
			strings.HasSuffix(e.Name(), txnIndexSuffix+swapSuffix) {
			os.Remove(filepath.Join(l.dir, e.Name()))
			changed = true
		}
	}
	if changed {
		return syncDir(l.dir)
	}
	return nil
}

// completeSwap puts the swap output at base in place of the segments it
// covers. An unreadable output (never expected: it was fsynced before it
// was renamed) is dropped if the segment it would replace still exists,
// since then none of the old segments was touched yet.
func (l *Log) completeSwap(base int64, logs []int64) error {
	out := newSegment(l.dir, base)
	out.tmp = swapSuffix
	next, pos, err := scanSwap(out.path(logSuffix), base)
	if err != nil {
		if fileExists(filepath.Join(l.dir, segmentName(base, logSuffix))) {
			out.discard()
			return nil
		}
		return &CorruptError{File: out.path(logSuffix), Pos: pos, Reason: err}
	}
	for _, b := range logs {
		if b > base && b < next {
			for _, suf := range []string{logSuffix, indexSuffix, timeIndexSuffix, txnIndexSuffix} {
				if err := os.Remove(filepath.Join(l.dir, segmentName(b, suf))); err != nil && !isNotExist(err) {
					return err
				}
			}
		}
	}
	for _, suf := range []string{indexSuffix, timeIndexSuffix, txnIndexSuffix, logSuffix} {
		err := os.Rename(out.path(suf), filepath.Join(l.dir, segmentName(base, suf)))
		if err != nil && !isNotExist(err) {
			return err
		}
	}
	return nil
}

// scanSwap checks every batch of a cleaner output and returns the offset
// after its last one (base when it is empty), or where it is damaged.
func scanSwap(path string, base int64) (next, pos int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, 0, err
	}
	r := chunkReader{f: f, size: st.Size()}
	r.mapForScan(0)
	defer r.unmap()
	next = base
	for pos < r.size {
		b, err := r.batchAt(pos)
		if err == nil {
			err = checkScanned(b, base, next, true, true)
		}
		if err != nil {
			return 0, pos, err
		}
		next = record.LastOffset(b) + 1
		pos += int64(len(b))
	}
	return next, pos, nil
}

func closeAll(segs []*segment) {
	for _, s := range segs {
		s.close()
	}
}

// openClean trusts a cleanly closed log: it reads each sealed segment's
// largest timestamp from its time index and reactivates the last segment
// with the writer state saved in the recovery point.
func (l *Log) openClean(segs []*segment, rp recoveryPoint) (int64, error) {
	for _, s := range segs[:len(segs)-1] {
		if err := l.loadSealed(s); err != nil {
			return 0, err
		}
	}
	for _, s := range segs {
		s.logDirty.Store(false) // a clean close made every byte durable
	}
	s := segs[len(segs)-1]
	s.activateKnown(l.mu.cfg)
	s.maxTs.Store(rp.maxTs)
	s.maxTsOff.Store(rp.maxTsOff)
	s.bytesSinceIndex = rp.bytesSinceIndex
	s.createdMs = l.firstBatchTime(s)
	if err := l.replayProducers(segs, rp.offset); err != nil {
		return 0, err
	}
	if err := l.loadTxnIndexes(segs, rp.offset, rp.offset); err != nil {
		return 0, err
	}
	return rp.offset, nil
}

// loadSealed reads a sealed segment's largest timestamp from the last time
// index entry, rebuilding both indexes if they are missing or malformed.
func (l *Log) loadSealed(s *segment) error {
	ts, rel, ok := readLastTimeEntry(s.path(timeIndexSuffix))
	offOK := s.fileSize(indexSuffix)%offsetEntrySize == 0 && fileExists(s.path(indexSuffix))
	if !ok || !offOK {
		return l.rebuildSealed(s)
	}
	if ts >= 0 {
		s.maxTs.Store(ts)
		s.maxTsOff.Store(s.base + int64(rel))
	}
	return nil
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// readLastTimeEntry returns the last entry of a trimmed .timeindex file;
// ts is -1 for an empty one. ok is false if the file is missing or its size
// is not a whole number of entries.
func readLastTimeEntry(path string) (ts int64, rel uint32, ok bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, false
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.Size()%timeEntrySize != 0 {
		return 0, 0, false
	}
	if st.Size() == 0 {
		return -1, 0, true
	}
	var e [timeEntrySize]byte
	if _, err := f.ReadAt(e[:], st.Size()-timeEntrySize); err != nil {
		return 0, 0, false
	}
	ts, rel = int64(binary.BigEndian.Uint64(e[:])), binary.BigEndian.Uint32(e[8:])
	return ts, rel, ts != 0 || rel != 0 // a zero entry: never trimmed, rebuild
}

// rebuildSealed recreates a sealed segment's indexes from its batches.
func (l *Log) rebuildSealed(s *segment) error {
	for _, suf := range []string{indexSuffix, timeIndexSuffix} {
		os.Remove(s.path(suf))
	}
	if err := s.mapWritable(l.mu.cfg); err != nil {
		return err
	}
	s.ix.off.truncate(0)
	s.ix.tim.truncate(0)
	end, _, bad := l.scanSegment(s, 0, s.base, false, nil)
	if bad != nil {
		return &CorruptError{File: s.path(logSuffix), Pos: end, Reason: bad}
	}
	return errors.Join(s.finalTimeEntry(), s.seal())
}

// recoverSegments validates everything after the recovery point. It returns
// the segments left (trailing empty ones after a torn tail are removed) and
// the log end offset.
func (l *Log) recoverSegments(segs []*segment, rp recoveryPoint, haveRP bool) ([]*segment, int64, error) {
	k, pos, next := 0, int64(0), segs[0].base
	if i := slices.IndexFunc(segs, func(s *segment) bool { return s.base == rp.base }); haveRP && i >= 0 && rp.pos <= segs[i].size.Load() {
		k, pos, next = i, rp.pos, rp.offset
	}
	l.flushed.rp = recoveryPoint{offset: next, base: segs[k].base} // fsync from here after recovery
	for _, s := range segs[:k] {
		if err := l.loadSealed(s); err != nil {
			return nil, 0, err
		}
	}
	if err := l.replayProducers(segs[:k+1], next); err != nil {
		return nil, 0, err
	}
	if err := l.loadTxnIndexes(segs, math.MaxInt64, next); err != nil {
		return nil, 0, err
	}
	for i := k; i < len(segs); i++ {
		s := segs[i]
		if i == k && pos > 0 {
			if err := l.resumeSegment(s, rp); err != nil {
				return nil, 0, err
			}
		} else if err := l.restartSegment(s); err != nil {
			return nil, 0, err
		}
		end, n, bad := l.scanSegment(s, pos, max(next, s.base), true, l.recoverBatch)
		next = n
		if bad != nil {
			if err := l.classifyDamage(segs[i:], end, next, bad); err != nil {
				return nil, 0, err
			}
			if err := l.truncateTail(s, end); err != nil {
				return nil, 0, err
			}
			removeSegments(segs[i+1:])
			segs = segs[:i+1]
			break
		}
		if i < len(segs)-1 {
			if err := errors.Join(s.finalTimeEntry(), s.seal()); err != nil {
				return nil, 0, err
			}
		}
		pos = 0
	}
	return segs, next, nil
}

// resumeSegment maps the recovery point's segment for writing and keeps the
// index entries below the recovery point, which were fsynced with it.
func (l *Log) resumeSegment(s *segment, rp recoveryPoint) error {
	if err := s.mapWritable(l.mu.cfg); err != nil {
		return err
	}
	n := int64(0)
	for n < s.ix.off.n.Load() {
		if _, p := s.ix.off.entry(n); int64(p) >= rp.pos {
			break
		}
		n++
	}
	s.ix.off.truncate(n)
	n = 0
	for n < s.ix.tim.n.Load() {
		if _, rel := s.ix.tim.entry(n); s.base+int64(rel) >= rp.offset {
			break
		}
		n++
	}
	s.ix.tim.truncate(n)
	s.maxTs.Store(rp.maxTs)
	s.maxTsOff.Store(rp.maxTsOff)
	s.bytesSinceIndex = rp.bytesSinceIndex
	return nil
}

// restartSegment maps a segment for writing with empty indexes, to rebuild
// them from its first batch.
func (l *Log) restartSegment(s *segment) error {
	if err := s.mapWritable(l.mu.cfg); err != nil {
		return err
	}
	s.ix.off.truncate(0)
	s.ix.tim.truncate(0)
	s.maxTs.Store(-1)
	s.maxTsOff.Store(-1)
	s.bytesSinceIndex = 0
	return nil
}

// recoveryChunk is the read size of a recovery scan; large reads keep the
// scan at memory bandwidth, and the CRC-32C (SSE4.2 / ARMv8 CRC
// instructions in hash/crc32) keeps up with it.
const recoveryChunk = 4 << 20

// scanSegment reads the batches of s from pos, checks them (CRCs too if
// validate), adds their index entries and calls fn for each. It returns the
// position where the valid batches end and, if that is not the end of the
// file, why the batch there is bad, with the offset after the last valid
// batch.
func (l *Log) scanSegment(s *segment, pos, next int64, validate bool, fn func([]byte)) (end, nextOff int64, bad error) {
	f, err := s.file()
	if err != nil {
		return pos, next, err
	}
	defer s.fileDone()
	st, err := f.Stat()
	if err != nil {
		return pos, next, err
	}
	fileSize := st.Size()
	r := chunkReader{f: f, size: fileSize}
	r.mapForScan(pos)
	defer r.unmap()
	interval := l.mu.cfg.IndexIntervalBytes
	defer s.publishIndexes()
	for pos < fileSize {
		b, err := r.batchAt(pos)
		if err != nil {
			return pos, next, err
		}
		if err := checkScanned(b, s.base, next, validate, l.mayBeCleaned(record.BaseOffset(b))); err != nil {
			return pos, next, err
		}
		last := record.LastOffset(b)
		s.trackBatch(pos, int64(len(b)), last, record.MaxTimestamp(b), interval)
		if fn != nil {
			fn(b)
		}
		next = last + 1
		pos += int64(len(b))
		s.size.Store(pos)
	}
	return pos, next, nil
}

var errOffsetsBackwards = fmt.Errorf("%w: batch offsets out of order", ErrCorruptMessage)

// mayBeCleaned reports whether the batch at offset may have been written
// by the cleaner: the log is compacted, or was below the cleaner
// checkpoint (a topic may stop being compacted).
func (l *Log) mayBeCleaned(offset int64) bool {
	return l.mu.cfg.Compact || offset < l.mu.cleanPoint
}

// checkScanned checks a batch read back from a segment: whole-batch checks
// when validating, and always that offsets continue where the previous batch
// ended (only cleaned batches have gaps) and fit the segment's 32-bit
// relative offsets. The offset check is what catches damage to baseOffset,
// which the CRC does not cover.
func checkScanned(b []byte, base, next int64, validate, cleaned bool) error {
	if validate {
		if _, err := checkBatchAs(b, 0, cleaned); err != nil {
			return err
		}
	} else if b[record.PosMagic] != record.Magic {
		return errBadMagic
	}
	first := record.BaseOffset(b)
	last := first + int64(record.LastOffsetDelta(b))
	if first < next || (first > next && !cleaned) || last < first || last-base > math.MaxInt32 {
		return errOffsetsBackwards
	}
	return nil
}

// chunkReader hands out whole batches of a file: from a read-only mapping
// of the whole file when it can make one, else by reading large chunks.
type chunkReader struct {
	f      *os.File
	size   int64
	mapped []byte // the whole file, if mapped
	buf    []byte
	start  int64 // file position of buf[0]
}

func (r *chunkReader) unmap() {
	if r.mapped != nil {
		unix.Munmap(r.mapped)
		r.mapped = nil
	}
}

// batchAt returns the batch at pos, or errBatchTruncated / errBatchTooShort
// if its header or body does not fit in the file.
func (r *chunkReader) batchAt(pos int64) ([]byte, error) {
	if r.size-pos < record.HeaderLen {
		return nil, errBatchTruncated
	}
	h, err := r.bytes(pos, record.HeaderLen)
	if err != nil {
		return nil, err
	}
	size := record.Size(h)
	switch {
	case size < record.HeaderLen:
		return nil, errBatchTooShort
	case pos+size > r.size:
		return nil, errBatchTruncated
	}
	return r.bytes(pos, size)
}

func (r *chunkReader) bytes(pos, n int64) ([]byte, error) {
	if r.mapped != nil {
		if pos < r.start || pos+n > r.size {
			return nil, errBatchTruncated
		}
		return r.mapped[pos-r.start : pos-r.start+n], nil
	}
	if pos >= r.start && pos+n <= r.start+int64(len(r.buf)) {
		return r.buf[pos-r.start : pos-r.start+n], nil
	}
	want := min(max(n, recoveryChunk), r.size-pos)
	if int64(cap(r.buf)) < want {
		r.buf = make([]byte, want)
	}
	r.buf = r.buf[:want]
	m, err := r.f.ReadAt(r.buf, pos)
	if int64(m) < n {
		if err == nil || err == io.EOF {
			err = errBatchTruncated
		}
		r.buf = r.buf[:0]
		return nil, err
	}
	r.buf, r.start = r.buf[:m], pos
	return r.buf[:n], nil
}

// classifyDamage applies the damage rule to a bad batch at pos of segs[0].
// It returns nil for a torn tail and a *CorruptError otherwise.
func (l *Log) classifyDamage(segs []*segment, pos, next int64, reason error) error {
	s := segs[0]
	for _, later := range segs[1:] {
		if later.size.Load() > 0 {
			return &CorruptError{File: s.path(logSuffix), Pos: pos, Reason: reason}
		}
	}
	f, err := s.file()
	if err != nil {
		return err
	}
	defer s.fileDone()
	if found, err := validBatchAfter(f, pos, next, l.mayBeCleaned(next)); err != nil {
		return err
	} else if found >= 0 {
		return &CorruptError{File: s.path(logSuffix), Pos: pos, Reason: fmt.Errorf("%w (a valid batch follows at %d)", reason, found)}
	}
	return nil
}

// validBatchAfter searches every byte position after pos for a valid batch
// with offsets at or after next, and returns its position or -1. Cheap
// checks (magic, a plausible base offset and length) rule out almost every
// position before a CRC is computed.
func validBatchAfter(f *os.File, pos, next int64, cleaned bool) (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return -1, err
	}
	r := chunkReader{f: f, size: st.Size()}
	r.mapForScan(pos + 1)
	defer r.unmap()
	for p := pos + 1; p+record.HeaderLen <= r.size; p++ {
		if r.mapped != nil { // jump to the next candidate magic byte
			i := bytes.IndexByte(r.mapped[p-r.start+record.PosMagic:], 2)
			if i < 0 {
				return -1, nil
			}
			if p += int64(i); p+record.HeaderLen > r.size {
				return -1, nil
			}
		}
		h, err := r.bytes(p, record.HeaderLen)
		if err != nil {
			return -1, err
		}
		base, size := record.BaseOffset(h), record.Size(h)
		if h[record.PosMagic] != record.Magic || base < next || base-next > math.MaxInt32 || size < record.HeaderLen || p+size > r.size {
			continue
		}
		b, err := r.bytes(p, size)
		if err != nil {
			return -1, err
		}
		if _, err := checkBatchAs(b, 0, cleaned); err == nil {
			return p, nil
		}
	}
	return -1, nil
}

// truncateTail cuts a torn tail off s at pos, durably.
func (l *Log) truncateTail(s *segment, pos int64) error {
	f, err := s.file()
	if err != nil {
		return err
	}
	defer s.fileDone()
	if err := f.Truncate(pos); err != nil {
		return err
	}
	s.size.Store(pos)
	return f.Sync()
}

// removeSegments deletes (empty) segments that followed a torn tail.
func removeSegments(segs []*segment) {
	for _, s := range segs {
		s.close()
		for _, suf := range []string{logSuffix, indexSuffix, timeIndexSuffix, txnIndexSuffix} {
			os.Remove(s.path(suf))
		}
	}
}

// firstBatchTime is the segment.ms clock start of a reopened active segment:
// the first batch's timestamp if it is sane, else now, so restarts do not
// reset the roll timer (Kafka does the same).
func (l *Log) firstBatchTime(s *segment) int64 {
	now := time.Now().UnixMilli()
	if s.size.Load() < record.HeaderLen {
		return now
	}
	f, err := s.file()
	if err != nil {
		return now
	}
	defer s.fileDone()
	var h [record.HeaderLen]byte
	if _, err := f.ReadAt(h[:], 0); err != nil {
		return now
	}
	if ts := record.MaxTimestamp(h[:]); ts > 0 && ts < now {
		return ts
	}
	return now
}

// publishLoaded makes the loaded segments visible and sets the offsets.
func (l *Log) publishLoaded(segs []*segment, next int64) error {
	active := segs[len(segs)-1]
	next = max(next, active.base)
	var total int64
	for i, s := range segs {
		total += s.size.Load()
		if i+1 < len(segs) {
			s.lastOff.Store(segs[i+1].base - 1)
		}
	}
	active.lastOff.Store(next - 1)
	l.size.Store(total)
	l.segs.Store(newSegList(segs))
	l.mu.active = active
	l.mu.nextOffset = next
	l.leo.store(mark{next, active.base, active.size.Load()})
	start, err := readOffsetFile(l.dir, logStartFile, segs[0].base)
	if err != nil {
		return err
	}
	l.logStart.Store(min(max(start, segs[0].base), next))
	l.producers.evictBefore(l.logStart.Load())
	cutEnd := l.epochs.truncateFromEnd(next)
	if cutStart := l.epochs.truncateFromStart(l.logStart.Load()); cutEnd || cutStart {
		if err := l.epochs.persist(); err != nil {
			return err
		}
	}
	hw, err := readOffsetFile(l.dir, highWatermarkFile, l.logStart.Load())
	if err != nil {
		return err
	}
	l.setHighWatermarkLocked(hw)
	return nil
}
