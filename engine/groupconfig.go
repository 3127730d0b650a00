package engine

// GROUP config resources: Kafka 4's per-group configs (KIP-848, KIP-932,
// KIP-1071), stored as ConfigRecords of the group id in the metadata and
// described and altered with DescribeConfigs, AlterConfigs and
// IncrementalAlterConfigs.
//
// Each group key has a broker key that provides its default
// (consumer.session.timeout.ms ← group.consumer.session.timeout.ms), and
// most are bounded by a broker min/max pair (group.consumer.min/max.
// session.timeout.ms): a group may tune itself only within what the
// broker allows. Those broker keys are rows of the config table
// (groupBrokerKeys), read-only as in Kafka.
//
// What applies: every group key belongs to a group protocol Sluice does
// not serve yet (consumer, share, streams); classic groups ignore them, as
// in Kafka. Sluice stores, validates and describes them so that tools and
// clients that set them work, and the protocols can read them when they
// come (Broker.GroupConfigs).
//
// The group need not exist: Kafka describes and alters configs of any
// non-empty group id.

import (
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/metadata"
)

// groupBrokerSpec is an Int broker key of the group protocols.
type groupBrokerSpec struct {
	name     string
	def      string
	min, max int64
	doc      string
}

// groupBrokerSpecs are the Int broker keys GROUP configs take defaults and
// bounds from, Kafka 4.4's names, defaults and ranges; a key's index is
// its slot in Config.GroupProtocolKeys.
var groupBrokerSpecs = [...]groupBrokerSpec{
	{"group.consumer.session.timeout.ms", "45000", 1, maxInt32, "session timeout of consumer-protocol group members"},
	{"group.consumer.min.session.timeout.ms", "45000", 1, maxInt32, "smallest consumer.session.timeout.ms a group may set"},
	{"group.consumer.max.session.timeout.ms", "60000", 1, maxInt32, "largest consumer.session.timeout.ms a group may set"},
	{"group.consumer.heartbeat.interval.ms", "5000", 1, maxInt32, "heartbeat interval given to consumer-protocol group members"},
	{"group.consumer.min.heartbeat.interval.ms", "5000", 1, maxInt32, "smallest consumer.heartbeat.interval.ms a group may set"},
	{"group.consumer.max.heartbeat.interval.ms", "15000", 1, maxInt32, "largest consumer.heartbeat.interval.ms a group may set"},
	{"group.consumer.assignment.interval.ms", "1000", 0, maxInt32, "interval between assignment updates of a consumer group"},
	{"group.consumer.min.assignment.interval.ms", "0", 0, maxInt32, "smallest consumer.assignment.interval.ms a group may set"},
	{"group.consumer.max.assignment.interval.ms", "15000", 0, maxInt32, "largest consumer.assignment.interval.ms a group may set"},
	{"group.share.session.timeout.ms", "45000", 1, maxInt32, "session timeout of share group members"},
	{"group.share.min.session.timeout.ms", "45000", 1, maxInt32, "smallest share.session.timeout.ms a group may set"},
	{"group.share.max.session.timeout.ms", "60000", 1, maxInt32, "largest share.session.timeout.ms a group may set"},
	{"group.share.heartbeat.interval.ms", "5000", 1, maxInt32, "heartbeat interval given to share group members"},
	{"group.share.min.heartbeat.interval.ms", "5000", 1, maxInt32, "smallest share.heartbeat.interval.ms a group may set"},
	{"group.share.max.heartbeat.interval.ms", "15000", 1, maxInt32, "largest share.heartbeat.interval.ms a group may set"},
	{"group.share.assignment.interval.ms", "1000", 0, maxInt32, "interval between assignment updates of a share group"},
	{"group.share.min.assignment.interval.ms", "0", 0, maxInt32, "smallest share.assignment.interval.ms a group may set"},
	{"group.share.max.assignment.interval.ms", "15000", 0, maxInt32, "largest share.assignment.interval.ms a group may set"},
	{"group.share.record.lock.duration.ms", "30000", 1000, 3600000, "record acquisition lock duration of share groups"},
	{"group.share.min.record.lock.duration.ms", "15000", 1000, 30000, "smallest share.record.lock.duration.ms a group may set"},
	{"group.share.max.record.lock.duration.ms", "60000", 30000, 3600000, "largest share.record.lock.duration.ms a group may set"},
	{"group.share.delivery.count.limit", "5", 2, 10, "delivery attempts of a record to a share group"},
	{"group.share.min.delivery.count.limit", "2", 2, 5, "smallest share.delivery.count.limit a group may set"},
	{"group.share.max.delivery.count.limit", "10", 5, 25, "largest share.delivery.count.limit a group may set"},
	{"group.share.partition.max.record.locks", "2000", 100, 10000, "record locks per share-partition"},
	{"group.share.min.partition.max.record.locks", "100", 100, 2000, "smallest share.partition.max.record.locks a group may set"},
	{"group.share.max.partition.max.record.locks", "4000", 2000, 10000, "largest share.partition.max.record.locks a group may set"},
	{"group.streams.session.timeout.ms", "45000", 1, maxInt32, "session timeout of streams group members"},
	{"group.streams.min.session.timeout.ms", "45000", 1, maxInt32, "smallest streams.session.timeout.ms a group may set"},
	{"group.streams.max.session.timeout.ms", "60000", 1, maxInt32, "largest streams.session.timeout.ms a group may set"},
	{"group.streams.heartbeat.interval.ms", "5000", 1, maxInt32, "heartbeat interval given to streams group members"},
	{"group.streams.min.heartbeat.interval.ms", "5000", 1, maxInt32, "smallest streams.heartbeat.interval.ms a group may set"},
	{"group.streams.max.heartbeat.interval.ms", "15000", 1, maxInt32, "largest streams.heartbeat.interval.ms a group may set"},
	{"group.streams.assignment.interval.ms", "1000", 0, maxInt32, "interval between assignment updates of a streams group"},
	{"group.streams.min.assignment.interval.ms", "0", 0, maxInt32, "smallest streams.assignment.interval.ms a group may set"},
	{"group.streams.max.assignment.interval.ms", "15000", 0, maxInt32, "largest streams.assignment.interval.ms a group may set"},
	{"group.streams.num.standby.replicas", "0", 0, maxInt32, "standby replicas of each streams task"},
	{"group.streams.max.standby.replicas", "2", 0, maxInt32, "largest streams.num.standby.replicas a group may set"},
	{"group.streams.initial.rebalance.delay.ms", "3000", 0, maxInt32, "wait for more streams clients before a new group's first rebalance"},
}

