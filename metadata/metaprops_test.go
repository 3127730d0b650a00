package metadata

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMetaPropertiesCreatedThenKept(t *testing.T) {
	dir := t.TempDir()
	mp, err := LoadMetaProperties(dir, 3, "")
	if err != nil || mp.ClusterID == "" || mp.NodeID != 3 {
		t.Fatalf("created %+v, %v", mp, err)
	}
	data, _ := os.ReadFile(filepath.Join(dir, MetaPropertiesFile))
	for _, line := range []string{"version=1\n", "node.id=3\n", "cluster.id=" + mp.ClusterID + "\n"} {
		if !strings.Contains(string(data), line) {
			t.Errorf("meta.properties lacks %q:\n%s", line, data)
		}
	}
	again, err := LoadMetaProperties(dir, 3, "other")
	if err != nil || again.ClusterID != mp.ClusterID {
		t.Fatalf("reloaded %+v, %v; want cluster %s", again, err, mp.ClusterID)
	}
}

func TestMetaPropertiesGivenClusterID(t *testing.T) {
	mp, err := LoadMetaProperties(t.TempDir(), 1, "given-id")
	if err != nil || mp.ClusterID != "given-id" {
		t.Fatalf("%+v, %v", mp, err)
	}
}

func TestMetaPropertiesOtherNodeRefused(t *testing.T) {
	dir := t.TempDir()
	if _, err := LoadMetaProperties(dir, 1, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadMetaProperties(dir, 2, ""); err == nil || !strings.Contains(err.Error(), "belongs to node 1") {
		t.Fatalf("err %v, want node-id mismatch", err)
	}
}

// A file Kafka's kafka-storage tool wrote reads as well.
func TestMetaPropertiesKafkaWritten(t *testing.T) {
	dir := t.TempDir()
	body := "#\n#Tue Dec 01 04:46:19 UTC 2026\nnode.id=1\ndirectory.id=Jt0kS3t5TnaLNVbz7N6EVA\nversion=1\ncluster.id=MkU3OEVBNTcwNTJENDM2Qk\n"
	os.WriteFile(filepath.Join(dir, MetaPropertiesFile), []byte(body), 0o644)
	mp, err := LoadMetaProperties(dir, 1, "")
	if err != nil || mp.ClusterID != "MkU3OEVBNTcwNTJENDM2Qk" {
		t.Fatalf("%+v, %v", mp, err)
	}
	os.WriteFile(filepath.Join(dir, MetaPropertiesFile), []byte("version=1\nnode.id=1\n"), 0o644)
	if _, err := LoadMetaProperties(dir, 1, ""); err == nil {
		t.Fatal("a file without cluster.id was accepted")
	}
}
