package metadata

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sync"

	"github.com/sluice-broker/sluice/internal/fsutil"
)

// Store is the durable log of metadata records under the image. Append
// returns only once its records are durable (single node: fsynced to the
// local file; cluster: committed by the controller quorum), and the image
// it returns already has them applied, so the caller can publish it at
// once: "build records → Append → publish the image".
//
// FileStore is the single-node Store. The cluster issue's Raft-backed store
// implements the same interface: Append proposes the batch and waits until
// it is committed and applied; Image is the image every broker reaches by
// applying the same committed records.
type Store interface {
	// Image returns the image after every record appended so far.
	Image() Image
	// Append applies recs to the image as one batch (all or none) and
	// makes them durable before it returns the new image. A batch that
	// does not apply returns an error wrapping ErrInvalid and writes
	// nothing; a failed write or fsync returns an error and sticks.
	Append(recs ...Record) (Image, error)
	Close() error
}

// ErrCorrupt is wrapped by the errors of a store whose files are damaged
// in a way a crash cannot explain.
var ErrCorrupt = errors.New("metadata store corrupt")

// FileStore keeps the records in a local directory:
//
//	snapshot   the image at some offset, as records (written whole: temp
//	           file, fsync, rename)
//	log        the batches appended since, each fsynced before Append
//	           returns
//
// Every snapshotEvery records the store writes a snapshot of its image and
// starts an empty log, so the log stays small and loading stays quick.
// Loading = apply the snapshot's records, then every batch of the log
// after the snapshot's offset.
type FileStore struct {
	dir           string
	snapshotEvery int

	mu struct {
		sync.Mutex
		img  Image
		f    *os.File // the log, open for appending at size
		size int64
		// next is the offset the next record gets: records are numbered
		// from 0 across snapshots and logs.
		next int64
		// sinceSnapshot counts the records in the log file.
		sinceSnapshot int
		// err is the first failed write, fsync or file swap; it sticks,
		// so nothing is ever appended past a hole.
		err error
	}
}

// StoreOptions tune a FileStore.
type StoreOptions struct {
	// SnapshotEvery is how many records the log may hold before the store
	// snapshots its image and empties the log (default 1000).
	SnapshotEvery int
}

const (
	logFile      = "log"
	snapshotFile = "snapshot"
)

// OpenFileStore loads the store in dir (created if missing): the image is
// the snapshot plus every batch after it. A torn tail of the log (a crash
// during an append, before it was acknowledged) is cut off; damage anywhere
// else is an error wrapping ErrCorrupt, never skipped.
func OpenFileStore(dir string, opts StoreOptions) (*FileStore, error) {
	s := &FileStore{dir: dir, snapshotEvery: opts.SnapshotEvery}
	if s.snapshotEvery <= 0 {
		s.snapshotEvery = 1000
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	img, next, err := readSnapshot(filepath.Join(dir, snapshotFile))
	if err != nil {
		return nil, err
	}
	s.mu.img, s.mu.next = img, next
	if err := s.loadLog(); err != nil {
		return nil, err
	}
	return s, nil
}

// Image returns the image after every appended record.
func (s *FileStore) Image() Image {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.img
}

// IsNew reports whether the store has never held a record.
func (s *FileStore) IsNew() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.next == 0
}

// Append applies recs as one batch and makes them durable; see Store.
func (s *FileStore) Append(recs ...Record) (Image, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.err != nil {
		return s.mu.img, s.mu.err
	}
	if len(recs) == 0 {
		return s.mu.img, nil
	}
	img, err := ApplyAll(s.mu.img, recs)
	if err != nil {
		return s.mu.img, err
	}
	frame := appendFrame(nil, s.mu.next, recs)
	if err := s.writeLocked(frame); err != nil {
		s.mu.err = fmt.Errorf("metadata log: %w", err)
		return s.mu.img, s.mu.err
	}
	s.mu.img = img
	s.mu.next += int64(len(recs))
	s.mu.sinceSnapshot += len(recs)
	if s.mu.sinceSnapshot >= s.snapshotEvery {
		// The batch is durable whatever happens here; a failed snapshot
		// sticks and fails the next Append instead.
		if err := s.snapshotLocked(); err != nil {
			s.mu.err = fmt.Errorf("metadata snapshot: %w", err)
		}
	}
	return img, nil
}

func (s *FileStore) writeLocked(frame []byte) error {
	if _, err := s.mu.f.WriteAt(frame, s.mu.size); err != nil {
		return err
	}
	if err := s.mu.f.Sync(); err != nil {
		return err
	}
	s.mu.size += int64(len(frame))
	return nil
}

// Snapshot writes the image as the new snapshot and empties the log.
func (s *FileStore) Snapshot() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.err != nil {
		return s.mu.err
	}
	if err := s.snapshotLocked(); err != nil {
		s.mu.err = fmt.Errorf("metadata snapshot: %w", err)
	}
	return s.mu.err
}

