package engine

// Dynamic broker configs (Kafka's KIP-226), kept in the metadata image as
// ConfigRecords of BROKER resources: "" is the cluster-wide default, "<id>"
// one broker. Every broker applies them from its image, so a change made
// through any broker (forwarded to the controller in a cluster) reaches
// all of them, and they survive restarts with the metadata log.
//
// A broker's effective config is, per key, the first of: its own dynamic
// value, the cluster-wide dynamic default, server.properties (b.cfg), the
// built-in default — Kafka's precedence. Within one level the most
// specific spelling wins (log.retention.ms > minutes > hours). The
// effective config is recomputed when either map changes in the image
// (applyBrokerConfigs, at every image change), and every hosted topic's
// settings are resolved again from it, so that retention, segment size,
// message.max.bytes, compression.type, min.insync.replicas, the cleaner's
// topic defaults and the rest take effect at run time for topics without
// their own override.
//
// Only keys whose scope (configkeys.go) is dynamic in Kafka are accepted,
// per-broker-only keys only on a named broker, and keys Sluice cannot
// change at run time (restartOnly) are refused like read-only ones.
//
// The replica fetcher reads the throttle rates through
// Broker.ReplicationThrottles; the controller reads
// unclean.leader.election.enable from the image itself.

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/metadata"
)

// brokerConfigs is one generation of a broker's dynamic configs and the
// effective config they lead to. Immutable once published.
type brokerConfigs struct {
	// clusterDefault and own are the image's maps of the BROKER resources
	// "" and "<node.id>" (nil when unset); never modified.
	clusterDefault, own map[string]string
	// eff is b.cfg with clusterDefault, then own, applied.
	eff Config
}

// currentConfig returns the broker's effective config: server.properties
// overlaid with its dynamic configs. Do not modify it.
func (b *Broker) currentConfig() *Config {
	if d := b.dynamic.Load(); d != nil {
		return &d.eff
	}
	return &b.cfg
}

// ReplicationThrottles returns the leader and follower replication
// throttles in bytes/s (leader.replication.throttled.rate and
// follower.replication.throttled.rate; math.MaxInt64 means none): the
// dynamic value of this broker, else the cluster-wide default, else
// server.properties. Cheap enough to read on every fetch (one atomic
// load).
func (b *Broker) ReplicationThrottles() (leader, follower int64) {
	c := b.currentConfig()
	return c.LeaderReplicationThrottledRate, c.FollowerReplicationThrottledRate
}

// CurrentConfig returns a copy of the effective config (tests, tools).
func (b *Broker) CurrentConfig() Config { return *b.currentConfig() }

func brokerResource(name string) metadata.ConfigResource {
	return metadata.ConfigResource{Type: metadata.ResourceBroker, Name: name}
}

func (b *Broker) ownResource() metadata.ConfigResource {
	return brokerResource(strconv.Itoa(int(b.cfg.NodeID)))
}

// applyBrokerConfigs publishes the effective config img's dynamic broker
// configs lead to, when they changed. The caller holds meta.mu.
func (b *Broker) applyBrokerConfigs(img metadata.Image) {
	def, own := img.Configs(brokerResource("")), img.Configs(b.ownResource())
	if cur := b.dynamic.Load(); cur != nil && maps.Equal(cur.clusterDefault, def) && maps.Equal(cur.own, own) {
		return
	}
	next := &brokerConfigs{clusterDefault: def, own: own, eff: b.cfg}
	for _, level := range []map[string]string{def, own} {
		if err := next.eff.applyDynamic(level); err != nil {
			b.log.Warn("dynamic broker config not applied", "err", err)
		}
	}
	b.dynamic.Store(next)
	if len(def) > 0 || len(own) > 0 {
		b.log.Info("dynamic broker configs", "cluster_default", def, "broker", own)
	}
}

// applyDynamic applies one level of dynamic configs to c, each row's most
// specific spelling. Keys that cannot change at run time are skipped
// whatever the image holds (node.id stays node.id). A value this broker's
// table refuses (written by a broker of another version) leaves the key
// as it was and is reported.
func (c *Config) applyDynamic(kv map[string]string) error {
	var bad []string
	for i := range configKeys {
		k := &configKeys[i]
		name, v, ok := k.mostSpecific(kv)
		if !ok || k.readOnly() {
			continue
		}
		v, err := brokerKeys[name].inKeyUnits(v)
		if err == nil {
			err = k.apply(c, v)
		}
		if err != nil {
			bad = append(bad, name+": "+err.Error())
		}
	}
	if len(bad) > 0 {
		return topicErr(kerr.InvalidConfig, "%s", strings.Join(bad, "; "))
	}
	return nil
}

