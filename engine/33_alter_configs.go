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
// BROKER resources (this node id, or "" for the cluster-wide default) and
// GROUP resources work the same way on their dynamic configs in the
// metadata (dynconfig.go, groupconfig.go): the request's set replaces the
// resource's, and is validated as a whole — for a broker, only keys Kafka
// changes at run time (INVALID_REQUEST otherwise, INVALID_CONFIG for an
// unknown key); for a group, Kafka 4's group keys within the broker's
// group.* bounds (INVALID_CONFIG). A null value is INVALID_REQUEST. In a
// cluster the change is committed by the controller, which validates it
// again. Other resource types answer INVALID_REQUEST.

import (
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.AlterConfigs, 0, 2, (*Broker).handleAlterConfigs) }

// configAlterMu serialises the read-modify-write of a resource's configs
// by AlterConfigs and IncrementalAlterConfigs, so concurrent alterations
// of one resource through this broker cannot lose each other's keys.
var configAlterMu sync.Mutex

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
	return b.alterResource(rr.ResourceType, rr.ResourceName, names, validateOnly,
		func() error { return b.replaceTopicConfigs(rr.ResourceName, rr.Configs, validateOnly) },
		func(map[string]string) (map[string]string, error) { return replacementConfigs(rr.Configs) })
}

// replacementConfigs is the set a legacy AlterConfigs gives a BROKER or
// GROUP resource.
func replacementConfigs(cfgs []kmsg.AlterConfigsRequestResourceConfig) (map[string]string, error) {
	next := make(map[string]string, len(cfgs))
	for _, c := range cfgs {
		if c.Value == nil {
			return nil, topicErr(kerr.InvalidRequest, "Null value not supported for : %s", c.Name)
		}
		next[c.Name] = *c.Value
	}
	return next, nil
}

// alterResource applies the checks both alter APIs share (duplicate keys,
// resource type) and runs alterTopic for a topic resource, or alterDynamic
// with next for a BROKER or GROUP resource.
func (b *Broker) alterResource(typ kmsg.ConfigResourceType, name string, names []string, validateOnly bool,
	alterTopic func() error, next func(cur map[string]string) (map[string]string, error)) error {
	if hasDuplicate(names) {
		return topicErr(kerr.InvalidRequest, "Error due to duplicate config keys")
	}
	switch typ {
	case kmsg.ConfigResourceTypeTopic:
		return alterTopic()
	case kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeGroupConfig:
		return b.alterDynamic(typ, name, validateOnly, next)
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
	configAlterMu.Lock()
	defer configAlterMu.Unlock()
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
