package metadata

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func openStore(t *testing.T, dir string, every int) *FileStore {
	t.Helper()
	s, err := OpenFileStore(dir, StoreOptions{SnapshotEvery: every})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func mustAppend(t *testing.T, s *FileStore, recs ...Record) Image {
	t.Helper()
	img, err := s.Append(recs...)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// topicBatch is what CreateTopics appends: the topic and its partitions.
func topicBatch(name string, id byte, partitions int32) []Record {
	tid := [16]byte{id}
	recs := []Record{TopicRecord{Name: name, TopicID: tid}}
	for i := range partitions {
		recs = append(recs, part(tid, i))
	}
	return recs
}

func TestStoreReloads(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, 1000)
	if !s.IsNew() {
		t.Fatal("a fresh store is not new")
	}
	mustAppend(t, s, ClusterRecord{ClusterID: "c"})
	mustAppend(t, s, topicBatch("a", 1, 3)...)
	mustAppend(t, s, setCfg("a", "retention.ms", "5"))
	want := mustAppend(t, s, ProducerIDsRecord{BrokerID: 1, NextProducerID: 1000})
	s.Close()

	// No Close: a crash after the last fsync loses nothing.
	got := openStore(t, dir, 1000)
	if got.IsNew() || !reflect.DeepEqual(got.Image().Records(), want.Records()) {
		t.Fatalf("reloaded %v, want %v", got.Image().Records(), want.Records())
	}
}

// An invalid batch is refused whole and never reaches the file.
func TestStoreRefusesInvalidBatch(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, 1000)
	mustAppend(t, s, topicBatch("a", 1, 1)...)
	if _, err := s.Append(append(topicBatch("b", 2, 1), part([16]byte{9}, 0))...); !errors.Is(err, ErrInvalid) {
		t.Fatalf("err %v, want ErrInvalid", err)
	}
	mustAppend(t, s, topicBatch("c", 3, 1)...) // the store still works
	s.Close()
	img := openStore(t, dir, 1000).Image()
	if img.Topic("b") != nil || img.Topic("c") == nil {
		t.Fatalf("after reload: b %v, c %v", img.Topic("b"), img.Topic("c"))
	}
}

// Every SnapshotEvery records the image is snapshotted and the log emptied.
func TestStoreSnapshots(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, 5)
	var want Image
	for i := range 10 {
		want = mustAppend(t, s, topicBatch(string(rune('a'+i)), byte(i+1), 2)...)
		s.mu.Lock()
		since := s.mu.sinceSnapshot
		s.mu.Unlock()
		if since >= 5 {
			t.Fatalf("log holds %d records after append %d", since, i)
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, logFile)); err != nil || fi.Size() > 200 {
		t.Fatalf("log not emptied by snapshots: %v, %v", fi, err)
	}
	s.Close()
	if got := openStore(t, dir, 5).Image(); !reflect.DeepEqual(got.Records(), want.Records()) {
		t.Fatalf("after reload: %d topics, want %d", got.TopicCount(), want.TopicCount())
	}
}

// A crash after the snapshot was written and before the log was emptied
// leaves batches the snapshot holds: loading skips them.
func TestStoreCrashBetweenSnapshotAndLogSwap(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, 1000)
	mustAppend(t, s, topicBatch("a", 1, 1)...)
	want := mustAppend(t, s, topicBatch("b", 2, 1)...)
	oldLog, _ := os.ReadFile(filepath.Join(dir, logFile))
	if err := s.Snapshot(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := os.WriteFile(filepath.Join(dir, logFile), oldLog, 0o644); err != nil {
		t.Fatal(err)
	}
	r := openStore(t, dir, 1000)
	if got := r.Image(); !reflect.DeepEqual(got.Records(), want.Records()) {
		t.Fatalf("reloaded %v", got.Records())
	}
	want = mustAppend(t, r, topicBatch("c", 3, 1)...)
	r.Close()
	if got := openStore(t, dir, 1000).Image(); !reflect.DeepEqual(got.Records(), want.Records()) {
		t.Fatalf("after appending past the stale log: %v", got.Records())
	}
}

