package storage

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/sluice-broker/sluice/internal/fsutil"
	"github.com/sluice-broker/sluice/internal/par"
)

// CloseAll closes many logs for a clean shutdown with a handful of
// filesystem syncs instead of Close's ten or so fsyncs per log (the log,
// both indexes twice, three checkpoint files and their directory, the
// shutdown marker): at 1,000 partitions those fsyncs were most of a
// 2.9 s shutdown. The steps keep Close's crash guarantees — a checkpoint
// never claims bytes that are not durable, every checkpoint file is the
// old one or the new one whole, and the clean-shutdown marker is durable
// only after everything it vouches for:
//
//  1. each log stops, trims its active indexes and writes its checkpoint
//     files' new contents beside them (no fsync);
//  2. syncfs: log bytes, index bytes and the new contents are durable;
//  3. each log renames its new checkpoint files into place;
//  4. syncfs: the renames are durable;
//  5. the clean-shutdown record of each data directory (cleanshutdown.go)
//     names the logs closed without error; syncfs; the files close.
//
// A log with a sticky error is left out of the record, as Close leaves
// it without a marker.
// workers bounds the logs handled at once.
func CloseAll(logs []*Log, workers int) error {
	cs := make([]*closing, len(logs))
	var errs []error
	errs = append(errs, par.Each(len(logs), workers, func(i int) error {
		var err error
		cs[i], err = logs[i].closeBegin()
		return err
	}))
	errs = append(errs, syncFilesystems(cs))
	errs = append(errs, par.Each(len(cs), workers, func(i int) error { return cs[i].commit() }))
	errs = append(errs, syncFilesystems(cs))
	errs = append(errs, markClean(cs))
	errs = append(errs, syncFilesystems(cs))
	errs = append(errs, par.Each(len(cs), workers, func(i int) error { return cs[i].finish() }))
	return errors.Join(errs...)
}

// closing is one log between the steps of CloseAll. A nil *closing (the
// log was already closed) does nothing at every step.
type closing struct {
	l *Log
	// ok: no error so far, so the log earns its clean-shutdown marker.
	ok bool
	// files are the checkpoint files written beside their final names
	// (name+TmpSuffix), renamed into place by commit, in order.
	files []string
	rp    recoveryPoint
	// snapshotOff is the producer snapshot written now, -1 if none; prev
	// the one before it, kept as a fallback.
	snapshotOff, prevSnapshot int64
}

// closeBegin is step 1 for one log.
func (l *Log) closeBegin() (*closing, error) {
	if l.closed.Swap(true) {
		return nil, nil
	}
	l.cleanMu.Lock() // wait for a running compaction to stop; held until finish
	l.removals.runAll()
	c := &closing{l: l, snapshotOff: -1}
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	rp, _, snap, err := l.captureFlush(true)
	l.mu.Lock()
	l.mu.closed = true
	if err == nil {
		err = l.mu.err
	}
	if err == nil {
		err = l.trimActiveLocked()
	}
	l.mu.Unlock()
	if err == nil {
		err = c.stage(rp, snap)
	}
	if err != nil {
		l.setErr(err)
		return c, err
	}
	c.ok = true
	return c, nil
}

// trimActiveLocked is sealActiveLocked without the syncs: the final time
// index entry, then the index files cut to their entries.
func (l *Log) trimActiveLocked() error {
	s := l.mu.active
	if s == nil {
		return nil
	}
	if err := s.finalTimeEntry(); err != nil {
		return err
	}
	s.ix.Lock()
	defer s.ix.Unlock()
	if !s.ix.active {
		return nil
	}
	return s.trimLocked() // dirty index pages stay in the page cache for the syncfs
}

// stage writes the leader-epoch file (if appends changed it), producer
// snapshot, recovery point and high watermark files beside their names, in the order commit renames them (the same
// order writeCheckpoints writes them).
func (c *closing) stage(rp recoveryPoint, snap []byte) error {
	l := c.l
	c.rp = rp
	if l.epochs.unsaved.Swap(false) { // the epochs of what rp covers
		if err := c.write(epochFile, formatCheckpoint(l.epochs.snapshot())); err != nil {
			return err
		}
	}
	if snap != nil {
		if err := c.write(segmentName(rp.offset, snapshotSuffix), snap); err != nil {
			return err
		}
		c.snapshotOff, c.prevSnapshot = rp.offset, l.flushed.snapshotOff
	}
	row := []int64{rp.offset, rp.base, rp.pos, rp.maxTs, rp.maxTsOff, rp.bytesSinceIndex}
	if err := c.write(recoveryPointFile, formatCheckpoint([][]int64{row})); err != nil {
		return err
	}
	return c.write(highWatermarkFile, formatCheckpoint([][]int64{{l.HighWatermark()}}))
}

// write stages one checkpoint file, unless the file already holds data:
// an idle partition's checkpoints are current, and leaving them be saves
// a file write and a rename each.
func (c *closing) write(name string, data []byte) error {
	path := filepath.Join(c.l.dir, name)
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		return nil
	}
	if err := os.WriteFile(path+fsutil.TmpSuffix, data, 0o644); err != nil {
		return err
	}
	c.files = append(c.files, path)
	return nil
}

// commit is step 3: the staged files take their names.
func (c *closing) commit() error {
	if c == nil || !c.ok {
		return nil
	}
	for _, path := range c.files {
		if err := os.Rename(path+fsutil.TmpSuffix, path); err != nil {
			c.ok = false
			c.l.setErr(err)
			return err
		}
	}
	l := c.l
	l.flushed.rp, l.flushed.diskRP = c.rp, c.rp
	l.durableBase.Store(c.rp.base)
	if c.snapshotOff >= 0 {
		l.flushed.snapshotOff = c.snapshotOff
		if c.prevSnapshot >= 0 {
			removeSnapshotsBelow(l.dir, c.prevSnapshot) // keep the previous one as a fallback
		}
	}
	return nil
}

// markClean is step 5: the clean-shutdown record of each parent
// directory, naming the logs closed without error (cleanshutdown.go). One
// file per data directory, where a marker per log cost a file creation
// at every shutdown and a removal with a directory fsync at every start.
func markClean(cs []*closing) error {
	byParent := map[string][]string{}
	for _, c := range cs {
		if c != nil && c.ok {
			parent := filepath.Dir(c.l.dir)
			byParent[parent] = append(byParent[parent], filepath.Base(c.l.dir))
		}
	}
	var errs []error
	for parent, names := range byParent {
		errs = append(errs, writeCleanShutdown(parent, names))
	}
	return errors.Join(errs...)
}

// finish closes the segment files and lets go of the log.
func (c *closing) finish() error {
	if c == nil {
		return nil
	}
	defer c.l.cleanMu.Unlock()
	return c.l.closeSegments()
}

// syncFilesystems runs syncfs(2) once on each filesystem that holds one
// of the logs.
func syncFilesystems(cs []*closing) error {
	seen := map[uint64]bool{}
	var errs []error
	for _, c := range cs {
		if c == nil || !c.ok {
			continue
		}
		var st unix.Stat_t
		if err := unix.Stat(c.l.dir, &st); err != nil {
			errs = append(errs, err)
			continue
		}
		if seen[st.Dev] {
			continue
		}
		seen[st.Dev] = true
		errs = append(errs, syncfs(c.l.dir))
	}
	return errors.Join(errs...)
}

func syncfs(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := unix.Syncfs(int(d.Fd())); err != nil {
		return &os.PathError{Op: "syncfs", Path: dir, Err: err}
	}
	return nil
}
