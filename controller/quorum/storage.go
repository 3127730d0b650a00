package quorum

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/sluice-broker/sluice/internal/fsutil"
)

// DiskStorage is the durable raft.Storage of one quorum member: raft reads
// its log from an in-memory raft.MemoryStorage, and every change to that
// memory is first written to a write-ahead log (and, for snapshots, a
// snapshot file) in dir, so a restarted member finds exactly the state it
// acknowledged.
//
// Files in dir:
//
//	snap-<index:016x>.snap   the latest snapshot (frame of one pb.Snapshot)
//	wal-<seq:016x>.log       frames, oldest segment first; each segment
//	                         restates the hard state and every entry after
//	                         the snapshot it follows, so older segments and
//	                         snapshots can be deleted once it is synced
//
// A frame is
//
//	+----------+----------+------+---------------------+
//	| len (4)  | crc (4)  | kind | protobuf payload    |
//	+----------+----------+------+---------------------+
//
// with len covering kind and payload and crc the CRC-32C of the same
// bytes. Recovery reads frames until the first one that is short or fails
// its checksum; in the newest segment that is a torn tail and is cut off,
// in an older one it is corruption and Open fails.
type DiskStorage struct {
	*raft.MemoryStorage

	dir string
	// wal is the open newest segment, appended to by Save.
	wal *os.File
	// walSeq is wal's sequence number; rotation opens walSeq+1.
	walSeq uint64
	// err sticks after a failed write or fsync: the segment may hold a
	// partial frame, and appending after it would put a hole in the log.
	err error
	// bootConf is the bootstrap membership of a member restarted before
	// its first snapshot (the bootstrap snapshot at index 0 is never
	// written); nil otherwise.
	bootConf *pb.ConfState
}

// InitialState is raft's: the hard state and the membership, which is
// the bootstrap one until a snapshot records another.
func (s *DiskStorage) InitialState() (*pb.HardState, *pb.ConfState, error) {
	hs, cs, err := s.MemoryStorage.InitialState()
	if err == nil && len(cs.GetVoters()) == 0 && s.bootConf != nil {
		cs = s.bootConf
	}
	return hs, cs, err
}

