package metadata

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/sluice-broker/sluice/internal/fsutil"
)

// Files of data directories written before the metadata log: the topic
// list (JSON, rewritten whole on every change) and the producer-id high
// mark (properties-style). meta.properties stays.
const (
	LegacyTopicsFile      = "sluice-topics.json"
	LegacyProducerIDsFile = "sluice-producer-ids"
)

// legacyTopic is a topic as the legacy topics file stored it.
type legacyTopic struct {
	Name       string            `json:"name"`
	ID         [16]byte          `json:"id"`
	Partitions int32             `json:"partitions"`
	Configs    map[string]string `json:"configs,omitempty"`
}

// MigrateLegacy moves a data directory written before the metadata log
// into store: when store has never held a record and the legacy files
// exist, their topics (name, id, partition count, configs) and producer-id
// high mark are appended as one batch and snapshotted; then the legacy
// files are removed, so that nothing reads a stale copy later. A store
// that already holds records is the truth: legacy files next to it are
// left over from a migration that crashed before removing them, and are
// removed. Single-node partitions get replicas and ISR [nodeID], led by
// nodeID at epoch 0. It reports whether it migrated anything.
func MigrateLegacy(store *FileStore, dataDir string, nodeID int32) (bool, error) {
	if !store.IsNew() {
		return false, removeLegacy(dataDir)
	}
	recs, found, err := LegacyRecords(dataDir, nodeID)
	if err != nil || !found {
		return false, err
	}
	if _, err := store.Append(recs...); err != nil {
		return false, fmt.Errorf("migrate %s: %w", LegacyTopicsFile, err)
	}
	if err := store.Snapshot(); err != nil {
		return false, err
	}
	return true, removeLegacy(dataDir)
}

func removeLegacy(dataDir string) error {
	removed := false
	for _, name := range []string{LegacyTopicsFile, LegacyProducerIDsFile} {
		err := os.Remove(filepath.Join(dataDir, name))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		removed = removed || err == nil
	}
	if !removed {
		return nil
	}
	return fsutil.SyncDir(dataDir)
}

// LegacyRecords reads the legacy files of dataDir as records; found is
// false when neither file exists.
func LegacyRecords(dataDir string, nodeID int32) (recs []Record, found bool, err error) {
	topics, tfound, err := readLegacyTopics(filepath.Join(dataDir, LegacyTopicsFile))
	if err != nil {
		return nil, false, err
	}
	next, pfound, err := readLegacyProducerIDs(filepath.Join(dataDir, LegacyProducerIDsFile))
	if err != nil {
		return nil, false, err
	}
	for _, t := range topics {
		recs = append(recs, legacyTopicRecords(t, nodeID)...)
	}
	if next > 0 {
		recs = append(recs, ProducerIDsRecord{BrokerID: nodeID, NextProducerID: next})
	}
	return recs, tfound || pfound, nil
}

func legacyTopicRecords(t legacyTopic, nodeID int32) []Record {
	recs := []Record{TopicRecord{Name: t.Name, TopicID: t.ID}}
	for i := range t.Partitions {
		recs = append(recs, SingleNodePartition(t.ID, i, nodeID, 0))
	}
	for _, k := range slices.Sorted(maps.Keys(t.Configs)) {
		v := t.Configs[k]
		recs = append(recs, ConfigRecord{ResourceType: ResourceTopic, ResourceName: t.Name, Name: k, Value: &v})
	}
	return recs
}

// SingleNodePartition is the PartitionRecord of a partition placed on node
// alone: its only replica, in-sync, and leader at epoch.
func SingleNodePartition(topicID [16]byte, partition, node, epoch int32) PartitionRecord {
	return PartitionRecord{TopicID: topicID, Partition: partition, Replicas: []int32{node}, ISR: []int32{node},
		Leader: node, LeaderEpoch: epoch}
}

func readLegacyTopics(path string) ([]legacyTopic, bool, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	var topics []legacyTopic
	if err := json.Unmarshal(data, &topics); err != nil {
		return nil, false, fmt.Errorf("%s: %w", path, err)
	}
	slices.SortFunc(topics, func(a, b legacyTopic) int { return strings.Compare(a.Name, b.Name) })
	return topics, true, nil
}

// readLegacyProducerIDs reads "next.block.start" from the producer-ids
// file.
func readLegacyProducerIDs(path string) (int64, bool, error) {
	props, err := readProperties(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	v, ok := props["next.block.start"]
	if !ok {
		return 0, false, fmt.Errorf("%s: no next.block.start", path)
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, false, fmt.Errorf("%s: bad next.block.start %q", path, v)
	}
	return n, true, nil
}