// snapshotLocked writes the snapshot first, then swaps in an empty log. A
// crash between the two leaves a log whose batches the snapshot already
// holds: loading skips batches below the snapshot's offset.
func (s *FileStore) snapshotLocked() error {
	data := encodeSnapshot(s.mu.img, s.mu.next)
	if err := fsutil.WriteFileAtomic(filepath.Join(s.dir, snapshotFile), data); err != nil {
		return err
	}
	if err := fsutil.WriteFileAtomic(filepath.Join(s.dir, logFile), []byte(logMagic)); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(s.dir, logFile), os.O_RDWR, 0)
	if err != nil {
		return err
	}
	s.mu.f.Close()
	s.mu.f, s.mu.size, s.mu.sinceSnapshot = f, int64(len(logMagic)), 0
	return nil
}

// Close closes the log file.
func (s *FileStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.f == nil {
		return nil
	}
	err := s.mu.f.Close()
	s.mu.f = nil
	if s.mu.err == nil {
		s.mu.err = errors.New("metadata store closed")
	}
	return err
}

// The log file:
//
//	+----------+---------+---------+-----
//	| "SLMDLOG1" | frame | frame | ...
//	+----------+---------+---------+-----
//
//	frame (one Append, applied all or nothing):
//	+--------+--------+------------+-------+-------------------------------+
//	| length | crc    | baseOffset | count | count × (uvarint len, record) |
//	| u32    | u32    | i64        | u32   |                               |
//	+--------+--------+------------+-------+-------------------------------+
//	length counts the bytes after crc; crc is CRC-32C (Castagnoli) of them.
//
// The snapshot file:
//
//	+------------+------------+-----+--------------------------------+
//	| "SLMDSNP1" | nextOffset | crc | records (uvarint len, record)* |
//	|            | i64        | u32 |                                |
//	+------------+------------+-----+--------------------------------+
//	crc covers nextOffset and the records.
const (
	logMagic        = "SLMDLOG1"
	snapshotMagic   = "SLMDSNP1"
	frameHeaderSize = 4 + 4 + 8 + 4
	// maxFrameBytes bounds one batch; a length above it is damage.
	maxFrameBytes = 64 << 20
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

func appendFrame(dst []byte, base int64, recs []Record) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, 8)...) // length, crc: filled below
	dst = binary.BigEndian.AppendUint64(dst, uint64(base))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(recs)))
	dst = appendRecords(dst, recs)
	body := dst[start+8:]
	binary.BigEndian.PutUint32(dst[start:], uint32(len(body)))
	binary.BigEndian.PutUint32(dst[start+4:], crc32.Checksum(body, crcTable))
	return dst
}

func appendRecords(dst []byte, recs []Record) []byte {
	var buf []byte
	for _, r := range recs {
		buf = AppendRecord(buf[:0], r)
		dst = binary.AppendUvarint(dst, uint64(len(buf)))
		dst = append(dst, buf...)
	}
	return dst
}

// decodeRecords decodes count records (count < 0: until b ends) that
// fill b exactly.
func decodeRecords(b []byte, count int) ([]Record, error) {
	var out []Record
	d := decoder{b: b}
	for i := 0; count < 0 && len(d.b) > 0 || i < count; i++ {
		n := d.length(MaxRecordBytes, 1)
		raw := d.take(n)
		if d.bad {
			return nil, fmt.Errorf("%w: record %d runs past its frame", ErrMalformed, i)
		}
		r, err := DecodeRecord(raw)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	if len(d.b) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the last record", ErrMalformed, len(d.b))
	}
	return out, nil
}

// frame is one parsed log frame.
type frame struct {
	base int64
	recs []Record
	end  int // offset in the file just past the frame
}

// parseFrame parses the frame at data[pos:]; ok is false for anything but
// a whole, checksummed, decodable frame.
func parseFrame(data []byte, pos int) (f frame, ok bool) {
	if len(data)-pos < frameHeaderSize {
		return f, false
	}
	length := int(binary.BigEndian.Uint32(data[pos:]))
	if length < frameHeaderSize-8 || length > maxFrameBytes || length > len(data)-pos-8 {
		return f, false
	}
	body := data[pos+8 : pos+8+length]
	if crc32.Checksum(body, crcTable) != binary.BigEndian.Uint32(data[pos+4:]) {
		return f, false
	}
	count := binary.BigEndian.Uint32(body[8:])
	if count == 0 || uint64(count) > uint64(len(body)) {
		return f, false
	}
	recs, err := decodeRecords(body[12:], int(count))
	if err != nil {
		return f, false
	}
	return frame{base: int64(binary.BigEndian.Uint64(body)), recs: recs, end: pos + 8 + length}, true
}

