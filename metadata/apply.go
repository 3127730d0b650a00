package metadata

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
)

// ErrInvalid is wrapped by every error Apply returns: the record does not
// follow from the image (a partition of an unknown topic, a topic name
// taken, a producer-id block that goes backwards, ...).
var ErrInvalid = errors.New("invalid metadata record")

// Apply returns the image after r. It is pure: no I/O, and img is not
// changed. An invalid record returns img unchanged and an error wrapping
// ErrInvalid.
func Apply(img Image, r Record) (Image, error) { return ApplyAll(img, []Record{r}) }

// ApplyAll applies recs in order as one batch: either all of them or, on
// the first invalid one, none.
func ApplyAll(img Image, recs []Record) (Image, error) {
	b := builder{img: img}
	for i, r := range recs {
		if err := b.apply(r); err != nil {
			return img, fmt.Errorf("record %d of %d (%v): %w", i, len(recs), r.Type(), err)
		}
	}
	return b.img, nil
}

// builder applies records to a private copy of an image, copying each map
// and topic the first time the batch changes it (copy-on-write), so that
// a batch costs what it touches, not the size of the image.
type builder struct {
	img                Image
	ownScramMap        bool // scram.go
	ownTopicMaps       bool
	ownConfigMap       bool
	ownFeatures        bool
	ownBrokers         bool
	ownTopics          map[[16]byte]bool       // TopicImages copied by this batch
	ownResourceConfigs map[ConfigResource]bool // per-resource maps copied by this batch
	ownACLs, ownQuotas bool                    // authz.go
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

func (b *builder) apply(r Record) error {
	switch r := r.(type) {
	case UserScramCredentialRecord: // scram.go
		return b.userScramCredential(r)
	case RemoveUserScramCredentialRecord:
		return b.removeUserScramCredential(r)
	case TopicRecord:
		return b.topic(r)
	case PartitionRecord:
		return b.partition(r)
	case ConfigRecord:
		return b.config(r)
	case RemoveTopicRecord:
		return b.removeTopic(r)
	case ProducerIDsRecord:
		return b.producerIDs(r)
	case FeatureLevelRecord:
		return b.feature(r)
	case ClusterRecord:
		return b.cluster(r)
	case RegisterBrokerRecord:
		return b.registerBroker(r)
	case UnregisterBrokerRecord:
		return b.unregisterBroker(r)
	case FenceBrokerRecord:
		return b.changeBroker(r.BrokerID, r.BrokerEpoch, FenceChangeFence, ShutdownChangeNone)
	case UnfenceBrokerRecord:
		return b.changeBroker(r.BrokerID, r.BrokerEpoch, FenceChangeUnfence, ShutdownChangeNone)
	case BrokerRegistrationChangeRecord:
		return b.changeBroker(r.BrokerID, r.BrokerEpoch, r.Fenced, r.InControlledShutdown)
	case PartitionChangeRecord:
		return b.partitionChange(r)
	case AccessControlEntryRecord:
		return b.addACL(r)
	case RemoveAccessControlEntryRecord:
		return b.removeACL(r)
	case ClientQuotaRecord:
		return b.clientQuota(r)
	}
	return invalid("unknown record %T", r)
}

func (b *builder) topic(r TopicRecord) error {
	if err := ValidTopicName(r.Name); err != nil {
		return invalid("%v", err)
	}
	if r.TopicID == ([16]byte{}) {
		return invalid("topic %q has the zero id", r.Name)
	}
	if b.img.topics[r.Name] != nil {
		return invalid("topic %q already exists", r.Name)
	}
	if b.img.topicsByID[r.TopicID] != nil {
		return invalid("topic id of %q is taken by %q", r.Name, b.img.topicsByID[r.TopicID].Name)
	}
	b.copyTopicMaps()
	t := &TopicImage{Name: r.Name, ID: r.TopicID}
	b.img.topics[r.Name], b.img.topicsByID[r.TopicID] = t, t
	b.ownTopics[r.TopicID] = true
	return nil
}

func (b *builder) partition(r PartitionRecord) error {
	t := b.img.topicsByID[r.TopicID]
	if t == nil {
		return invalid("partition %d of unknown topic id %x", r.Partition, r.TopicID)
	}
	if r.Partition != int32(len(t.Partitions)) {
		return invalid("topic %q has %d partitions; partition %d is not the next", t.Name, len(t.Partitions), r.Partition)
	}
	p := PartitionImage{Replicas: r.Replicas, ISR: r.ISR, Leader: r.Leader, LeaderEpoch: r.LeaderEpoch, PartitionEpoch: r.PartitionEpoch,
		AddingReplicas: nilIfEmpty(r.AddingReplicas), RemovingReplicas: nilIfEmpty(r.RemovingReplicas)}
	if err := p.check(); err != nil {
		return invalid("partition %s-%d: %v", t.Name, r.Partition, err)
	}
	t = b.ownTopic(t)
	t.Partitions = append(t.Partitions, p)
	return nil
}

// check states the partition invariant.
func (p *PartitionImage) check() error {
	if len(p.Replicas) == 0 {
		return errors.New("no replicas")
	}
	if err := distinctNodes(p.Replicas); err != nil {
		return fmt.Errorf("replicas: %v", err)
	}
	if err := distinctNodes(p.ISR); err != nil {
		return fmt.Errorf("isr: %v", err)
	}
	for _, n := range p.ISR {
		if !slices.Contains(p.Replicas, n) {
			return fmt.Errorf("isr member %d is not a replica", n)
		}
	}
	if p.Leader != -1 && !slices.Contains(p.ISR, p.Leader) {
		return fmt.Errorf("leader %d is not in the isr", p.Leader)
	}
	if p.LeaderEpoch < 0 || p.PartitionEpoch < 0 {
		return fmt.Errorf("negative epoch")
	}
	return p.checkReassignment()
}

func distinctNodes(ns []int32) error {
	for i, n := range ns {
		if n < 0 {
			return fmt.Errorf("node id %d", n)
		}
		if slices.Contains(ns[:i], n) {
			return fmt.Errorf("node %d twice", n)
		}
	}
	return nil
}

func (b *builder) config(r ConfigRecord) error {
	if err := b.checkResource(r.ResourceType, r.ResourceName); err != nil {
		return err
	}
	if r.Name == "" {
		return invalid("config of %v %q has no name", r.ResourceType, r.ResourceName)
	}
	if len(r.ResourceName) > MaxStringLen || len(r.Name) > MaxStringLen || r.Value != nil && len(*r.Value) > MaxStringLen {
		return invalid("config of %v: a string longer than %d bytes", r.ResourceType, MaxStringLen)
	}
	res := ConfigResource{r.ResourceType, r.ResourceName}
	if _, ok := b.img.configs[res][r.Name]; !ok && r.Value == nil {
		return nil // deleting an absent key changes nothing
	}
	kv := b.ownConfigs(res)
	if r.Value == nil {
		delete(kv, r.Name)
	} else {
		kv[r.Name] = *r.Value
	}
	if len(kv) == 0 {
		delete(b.img.configs, res)
		delete(b.ownResourceConfigs, res)
	}
	return nil
}

func (b *builder) checkResource(typ ResourceType, name string) error {
	switch typ {
	case ResourceTopic:
		if b.img.topics[name] == nil {
			return invalid("config of unknown topic %q", name)
		}
	case ResourceBroker:
		if n, err := strconv.ParseInt(name, 10, 32); name != "" && (err != nil || n < 0) {
			return invalid("broker resource %q is not a node id", name)
		}
	case ResourceGroup:
		if name == "" {
			return invalid("group resource has no name")
		}
	default:
		return invalid("unknown resource type %d", typ)
	}
	return nil
}

func (b *builder) removeTopic(r RemoveTopicRecord) error {
	t := b.img.topicsByID[r.TopicID]
	if t == nil {
		return invalid("remove of unknown topic id %x", r.TopicID)
	}
	b.copyTopicMaps()
	delete(b.img.topics, t.Name)
	delete(b.img.topicsByID, t.ID)
	if res := (ConfigResource{ResourceTopic, t.Name}); b.img.configs[res] != nil {
		b.copyConfigMap()
		delete(b.img.configs, res)
		delete(b.ownResourceConfigs, res)
	}
	return nil
}

func (b *builder) producerIDs(r ProducerIDsRecord) error {
	if r.BrokerID < 0 || r.BrokerEpoch < 0 {
		return invalid("producer ids for broker %d epoch %d", r.BrokerID, r.BrokerEpoch)
	}
	if r.NextProducerID <= b.img.producerIDs.NextProducerID {
		return invalid("producer-id block ending at %d does not follow %d", r.NextProducerID, b.img.producerIDs.NextProducerID)
	}
	b.img.producerIDs = ProducerIDsImage{NextProducerID: r.NextProducerID, BrokerID: r.BrokerID, BrokerEpoch: r.BrokerEpoch}
	return nil
}

func (b *builder) feature(r FeatureLevelRecord) error {
	if r.Name == "" || r.FeatureLevel < 0 {
		return invalid("feature %q level %d", r.Name, r.FeatureLevel)
	}
	if !b.ownFeatures {
		b.img.features = maps.Clone(b.img.features)
		if b.img.features == nil {
			b.img.features = map[string]int16{}
		}
		b.ownFeatures = true
	}
	b.img.features[r.Name] = r.FeatureLevel
	return nil
}

func (b *builder) cluster(r ClusterRecord) error {
	switch {
	case r.ClusterID == "":
		return invalid("empty cluster id")
	case b.img.clusterID != "" && b.img.clusterID != r.ClusterID:
		return invalid("log of cluster %q cannot become cluster %q", b.img.clusterID, r.ClusterID)
	}
	b.img.clusterID = r.ClusterID
	return nil
}

// copyTopicMaps gives the batch its own topic maps (the TopicImages in
// them are still shared until ownTopic copies one).
func (b *builder) copyTopicMaps() {
	if b.ownTopicMaps {
		return
	}
	b.img.topics = cloneOrMake(b.img.topics)
	b.img.topicsByID = cloneOrMake(b.img.topicsByID)
	b.ownTopics = map[[16]byte]bool{}
	b.ownTopicMaps = true
}

// ownTopic returns a copy of t private to the batch, registered in place
// of t. Its Partitions are copied too, since a PartitionChangeRecord
// changes one in place.
func (b *builder) ownTopic(t *TopicImage) *TopicImage {
	b.copyTopicMaps()
	if b.ownTopics[t.ID] {
		return t
	}
	c := &TopicImage{Name: t.Name, ID: t.ID, Partitions: slices.Clone(t.Partitions)}
	b.img.topics[c.Name], b.img.topicsByID[c.ID] = c, c
	b.ownTopics[c.ID] = true
	return c
}

func (b *builder) copyConfigMap() {
	if !b.ownConfigMap {
		b.img.configs = cloneOrMake(b.img.configs)
		b.ownResourceConfigs = map[ConfigResource]bool{}
		b.ownConfigMap = true
	}
}

// ownConfigs returns the resource's config map, private to the batch.
func (b *builder) ownConfigs(res ConfigResource) map[string]string {
	b.copyConfigMap()
	if !b.ownResourceConfigs[res] {
		b.img.configs[res] = cloneOrMake(b.img.configs[res])
		b.ownResourceConfigs[res] = true
	}
	return b.img.configs[res]
}

func cloneOrMake[K comparable, V any](m map[K]V) map[K]V {
	if m == nil {
		return map[K]V{}
	}
	return maps.Clone(m)
}

// ValidTopicName applies Kafka's rules for topic names. Names become
// directory names, so the image refuses any other.
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

// Check verifies the image's invariants; tests and the fuzz target call
// it after every record.
func (img Image) Check() error {
	if len(img.topics) != len(img.topicsByID) {
		return fmt.Errorf("%d topics by name, %d by id", len(img.topics), len(img.topicsByID))
	}
	for name, t := range img.topics {
		if t.Name != name || img.topicsByID[t.ID] != t {
			return fmt.Errorf("topic %q: maps disagree", name)
		}
		for i := range t.Partitions {
			if err := t.Partitions[i].check(); err != nil {
				return fmt.Errorf("partition %s-%d: %v", name, i, err)
			}
		}
	}
	for id, br := range img.brokers {
		if br.ID != id || br.Epoch < 0 {
			return fmt.Errorf("broker %d: %+v", id, br)
		}
	}
	for res, kv := range img.configs {
		if len(kv) == 0 {
			return fmt.Errorf("empty configs of %v", res)
		}
		if res.Type == ResourceTopic && img.topics[res.Name] == nil {
			return fmt.Errorf("configs of unknown topic %q", res.Name)
		}
	}
	return nil
}