// numGroupBrokerInts sizes Config.GroupProtocolKeys.
const numGroupBrokerInts = len(groupBrokerSpecs)

// groupBrokerKeys returns the config table's rows of the group protocols'
// broker keys: the Int ones above, and the assignor lists (Sluice runs
// with Kafka's defaults).
func groupBrokerKeys() []configKey {
	rows := make([]configKey, 0, numGroupBrokerInts+4)
	for i := range groupBrokerSpecs {
		s := &groupBrokerSpecs[i]
		rows = append(rows, configKey{name: s.name, typ: typeInt, def: s.def, min: s.min, max: s.max, doc: s.doc,
			field: func(c *Config) any { return &c.GroupProtocolKeys[i] }})
	}
	return append(rows,
		configKey{name: "group.consumer.assignors", typ: typeList, def: "uniform,range",
			oneOf: []string{"uniform", "range", consumerUniformClass, consumerRangeClass},
			doc:   "server-side assignors of consumer groups, the first the default; a member may ask for another",
			field: func(c *Config) any { return &c.GroupConsumerAssignors }},
		configKey{name: "group.consumer.migration.policy", typ: typeString, def: "bidirectional",
			oneOf: []string{"bidirectional", "upgrade", "downgrade", "disabled"},
			doc:   "online conversion of a classic group to a consumer group (upgrade) and back (downgrade)",
			field: func(c *Config) any { return &c.GroupConsumerMigrationPolicy }},
		configKey{name: "group.streams.assignors", typ: typeList, def: "sticky", use: useFixedAccepted,
			doc: "task assignors of streams groups; streams.assignor.name picks one"},
		configKey{name: "group.streams.rack.aware.assignment.tags", typ: typeList, use: useFixedAccepted,
			doc: "client tags standby tasks are spread over"})
}

