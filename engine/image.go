package engine

// The broker's metadata: one image (package metadata) published through an
// atomic pointer and changed only one way, under meta.mu:
//
//	check the request against the image → build records →
//	store.Append (durable) → publish the image → syncPartitions
//
// CreateTopic, DeleteTopic, CreatePartitions, SetTopicConfigs and
// producer-id block allocation all go through commitLocked. On a single
// node the store is a local file (metadata.FileStore); in a cluster it is
// the controller quorum's log, and the same records reach every broker.

import (
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-broker/sluice/metadata"
)

// metadataDir is the store's directory in the data dir. It cannot be taken
// for a partition's directory, which always ends in -<partition>.
const metadataDir = "metadata"

// metaState is the broker's metadata image and the store under it.
type metaState struct {
	// mu serialises changes: a change checks the image, appends its records
	// and syncs the partitions as one step.
	mu    sync.Mutex
	store metadata.Store
	// image is the last published image; it only moves forward.
	image atomic.Pointer[metadata.Image]
}

// image returns the current metadata image.
func (b *Broker) image() metadata.Image {
	if img := b.meta.image.Load(); img != nil {
		return *img
	}
	return metadata.Image{}
}

// openMetadata opens the store, migrates a data directory of the earlier
// ad-hoc files into it, ties it to the cluster of meta.properties and
// publishes its image.
func (b *Broker) openMetadata() error {
	store, err := metadata.OpenFileStore(filepath.Join(b.cfg.DataDir, metadataDir), metadata.StoreOptions{})
	if err != nil {
		return err
	}
	img, err := b.bootstrapMetadata(store)
	if err != nil {
		store.Close()
		return err
	}
	b.meta.store = store
	b.meta.image.Store(&img)
	return nil
}

func (b *Broker) bootstrapMetadata(store *metadata.FileStore) (metadata.Image, error) {
	migrated, err := metadata.MigrateLegacy(store, b.cfg.DataDir, b.cfg.NodeID)
	if err != nil {
		return metadata.Image{}, err
	}
	if migrated {
		b.log.Info("migrated topics and producer ids into the metadata log", "topics", store.Image().TopicCount())
	}
	img := store.Image()
	switch img.ClusterID() {
	case "":
		boot, err := metadata.ReadBootstrap(b.cfg.DataDir) // sluice format --add-scram
		if err != nil {
			return img, err
		}
		return store.Append(append([]metadata.Record{metadata.ClusterRecord{ClusterID: b.clusterID}}, boot...)...)
	case b.clusterID:
		return img, nil
	}
	return img, fmt.Errorf("the metadata log in %s belongs to cluster %s, meta.properties to cluster %s",
		b.cfg.DataDir, img.ClusterID(), b.clusterID)
}

// commitLocked makes recs durable, publishes the image they lead to and
// brings the hosted partitions in step. The caller holds meta.mu.
func (b *Broker) commitLocked(recs ...metadata.Record) error {
	img, err := b.meta.store.Append(recs...)
	if err != nil {
		return err
	}
	b.meta.image.Store(&img)
	return b.syncPartitions(img)
}

// ValidTopicName applies Kafka's rules for topic names.
func ValidTopicName(name string) error { return metadata.ValidTopicName(name) }

// TopicError is an error with the Kafka error code it answers with.
type TopicError struct {
	Code *kerr.Error
	Msg  string
}

func (e *TopicError) Error() string { return e.Msg }

