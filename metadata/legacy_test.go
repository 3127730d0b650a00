package metadata

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// writeLegacyDir writes a data dir as the broker wrote it before the
// metadata log, by hand, in its exact formats.
func writeLegacyDir(t *testing.T, dir string) {
	t.Helper()
	topics := `[
  {
    "name": "__consumer_offsets",
    "id": [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16],
    "partitions": 4,
    "configs": {
      "cleanup.policy": "compact",
      "segment.bytes": "104857600"
    }
  },
  {
    "name": "orders",
    "id": [200,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1],
    "partitions": 3,
    "configs": {
      "retention.ms": "1000"
    }
  },
  {
    "name": "plain",
    "id": [99,0,0,0,0,0,0,0,0,0,0,0,0,0,0,7],
    "partitions": 1
  }
]`
	files := map[string]string{
		LegacyTopicsFile:      topics,
		LegacyProducerIDsFile: "version=1\nnext.block.start=3000\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestMigrateLegacy(t *testing.T) {
	dataDir := t.TempDir()
	writeLegacyDir(t, dataDir)
	s := openStore(t, filepath.Join(dataDir, "metadata"), 1000)
	migrated, err := MigrateLegacy(s, dataDir, 5)
	if err != nil || !migrated {
		t.Fatalf("migrated %v, %v", migrated, err)
	}
	checkMigrated(t, s.Image())
	for _, name := range []string{LegacyTopicsFile, LegacyProducerIDsFile} {
		if _, err := os.Stat(filepath.Join(dataDir, name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left behind: %v", name, err)
		}
	}
	s.Close()

	// The new form holds it all; a second migration has nothing to do.
	r := openStore(t, filepath.Join(dataDir, "metadata"), 1000)
	checkMigrated(t, r.Image())
	if migrated, err := MigrateLegacy(r, dataDir, 5); err != nil || migrated {
		t.Fatalf("second migration: %v, %v", migrated, err)
	}
}

func checkMigrated(t *testing.T, img Image) {
	t.Helper()
	orders := img.Topic("orders")
	if orders == nil || orders.ID != [16]byte{200, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1} || len(orders.Partitions) != 3 {
		t.Fatalf("orders: %+v", orders)
	}
	if p := orders.Partitions[2]; !reflect.DeepEqual(p.Replicas, []int32{5}) || !reflect.DeepEqual(p.ISR, []int32{5}) || p.Leader != 5 || p.LeaderEpoch != 0 {
		t.Errorf("orders-2: %+v", p)
	}
	if got := img.TopicConfigs("orders"); !reflect.DeepEqual(got, map[string]string{"retention.ms": "1000"}) {
		t.Errorf("orders configs %v", got)
	}
	if got := img.TopicConfigs("__consumer_offsets"); len(got) != 2 || got["cleanup.policy"] != "compact" {
		t.Errorf("offsets configs %v", got)
	}
	if p := img.Topic("plain"); p == nil || len(p.Partitions) != 1 || img.TopicConfigs("plain") != nil {
		t.Errorf("plain: %+v", p)
	}
	if got := img.ProducerIDs().NextProducerID; got != 3000 {
		t.Errorf("producer-id high mark %d, want 3000", got)
	}
}

// Legacy files next to a store that has records are leftovers of a
// migration that crashed before removing them: the store wins.
func TestMigrateLegacyLeftovers(t *testing.T) {
	dataDir := t.TempDir()
	s := openStore(t, filepath.Join(dataDir, "metadata"), 1000)
	mustAppend(t, s, topicBatch("kept", 1, 1)...)
	writeLegacyDir(t, dataDir)
	if migrated, err := MigrateLegacy(s, dataDir, 1); err != nil || migrated {
		t.Fatalf("%v, %v", migrated, err)
	}
	if s.Image().Topic("orders") != nil || s.Image().Topic("kept") == nil {
		t.Fatal("leftover legacy files were applied over the store")
	}
	if _, err := os.Stat(filepath.Join(dataDir, LegacyTopicsFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("leftover not removed: %v", err)
	}
}

func TestMigrateLegacyBadFiles(t *testing.T) {
	dataDir := t.TempDir()
	os.WriteFile(filepath.Join(dataDir, LegacyProducerIDsFile), []byte("version=1\n"), 0o644)
	s := openStore(t, filepath.Join(dataDir, "metadata"), 1000)
	if _, err := MigrateLegacy(s, dataDir, 1); err == nil {
		t.Fatal("a producer-ids file without next.block.start migrated")
	}
	os.WriteFile(filepath.Join(dataDir, LegacyProducerIDsFile), []byte("version=1\nnext.block.start=1000\n"), 0o644)
	os.WriteFile(filepath.Join(dataDir, LegacyTopicsFile), []byte("[{"), 0o644)
	if _, err := MigrateLegacy(s, dataDir, 1); err == nil {
		t.Fatal("a broken topics file migrated")
	}
	if !s.IsNew() {
		t.Fatal("a failed migration wrote records")
	}
}
