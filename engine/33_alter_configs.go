package engine

// AlterConfigs (key 33), versions 0-2.
//
// For a TOPIC, the request's configs replace the topic's whole set of
// overrides (keys left out return to the broker default): that is this
// legacy API's semantics, which IncrementalAlterConfigs replaced. Every
// value is checked first; one bad key or value fails the resource with
// INVALID_CONFIG and changes nothing. A key given twice is INVALID_REQUEST.
// ValidateOnly checks and changes nothing. The new set is persisted and
// applied to the topic's logs before the response (SetTopicConfigs).
//
// BROKER resources (this node id, or "" for cluster-wide defaults) have no
// dynamic configs in Sluice: broker configs come from server.properties
// only. An alteration naming any key answers INVALID_REQUEST ("Cannot update
// these configs dynamically"), which is Kafka's answer for keys that are
// not dynamic; for keys Kafka does accept dynamically (log.retention.ms,
// message.max.bytes, …) this is a deliberate difference. Other resource
// types answer INVALID_REQUEST.

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.AlterConfigs, 0, 2, (*Broker).handleAlterConfigs) }

// topicConfigMu serialises the read-modify-write of topic overrides by
// AlterConfigs and IncrementalAlterConfigs, so concurrent alterations of one
// topic cannot lose each other's keys.
var topicConfigMu sync.Mutex

func (b *Broker) handleAlterConfigs(r *Request) {
	req := r.Msg.(*kmsg.AlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	for i := range req.Resources {
		rr := &req.Resources[i]
		sr := kmsg.NewAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		if err := b.alterConfigs(rr, req.ValidateOnly); err != nil {
			sr.ErrorCode = ErrorCode(err)
			sr.ErrorMessage = stringPtr(err.Error())
		}
		resp.Resources = append(resp.Resources, sr)
	}
	r.Respond(resp)
}

func (b *Broker) alterConfigs(rr *kmsg.AlterConfigsRequestResource, validateOnly bool) error {
	names := make([]string, len(rr.Configs))
	for i, c := range rr.Configs {
		names[i] = c.Name
	}
	return b.alterResource(rr.ResourceType, rr.ResourceName, names, func() error {
		return b.replaceTopicConfigs(rr.ResourceName, rr.Configs, validateOnly)
	})
}

// alterResource applies the checks both alter APIs share (duplicate keys,
// resource type) and runs alterTopic for a topic resource.
func (b *Broker) alterResource(typ kmsg.ConfigResourceType, name string, names []string, alterTopic func() error) error {
	if hasDuplicate(names) {
		return topicErr(kerr.InvalidRequest, "Error due to duplicate config keys")
	}
	switch typ {
	case kmsg.ConfigResourceTypeTopic:
		return alterTopic()
	case kmsg.ConfigResourceTypeBroker:
		return b.alterBrokerConfigs(name, names)
	}
	return unsupportedResource(typ)
}

func (b *Broker) replaceTopicConfigs(name string, cfgs []kmsg.AlterConfigsRequestResourceConfig, validateOnly bool) error {
	t, err := b.configTopic(name)
	if err != nil {
		return err
	}
	overrides := make(map[string]string, len(cfgs))
	for _, c := range cfgs {
		if c.Value == nil {
			return configErr("Null value not supported for topic configs: %s", c.Name)
		}
		if err := ValidateTopicConfig(c.Name, *c.Value); err != nil {
			return configErr("%v", err)
		}
		overrides[c.Name] = *c.Value
	}
	if validateOnly {
		return nil
	}
	topicConfigMu.Lock()
	defer topicConfigMu.Unlock()
	return b.setTopicConfigs(t, overrides)
}

// setTopicConfigs applies new overrides, logging what changed.
func (b *Broker) setTopicConfigs(t *Topic, overrides map[string]string) error {
	if err := b.SetTopicConfigs(t, overrides); err != nil {
		return fmt.Errorf("persist configs of topic %s: %w", t.Name, err)
	}
	b.log.Info("altered topic configs", "topic", t.Name, "configs", overrides)
	return nil
}

// alterBrokerConfigs answers an alteration of broker configs: the name must
// be valid, and no key can change at runtime.
func (b *Broker) alterBrokerConfigs(name string, keys []string) error {
	if _, err := b.configBroker(name); err != nil {
		return err
	}
	if len(keys) == 0 {
		return nil
	}
	sorted := append([]string(nil), keys...)
	sort.Strings(sorted)
	return topicErr(kerr.InvalidRequest, "Cannot update these configs dynamically: %s (Sluice reads broker configs from server.properties at startup only)", strings.Join(sorted, ", "))
}

func hasDuplicate(names []string) bool {
	seen := make(map[string]bool, len(names))
	for _, n := range names {
		if seen[n] {
			return true
		}
		seen[n] = true
	}
	return false
}