func topicErr(code *kerr.Error, format string, args ...any) error {
	return &TopicError{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// ErrorCode maps an error from the registry or storage to a Kafka code.
func ErrorCode(err error) int16 {
	if err == nil {
		return 0
	}
	var te *TopicError
	if errors.As(err, &te) {
		return te.Code.Code
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	return storageErrorCode(err)
}

// maxPartitionsPerTopic bounds a single request's disk and fd footprint.
const maxPartitionsPerTopic = 10000

// CreateTopic validates and (unless validateOnly) creates a topic with
// partitions partitions (-1 = num.partitions) and the given overrides.
func (b *Broker) CreateTopic(name string, partitions int32, overrides map[string]string, validateOnly bool) (*Topic, error) {
	if err := ValidTopicName(name); err != nil {
		return nil, topicErr(kerr.InvalidTopicException, "%v", err)
	}
	if partitions == -1 {
		partitions = b.cfg.NumPartitions
	}
	if partitions <= 0 || partitions > maxPartitionsPerTopic {
		return nil, topicErr(kerr.InvalidPartitions, "number of partitions must be in [1, %d], got %d", maxPartitionsPerTopic, partitions)
	}
	for k, v := range overrides {
		if err := ValidateTopicConfig(k, v); err != nil {
			return nil, topicErr(kerr.InvalidConfig, "%v", err)
		}
	}
	if b.cluster != nil {
		return b.cluster.forwardCreateTopic(b.clusterTopicRequest(name, partitions), overrides, validateOnly)
	}
	b.meta.mu.Lock()
	defer b.meta.mu.Unlock()
	if b.image().Topic(name) != nil {
		return nil, topicErr(kerr.TopicAlreadyExists, "topic %q already exists", name)
	}
	if validateOnly {
		return nil, nil
	}
	id := b.newTopicIDLocked()
	if err := b.commitLocked(b.newTopicRecords(name, id, partitions, overrides)...); err != nil {
		b.undoCreateLocked(id)
		return nil, err
	}
	b.log.Info("created topic", "topic", name, "partitions", partitions, "configs", overrides)
	return b.TopicByID(id), nil
}

// newTopicRecords describes a new topic: its partitions placed on this
// node alone, then its configs.
func (b *Broker) newTopicRecords(name string, id [16]byte, partitions int32, overrides map[string]string) []metadata.Record {
	recs := []metadata.Record{metadata.TopicRecord{Name: name, TopicID: id}}
	for i := range partitions {
		recs = append(recs, metadata.SingleNodePartition(id, i, b.cfg.NodeID, 0))
	}
	for _, k := range slices.Sorted(maps.Keys(overrides)) {
		recs = append(recs, topicConfigRecord(name, k, overrides[k], true))
	}
	return recs
}

func topicConfigRecord(topic, key, value string, set bool) metadata.ConfigRecord {
	r := metadata.ConfigRecord{ResourceType: metadata.ResourceTopic, ResourceName: topic, Name: key}
	if set {
		r.Value = &value
	}
	return r
}

// undoCreateLocked removes a topic whose records are durable but whose
// logs failed to open, so that a failed create leaves no topic behind, as
// it always has.
func (b *Broker) undoCreateLocked(id [16]byte) {
	if b.image().TopicByID(id) == nil {
		return
	}
	if err := b.commitLocked(metadata.RemoveTopicRecord{TopicID: id}); err != nil {
		b.log.Error("cannot remove a topic whose logs failed to open", "err", err)
	}
}

func (b *Broker) newTopicIDLocked() [16]byte {
	for {
		var id [16]byte
		_, _ = rand.Read(id[:])
		if id != ([16]byte{}) && b.image().TopicByID(id) == nil {
			return id
		}
	}
}

// DeleteTopic removes a topic and its data.
func (b *Broker) DeleteTopic(name string) error {
	if ti := b.image().Topic(name); b.cluster != nil && ti != nil && name != offsetsTopic {
		return b.cluster.forwardDeleteTopic(ti)
	}
	b.meta.mu.Lock()
	defer b.meta.mu.Unlock()
	ti := b.image().Topic(name)
	if ti == nil {
		return topicErr(kerr.UnknownTopicOrPartition, "topic %q does not exist", name)
	}
	if name == offsetsTopic {
		return topicErr(kerr.TopicAuthorizationFailed, "internal topic %q cannot be deleted", name)
	}
	return b.commitLocked(metadata.RemoveTopicRecord{TopicID: ti.ID})
}

// CreatePartitions grows a topic to total partitions.
func (b *Broker) CreatePartitions(name string, total int32, validateOnly bool) error {
	if b.cluster != nil {
		return b.cluster.forwardCreatePartitions(name, total, nil, validateOnly)
	}
	b.meta.mu.Lock()
	defer b.meta.mu.Unlock()
	ti := b.image().Topic(name)
	if ti == nil {
		return topicErr(kerr.UnknownTopicOrPartition, "topic %q does not exist", name)
	}
	have := int32(len(ti.Partitions))
	if total <= have {
		return topicErr(kerr.InvalidPartitions, "topic %q has %d partitions; the count can only grow", name, have)
	}
	if total > maxPartitionsPerTopic {
		return topicErr(kerr.InvalidPartitions, "at most %d partitions per topic", maxPartitionsPerTopic)
	}
	if validateOnly {
		return nil
	}
	recs := make([]metadata.Record, 0, total-have)
	for i := have; i < total; i++ {
		recs = append(recs, metadata.SingleNodePartition(ti.ID, i, b.cfg.NodeID, 0))
	}
	return b.commitLocked(recs...)
}

// SetTopicConfigs replaces a topic's explicit configs (already validated)
// and applies them to its partitions' logs.
func (b *Broker) SetTopicConfigs(t *Topic, overrides map[string]string) error {
	if b.cluster != nil {
		res := metadata.ConfigResource{Type: metadata.ResourceTopic, Name: t.Name}
		return b.cluster.forwardConfigs(res, configChanges(t.Name, b.image().TopicConfigs(t.Name), overrides), overrides)
	}
	b.meta.mu.Lock()
	defer b.meta.mu.Unlock()
	if b.image().TopicByID(t.ID) == nil {
		return topicErr(kerr.UnknownTopicOrPartition, "topic %q does not exist", t.Name)
	}
	return b.commitLocked(configChanges(t.Name, b.image().TopicConfigs(t.Name), overrides)...)
}

// configChanges returns the records that turn a topic's configs from old
// into new (resourceConfigChanges).
func configChanges(topic string, old, new map[string]string) []metadata.Record {
	return resourceConfigChanges(metadata.ConfigResource{Type: metadata.ResourceTopic, Name: topic}, old, new)
}

// allocateProducerIDs allocates this broker the next block of size
// producer ids through the metadata log and returns its first id. The
// block is durable before any of its ids is handed out.
func (b *Broker) allocateProducerIDs(size int64) (int64, error) {
	if b.cluster != nil {
		return b.cluster.allocateProducerIDs(size)
	}
	b.meta.mu.Lock()
	defer b.meta.mu.Unlock()
	start := b.image().ProducerIDs().NextProducerID
	err := b.commitLocked(metadata.ProducerIDsRecord{BrokerID: b.cfg.NodeID, NextProducerID: start + size})
	return start, err
}
