package engine

// The partition manager: it keeps the partition logs this broker hosts in
// step with the metadata image (image.go). After every change of the image
// syncPartitions opens the logs of partitions the image places here
// (replicas contain node.id), sets their role from the image, applies
// changed topic configs to them, and closes and deletes the logs of topics
// the image no longer has and of partitions a reassignment moved away
// (left over from a time the broker was down, too). Handlers find what is open through b.Topic,
// b.TopicByID, b.Topics and t.Partition, which read a copy-on-write set
// without locks.

import (
	"cmp"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/sluice-broker/sluice/internal/par"
	"github.com/sluice-broker/sluice/metadata"
	"github.com/sluice-broker/sluice/storage"
)

// Topic is one topic and its partitions hosted on this broker.
type Topic struct {
	Name     string
	ID       [16]byte
	Internal bool // __consumer_offsets: hidden from auto-create and protected from deletion by clients

	// parts is replaced (never mutated) when partitions are added, so readers
	// load it without a lock. Invariant: parts[i].Index == i.
	parts atomic.Pointer[[]*Partition]
	// settings is the effective config: broker defaults + overrides.
	settings atomic.Pointer[TopicSettings]

	// overrides holds the explicit topic-level configs: the image's map,
	// which is never mutated, so readers need no lock.
	overrides atomic.Pointer[map[string]string]
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

// partitionManager holds the topics whose partitions are open here.
type partitionManager struct {
	// set is replaced whole by syncPartitions (which runs under meta.mu)
	// when topics come or go; lookups load it without a lock.
	set atomic.Pointer[topicSet]
	// clean is the data directory's clean-shutdown record, taken at
	// start before any partition opens; each partition it names opens
	// without recovery, once (storage.CleanShutdown).
	clean *storage.CleanShutdown
}

// topicSet is one published generation of hosted topics. Invariant: byName,
// byID and sorted hold the same topics; sorted is ordered by name.
type topicSet struct {
	byName map[string]*Topic
	byID   map[[16]byte]*Topic
	sorted []*Topic
}

var emptyTopicSet = &topicSet{}

func (m *partitionManager) load() *topicSet {
	if s := m.set.Load(); s != nil {
		return s
	}
	return emptyTopicSet
}

// Topic returns the named topic or nil.
func (b *Broker) Topic(name string) *Topic { return b.hosted.load().byName[name] }

// TopicByID returns the topic with the given id or nil.
func (b *Broker) TopicByID(id [16]byte) *Topic { return b.hosted.load().byID[id] }

// Topics returns all topics sorted by name.
func (b *Broker) Topics() []*Topic { return slices.Clone(b.hosted.load().sorted) }

// syncPartitions brings the hosted topics in step with img: it opens the
// topics and partitions img adds, applies changed configs, publishes the
// new set, then closes and deletes the logs of topics img removed. The
// caller holds meta.mu. It is idempotent: a partition that failed to open
// is tried again by the next call.
func (b *Broker) syncPartitions(img metadata.Image) error {
	// Metadata answers cached before this change are stale after it.
	defer b.mdCache.invalidate()
	b.applyBrokerConfigs(img) // dynconfig.go: topic defaults first
	b.applyAuthz(img)         // authz.go: ACLs and quotas
	old := b.hosted.load()
	var added []*metadata.TopicImage
	var errs []error
	for ti := range img.AllTopics() {
		t := old.byID[ti.ID]
		if t == nil {
			added = append(added, ti)
			continue
		}
		if err := b.syncTopic(t, ti, img.TopicConfigs(ti.Name)); err != nil {
			errs = append(errs, err)
		}
	}
	opened, err := b.openTopics(added, img)
	errs = append(errs, err)
	var gone []*Topic
	for _, t := range old.sorted {
		if img.TopicByID(t.ID) == nil {
			gone = append(gone, t)
		}
	}
	if len(opened) > 0 || len(gone) > 0 {
		b.hosted.set.Store(old.with(opened, gone))
	}
	errs = append(errs, b.removeTopics(gone))
	return cmp.Or(errs...)
}

// with returns a copy of s with added and without removed.
func (s *topicSet) with(added, removed []*Topic) *topicSet {
	n := &topicSet{byName: maps.Clone(s.byName), byID: maps.Clone(s.byID)}
	if n.byName == nil {
		n.byName, n.byID = map[string]*Topic{}, map[[16]byte]*Topic{}
	}
	for _, t := range removed {
		delete(n.byName, t.Name)
		delete(n.byID, t.ID)
	}
	for _, t := range added {
		n.byName[t.Name], n.byID[t.ID] = t, t
	}
	n.sorted = slices.SortedFunc(maps.Values(n.byName), func(a, b *Topic) int { return strings.Compare(a.Name, b.Name) })
	return n
}

// openTopics opens the given topics side by side and returns those that
// opened, even on error (so that the caller's cleanup closes them).
func (b *Broker) openTopics(tis []*metadata.TopicImage, img metadata.Image) ([]*Topic, error) {
	topics := make([]*Topic, len(tis))
	err := parallel(len(tis), func(i int) error {
		var err error
		topics[i], err = b.openTopic(tis[i], img.TopicConfigs(tis[i].Name))
		return err
	})
	return slices.DeleteFunc(topics, func(t *Topic) bool { return t == nil }), err
}

// openTopic opens the logs of a topic's hosted partitions.
func (b *Broker) openTopic(ti *metadata.TopicImage, overrides map[string]string) (*Topic, error) {
	t := &Topic{Name: ti.Name, ID: ti.ID, Internal: ti.Name == offsetsTopic || ti.Name == txnStateTopic}
	b.setOverrides(t, overrides)
	parts, err := b.openPartitions(t, ti.Partitions, 0)
	if err != nil {
		return nil, err
	}
	t.parts.Store(&parts)
	return t, nil
}

// setOverrides installs a topic's explicit configs and the settings they
// resolve to.
func (b *Broker) setOverrides(t *Topic, overrides map[string]string) {
	if overrides == nil {
		overrides = map[string]string{}
	}
	t.overrides.Store(&overrides)
	s := b.currentConfig().ResolveTopic(overrides)
	t.settings.Store(&s)
}

// syncTopic opens partitions the image added to a hosted topic and applies
// changed configs (its own, or the broker defaults under them) to its logs.
func (b *Broker) syncTopic(t *Topic, ti *metadata.TopicImage, overrides map[string]string) error {
	if !maps.Equal(t.Overrides(), overrides) || !t.Settings().resolvedFrom(b.currentConfig()) {
		b.setOverrides(t, overrides)
		for _, p := range t.Partitions() {
			if p != nil { // nil: hosted elsewhere
				p.setConfig(t.Settings().Log)
			}
		}
	}
	old := t.Partitions()
	err := b.syncRoles(t, ti, old)
	if len(old) >= len(ti.Partitions) {
		return err
	}
	added, err := b.openPartitions(t, ti.Partitions[len(old):], int32(len(old)))
	if err != nil {
		return err
	}
	parts := append(slices.Clip(t.Partitions()), added...)
	t.parts.Store(&parts)
	return nil
}

// syncRoles gives each partition of t the image has assigned here the
// role the image says (applyImageRole), opens those newly assigned here
// and deletes those a reassignment moved away (after publishing the
// partitions without them, as a topic deletion does).
func (b *Broker) syncRoles(t *Topic, ti *metadata.TopicImage, parts []*Partition) error {
	var opened, moved []*Partition
	var errs []error
	for i, p := range parts {
		pi := &ti.Partitions[i]
		switch {
		case p != nil && !pi.Hosts(b.cfg.NodeID):
			if opened == nil {
				opened = slices.Clone(parts)
			}
			opened[i] = nil
			moved = append(moved, p)
		case p != nil:
			b.applyImageRole(p, pi)
		case pi.Hosts(b.cfg.NodeID):
			np, err := b.openPartition(t, int32(i), pi)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if opened == nil {
				opened = slices.Clone(parts)
			}
			opened[i] = np
		}
	}
	if opened != nil {
		t.parts.Store(&opened)
	}
	for _, p := range moved {
		errs = append(errs, p.delete())
		b.log.Info("deleted partition moved away", "topic", t.Name, "partition", p.Index)
	}
	return cmp.Or(errs...)
}

// applyImageRole brings p in step with the image: its role, and on a
// leader the ISR the controller committed (Partition.applyImage, which
// returns at once when the partition's image did not change). This is
// the one place the partition manager sets roles.
func (b *Broker) applyImageRole(p *Partition, pi *metadata.PartitionImage) {
	p.applyImage(b.cfg.NodeID, pi)
}

// takeCleanShutdown takes the data directory's clean-shutdown record
// (which closeTopics' storage.CloseAll leaves), before any partition
// opens: from here on a crash leaves no record.
func (b *Broker) takeCleanShutdown() error {
	rec, err := storage.TakeCleanShutdown(b.cfg.DataDir)
	if err != nil {
		return err
	}
	b.hosted.clean = rec
	if n := rec.Len(); n > 0 {
		b.log.Info("partitions closed cleanly at the last shutdown", "partitions", n)
	}
	return nil
}

// openPartitions opens partitions from, from+1, ... of t (described by pis)
// side by side: opening a log is dominated by fsync latency (clean-shutdown
// marker, directory), not CPU, so a topic of many partitions opens in a
// fraction of the serial time.
func (b *Broker) openPartitions(t *Topic, pis []metadata.PartitionImage, from int32) ([]*Partition, error) {
	parts := make([]*Partition, len(pis))
	err := parallel(len(pis), func(i int) error {
		if !pis[i].Hosts(b.cfg.NodeID) {
			// A partition hosted elsewhere has no log here; its slot stays
			// nil (syncRoles opens it if the image later places it here).
			// A single node hosts every one.
			return b.removeLeftover(t, from+int32(i))
		}
		p, err := b.openPartition(t, from+int32(i), &pis[i])
		parts[i] = p
		return err
	})
	if err != nil {
		closePartitions(parts)
		return nil, err
	}
	return parts, nil
}

// removeLeftover deletes the directory of partition i of t on a broker
// the image does not place it on: what is left when a reassignment moved
// the partition away while this broker was down. The image is the
// committed one (each metadata read brings a broker to the log's end), so
// the partition can only come back here as a new replica that copies the
// leader's log afresh; these bytes are never needed again.
func (b *Broker) removeLeftover(t *Topic, i int32) error {
	dir := filepath.Join(b.cfg.DataDir, t.Name+"-"+strconv.Itoa(int(i)))
	if _, err := os.Stat(dir); err != nil {
		return nil
	}
	b.log.Info("deleting the log of a partition no longer assigned here", "topic", t.Name, "partition", i)
	return os.RemoveAll(dir)
}

// openWorkers bounds how many logs open or close at once.
const openWorkers = 16

// parallel runs fn(0..n-1) on up to openWorkers goroutines and returns the
// first error.
func parallel(n int, fn func(i int) error) error { return par.Each(n, openWorkers, fn) }

// openPartition opens partition i's log and gives it the role the image
// says.
func (b *Broker) openPartition(t *Topic, i int32, pi *metadata.PartitionImage) (*Partition, error) {
	dir := filepath.Join(b.cfg.DataDir, t.Name+"-"+strconv.Itoa(int(i)))
	l, err := b.hosted.clean.Open(dir, t.Settings().Log)
	if err != nil {
		return nil, fmt.Errorf("open partition %s-%d: %w", t.Name, i, err)
	}
	l.SetFailureHook(func(err error) { b.logFailed(t.Name, i, err) })
	p := newPartition(t, i, l, b.waiters, b.replicas)
	b.setRole(p, pi)
	return p, nil
}

// setRole makes p what the image says it is: leader at the image's epoch
// when the image names this node, else a follower of the leader
// (Partition.applyImage).
func (b *Broker) setRole(p *Partition, pi *metadata.PartitionImage) {
	p.applyImage(b.cfg.NodeID, pi)
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

// removeTopics deletes the logs of topics the image no longer has, and
// drops their committed offsets as Kafka does.
func (b *Broker) removeTopics(gone []*Topic) error {
	var errs []error
	for _, t := range gone {
		ps := t.Partitions()
		errs = append(errs, parallel(len(ps), func(i int) error {
			if ps[i] == nil {
				return nil
			}
			return ps[i].delete()
		}))
		if b.groups != nil {
			b.groups.topicDeleted(t.Name) // committed offsets go with the topic, as in Kafka
		}
		b.share.topicDeleted(t.ID)
		b.log.Info("deleted topic", "topic", t.Name)
	}
	return cmp.Or(errs...)
}

// closeTopics closes every hosted partition (shutdown), all logs together
// (storage.CloseAll: a few filesystem syncs instead of fsyncs per log).
func (b *Broker) closeTopics() error {
	var logs []*storage.Log
	for _, t := range b.Topics() {
		for _, p := range t.Partitions() {
			if p != nil {
				logs = append(logs, p.stop())
			}
		}
	}
	return storage.CloseAll(logs, openWorkers)
}