// mostSpecific finds k's most specific spelling set in kv.
func (k *configKey) mostSpecific(kv map[string]string) (name, value string, ok bool) {
	if v, ok := kv[k.name]; ok {
		return k.name, v, true
	}
	for _, a := range k.aliases {
		if v, ok := kv[a.name]; ok {
			return a.name, v, true
		}
	}
	return "", "", false
}

// levelSynonyms lists the spellings of k set in one dynamic level, most
// specific first.
func levelSynonyms(k *configKey, kv map[string]string, source kmsg.ConfigSource) []configSynonym {
	var out []configSynonym
	if v, ok := kv[k.name]; ok {
		out = append(out, configSynonym{k.name, v, source})
	}
	for _, a := range k.aliases {
		if v, ok := kv[a.name]; ok && !a.same {
			out = append(out, configSynonym{a.name, v, source})
		}
	}
	return out
}

// ValidateBrokerConfigs checks the dynamic configs a BROKER resource would
// have (named: a named broker, else the cluster-wide default), with
// Kafka's answers: an unknown key is INVALID_CONFIG; a key that cannot
// change at run time, a per-broker key at the cluster level and a bad
// value are INVALID_REQUEST (Kafka's DynamicBrokerConfig.validate, whose
// ConfigException the broker turns into INVALID_REQUEST). A key Kafka
// changes at run time and Sluice does not (restartOnly) is refused the
// same way.
func ValidateBrokerConfigs(kv map[string]string, named bool) error {
	names := slices.Sorted(maps.Keys(kv))
	var readOnly, notDefault, restartOnly []string
	for _, name := range names {
		ref, ok := brokerKeys[name]
		switch {
		case !ok:
			return configErr("Unknown broker config: %s", name)
		case ref.key.scope == static || ref.key.use == useIgnored || ref.alias != nil && ref.alias.same:
			readOnly = append(readOnly, name)
		case ref.key.scope == perBroker && !named:
			notDefault = append(notDefault, name)
		case ref.key.restartOnly:
			restartOnly = append(restartOnly, name)
		}
	}
	switch {
	case len(readOnly) > 0:
		return topicErr(kerr.InvalidRequest, "Cannot update these configs dynamically: Set(%s)", strings.Join(readOnly, ", "))
	case len(notDefault) > 0:
		return topicErr(kerr.InvalidRequest, "Cannot update these configs at default cluster level, broker id must be specified: Set(%s)", strings.Join(notDefault, ", "))
	case len(restartOnly) > 0:
		return topicErr(kerr.InvalidRequest, "Cannot update these configs dynamically: Set(%s) (Sluice changes them at restart only)", strings.Join(restartOnly, ", "))
	}
	for _, name := range names {
		if _, err := brokerKeys[name].inKeyUnits(kv[name]); err != nil {
			return topicErr(kerr.InvalidRequest, "Invalid value %s for configuration %s: %v", kv[name], name, err)
		}
	}
	return nil
}

// ValidateResourceConfigs checks the configs a resource of any type would
// have after an alteration, against the config table and c (for the
// group protocols' bounds). The controller runs it before committing
// (ConfigValidator).
func (c *Config) ValidateResourceConfigs(res metadata.ConfigResource, kv map[string]string) error {
	for name, v := range kv {
		if len(v) > metadata.MaxStringLen {
			return configErr("value of %s longer than %d bytes", name, metadata.MaxStringLen)
		}
	}
	switch res.Type {
	case metadata.ResourceTopic:
		for _, name := range slices.Sorted(maps.Keys(kv)) {
			if err := ValidateTopicConfig(name, kv[name]); err != nil {
				return configErr("%v", err)
			}
		}
		return nil
	case metadata.ResourceBroker:
		return ValidateBrokerConfigs(kv, res.Name != "")
	case metadata.ResourceGroup:
		return c.ValidateGroupConfigs(kv)
	}
	return topicErr(kerr.InvalidRequest, "Unsupported resource type: %d", res.Type)
}

// ConfigValidator adapts ValidateResourceConfigs to the controller's hook
// (controller.ServiceConfig.ValidateConfigs), which cannot import the
// engine.
func ConfigValidator(cfg Config) func(metadata.ConfigResource, map[string]string) (*kerr.Error, string) {
	return func(res metadata.ConfigResource, kv map[string]string) (*kerr.Error, string) {
		err := cfg.ValidateResourceConfigs(res, kv)
		if err == nil {
			return nil, ""
		}
		return kerr.ErrorForCode(ErrorCode(err)).(*kerr.Error), err.Error()
	}
}