// groupKey is one GROUP resource config.
type groupKey struct {
	configKey // name, type, Kafka's default, static bounds, valid values, doc
	// broker is the broker key giving the default ("" for configKey.def).
	broker string
	// lo and hi name the broker keys bounding the value ("" for none).
	lo, hi string
	// internal keys (Kafka's) are accepted and stored, not described.
	internal bool
	// extra checks what the type and bounds cannot.
	extra func(c *Config, v string) error
}

func gkey(name string, typ kmsg.ConfigType, def string, min, max int64, doc string) configKey {
	return configKey{name: name, typ: typ, def: def, min: min, max: max, doc: doc}
}

// groupKeys is Kafka 4.4's GroupConfig, by name.
var groupKeys = indexGroupKeys([]groupKey{
	{configKey: gkey("consumer.session.timeout.ms", typeInt, "45000", 1, maxInt32, "timeout to detect failed members of a consumer-protocol group"),
		broker: "group.consumer.session.timeout.ms", lo: "group.consumer.min.session.timeout.ms", hi: "group.consumer.max.session.timeout.ms"},
	{configKey: gkey("consumer.heartbeat.interval.ms", typeInt, "5000", 1, maxInt32, "heartbeat interval given to the members of a consumer group"),
		broker: "group.consumer.heartbeat.interval.ms", lo: "group.consumer.min.heartbeat.interval.ms", hi: "group.consumer.max.heartbeat.interval.ms"},
	{configKey: gkey("consumer.assignment.interval.ms", typeInt, "1000", 0, maxInt32, "interval between assignment updates of a consumer group"),
		broker: "group.consumer.assignment.interval.ms", lo: "group.consumer.min.assignment.interval.ms", hi: "group.consumer.max.assignment.interval.ms"},
	{configKey: gkey("consumer.assignor.offload.enable", typeBool, "true", 0, 0, "offload assignment to a background thread"), internal: true},
	{configKey: gkey("share.session.timeout.ms", typeInt, "45000", 1, maxInt32, "timeout to detect failed members of a share group"),
		broker: "group.share.session.timeout.ms", lo: "group.share.min.session.timeout.ms", hi: "group.share.max.session.timeout.ms"},
	{configKey: gkey("share.heartbeat.interval.ms", typeInt, "5000", 1, maxInt32, "heartbeat interval given to the members of a share group"),
		broker: "group.share.heartbeat.interval.ms", lo: "group.share.min.heartbeat.interval.ms", hi: "group.share.max.heartbeat.interval.ms"},
	{configKey: gkey("share.record.lock.duration.ms", typeInt, "30000", 1000, maxInt32, "record acquisition lock duration of a share group"),
		broker: "group.share.record.lock.duration.ms", lo: "group.share.min.record.lock.duration.ms", hi: "group.share.max.record.lock.duration.ms"},
	{configKey: gkey("share.delivery.count.limit", typeInt, "5", 2, maxInt32, "delivery attempts of a record to a share group"),
		broker: "group.share.delivery.count.limit", lo: "group.share.min.delivery.count.limit", hi: "group.share.max.delivery.count.limit"},
	{configKey: gkey("share.partition.max.record.locks", typeInt, "2000", 100, maxInt32, "record locks per share-partition"),
		broker: "group.share.partition.max.record.locks", lo: "group.share.min.partition.max.record.locks", hi: "group.share.max.partition.max.record.locks"},
	{configKey: gkey("share.auto.offset.reset", typeString, "latest", 0, 0, "where a share-partition starts: latest, earliest or by_duration:<ISO-8601 duration>"),
		extra: checkShareAutoOffsetReset},
	{configKey: configKey{name: "share.isolation.level", typ: typeString, def: "read_uncommitted", oneOf: []string{"read_committed", "read_uncommitted"},
		doc: "whether a share group reads only committed transactional records"}},
	{configKey: gkey("share.renew.acknowledge.enable", typeBool, "true", 0, 0, "whether the RENEW acknowledge type is enabled for the share group")},
	{configKey: gkey("share.assignment.interval.ms", typeInt, "1000", 0, maxInt32, "interval between assignment updates of a share group"),
		broker: "group.share.assignment.interval.ms", lo: "group.share.min.assignment.interval.ms", hi: "group.share.max.assignment.interval.ms"},
	{configKey: gkey("share.assignor.offload.enable", typeBool, "true", 0, 0, "offload assignment to a background thread"), internal: true},
	{configKey: gkey("streams.session.timeout.ms", typeInt, "45000", 1, maxInt32, "timeout to detect failed members of a streams group"),
		broker: "group.streams.session.timeout.ms", lo: "group.streams.min.session.timeout.ms", hi: "group.streams.max.session.timeout.ms"},
	{configKey: gkey("streams.heartbeat.interval.ms", typeInt, "5000", 1, maxInt32, "heartbeat interval given to the members of a streams group"),
		broker: "group.streams.heartbeat.interval.ms", lo: "group.streams.min.heartbeat.interval.ms", hi: "group.streams.max.heartbeat.interval.ms"},
	{configKey: gkey("streams.num.standby.replicas", typeInt, "0", 0, maxInt32, "standby replicas of each task"),
		broker: "group.streams.num.standby.replicas", hi: "group.streams.max.standby.replicas"},
	{configKey: gkey("streams.initial.rebalance.delay.ms", typeInt, "3000", 0, maxInt32, "wait for more streams clients before a new group's first rebalance"),
		broker: "group.streams.initial.rebalance.delay.ms"},
	{configKey: gkey("streams.assignment.interval.ms", typeInt, "1000", 0, maxInt32, "interval between assignment updates of a streams group"),
		broker: "group.streams.assignment.interval.ms", lo: "group.streams.min.assignment.interval.ms", hi: "group.streams.max.assignment.interval.ms"},
	{configKey: gkey("streams.assignor.offload.enable", typeBool, "true", 0, 0, "offload assignment to a background thread"), internal: true},
	// Kafka bounds these two by internal broker keys (15000 and 20 by
	// default); Sluice bounds them by those defaults.
	{configKey: gkey("streams.task.offset.interval.ms", typeInt, "60000", 15000, maxInt32, "how often warmup tasks' changelog offsets are reported"), internal: true},
	{configKey: gkey("streams.num.warmup.replicas", typeInt, "2", 0, 20, "most warmup task replicas"), internal: true},
	{configKey: gkey("streams.rack.aware.assignment.tags", typeList, "", 0, 0, "client tags standby tasks are spread over"),
		broker: "group.streams.rack.aware.assignment.tags"},
	{configKey: gkey("streams.acceptable.recovery.lag", typeLong, "10000", 0, maxLong, "lag under which a client may take an active task"), internal: true},
	{configKey: gkey("streams.assignor.name", typeString, "", 0, 0, "task assignor of this streams group, one of group.streams.assignors"),
		extra: checkStreamsAssignor},
	{configKey: gkey("errors.deadletterqueue.topic.name", typeString, "", 0, 0, "dead-letter queue topic of this share group; empty for none"),
		extra: checkDLQTopic},
	{configKey: gkey("errors.deadletterqueue.copy.record.enable", typeBool, "false", 0, 0, "copy the original record onto the dead-letter queue topic")},
})

