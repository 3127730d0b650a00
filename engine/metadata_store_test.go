package engine_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-broker/sluice/engine"
	"github.com/sluice-broker/sluice/internal/testbroker"
)

// writeLegacyDataDir writes, by hand, a data dir as the broker wrote it
// before the metadata log: meta.properties, the topic list
// sluice-topics.json and the producer-id high mark sluice-producer-ids.
func writeLegacyDataDir(t *testing.T, dir string) {
	t.Helper()
	files := map[string]string{
		"meta.properties": "#\n#Mon, 30 Nov 2026 10:00:00 UTC\nversion=1\nnode.id=1\ncluster.id=bGVnYWN5LWNsdXN0ZXItaWQ\n",
		"sluice-topics.json": `[
  {
    "name": "legacy",
    "id": [7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,1],
    "partitions": 3,
    "configs": {
      "retention.ms": "86400000",
      "cleanup.policy": "delete"
    }
  },
  {
    "name": "plain",
    "id": [7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,2],
    "partitions": 1
  }
]`,
		"sluice-producer-ids": "version=1\nnext.block.start=3000\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// A data dir written by the broker before the metadata log starts with
// every topic, id, partition count and config and the producer-id high
// mark, and is rewritten in the new form.
func TestLegacyDataDirMigrates(t *testing.T) {
	dir := t.TempDir()
	writeLegacyDataDir(t, dir)
	tb := testbroker.Start(t, func(c *engine.Config) { c.DataDir = dir })
	checkLegacyTopics(t, tb)
	for _, name := range []string{"sluice-topics.json", "sluice-producer-ids"} {
		if _, err := os.Stat(filepath.Join(dir, name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left behind: %v", name, err)
		}
	}
	if tb.Broker.ClusterID() != "bGVnYWN5LWNsdXN0ZXItaWQ" {
		t.Errorf("cluster id %q", tb.Broker.ClusterID())
	}
	rc := dialRaw(t, tb.Addr)
	if r := initProducerID(rc, 4, nil); r.ErrorCode != 0 || r.ProducerID < 3000 {
		t.Fatalf("producer id %d (error %d) reuses the legacy block", r.ProducerID, r.ErrorCode)
	}
	produceOne(t, tb, "legacy", 2)

	tb.Restart(t)
	checkLegacyTopics(t, tb)
	if got := consumeAll(t, tb, "legacy", 1); string(got[0].Value) != "kept" {
		t.Fatalf("record after restart: %q", got[0].Value)
	}
}

func checkLegacyTopics(t *testing.T, tb *testbroker.Broker) {
	t.Helper()
	lt := tb.Broker.Topic("legacy")
	if lt == nil || lt.ID != [16]byte{7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 1} || len(lt.Partitions()) != 3 {
		t.Fatalf("legacy topic: %+v", lt)
	}
	if want := map[string]string{"retention.ms": "86400000", "cleanup.policy": "delete"}; !reflect.DeepEqual(lt.Overrides(), want) {
		t.Errorf("legacy configs %v, want %v", lt.Overrides(), want)
	}
	if lt.Settings().Log.RetentionMs != 86400000 {
		t.Errorf("retention.ms not applied: %d", lt.Settings().Log.RetentionMs)
	}
	if pt := tb.Broker.TopicByID([16]byte{7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 2}); pt == nil || pt.Name != "plain" {
		t.Fatalf("plain by id: %+v", pt)
	}
}

func produceOne(t *testing.T, tb *testbroker.Broker, topic string, partition int32) {
	t.Helper()
	cl := tb.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	r := &kgo.Record{Topic: topic, Partition: partition, Value: []byte("kept")}
	if err := cl.ProduceSync(adminCtx(t), r).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// Every metadata change survives a restart: created and grown topics,
// configs, deletions.
func TestMetadataChangesSurviveRestart(t *testing.T) {
	tb := testbroker.Start(t)
	adm := tb.Admin(t)
	createTopic(t, tb, "grown", 1)
	createTopic(t, tb, "gone", 2)
	createTopic(t, tb, "kept", 2)
	if _, err := adm.CreatePartitions(adminCtx(t), 3, "grown"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.DeleteTopics(adminCtx(t), "gone"); err != nil {
		t.Fatal(err)
	}
	ids := map[string][16]byte{"grown": tb.Broker.Topic("grown").ID, "kept": tb.Broker.Topic("kept").ID}
	tb.Restart(t)
	for name, want := range map[string]int{"grown": 4, "kept": 2} {
		tp := tb.Broker.Topic(name)
		if tp == nil || len(tp.Partitions()) != want || tp.ID != ids[name] {
			t.Fatalf("%s after restart: %+v", name, tp)
		}
	}
	listed, err := tb.Admin(t).ListTopics(adminCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if tb.Broker.Topic("gone") != nil || listed.Has("gone") || !listed.Has("grown") || len(listed["grown"].Partitions) != 4 {
		t.Fatalf("after restart the topics are %v", listed.Names())
	}
	if _, err := os.Stat(filepath.Join(tb.Config.DataDir, "gone-0")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("deleted topic's log left: %v", err)
	}
}

// A metadata log that belongs to another cluster is refused.
func TestMetadataLogOfOtherClusterRefused(t *testing.T) {
	cfg := engine.DefaultConfig()
	cfg.DataDir, cfg.Listen, cfg.OffsetsTopicPartitions = t.TempDir(), "127.0.0.1:0", 1
	b, err := engine.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	props := filepath.Join(cfg.DataDir, "meta.properties")
	if err := os.WriteFile(props, []byte("version=1\nnode.id=1\ncluster.id=c29tZS1vdGhlci1jbHVzdGVy\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = engine.New(cfg, nil)
	if err == nil || !strings.Contains(err.Error(), "belongs to cluster") {
		t.Fatalf("err %v, want a cluster mismatch", err)
	}
}

// A topic whose logs fail to open is not created: its records are undone,
// so it is neither served nor back after a restart.
func TestCreateTopicOpenFailureLeavesNoTopic(t *testing.T) {
	tb := testbroker.Start(t)
	// A file where the partition's directory must go makes the open fail.
	if err := os.WriteFile(filepath.Join(tb.Config.DataDir, "blocked-1"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	resp, err := tb.Admin(t).CreateTopic(adminCtx(t), 2, 1, nil, "blocked")
	if err == nil && resp.Err == nil {
		t.Fatal("created a topic whose log cannot open")
	}
	if tb.Broker.Topic("blocked") != nil {
		t.Fatal("half-created topic is served")
	}
	tb.Restart(t)
	listed, err := tb.Admin(t).ListTopics(adminCtx(t))
	if err != nil || listed.Has("blocked") {
		t.Fatalf("after restart: %v, %v", listed.Names(), err)
	}
	createTopic(t, tb, "after", 1) // the metadata log still takes changes
}
