package engine

import (
	"cmp"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-broker/sluice/storage"
)

// Topic is one topic and its partitions.
type Topic struct {
	Name     string
	ID       [16]byte
	Internal bool // __consumer_offsets: hidden from auto-create and protected from deletion by clients

	// parts is replaced (never mutated) when partitions are added, so readers
	// load it without a lock. Invariant: parts[i].Index == i.
	parts atomic.Pointer[[]*Partition]
	// settings is the effective config: broker defaults + overrides.
	settings atomic.Pointer[TopicSettings]

	// overrides holds the explicit topic-level configs; the map is replaced,
	// never mutated, so readers need no lock.
	overrides atomic.Pointer[map[string]string]
	// mu serialises changes to partitions and configs.
	mu sync.Mutex
}

// Partitions returns the topic's partitions (do not modify).
func (t *Topic) Partitions() []*Partition { return *t.parts.Load() }

// Partition returns partition i or nil.
func (t *Topic) Partition(i int32) *Partition {
	ps := t.Partitions()
	if i < 0 || int(i) >= len(ps) {
		return nil
	}
	return ps[i]
}

// Settings returns the topic's effective configuration.
func (t *Topic) Settings() *TopicSettings { return t.settings.Load() }

// Overrides returns the topic's explicit configs (do not modify).
func (t *Topic) Overrides() map[string]string { return *t.overrides.Load() }

// registry holds every topic. Lookups take the read lock; creating and
// deleting topics take the write lock and persist the topic list.
type registry struct {
	mu     sync.RWMutex
	byName map[string]*Topic
	byID   map[[16]byte]*Topic
	// persistMu serialises writes of the topics file.
	persistMu sync.Mutex
}

// Topic returns the named topic or nil.
func (b *Broker) Topic(name string) *Topic {
	b.topics.mu.RLock()
	defer b.topics.mu.RUnlock()
	return b.topics.byName[name]
}

// TopicByID returns the topic with the given id or nil.
func (b *Broker) TopicByID(id [16]byte) *Topic {
	b.topics.mu.RLock()
	defer b.topics.mu.RUnlock()
	return b.topics.byID[id]
}

// Topics returns all topics sorted by name.
func (b *Broker) Topics() []*Topic {
	b.topics.mu.RLock()
	out := make([]*Topic, 0, len(b.topics.byName))
	for _, t := range b.topics.byName {
		out = append(out, t)
	}
	b.topics.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// ValidTopicName applies Kafka's rules for topic names.
func ValidTopicName(name string) error {
	if name == "" || name == "." || name == ".." {
		return fmt.Errorf("topic name %q is illegal", name)
	}
	if len(name) > 249 {
		return fmt.Errorf("topic name is longer than 249 characters")
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("topic name %q contains a character other than ASCII alphanumerics, '.', '_' and '-'", name)
		}
	}
	return nil
}

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
	b.topics.mu.Lock()
	defer b.topics.mu.Unlock()
	if b.topics.byName[name] != nil {
		return nil, topicErr(kerr.TopicAlreadyExists, "topic %q already exists", name)
	}
	if validateOnly {
		return nil, nil
	}
	t, err := b.openTopic(name, newTopicID(), partitions, overrides)
	if err != nil {
		return nil, err
	}
	b.topics.byName[name] = t
	b.topics.byID[t.ID] = t
	if err := b.persistTopicsLocked(); err != nil {
		return nil, err
	}
	b.log.Info("created topic", "topic", name, "partitions", partitions, "configs", overrides)
	return t, nil
}

// maxPartitionsPerTopic bounds a single request's disk and fd footprint.
const maxPartitionsPerTopic = 10000

// openTopic opens (creating if needed) the logs of a topic's partitions.
func (b *Broker) openTopic(name string, id [16]byte, partitions int32, overrides map[string]string) (*Topic, error) {
	t := &Topic{Name: name, ID: id, Internal: name == offsetsTopic}
	if overrides == nil {
		overrides = map[string]string{}
	}
	t.overrides.Store(&overrides)
	s := b.cfg.ResolveTopic(overrides)
	t.settings.Store(&s)
	parts, err := b.openPartitions(t, 0, partitions)
	if err != nil {
		return nil, err
	}
	t.parts.Store(&parts)
	return t, nil
}

// openPartitions opens partitions [from, to) of t side by side: opening a
// log is dominated by fsync latency (clean-shutdown marker, directory), not
// CPU, so a topic of many partitions opens in a fraction of the serial time.
func (b *Broker) openPartitions(t *Topic, from, to int32) ([]*Partition, error) {
	parts := make([]*Partition, to-from)
	err := parallel(int(to-from), func(i int) error {
		p, err := b.openPartition(t, from+int32(i))
		parts[i] = p
		return err
	})
	if err != nil {
		closePartitions(parts)
		return nil, err
	}
	return parts, nil
}

// openWorkers bounds how many logs open or close at once.
const openWorkers = 16

// parallel runs fn(0..n-1) on up to openWorkers goroutines and returns the
// first error.
func parallel(n int, fn func(i int) error) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		next  atomic.Int64
	)
	for w := 0; w < min(n, openWorkers); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				if err := fn(i); err != nil {
					mu.Lock()
					first = cmp.Or(first, err)
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return first
}