// loadLog replays the log after the snapshot and opens it for appends.
func (s *FileStore) loadLog() error {
	path := filepath.Join(s.dir, logFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) || err == nil && len(data) < len(logMagic) && bytes.HasPrefix([]byte(logMagic), data) {
		// Missing, or torn while being created: start it afresh.
		if err := fsutil.WriteFileAtomic(path, []byte(logMagic)); err != nil {
			return err
		}
		data, err = []byte(logMagic), nil
	}
	if err != nil {
		return err
	}
	if !bytes.HasPrefix(data, []byte(logMagic)) {
		return fmt.Errorf("%w: %s does not start with %q", ErrCorrupt, path, logMagic)
	}
	good, err := s.replay(data)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	if good < len(data) { // torn tail: cut it off before appending after it
		if err := truncateSync(f, int64(good)); err != nil {
			f.Close()
			return err
		}
	}
	s.mu.f, s.mu.size = f, int64(good)
	return nil
}

// replay applies the frames of data after the snapshot and returns where
// the good ones end.
func (s *FileStore) replay(data []byte) (int, error) {
	pos := len(logMagic)
	b := builder{img: s.mu.img}
	for pos < len(data) {
		f, ok := parseFrame(data, pos)
		if !ok {
			s.mu.img = b.img
			return pos, checkTornTail(data, pos)
		}
		pos = f.end
		last := f.base + int64(len(f.recs))
		if last <= s.mu.next {
			continue // already in the snapshot
		}
		if f.base != s.mu.next {
			return pos, fmt.Errorf("%w: batch at offset %d, expected %d", ErrCorrupt, f.base, s.mu.next)
		}
		for _, r := range f.recs {
			if err := b.apply(r); err != nil {
				return pos, fmt.Errorf("%w: batch at offset %d does not apply: %v", ErrCorrupt, f.base, err)
			}
		}
		s.mu.next = last
		s.mu.sinceSnapshot += len(f.recs)
	}
	s.mu.img = b.img
	return pos, nil
}

// checkTornTail decides what a bad frame at pos is. Each Append writes one
// frame and fsyncs it before the next, so a crash can only tear the last
// frame: if no whole frame follows pos, the rest is a torn tail (nil); if
// one does, the damage is in the middle of the log and is corruption.
func checkTornTail(data []byte, pos int) error {
	for q := pos + 1; q+frameHeaderSize <= len(data); q++ {
		if _, ok := parseFrame(data, q); ok {
			return fmt.Errorf("%w: damaged batch at byte %d is followed by good ones (at byte %d)", ErrCorrupt, pos, q)
		}
	}
	return nil
}

func encodeSnapshot(img Image, next int64) []byte {
	data := []byte(snapshotMagic)
	data = append(data, make([]byte, 12)...)
	binary.BigEndian.PutUint64(data[len(snapshotMagic):], uint64(next))
	data = appendRecords(data, img.Records())
	crcAt := len(snapshotMagic) + 8
	sum := crc32.Update(crc32.Checksum(data[len(snapshotMagic):crcAt], crcTable), crcTable, data[crcAt+4:])
	binary.BigEndian.PutUint32(data[crcAt:], sum)
	return data
}

// readSnapshot returns the snapshot's image and the offset after it; no
// snapshot is the empty image at offset 0. Snapshots are written whole
// (rename), so any damage is corruption.
func readSnapshot(path string) (Image, int64, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return Image{}, 0, nil
	}
	if err != nil {
		return Image{}, 0, err
	}
	img, next, err := decodeSnapshot(data)
	if err != nil {
		return Image{}, 0, fmt.Errorf("%s: %w", path, err)
	}
	return img, next, nil
}

func decodeSnapshot(data []byte) (Image, int64, error) {
	const hdr = len(snapshotMagic) + 12
	if len(data) < hdr || string(data[:len(snapshotMagic)]) != snapshotMagic {
		return Image{}, 0, fmt.Errorf("%w: bad snapshot header", ErrCorrupt)
	}
	crcAt := len(snapshotMagic) + 8
	sum := crc32.Update(crc32.Checksum(data[len(snapshotMagic):crcAt], crcTable), crcTable, data[hdr:])
	if sum != binary.BigEndian.Uint32(data[crcAt:]) {
		return Image{}, 0, fmt.Errorf("%w: snapshot checksum mismatch", ErrCorrupt)
	}
	next := int64(binary.BigEndian.Uint64(data[len(snapshotMagic):]))
	recs, err := decodeRecords(data[hdr:], -1)
	if err == nil && next < 0 {
		err = fmt.Errorf("negative offset %d", next)
	}
	if err != nil {
		return Image{}, 0, fmt.Errorf("%w: snapshot: %v", ErrCorrupt, err)
	}
	img, err := ApplyAll(Image{}, recs)
	if err != nil {
		return Image{}, 0, fmt.Errorf("%w: snapshot: %v", ErrCorrupt, err)
	}
	return img, next, nil
}

func truncateSync(f *os.File, size int64) error {
	if err := f.Truncate(size); err != nil {
		return err
	}
	return f.Sync()
}

var _ Store = (*FileStore)(nil)