const (
	frameEntry     byte = 1
	frameHardState byte = 2
	frameSnapshot  byte = 3

	frameHeader = 9
	// maxFrame bounds one frame so a corrupt length cannot ask for an
	// absurd allocation; snapshots of the metadata image stay far below it.
	maxFrame = 256 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt reports damage that is not a torn tail.
var ErrCorrupt = errors.New("quorum: corrupt raft log")

// OpenDiskStorage recovers (or creates) the storage in dir.
func OpenDiskStorage(dir string) (*DiskStorage, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	s := &DiskStorage{MemoryStorage: raft.NewMemoryStorage(), dir: dir}
	if err := s.loadSnapshot(); err != nil {
		return nil, err
	}
	if err := s.replayWAL(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *DiskStorage) loadSnapshot() error {
	names, err := listFiles(s.dir, "snap-", ".snap")
	if err != nil || len(names) == 0 {
		return err
	}
	// The newest snapshot file is complete: it was renamed into place
	// after its fsync.
	data, err := os.ReadFile(filepath.Join(s.dir, names[len(names)-1]))
	if err != nil {
		return err
	}
	kind, payload, _, err := readFrame(data)
	if err != nil || kind != frameSnapshot {
		return fmt.Errorf("%w: snapshot %s", ErrCorrupt, names[len(names)-1])
	}
	snap := &pb.Snapshot{}
	if err := proto.Unmarshal(payload, snap); err != nil {
		return fmt.Errorf("%w: snapshot %s: %v", ErrCorrupt, names[len(names)-1], err)
	}
	return s.MemoryStorage.ApplySnapshot(snap)
}

func (s *DiskStorage) replayWAL() error {
	names, err := listFiles(s.dir, "wal-", ".log")
	if err != nil {
		return err
	}
	for i, name := range names {
		last := i == len(names)-1
		if err := s.replaySegment(filepath.Join(s.dir, name), last); err != nil {
			return err
		}
	}
	if len(names) == 0 {
		return s.rotate()
	}
	seq, err := parseSeq(names[len(names)-1], "wal-", ".log")
	if err != nil {
		return err
	}
	s.walSeq = seq
	s.wal, err = os.OpenFile(filepath.Join(s.dir, names[len(names)-1]), os.O_WRONLY|os.O_APPEND, 0o644)
	return err
}

func (s *DiskStorage) replaySegment(path string, last bool) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	pos := 0
	for pos < len(data) {
		kind, payload, n, err := readFrame(data[pos:])
		if err != nil {
			if !last {
				return fmt.Errorf("%w: %s at byte %d: %v", ErrCorrupt, path, pos, err)
			}
			// A torn tail: the write never completed, so it was never
			// acknowledged to raft. Cut it off.
			return os.Truncate(path, int64(pos))
		}
		if err := s.replayFrame(kind, payload); err != nil {
			return fmt.Errorf("%s at byte %d: %w", path, pos, err)
		}
		pos += n
	}
	return nil
}

func (s *DiskStorage) replayFrame(kind byte, payload []byte) error {
	switch kind {
	case frameEntry:
		e := &pb.Entry{}
		if err := proto.Unmarshal(payload, e); err != nil {
			return fmt.Errorf("%w: entry: %v", ErrCorrupt, err)
		}
		return s.appendMem(e)
	case frameHardState:
		hs := &pb.HardState{}
		if err := proto.Unmarshal(payload, hs); err != nil {
			return fmt.Errorf("%w: hard state: %v", ErrCorrupt, err)
		}
		return s.MemoryStorage.SetHardState(hs)
	case frameSnapshot:
		snap := &pb.Snapshot{}
		if err := proto.Unmarshal(payload, snap); err != nil {
			return fmt.Errorf("%w: snapshot: %v", ErrCorrupt, err)
		}
		if err := s.MemoryStorage.ApplySnapshot(snap); err != nil && !errors.Is(err, raft.ErrSnapOutOfDate) {
			return err
		}
		return nil
	}
	return fmt.Errorf("%w: frame kind %d", ErrCorrupt, kind)
}

// appendMem appends one replayed entry, skipping what a snapshot covers.
func (s *DiskStorage) appendMem(e *pb.Entry) error {
	first, _ := s.MemoryStorage.FirstIndex()
	if e.GetIndex() < first {
		return nil
	}
	last, _ := s.MemoryStorage.LastIndex()
	if e.GetIndex() > last+1 {
		return fmt.Errorf("%w: entry %d follows %d", ErrCorrupt, e.GetIndex(), last)
	}
	return s.MemoryStorage.Append([]*pb.Entry{e})
}

// Save makes one Ready's state durable, in the order raft requires: the
// snapshot, then the entries, then the hard state. With sync it fsyncs
// before returning (raft's MustSync).
func (s *DiskStorage) Save(hs *pb.HardState, ents []*pb.Entry, snap *pb.Snapshot, sync bool) error {
	if s.err != nil {
		return s.err
	}
	if snap != nil && !raft.IsEmptySnap(snap) {
		if err := s.applySnapshot(snap); err != nil {
			return s.stick(err)
		}
	}
	var buf []byte
	for _, e := range ents {
		buf = appendFrame(buf, frameEntry, e)
	}
	if hs != nil && !raft.IsEmptyHardState(hs) {
		buf = appendFrame(buf, frameHardState, hs)
	}
	if len(buf) > 0 {
		if _, err := s.wal.Write(buf); err != nil {
			return s.stick(err)
		}
	}
	if sync && len(buf) > 0 {
		if err := s.wal.Sync(); err != nil {
			return s.stick(err)
		}
	}
	if err := s.MemoryStorage.Append(ents); err != nil {
		return s.stick(err)
	}
	if hs != nil && !raft.IsEmptyHardState(hs) {
		return s.MemoryStorage.SetHardState(hs)
	}
	return nil
}

// applySnapshot installs a snapshot received from the leader: durable
// first, then in memory, then a fresh segment that no longer needs the old
// ones.
func (s *DiskStorage) applySnapshot(snap *pb.Snapshot) error {
	if err := s.writeSnapshot(snap); err != nil {
		return err
	}
	if err := s.MemoryStorage.ApplySnapshot(snap); err != nil {
		return err
	}
	return s.rotate()
}

// Compact records a snapshot of the state machine at index (already
// applied) and drops the log before it, so the raft log stays small.
func (s *DiskStorage) Compact(index uint64, cs *pb.ConfState, data []byte) error {
	if s.err != nil {
		return s.err
	}
	snap, err := s.MemoryStorage.CreateSnapshot(index, cs, data)
	if err != nil {
		return err
	}
	if err := s.writeSnapshot(snap); err != nil {
		return s.stick(err)
	}
	if err := s.MemoryStorage.Compact(index); err != nil && !errors.Is(err, raft.ErrCompacted) {
		return err
	}
	return s.stick(s.rotate())
}

func (s *DiskStorage) writeSnapshot(snap *pb.Snapshot) error {
	name := fmt.Sprintf("snap-%016x.snap", snap.GetMetadata().GetIndex())
	return fsutil.WriteFileAtomic(filepath.Join(s.dir, name), appendFrame(nil, frameSnapshot, snap))
}

// rotate starts segment walSeq+1 holding the hard state and every entry
// after the snapshot, syncs it, and deletes the older segments and
// snapshots it makes redundant.
func (s *DiskStorage) rotate() error {
	var buf []byte
	hs, _, err := s.MemoryStorage.InitialState()
	if err != nil {
		return err
	}
	if hs != nil && !raft.IsEmptyHardState(hs) {
		buf = appendFrame(buf, frameHardState, hs)
	}
	first, _ := s.MemoryStorage.FirstIndex()
	last, _ := s.MemoryStorage.LastIndex()
	if last >= first {
		ents, err := s.MemoryStorage.Entries(first, last+1, 1<<62)
		if err != nil {
			return err
		}
		for _, e := range ents {
			buf = appendFrame(buf, frameEntry, e)
		}
	}
	seq := s.walSeq + 1
	path := filepath.Join(s.dir, fmt.Sprintf("wal-%016x.log", seq))
	if err := fsutil.WriteFileAtomic(path, buf); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	if s.wal != nil {
		s.wal.Close()
	}
	s.wal, s.walSeq = f, seq
	return s.removeBefore(seq)
}

// removeBefore deletes segments older than seq and every snapshot but the
// newest: the new segment and that snapshot restate all of it.
func (s *DiskStorage) removeBefore(seq uint64) error {
	wals, err := listFiles(s.dir, "wal-", ".log")
	if err != nil {
		return err
	}
	for _, name := range wals {
		if n, err := parseSeq(name, "wal-", ".log"); err == nil && n < seq {
			os.Remove(filepath.Join(s.dir, name))
		}
	}
	snaps, err := listFiles(s.dir, "snap-", ".snap")
	if err != nil {
		return err
	}
	for i := 0; i+1 < len(snaps); i++ {
		os.Remove(filepath.Join(s.dir, snaps[i]))
	}
	return fsutil.SyncDir(s.dir)
}

func (s *DiskStorage) stick(err error) error {
	if err != nil && s.err == nil {
		s.err = err
	}
	return err
}

// Close closes the open segment.
func (s *DiskStorage) Close() error {
	if s.wal == nil {
		return nil
	}
	err := s.wal.Close()
	s.wal = nil
	return err
}

func appendFrame(dst []byte, kind byte, m proto.Message) []byte {
	payload, err := proto.Marshal(m)
	if err != nil {
		// Marshalling raft's own generated messages cannot fail.
		panic(err)
	}
	start := len(dst)
	dst = append(dst, make([]byte, frameHeader)...)
	dst[start+8] = kind
	dst = append(dst, payload...)
	body := dst[start+8:]
	binary.BigEndian.PutUint32(dst[start:], uint32(len(body)))
	binary.BigEndian.PutUint32(dst[start+4:], crc32.Checksum(body, castagnoli))
	return dst
}

func readFrame(b []byte) (kind byte, payload []byte, n int, err error) {
	if len(b) < frameHeader {
		return 0, nil, 0, io.ErrUnexpectedEOF
	}
	size := int(binary.BigEndian.Uint32(b))
	if size < 1 || size > maxFrame {
		return 0, nil, 0, fmt.Errorf("frame length %d", size)
	}
	if len(b) < 8+size {
		return 0, nil, 0, io.ErrUnexpectedEOF
	}
	body := b[8 : 8+size]
	if crc32.Checksum(body, castagnoli) != binary.BigEndian.Uint32(b[4:]) {
		return 0, nil, 0, errors.New("checksum mismatch")
	}
	return body[0], body[1:], 8 + size, nil
}

func listFiles(dir, prefix, suffix string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if n := e.Name(); strings.HasPrefix(n, prefix) && strings.HasSuffix(n, suffix) {
			if _, err := parseSeq(n, prefix, suffix); err == nil {
				out = append(out, n)
			}
		}
	}
	sort.Strings(out) // fixed-width hex sorts numerically
	return out, nil
}

func parseSeq(name, prefix, suffix string) (uint64, error) {
	var n uint64
	_, err := fmt.Sscanf(strings.TrimSuffix(strings.TrimPrefix(name, prefix), suffix), "%016x", &n)
	return n, err
}
