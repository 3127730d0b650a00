package metadata

import (
	"cmp"
	"iter"
	"maps"
	"slices"
	"strings"
)

// Image is the cluster metadata at one point of the log: what every record
// up to there adds up to. It is an immutable value: Apply returns a new
// Image and never changes the one it was given, so an Image can be shared
// between goroutines without locks and kept as long as wanted. The maps and
// slices it hands out are part of it: callers must not modify them.
//
// The zero Image is the empty one.
type Image struct {
	clusterID string
	// scram holds every SCRAM credential (scram.go).
	scram map[ScramKey]ScramCredential
	// Invariant: topics and topicsByID hold the same *TopicImage values,
	// keyed by their Name and ID.
	topics     map[string]*TopicImage
	topicsByID map[[16]byte]*TopicImage
	// configs holds every resource's explicit configs. Invariant: no map
	// is empty, and a topic resource names a topic of the image.
	configs     map[ConfigResource]map[string]string
	producerIDs ProducerIDsImage
	features    map[string]int16
	// brokers holds every registered broker by id. Invariant: each value's
	// ID is its key.
	brokers map[int32]BrokerImage
	// acls holds every ACL by its id; quotas every client-quota entity's
	// keys (authz.go). Invariant: no quota map is empty.
	acls   map[[16]byte]ACL
	quotas map[QuotaEntity]map[string]float64
}

// TopicImage is one topic. Read-only, like everything an Image returns.
type TopicImage struct {
	Name string
	ID   [16]byte
	// Partitions[i] is partition i: indexes are dense, 0..len-1.
	Partitions []PartitionImage
}

// PartitionImage is one partition's placement and leadership.
// Invariant: Replicas is non-empty without duplicates, ISR ⊆ Replicas,
// Leader == -1 or Leader ∈ ISR, AddingReplicas and RemovingReplicas are
// disjoint subsets of Replicas (nil when empty), epochs are not negative.
type PartitionImage struct {
	Replicas       []int32
	ISR            []int32
	Leader         int32
	LeaderEpoch    int32 // bumped by every leader change
	PartitionEpoch int32 // bumped by every change
	// AddingReplicas and RemovingReplicas are the reassignment in
	// progress, if any.
	AddingReplicas   []int32
	RemovingReplicas []int32
}

// Hosts reports whether node holds a replica of the partition.
func (p *PartitionImage) Hosts(node int32) bool { return slices.Contains(p.Replicas, node) }

// ConfigResource names a configurable resource.
type ConfigResource struct {
	Type ResourceType
	Name string
}

// ProducerIDsImage is where producer-id allocation stands.
type ProducerIDsImage struct {
	// NextProducerID is the first id of the next block; every id below it
	// has been allocated. It only grows.
	NextProducerID int64
	BrokerID       int32 // the broker the last block went to
	BrokerEpoch    int64
}

// ClusterID returns the cluster the log belongs to ("" before the
// ClusterRecord).
func (img Image) ClusterID() string { return img.clusterID }

// Topic returns the named topic or nil.
func (img Image) Topic(name string) *TopicImage { return img.topics[name] }

// TopicByID returns the topic with the given id or nil.
func (img Image) TopicByID(id [16]byte) *TopicImage { return img.topicsByID[id] }

// TopicCount returns the number of topics.
func (img Image) TopicCount() int { return len(img.topics) }

// AllTopics yields every topic, in no particular order.
func (img Image) AllTopics() iter.Seq[*TopicImage] { return maps.Values(img.topics) }

// Topics returns every topic, sorted by name.
func (img Image) Topics() []*TopicImage {
	out := slices.Collect(maps.Values(img.topics))
	slices.SortFunc(out, func(a, b *TopicImage) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Configs returns a resource's explicit configs (nil if it has none).
func (img Image) Configs(r ConfigResource) map[string]string { return img.configs[r] }

// TopicConfigs returns the explicit configs of the named topic.
func (img Image) TopicConfigs(name string) map[string]string {
	return img.configs[ConfigResource{ResourceTopic, name}]
}

// ProducerIDs returns where producer-id allocation stands.
func (img Image) ProducerIDs() ProducerIDsImage { return img.producerIDs }

// FeatureLevel returns a feature's level and whether it is set.
func (img Image) FeatureLevel(name string) (int16, bool) {
	l, ok := img.features[name]
	return l, ok
}

// IsEmpty reports whether no record has changed the image.
func (img Image) IsEmpty() bool {
	return img.clusterID == "" && len(img.scram) == 0 && len(img.topics) == 0 && len(img.configs) == 0 &&
		img.producerIDs == (ProducerIDsImage{}) && len(img.features) == 0 && len(img.brokers) == 0 &&
		len(img.acls) == 0 && len(img.quotas) == 0
}

// Records returns records that rebuild the image when applied to an empty
// one, in an order Apply accepts: a snapshot of it. KRaft's snapshots are
// the same thing, a list of records.
func (img Image) Records() []Record {
	var out []Record
	if img.clusterID != "" {
		out = append(out, ClusterRecord{ClusterID: img.clusterID})
	}
	for _, name := range slices.Sorted(maps.Keys(img.features)) {
		out = append(out, FeatureLevelRecord{Name: name, FeatureLevel: img.features[name]})
	}
	out = append(out, img.brokerRecords()...)
	out = append(out, img.scramRecords()...)
	for _, t := range img.Topics() {
		out = append(out, TopicRecord{Name: t.Name, TopicID: t.ID})
		for i, p := range t.Partitions {
			out = append(out, PartitionRecord{TopicID: t.ID, Partition: int32(i), Replicas: p.Replicas, ISR: p.ISR,
				Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch,
				AddingReplicas: p.AddingReplicas, RemovingReplicas: p.RemovingReplicas})
		}
	}
	out = append(out, img.configRecords()...)
	out = append(out, img.authzRecords()...)
	if img.producerIDs != (ProducerIDsImage{}) {
		out = append(out, img.producerIDs.record())
	}
	return out
}

func (p ProducerIDsImage) record() ProducerIDsRecord {
	return ProducerIDsRecord{BrokerID: p.BrokerID, BrokerEpoch: p.BrokerEpoch, NextProducerID: p.NextProducerID}
}

func (img Image) configRecords() []Record {
	res := slices.SortedFunc(maps.Keys(img.configs), func(a, b ConfigResource) int {
		return cmp.Or(cmp.Compare(a.Type, b.Type), strings.Compare(a.Name, b.Name))
	})
	var out []Record
	for _, r := range res {
		kv := img.configs[r]
		for _, k := range slices.Sorted(maps.Keys(kv)) {
			v := kv[k]
			out = append(out, ConfigRecord{ResourceType: r.Type, ResourceName: r.Name, Name: k, Value: &v})
		}
	}
	return out
}