func indexGroupKeys(keys []groupKey) map[string]*groupKey {
	out := make(map[string]*groupKey, len(keys))
	for i := range keys {
		out[keys[i].name] = &keys[i]
	}
	return out
}

// groupKeyNames lists the described (not internal) group keys, sorted.
var groupKeyNames = func() []string {
	var names []string
	for name, k := range groupKeys {
		if !k.internal {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}()

// ValidateGroupConfigs checks the configs a group would have, as Kafka's
// GroupConfig.validate does, against this broker's group protocol keys.
// Errors are INVALID_CONFIG with Kafka's wording.
func (c *Config) ValidateGroupConfigs(kv map[string]string) error {
	for _, name := range slices.Sorted(maps.Keys(kv)) {
		if err := c.validateGroupConfig(name, kv[name]); err != nil {
			return err
		}
	}
	return nil
}

func (c *Config) validateGroupConfig(name, v string) error {
	k := groupKeys[name]
	if k == nil {
		return configErr("Unknown group config name: %s", name)
	}
	p, err := k.parse(v)
	if err != nil {
		return configErr("Invalid value %s for configuration %s: %v", v, name, err)
	}
	lo, hasLo := c.groupBrokerInt(k.lo)
	hi, hasHi := c.groupBrokerInt(k.hi)
	switch {
	case hasLo && hasHi && (p.n < lo || p.n > hi):
		return configErr("%s must be in the range %d to %d inclusive.", name, lo, hi)
	case hasLo && p.n < lo:
		return configErr("%s must be greater than or equal to %d", name, lo)
	case hasHi && p.n > hi:
		return configErr("%s must be less than or equal to %d", name, hi)
	}
	if k.extra != nil {
		return k.extra(c, p.s)
	}
	return nil
}

// groupBrokerInt is the value of an Int broker key of the group protocols.
func (c *Config) groupBrokerInt(name string) (int64, bool) {
	if name == "" {
		return 0, false
	}
	for i := range groupBrokerSpecs {
		if groupBrokerSpecs[i].name == name {
			return c.GroupProtocolKeys[i], true
		}
	}
	panic("engine: no group broker key " + name)
}

// isoDuration is the PnDTnHnMn.nS form Java's Duration.parse reads,
// without a sign (Kafka refuses negative durations).
var isoDuration = regexp.MustCompile(`(?i)^P(\d+D)?(T(\d+H)?(\d+M)?(\d+(\.\d+)?S)?)?$`)

func checkShareAutoOffsetReset(_ *Config, v string) error {
	d, isDuration := strings.CutPrefix(v, "by_duration:")
	switch {
	case v == "latest" || v == "earliest":
		return nil
	case isDuration && isoDuration.MatchString(d) && len(d) > 1 && !strings.HasSuffix(strings.ToUpper(d), "T"):
		return nil
	}
	return configErr("Invalid value `%s` for configuration share.auto.offset.reset. The value must be either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'.", v)
}

func checkStreamsAssignor(c *Config, v string) error {
	names := splitList(brokerKeys["group.streams.assignors"].key.value(c))
	if !slices.Contains(names, v) {
		return configErr("streams.assignor.name '%s' is not a registered task assignor. Registered assignors are: [%s].", v, strings.Join(names, ", "))
	}
	return nil
}

func checkDLQTopic(_ *Config, v string) error {
	if strings.HasPrefix(v, "__") {
		return configErr("errors.deadletterqueue.topic.name: DLQ topic name must not start with '__'")
	}
	return nil
}

// groupResource checks a GROUP resource name.
func groupResource(name string) (metadata.ConfigResource, error) {
	switch {
	case name == "":
		return metadata.ConfigResource{}, topicErr(kerr.InvalidRequest, "Group name must not be empty")
	case len(name) > metadata.MaxStringLen:
		return metadata.ConfigResource{}, topicErr(kerr.InvalidRequest, "Group name longer than %d bytes", metadata.MaxStringLen)
	}
	return metadata.ConfigResource{Type: metadata.ResourceGroup, Name: name}, nil
}

// GroupConfigs returns a group's explicit configs (do not modify): what a
// group protocol reads, over the broker defaults.
func (b *Broker) GroupConfigs(group string) map[string]string {
	return b.image().Configs(metadata.ConfigResource{Type: metadata.ResourceGroup, Name: group})
}

// groupConfigEntries describes a group with the given configs: every
// described group key (or those in keep), set ones as GROUP_CONFIG, the
// others from their broker key or Kafka's default.
func (b *Broker) groupConfigEntries(set map[string]string, keep map[string]bool) []configEntry {
	out := make([]configEntry, 0, len(groupKeyNames))
	for _, name := range groupKeyNames {
		if keep != nil && !keep[name] {
			continue
		}
		k := groupKeys[name]
		e := configEntry{name: name, typ: k.typ, doc: k.doc}
		if v, ok := set[name]; ok {
			e.synonyms = append(e.synonyms, configSynonym{name, v, kmsg.ConfigSourceGroupConfig})
		}
		if bk := brokerKeys[k.broker].key; k.broker != "" {
			e.synonyms = append(e.synonyms, b.brokerSynonyms(bk.name, bk)...)
		} else {
			e.synonyms = append(e.synonyms, configSynonym{name, k.def, kmsg.ConfigSourceDefaultConfig})
		}
		e.value, e.source = e.synonyms[0].value, e.synonyms[0].source
		out = append(out, e)
	}
	return out
}

// describeGroup answers DescribeConfigs for a GROUP resource.
func (b *Broker) describeGroup(name string, keep map[string]bool) ([]configEntry, error) {
	res, err := groupResource(name)
	if err != nil {
		return nil, err
	}
	return b.groupConfigEntries(b.image().Configs(res), keep), nil
}
