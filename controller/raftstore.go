package controller

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/sluice-broker/sluice/metadata"
)

// RaftStore is the cluster's metadata.Store: the controller quorum's raft
// log. It is the quorum's state machine (Apply, Snapshot, Restore are
// called by quorum.Node on the runner's goroutine) and the metadata store
// of this controller (Append proposes a batch and returns once it is
// committed and applied here).
//
// Every committed batch gets metadata offsets: record i of the log has
// offset i, counted identically on every member because each applies the
// same committed entries in the same order. A batch that does not apply
// to the image (decided against an image that has since moved) is
// refused by every member alike, takes no offsets, and fails the Append
// that proposed it.
//
// Brokers follow the log through Read: the batches from an offset on,
// long-polled, or the whole image as records when that offset is no
// longer retained (compacted away, or before this member's snapshot).
type RaftStore struct {
	propose func(ctx context.Context, data []byte) error
	timeout time.Duration
	retain  int

	mu struct {
		sync.Mutex
		img metadata.Image
		// next is the offset the next committed record gets.
		// Invariant: next == base + the records in batches.
		next    int64
		base    int64
		batches []Batch
		// changed is closed (and replaced) whenever a batch applies.
		changed chan struct{}
	}
}

// Batch is one committed batch of records starting at Offset.
type Batch struct {
	Offset  int64
	Records []metadata.Record
}

// ErrNotApplied wraps the error of a batch that did not apply.
var ErrNotApplied = errors.New("controller: batch did not apply")

// NewRaftStore returns an empty store; propose submits an entry to the
// quorum and waits for it to be applied here (quorum.Runner.Propose).
func NewRaftStore(propose func(ctx context.Context, data []byte) error) *RaftStore {
	s := &RaftStore{propose: propose, timeout: 5 * time.Second, retain: 20000}
	s.mu.changed = make(chan struct{})
	return s
}

// Image returns the image after every applied batch.
func (s *RaftStore) Image() metadata.Image {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.img
}

// NextOffset is the offset the next committed record will get.
func (s *RaftStore) NextOffset() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.next
}

// Append proposes recs as one batch and waits until it is committed and
// applied here (or refused, or the quorum does not answer in time).
func (s *RaftStore) Append(recs ...metadata.Record) (metadata.Image, error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	err := s.propose(ctx, EncodeBatch(nil, recs))
	return s.Image(), err
}

// Close does nothing: the quorum's runner owns the log.
func (s *RaftStore) Close() error { return nil }

// Apply applies one committed entry (quorum.StateMachine).
func (s *RaftStore) Apply(_ uint64, data []byte) error {
	recs, err := DecodeBatch(data)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(recs) == 0 {
		return nil // a barrier: a new active controller catching up
	}
	img, err := metadata.ApplyAll(s.mu.img, recs)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNotApplied, err)
	}
	s.mu.img = img
	s.mu.batches = append(s.mu.batches, Batch{Offset: s.mu.next, Records: recs})
	s.mu.next += int64(len(recs))
	s.trimLocked()
	close(s.mu.changed)
	s.mu.changed = make(chan struct{})
	return nil
}

// trimLocked forgets the oldest batches beyond retain records; a broker
// that asks for them gets the image instead.
func (s *RaftStore) trimLocked() {
	for len(s.mu.batches) > 1 && s.mu.next-s.mu.batches[0].Offset > int64(s.retain) {
		s.mu.batches = s.mu.batches[1:]
	}
	if len(s.mu.batches) > 0 {
		s.mu.base = s.mu.batches[0].Offset
	}
}

// Snapshot encodes the image with its next offset (quorum.StateMachine).
func (s *RaftStore) Snapshot() ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := binary.BigEndian.AppendUint64(nil, uint64(s.mu.next))
	return EncodeBatch(b, s.mu.img.Records()), nil
}

// Restore replaces the state with a snapshot (quorum.StateMachine).
func (s *RaftStore) Restore(_ uint64, data []byte) error {
	if len(data) == 0 {
		return nil // the bootstrap snapshot of a new member
	}
	if len(data) < 8 {
		return fmt.Errorf("%w: snapshot of %d bytes", metadata.ErrMalformed, len(data))
	}
	recs, err := DecodeBatch(data[8:])
	if err != nil {
		return err
	}
	img, err := metadata.ApplyAll(metadata.Image{}, recs)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.img, s.mu.next = img, int64(binary.BigEndian.Uint64(data))
	s.mu.base, s.mu.batches = s.mu.next, nil
	close(s.mu.changed)
	s.mu.changed = make(chan struct{})
	return nil
}

// LogRead is what Read returns: committed batches from the asked offset,
// or (Snapshot) the whole image as records, after which the reader is at
// Next.
type LogRead struct {
	Snapshot bool
	Batches  []Batch
	Next     int64
}

// Read returns the batches from offset from on, waiting up to wait for
// one when there is none yet.
func (s *RaftStore) Read(ctx context.Context, from int64, wait time.Duration) LogRead {
	s.mu.Lock()
	if from >= s.mu.next && wait > 0 {
		ch := s.mu.changed
		s.mu.Unlock()
		t := time.NewTimer(wait)
		select {
		case <-ch:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
		s.mu.Lock()
	}
	defer s.mu.Unlock()
	return s.readLocked(from)
}

func (s *RaftStore) readLocked(from int64) LogRead {
	next := s.mu.next
	if from >= next {
		return LogRead{Next: next}
	}
	i := sort.Search(len(s.mu.batches), func(i int) bool { return s.mu.batches[i].Offset >= from })
	if from < s.mu.base || i == len(s.mu.batches) || s.mu.batches[i].Offset != from {
		return LogRead{Snapshot: true, Batches: []Batch{{Offset: next, Records: s.mu.img.Records()}}, Next: next}
	}
	return LogRead{Batches: s.mu.batches[i:], Next: next}
}

// EncodeBatch appends a batch's encoding to dst:
//
//	count (uvarint) | count × ( length (uvarint) | record )
func EncodeBatch(dst []byte, recs []metadata.Record) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(recs)))
	var buf []byte
	for _, r := range recs {
		buf = metadata.AppendRecord(buf[:0], r)
		dst = binary.AppendUvarint(dst, uint64(len(buf)))
		dst = append(dst, buf...)
	}
	return dst
}

// DecodeBatch decodes EncodeBatch's encoding, which must fill b.
func DecodeBatch(b []byte) ([]metadata.Record, error) {
	n, k := uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return nil, fmt.Errorf("%w: bad batch count", metadata.ErrMalformed)
	}
	b = b[k:]
	recs := make([]metadata.Record, 0, n)
	for range n {
		l, k := uvarint(b)
		if k <= 0 || l > uint64(len(b)-k) {
			return nil, fmt.Errorf("%w: bad record length", metadata.ErrMalformed)
		}
		r, err := metadata.DecodeRecord(b[k : k+int(l)])
		if err != nil {
			return nil, err
		}
		recs = append(recs, r)
		b = b[k+int(l):]
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the batch", metadata.ErrMalformed, len(b))
	}
	return recs, nil
}

// uvarint is binary.Uvarint that refuses a non-minimal encoding, so each
// batch has one encoding.
func uvarint(b []byte) (uint64, int) {
	v, k := binary.Uvarint(b)
	if k > 0 && k != len(binary.AppendUvarint(nil, v)) {
		return 0, -1
	}
	return v, k
}
