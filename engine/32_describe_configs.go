package engine

// DescribeConfigs (key 32), versions 1-4.
//
// Every resource kind is answered from the config table (configkeys.go),
// each key once. TOPIC resources report every topic-level key with its
// effective value and source: DYNAMIC_TOPIC_CONFIG for the topic's own
// overrides, else the broker-level synonym's (below), else
// DEFAULT_CONFIG; never read-only. BROKER resources named by this node's
// id report every broker key Sluice runs with (the table's rows but the
// ignored ones, and broker.id beside node.id) with Kafka's precedence
// (dynconfig.go): DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG,
// STATIC_BROKER_CONFIG, DEFAULT_CONFIG; read-only unless Sluice changes
// the key at run time. The empty name (the cluster-wide default) reports
// the keys set there, as Kafka does. GROUP resources (groupconfig.go)
// report every group key: GROUP_CONFIG when the group sets it, else its
// broker key's value. Password-typed keys are sensitive: their values are
// reported as null.
//
// Whether a broker key was set statically is decided by comparing it with
// the built-in default: a key set in server.properties to the default value
// is reported as DEFAULT_CONFIG. Kafka lists one synonym per spelling of a
// broker key (log.retention.ms/minutes/hours); Sluice lists the dynamic
// spellings set and the static value under the key's name. Synonyms are
// returned with IncludeSynonyms, types always (v3+), documentation with
// IncludeDocumentation. A null or empty key list means every key; unknown
// keys are left out, as Kafka does. BROKER_LOGGER and CLIENT_METRICS
// answer INVALID_REQUEST.

import (
	"fmt"
	"sort"
	"strconv"

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
	name      string
	value     string
	source    kmsg.ConfigSource
	readOnly  bool
	sensitive bool // the value is withheld (null), as Kafka does for passwords
	typ       kmsg.ConfigType
	doc       string
	synonyms  []configSynonym // most to least specific; synonyms[0] is in effect
}

type configSynonym struct {
	name   string
	value  string
	source kmsg.ConfigSource
}

// describedBrokerKey is a name reported for BROKER resources: a table row,
// or a second name of one (broker.id).
type describedBrokerKey struct {
	key *configKey
	doc string
}

// describedBrokerKeys indexes the names BROKER resources report;
// brokerKeyNames lists them sorted, so answers come in a stable order.
var describedBrokerKeys, brokerKeyNames = indexDescribedBrokerKeys()

func indexDescribedBrokerKeys() (map[string]describedBrokerKey, []string) {
	byName := map[string]describedBrokerKey{}
	for i := range configKeys {
		k := &configKeys[i]
		if !k.described() {
			continue
		}
		byName[k.name] = describedBrokerKey{k, k.doc}
		for _, a := range k.aliases {
			if a.same {
				byName[a.name] = describedBrokerKey{k, "same as " + k.name}
			}
		}
	}
	names := make([]string, 0, len(byName))
	for name := range byName {
		names = append(names, name)
	}
	sort.Strings(names)
	return byName, names
}

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
		if err != nil {
			return nil, err
		}
		if !self {
			return b.defaultBrokerEntries(keep), nil
		}
		return b.brokerConfigEntries(keep), nil
	case kmsg.ConfigResourceTypeGroupConfig:
		return b.describeGroup(rr.ResourceName, keep)
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
// (the cluster-wide dynamic defaults).
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
		e := configEntry{name: name, typ: k.typ, doc: k.doc, sensitive: k.sensitive()}
		if v, ok := overrides[name]; ok {
			e.synonyms = append(e.synonyms, configSynonym{name, v, kmsg.ConfigSourceDynamicTopicConfig})
		}
		e.synonyms = append(e.synonyms, b.brokerSynonyms(k.name, k)...)
		e.value, e.source = valueInKeyUnits(e.synonyms[0]), e.synonyms[0].source
		out = append(out, e)
	}
	return out
}

// brokerConfigEntries describes this broker's keys (or those in keep).
func (b *Broker) brokerConfigEntries(keep map[string]bool) []configEntry {
	out := make([]configEntry, 0, len(brokerKeyNames))
	for _, name := range brokerKeyNames {
		if keep != nil && !keep[name] {
			continue
		}
		d := describedBrokerKeys[name]
		k := d.key
		e := configEntry{name: name, typ: k.typ, doc: d.doc, readOnly: k.readOnly(), sensitive: k.sensitive()}
		e.synonyms = b.brokerSynonyms(name, k)
		e.value, e.source = valueInKeyUnits(e.synonyms[0]), e.synonyms[0].source
		out = append(out, e)
	}
	return out
}

// brokerSynonyms lists the values of broker key k, most specific first:
// the spellings set dynamically for this broker, then for the cluster,
// then the value set in server.properties (under name) if it differs from
// the built-in default, then the default.
func (b *Broker) brokerSynonyms(name string, k *configKey) []configSynonym {
	var out []configSynonym
	if d := b.dynamic.Load(); d != nil {
		out = append(out, levelSynonyms(k, d.own, kmsg.ConfigSourceDynamicBrokerConfig)...)
		out = append(out, levelSynonyms(k, d.clusterDefault, kmsg.ConfigSourceDynamicDefaultBrokerConfig)...)
	}
	def := k.value(&kafkaDefaults)
	if v := k.value(&b.cfg); v != def {
		out = append(out, configSynonym{name, v, kmsg.ConfigSourceStaticBrokerConfig})
	}
	return append(out, configSynonym{name, def, kmsg.ConfigSourceDefaultConfig})
}

// describedConfig converts an entry to the DescribeConfigs wire form.
func describedConfig(e *configEntry, req *kmsg.DescribeConfigsRequest) kmsg.DescribeConfigsResponseResourceConfig {
	c := kmsg.NewDescribeConfigsResponseResourceConfig()
	c.Name = e.name
	c.Value = e.wireValue(e.value)
	c.ReadOnly = e.readOnly
	c.IsSensitive = e.sensitive
	c.IsDefault = e.source == kmsg.ConfigSourceDefaultConfig
	c.Source = e.source
	c.ConfigType = e.typ
	if req.IncludeDocumentation {
		c.Documentation = stringPtr(e.doc)
	}
	if req.IncludeSynonyms {
		c.ConfigSynonyms = make([]kmsg.DescribeConfigsResponseResourceConfigConfigSynonym, 0, len(e.synonyms))
		for _, s := range e.synonyms {
			syn := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
			syn.Name, syn.Value, syn.Source = s.name, e.wireValue(s.value), s.source
			c.ConfigSynonyms = append(c.ConfigSynonyms, syn)
		}
	}
	return c
}

// wireValue is v as described: null when unset or sensitive.
func (e *configEntry) wireValue(v string) *string {
	if e.sensitive {
		return nil
	}
	return nullIfEmpty(v)
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