// A torn last batch (a crash during its write, so it was never
// acknowledged) is cut off, and appends continue after the good ones.
func TestStoreTruncatesTornTail(t *testing.T) {
	for name, tear := range map[string]func(frame []byte) []byte{
		"half a frame":   func(f []byte) []byte { return f[:len(f)/2] },
		"bad checksum":   func(f []byte) []byte { f[len(f)-1] ^= 0xff; return f },
		"zeroed":         func(f []byte) []byte { return make([]byte, len(f)) },
		"header only":    func(f []byte) []byte { return f[:6] },
		"length too big": func(f []byte) []byte { f[0] = 0x7f; return f },
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			s := openStore(t, dir, 1000)
			want := mustAppend(t, s, topicBatch("a", 1, 2)...)
			s.Close()
			path := filepath.Join(dir, logFile)
			good, _ := os.ReadFile(path)
			torn := tear(appendFrame(nil, 3, topicBatch("b", 2, 1)))
			if err := os.WriteFile(path, append(good, torn...), 0o644); err != nil {
				t.Fatal(err)
			}
			r := openStore(t, dir, 1000)
			if got := r.Image(); !reflect.DeepEqual(got.Records(), want.Records()) {
				t.Fatalf("reloaded %v", got.Records())
			}
			if fi, _ := os.Stat(path); fi.Size() != int64(len(good)) {
				t.Fatalf("log is %d bytes, want the torn tail cut to %d", fi.Size(), len(good))
			}
			want = mustAppend(t, r, topicBatch("c", 3, 1)...)
			r.Close()
			if got := openStore(t, dir, 1000).Image(); !reflect.DeepEqual(got.Records(), want.Records()) {
				t.Fatalf("after appending past the cut: %v", got.Records())
			}
		})
	}
}

// Damage in the middle of the log is reported, never skipped.
func TestStoreReportsMidLogCorruption(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, 1000)
	mustAppend(t, s, topicBatch("a", 1, 2)...)
	mustAppend(t, s, topicBatch("b", 2, 2)...)
	s.Close()
	path := filepath.Join(dir, logFile)
	data, _ := os.ReadFile(path)
	data[len(logMagic)+30] ^= 0xff // inside the first batch
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenFileStore(dir, StoreOptions{}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("err %v, want ErrCorrupt", err)
	}
}

func TestStoreReportsCorruptSnapshot(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, 1000)
	mustAppend(t, s, topicBatch("a", 1, 2)...)
	if err := s.Snapshot(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	path := filepath.Join(dir, snapshotFile)
	data, _ := os.ReadFile(path)
	data[len(data)-3] ^= 0xff
	os.WriteFile(path, data, 0o644)
	if _, err := OpenFileStore(dir, StoreOptions{}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("err %v, want ErrCorrupt", err)
	}
}

// After a failed write the store refuses every later append: nothing is
// appended past a hole.
func TestStoreWriteErrorSticks(t *testing.T) {
	s := openStore(t, t.TempDir(), 1000)
	s.mu.f.Close() // every write now fails
	if _, err := s.Append(topicBatch("a", 1, 1)...); err == nil {
		t.Fatal("append to a closed file succeeded")
	}
	if _, err := s.Append(ClusterRecord{ClusterID: "c"}); err == nil {
		t.Fatal("the write error did not stick")
	}
	if s.Image().Topic("a") != nil {
		t.Fatal("a failed append changed the image")
	}
}

// FuzzLoadLog: any log or snapshot content replays or fails with an
// error; it never panics, and what replays keeps the invariants.
func FuzzLoadLog(f *testing.F) {
	good := append([]byte(logMagic), appendFrame(nil, 0, topicBatch("a", 1, 2))...)
	good = appendFrame(good, 3, []Record{setCfg("a", "k", "v")})
	f.Add(good)
	f.Add(good[:len(good)-4])
	f.Add(encodeSnapshot(mustApply(topicBatch("a", 1, 2)), 3))
	f.Fuzz(func(t *testing.T, data []byte) {
		s := &FileStore{}
		if _, err := s.replay(data); err == nil {
			if err := s.mu.img.Check(); err != nil {
				t.Fatal(err)
			}
		}
		if img, _, err := decodeSnapshot(data); err == nil {
			if err := img.Check(); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func mustApply(recs []Record) Image {
	img, err := ApplyAll(Image{}, recs)
	if err != nil {
		panic(err)
	}
	return img
}