// dynamicResource checks the name of a BROKER or GROUP resource an
// alteration names. A named broker must be this one, as in Kafka (clients
// send a broker's configs to that broker).
func (b *Broker) dynamicResource(typ kmsg.ConfigResourceType, name string) (metadata.ConfigResource, error) {
	if typ == kmsg.ConfigResourceTypeGroupConfig {
		return groupResource(name)
	}
	if name == "" {
		return brokerResource(""), nil
	}
	id, err := strconv.ParseInt(name, 10, 32)
	if err != nil {
		return metadata.ConfigResource{}, topicErr(kerr.InvalidRequest, "Node id must be an integer, but it is: %s", name)
	}
	if int32(id) != b.cfg.NodeID {
		return metadata.ConfigResource{}, topicErr(kerr.InvalidRequest, "Unexpected broker id, expected %d, but received %s", b.cfg.NodeID, name)
	}
	return b.ownResource(), nil
}

// alterDynamic alters a BROKER or GROUP resource: next turns its current
// configs (a copy) into the wanted ones, which are validated as a whole,
// then committed (unless validateOnly) to the metadata: locally on a
// single node, through the controller in a cluster.
func (b *Broker) alterDynamic(typ kmsg.ConfigResourceType, name string, validateOnly bool, next func(cur map[string]string) (map[string]string, error)) error {
	res, err := b.dynamicResource(typ, name)
	if err != nil {
		return err
	}
	configAlterMu.Lock()
	defer configAlterMu.Unlock()
	cur := maps.Clone(b.image().Configs(res))
	if cur == nil {
		cur = map[string]string{}
	}
	want, err := next(cur)
	if err == nil {
		err = b.currentConfig().ValidateResourceConfigs(res, want)
	}
	if err != nil || validateOnly {
		return err
	}
	return b.commitConfigs(res, want)
}

// commitConfigs makes want the resource's configs in the metadata.
func (b *Broker) commitConfigs(res metadata.ConfigResource, want map[string]string) error {
	if b.cluster != nil {
		return b.cluster.forwardConfigs(res, resourceConfigChanges(res, b.image().Configs(res), want), want)
	}
	b.meta.mu.Lock()
	defer b.meta.mu.Unlock()
	if err := b.commitLocked(resourceConfigChanges(res, b.image().Configs(res), want)...); err != nil {
		return err
	}
	b.log.Info("altered configs", "resource", res.Type, "name", res.Name, "configs", want)
	return nil
}

// resourceConfigChanges returns the records that turn a resource's
// configs from old into new: deletions first, then sets, each in key
// order.
func resourceConfigChanges(res metadata.ConfigResource, old, new map[string]string) []metadata.Record {
	var recs []metadata.Record
	for _, k := range slices.Sorted(maps.Keys(old)) {
		if _, ok := new[k]; !ok {
			recs = append(recs, metadata.ConfigRecord{ResourceType: res.Type, ResourceName: res.Name, Name: k})
		}
	}
	for _, k := range slices.Sorted(maps.Keys(new)) {
		if v, ok := old[k]; !ok || v != new[k] {
			v := new[k]
			recs = append(recs, metadata.ConfigRecord{ResourceType: res.Type, ResourceName: res.Name, Name: k, Value: &v})
		}
	}
	return recs
}

// defaultBrokerEntries describes the cluster-wide default resource: the
// keys set there, as Kafka answers it.
func (b *Broker) defaultBrokerEntries(keep map[string]bool) []configEntry {
	set := b.image().Configs(brokerResource(""))
	out := make([]configEntry, 0, len(set))
	for _, name := range slices.Sorted(maps.Keys(set)) {
		ref, ok := brokerKeys[name]
		if !ok || keep != nil && !keep[name] {
			continue
		}
		s := configSynonym{name, set[name], kmsg.ConfigSourceDynamicDefaultBrokerConfig}
		out = append(out, configEntry{name: name, value: s.value, source: s.source, typ: ref.key.typ, doc: ref.key.doc,
			sensitive: ref.key.sensitive(), synonyms: []configSynonym{s}})
	}
	return out
}

// valueInKeyUnits is a synonym's value in its key's units (a
// log.retention.hours synonym of 1 is 3600000 for log.retention.ms).
func valueInKeyUnits(s configSynonym) string {
	ref, ok := brokerKeys[s.name]
	if !ok || ref.alias == nil {
		return s.value
	}
	if v, err := ref.inKeyUnits(s.value); err == nil {
		return v
	}
	return s.value
}
