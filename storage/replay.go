package storage

// Rebuilding producer state at open: load the newest snapshot at or below
// the point where the recovery scan starts, replay batch headers from the
// snapshot's offset to that point, and let the recovery scan replay the
// rest. Snapshots are written with every recovery checkpoint, so the replay
// between them is short.

import "github.com/sluice-broker/sluice/record"

// replayProducers loads the newest snapshot at or below to and replays the
// headers of the batches in [snapshot, to) from segs.
func (l *Log) replayProducers(segs []*segment, to int64) error {
	m, from, err := loadLatestSnapshot(l.dir, to)
	if err != nil {
		return err
	}
	l.producers.mu.Lock()
	l.producers.mu.m = m
	l.producers.mu.Unlock()
	l.producers.txnDirty.Store(true)
	l.flushed.snapshotOff = from
	if from < 0 {
		from = segs[0].base
	}
	if from >= to {
		// The snapshot is at the point itself (every clean close writes
		// one): nothing to replay, and no segment to open or map, which
		// at thousands of partitions was most of a clean start.
		return nil
	}
	for i, s := range segs {
		if s.base >= to || (i+1 < len(segs) && segs[i+1].base <= from) {
			continue
		}
		if err := l.replaySegment(s, from, to); err != nil {
			return err
		}
	}
	return nil
}

// replaySegment replays the headers of the batches of s in [from, to).
func (l *Log) replaySegment(s *segment, from, to int64) error {
	end := s.size.Load()
	pos := int64(0)
	if from > s.base {
		p, _, err := s.findBatchOpen(from, end)
		if err != nil {
			return nil // from is past this segment's data
		}
		pos = p
	}
	f, err := s.file()
	if err != nil {
		return err
	}
	defer s.fileDone()
	r := newHeaderReader(f)
	defer r.close()
	for pos < end {
		h, err := r.header(pos, end)
		if err != nil {
			return err
		}
		if record.BaseOffset(h) >= to {
			return nil
		}
		l.replayBatch(h)
		if pos, err = nextBatch(h, pos, end); err != nil {
			return err
		}
	}
	return nil
}

// recoverBatch is replayBatch for a batch that recovery scanned past the
// recovery point: its leader epoch is assigned again too, since appends do
// not save the epoch file before a recovery point covers them.
func (l *Log) recoverBatch(b []byte) {
	if h, err := record.ParseHeader(b); err == nil && h.IsControl() && h.HasProducerID() {
		l.replayMarker(b, &h, false) // its index entry is written once the segments are published
	}
	l.replayBatch(b)
	if l.epochs.assign(leaderEpochOf(b), record.BaseOffset(b)) {
		l.epochs.unsaved.Store(true)
	}
}

// replayBatch applies one batch (or just its header) to the producer state.
func (l *Log) replayBatch(b []byte) {
	h, err := record.ParseHeader(b)
	if err != nil || !h.HasProducerID() {
		return
	}
	l.producers.mu.Lock()
	l.producers.replay(&h)
	l.producers.mu.Unlock()
}
