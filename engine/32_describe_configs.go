package engine

// DescribeConfigs (key 32), versions 1-4.
//
// TOPIC resources report every topic-level key Sluice knows (topicconfig.go)
// with its effective value and source: DYNAMIC_TOPIC_CONFIG for the topic's
// own overrides, else STATIC_BROKER_CONFIG when server.properties set the
// broker-level synonym, else DEFAULT_CONFIG. BROKER resources (name = this
// node id) report the broker keys whose values Sluice actually runs with,
// all read-only; the empty name (cluster-wide dynamic defaults) answers an
// empty list because Sluice has no dynamic broker configs — broker configs
// come from server.properties only, and AlterConfigs refuses them.
//
// Whether a broker key was set statically is decided by comparing it with
// the built-in default: a key set in server.properties to the default value
// is reported as DEFAULT_CONFIG. Kafka lists one synonym per spelling of a
// broker key (log.retention.ms/minutes/hours); Sluice lists the one it
// stores. Synonyms are returned with IncludeSynonyms, types always (v3+),
// documentation with IncludeDocumentation. A null or empty key list means
// every key; unknown keys are left out, as Kafka does. Other resource types
// (BROKER_LOGGER, CLIENT_METRICS, GROUP) answer INVALID_REQUEST.

import (
	"fmt"
	"sort"
	"strconv"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.DescribeConfigs, 1, 4, (*Broker).handleDescribeConfigs) }

// kafkaDefaults is the configuration of a broker whose server.properties
// sets nothing; a broker value differing from it was set statically.
var kafkaDefaults = DefaultConfig()

// configEntry is one described config, independent of the response type
// that carries it (DescribeConfigs, CreateTopics v5+).
type configEntry struct {
	name     string
	value    string
	source   kmsg.ConfigSource
	readOnly bool
	typ      int8
	doc      string
	synonyms []configSynonym // most to least specific; synonyms[0] is in effect
}

type configSynonym struct {
	name   string
	value  string
	source kmsg.ConfigSource
}

// brokerConfig is a broker-level key reported for BROKER resources.
type brokerConfig struct {
	name string
	typ  int8
	get  func(c *Config) string
	doc  string
}

// brokerOnlyConfigs are the broker keys that are not the broker-level
// synonym of a topic key (those come from topicKeys).
var brokerOnlyConfigs = []brokerConfig{
	{"node.id", cfgInt, func(c *Config) string { return itoa(int64(c.NodeID)) }, "id of this node"},
	{"broker.id", cfgInt, func(c *Config) string { return itoa(int64(c.NodeID)) }, "id of this broker (same as node.id)"},
	{"listeners", cfgString, func(c *Config) string { return "PLAINTEXT://" + c.Listen }, "address the broker listens on"},
	{"advertised.listeners", cfgString, func(c *Config) string { return listenerOrEmpty(c.Advertise) }, "address clients are told to connect to; listeners when unset"},
	{"log.dirs", cfgString, func(c *Config) string { return c.DataDir }, "data directory"},
	{"num.partitions", cfgInt, func(c *Config) string { return itoa(int64(c.NumPartitions)) }, "partitions of auto-created topics and of CreateTopics without a count"},
	{"default.replication.factor", cfgInt, constant("1"), "replication factor of new topics; a single node keeps one replica"},
	{"auto.create.topics.enable", cfgBoolean, func(c *Config) string { return strconv.FormatBool(c.AutoCreateTopics) }, "create unknown topics asked for in Metadata"},
	{"delete.topic.enable", cfgBoolean, func(c *Config) string { return strconv.FormatBool(c.DeleteTopicEnable) }, "allow DeleteTopics"},
	{"socket.request.max.bytes", cfgInt, func(c *Config) string { return itoa(int64(c.SocketRequestMaxBytes)) }, "largest request accepted"},
	{"connections.max.idle.ms", cfgLong, func(c *Config) string { return itoa(c.ConnectionsMaxIdle.Milliseconds()) }, "idle connections are closed after this"},
	{"log.retention.check.interval.ms", cfgLong, func(c *Config) string { return itoa(c.RetentionCheckInterval.Milliseconds()) }, "how often retention runs"},
	{"group.initial.rebalance.delay.ms", cfgInt, func(c *Config) string { return itoa(c.GroupInitialRebalanceDelay.Milliseconds()) }, "wait for more members before the first rebalance of an empty group"},
	{"group.min.session.timeout.ms", cfgInt, func(c *Config) string { return itoa(c.GroupMinSessionTimeout.Milliseconds()) }, "smallest session timeout a member may ask for"},
	{"group.max.session.timeout.ms", cfgInt, func(c *Config) string { return itoa(c.GroupMaxSessionTimeout.Milliseconds()) }, "largest session timeout a member may ask for"},
	{"group.max.size", cfgInt, func(c *Config) string { return itoa(int64(c.GroupMaxSize)) }, "most members a group may have"},
	{"offsets.topic.num.partitions", cfgInt, func(c *Config) string { return itoa(int64(c.OffsetsTopicPartitions)) }, "partitions of __consumer_offsets"},
	{"offsets.topic.replication.factor", cfgInt, constant("1"), "replication factor of __consumer_offsets"},
	{"offsets.topic.segment.bytes", cfgInt, func(c *Config) string { return itoa(c.OffsetsTopicSegmentBytes) }, "segment size of __consumer_offsets"},
	{"offsets.retention.minutes", cfgInt, func(c *Config) string { return itoa(int64(c.OffsetsRetention.Minutes())) }, "how long committed offsets of empty groups are kept"},
	{"max.incremental.fetch.session.cache.slots", cfgInt, func(c *Config) string { return itoa(int64(c.MaxIncrementalFetchSessions)) }, "most incremental fetch sessions kept"},
}