func (b *Broker) openPartition(t *Topic, i int32) (*Partition, error) {
	dir := filepath.Join(b.cfg.DataDir, t.Name+"-"+strconv.Itoa(int(i)))
	l, err := storage.Open(dir, t.Settings().Log)
	if err != nil {
		return nil, fmt.Errorf("open partition %s-%d: %w", t.Name, i, err)
	}
	p := newPartition(t, i, l, b.waiters)
	p.becomeLeader(p.storedEpoch()) // single node: this broker leads every partition
	return p, nil
}

// closePartitions closes the (possibly nil) partitions' logs side by side.
func closePartitions(ps []*Partition) error {
	return parallel(len(ps), func(i int) error {
		if ps[i] == nil {
			return nil
		}
		return ps[i].close()
	})
}

// DeleteTopic removes a topic and its data.
func (b *Broker) DeleteTopic(name string) error {
	b.topics.mu.Lock()
	t := b.topics.byName[name]
	if t == nil {
		b.topics.mu.Unlock()
		return topicErr(kerr.UnknownTopicOrPartition, "topic %q does not exist", name)
	}
	if t.Internal {
		b.topics.mu.Unlock()
		return topicErr(kerr.TopicAuthorizationFailed, "internal topic %q cannot be deleted", name)
	}
	delete(b.topics.byName, name)
	delete(b.topics.byID, t.ID)
	err := b.persistTopicsLocked()
	b.topics.mu.Unlock()
	for _, p := range t.Partitions() {
		if derr := p.delete(); derr != nil && err == nil {
			err = derr
		}
	}
	b.groups.topicDeleted(name) // committed offsets go with the topic, as in Kafka
	b.log.Info("deleted topic", "topic", name)
	return err
}

// CreatePartitions grows a topic to total partitions.
func (b *Broker) CreatePartitions(name string, total int32, validateOnly bool) error {
	t := b.Topic(name)
	if t == nil {
		return topicErr(kerr.UnknownTopicOrPartition, "topic %q does not exist", name)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.Partitions()
	if total <= int32(len(old)) {
		return topicErr(kerr.InvalidPartitions, "topic %q has %d partitions; the count can only grow", name, len(old))
	}
	if total > maxPartitionsPerTopic {
		return topicErr(kerr.InvalidPartitions, "at most %d partitions per topic", maxPartitionsPerTopic)
	}
	if validateOnly {
		return nil
	}
	added, err := b.openPartitions(t, int32(len(old)), total)
	if err != nil {
		return err
	}
	parts := append(append(make([]*Partition, 0, total), old...), added...)
	t.parts.Store(&parts)
	b.topics.mu.Lock()
	defer b.topics.mu.Unlock()
	return b.persistTopicsLocked()
}

// SetTopicConfigs replaces a topic's explicit configs (already validated)
// and applies them to its partitions' logs.
func (b *Broker) SetTopicConfigs(t *Topic, overrides map[string]string) error {
	t.mu.Lock()
	t.overrides.Store(&overrides)
	s := b.cfg.ResolveTopic(overrides)
	t.settings.Store(&s)
	t.mu.Unlock()
	for _, p := range t.Partitions() {
		p.setConfig(s.Log)
	}
	b.topics.mu.Lock()
	defer b.topics.mu.Unlock()
	return b.persistTopicsLocked()
}

func newTopicID() [16]byte {
	var id [16]byte
	for id == [16]byte{} {
		_, _ = rand.Read(id[:])
	}
	return id
}

// topicRecord is a topic as stored in the topics file.
type topicRecord struct {
	Name       string            `json:"name"`
	ID         [16]byte          `json:"id"`
	Partitions int32             `json:"partitions"`
	Configs    map[string]string `json:"configs,omitempty"`
}

const topicsFile = "sluice-topics.json"

// persistTopicsLocked writes the topic list atomically (temp file, fsync,
// rename). The caller holds topics.mu.
func (b *Broker) persistTopicsLocked() error {
	b.topics.persistMu.Lock()
	defer b.topics.persistMu.Unlock()
	recs := make([]topicRecord, 0, len(b.topics.byName))
	for _, t := range b.topics.byName {
		recs = append(recs, topicRecord{Name: t.Name, ID: t.ID, Partitions: int32(len(t.Partitions())), Configs: t.Overrides()})
	}
	sort.Slice(recs, func(i, j int) bool { return recs[i].Name < recs[j].Name })
	data, err := json.MarshalIndent(recs, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(b.cfg.DataDir, topicsFile), data)
}

func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if _, err = f.Write(data); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// loadTopics opens every topic listed in the topics file.
func (b *Broker) loadTopics() error {
	b.topics.byName = map[string]*Topic{}
	b.topics.byID = map[[16]byte]*Topic{}
	data, err := os.ReadFile(filepath.Join(b.cfg.DataDir, topicsFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var recs []topicRecord
	if err := json.Unmarshal(data, &recs); err != nil {
		return fmt.Errorf("%s: %w", topicsFile, err)
	}
	topics := make([]*Topic, len(recs))
	err = parallel(len(recs), func(i int) error {
		rec := recs[i]
		var err error
		topics[i], err = b.openTopic(rec.Name, rec.ID, rec.Partitions, rec.Configs)
		return err
	})
	// Register what opened even on error, so the caller's cleanup closes it.
	for _, t := range topics {
		if t != nil {
			b.topics.byName[t.Name] = t
			b.topics.byID[t.ID] = t
		}
	}
	return err
}