func listenerOrEmpty(addr string) string {
	if addr == "" {
		return ""
	}
	return "PLAINTEXT://" + addr
}

// brokerConfigs indexes every reported broker key by name, with the names
// sorted so BROKER answers come in a stable order. It is built on first use
// because it reads topicKeys, which another file's init fills.
var brokerConfigs = sync.OnceValues(func() (map[string]*brokerConfig, []string) {
	byName := map[string]*brokerConfig{}
	for i := range brokerOnlyConfigs {
		c := &brokerOnlyConfigs[i]
		byName[c.name] = c
	}
	for _, name := range topicKeyNames {
		k := topicKeys[name]
		if k.brokerName != "" && byName[k.brokerName] == nil {
			byName[k.brokerName] = &brokerConfig{name: k.brokerName, typ: k.typ, get: k.def, doc: k.doc}
		}
	}
	names := make([]string, 0, len(byName))
	for name := range byName {
		names = append(names, name)
	}
	sort.Strings(names)
	return byName, names
})

func (b *Broker) handleDescribeConfigs(r *Request) {
	req := r.Msg.(*kmsg.DescribeConfigsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for i := range req.Resources {
		rr := &req.Resources[i]
		sr := kmsg.NewDescribeConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		entries, err := b.describeResource(rr)
		if err != nil {
			sr.ErrorCode = ErrorCode(err)
			sr.ErrorMessage = stringPtr(err.Error())
		}
		sr.Configs = make([]kmsg.DescribeConfigsResponseResourceConfig, 0, len(entries))
		for j := range entries {
			sr.Configs = append(sr.Configs, describedConfig(&entries[j], req))
		}
		resp.Resources = append(resp.Resources, sr)
	}
	r.Respond(resp)
}

func (b *Broker) describeResource(rr *kmsg.DescribeConfigsRequestResource) ([]configEntry, error) {
	keep := wantedKeys(rr.ConfigNames)
	switch rr.ResourceType {
	case kmsg.ConfigResourceTypeTopic:
		t, err := b.configTopic(rr.ResourceName)
		if err != nil {
			return nil, err
		}
		return b.topicConfigEntries(t.Overrides(), keep), nil
	case kmsg.ConfigResourceTypeBroker:
		self, err := b.configBroker(rr.ResourceName)
		if err != nil || !self {
			return nil, err
		}
		return b.brokerConfigEntries(keep), nil
	}
	return nil, unsupportedResource(rr.ResourceType)
}

// configTopic finds the topic a config request names.
func (b *Broker) configTopic(name string) (*Topic, error) {
	if err := ValidTopicName(name); err != nil {
		return nil, topicErr(kerr.InvalidTopicException, "%v", err)
	}
	t := b.Topic(name)
	if t == nil {
		return nil, topicErr(kerr.UnknownTopicOrPartition, "Topic '%s' does not exist.", name)
	}
	return t, nil
}

// configBroker checks a BROKER resource name: this node's id (self) or ""
// (the cluster-wide dynamic defaults, of which Sluice has none).
func (b *Broker) configBroker(name string) (self bool, err error) {
	if name == "" {
		return false, nil
	}
	id, perr := strconv.ParseInt(name, 10, 32)
	if perr != nil {
		return false, topicErr(kerr.InvalidRequest, "Broker id must be an integer, but it is: %s", name)
	}
	if int32(id) != b.cfg.NodeID {
		return false, topicErr(kerr.InvalidRequest, "Unexpected broker id, expected %d or empty string, but received %s", b.cfg.NodeID, name)
	}
	return true, nil
}

func unsupportedResource(t kmsg.ConfigResourceType) error {
	return topicErr(kerr.InvalidRequest, "Unsupported resource type: %s", t)
}

// wantedKeys turns a request's key list into a filter; nil keeps all.
func wantedKeys(names []string) map[string]bool {
	if len(names) == 0 {
		return nil
	}
	keep := make(map[string]bool, len(names))
	for _, n := range names {
		keep[n] = true
	}
	return keep
}

// topicConfigEntries describes a topic with the given overrides, every
// topic key (or those in keep).
func (b *Broker) topicConfigEntries(overrides map[string]string, keep map[string]bool) []configEntry {
	out := make([]configEntry, 0, len(topicKeyNames))
	for _, name := range topicKeyNames {
		if keep != nil && !keep[name] {
			continue
		}
		k := topicKeys[name]
		e := configEntry{name: name, typ: k.typ, doc: k.doc}
		if v, ok := overrides[name]; ok {
			e.synonyms = append(e.synonyms, configSynonym{name, v, kmsg.ConfigSourceDynamicTopicConfig})
		}
		brokerName := k.brokerName
		if brokerName == "" {
			brokerName = name
		}
		e.synonyms = append(e.synonyms, b.brokerSynonyms(brokerName, k.def)...)
		e.value, e.source = e.synonyms[0].value, e.synonyms[0].source
		out = append(out, e)
	}
	return out
}

// brokerConfigEntries describes this broker's keys (or those in keep).
func (b *Broker) brokerConfigEntries(keep map[string]bool) []configEntry {
	byName, names := brokerConfigs()
	out := make([]configEntry, 0, len(names))
	for _, name := range names {
		if keep != nil && !keep[name] {
			continue
		}
		c := byName[name]
		e := configEntry{name: name, typ: c.typ, doc: c.doc, readOnly: true}
		e.synonyms = b.brokerSynonyms(name, c.get)
		e.value, e.source = e.synonyms[0].value, e.synonyms[0].source
		out = append(out, e)
	}
	return out
}

// brokerSynonyms lists a broker key's values: the one set in
// server.properties if it differs from the built-in default, then the
// default.
func (b *Broker) brokerSynonyms(name string, get func(*Config) string) []configSynonym {
	def := get(&kafkaDefaults)
	if v := get(&b.cfg); v != def {
		return []configSynonym{{name, v, kmsg.ConfigSourceStaticBrokerConfig}, {name, def, kmsg.ConfigSourceDefaultConfig}}
	}
	return []configSynonym{{name, def, kmsg.ConfigSourceDefaultConfig}}
}

// describedConfig converts an entry to the DescribeConfigs wire form.
func describedConfig(e *configEntry, req *kmsg.DescribeConfigsRequest) kmsg.DescribeConfigsResponseResourceConfig {
	c := kmsg.NewDescribeConfigsResponseResourceConfig()
	c.Name = e.name
	c.Value = nullIfEmpty(e.value)
	c.ReadOnly = e.readOnly
	c.IsDefault = e.source == kmsg.ConfigSourceDefaultConfig
	c.Source = e.source
	c.ConfigType = kmsg.ConfigType(e.typ)
	if req.IncludeDocumentation {
		c.Documentation = stringPtr(e.doc)
	}
	if req.IncludeSynonyms {
		c.ConfigSynonyms = make([]kmsg.DescribeConfigsResponseResourceConfigConfigSynonym, 0, len(e.synonyms))
		for _, s := range e.synonyms {
			syn := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
			syn.Name, syn.Value, syn.Source = s.name, nullIfEmpty(s.value), s.source
			c.ConfigSynonyms = append(c.ConfigSynonyms, syn)
		}
	}
	return c
}

func stringPtr(s string) *string { return &s }

// nullIfEmpty reports an unset value ("") as null, as Kafka does.
func nullIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// configErr is an INVALID_CONFIG error with Kafka's wording.
func configErr(format string, args ...any) error {
	return &TopicError{Code: kerr.InvalidConfig, Msg: fmt.Sprintf(format, args...)}
}
