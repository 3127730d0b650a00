package engine

// IncrementalAlterConfigs (key 44), versions 0-1.
//
// For a TOPIC, each operation changes one key of the topic's overrides, in
// request order: SET puts a value, DELETE drops the override (the broker
// default returns; deleting an absent key is not an error), APPEND and
// SUBTRACT add or remove items of a list-typed key (cleanup.policy),
// starting from the override or, without one, the broker default. The
// result is checked as a whole; one bad operation fails the resource with
// INVALID_CONFIG (INVALID_REQUEST for a null SET value or an unknown
// operation) and changes nothing. A key named twice is INVALID_REQUEST.
// ValidateOnly checks and changes nothing. Changes are persisted and applied
// to the topic's logs before the response (SetTopicConfigs).
//
// BROKER and GROUP resources take the same operations on their dynamic
// configs in the metadata (dynconfig.go, groupconfig.go); APPEND and
// SUBTRACT start from the resource's value or, without one, the key's
// built-in default, as Kafka does. The result is validated as a whole as
// in AlterConfigs. BROKER_LOGGER and the other types answer
// INVALID_REQUEST.

import (
	"maps"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(kmsg.IncrementalAlterConfigs, 0, 1, (*Broker).handleIncrementalAlterConfigs)
}

func (b *Broker) handleIncrementalAlterConfigs(r *Request) {
	req := r.Msg.(*kmsg.IncrementalAlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	for i := range req.Resources {
		rr := &req.Resources[i]
		sr := kmsg.NewIncrementalAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		if err := b.incrementalAlterConfigs(rr, req.ValidateOnly); err != nil {
			sr.ErrorCode = ErrorCode(err)
			sr.ErrorMessage = stringPtr(err.Error())
		}
		resp.Resources = append(resp.Resources, sr)
	}
	r.Respond(resp)
}

func (b *Broker) incrementalAlterConfigs(rr *kmsg.IncrementalAlterConfigsRequestResource, validateOnly bool) error {
	names := make([]string, len(rr.Configs))
	for i, c := range rr.Configs {
		names[i] = c.Name
	}
	return b.alterResource(rr.ResourceType, rr.ResourceName, names, validateOnly,
		func() error { return b.alterTopicIncrementally(rr.ResourceName, rr.Configs, validateOnly) },
		func(cur map[string]string) (map[string]string, error) {
			for i := range rr.Configs {
				if err := applyOp(cur, &rr.Configs[i], dynamicListBase(rr.ResourceType)); err != nil {
					return nil, err
				}
			}
			return cur, nil
		})
}

func (b *Broker) alterTopicIncrementally(name string, ops []kmsg.IncrementalAlterConfigsRequestResourceConfig, validateOnly bool) error {
	t, err := b.configTopic(name)
	if err != nil {
		return err
	}
	configAlterMu.Lock()
	defer configAlterMu.Unlock()
	next := maps.Clone(t.Overrides())
	if next == nil {
		next = map[string]string{}
	}
	for i := range ops {
		if err := b.applyConfigOp(next, &ops[i]); err != nil {
			return err
		}
	}
	if validateOnly {
		return nil
	}
	return b.setTopicConfigs(t, next)
}

// applyConfigOp applies one operation to a topic's overrides, checking
// the result.
func (b *Broker) applyConfigOp(overrides map[string]string, op *kmsg.IncrementalAlterConfigsRequestResourceConfig) error {
	if err := applyOp(overrides, op, b.topicListBase); err != nil {
		return err
	}
	if v, ok := overrides[op.Name]; ok && op.Op != kmsg.IncrementalAlterConfigOpDelete {
		return setChecked(overrides, op.Name, v)
	}
	return nil
}

// listBase finds a list-typed key's value before an APPEND or SUBTRACT
// when the resource sets none; ok is false for a key that is unknown or
// not a list.
type listBase func(name string) (base string, known, isList bool)

// topicListBase: the topic's broker-level default.
func (b *Broker) topicListBase(name string) (string, bool, bool) {
	k := topicKeys[name]
	if k == nil {
		return "", false, false
	}
	v, _ := b.currentConfig().DefaultTopicValue(name)
	return v, true, k.typ == typeList
}

// dynamicListBase: the built-in default of a broker or group key.
func dynamicListBase(typ kmsg.ConfigResourceType) listBase {
	return func(name string) (string, bool, bool) {
		var k *configKey
		if typ == kmsg.ConfigResourceTypeGroupConfig {
			if gk := groupKeys[name]; gk != nil {
				k = &gk.configKey
			}
		} else if ref, ok := brokerKeys[name]; ok {
			k = ref.key
		}
		if k == nil {
			return "", false, false
		}
		return k.def, true, k.typ == typeList
	}
}

// applyOp applies one operation to a resource's configs; values are
// checked by the caller.
func applyOp(kv map[string]string, op *kmsg.IncrementalAlterConfigsRequestResourceConfig, base listBase) error {
	switch op.Op {
	case kmsg.IncrementalAlterConfigOpDelete:
		delete(kv, op.Name)
		return nil
	case kmsg.IncrementalAlterConfigOpSet:
		if op.Value == nil {
			return topicErr(kerr.InvalidRequest, "Null value not supported for: %s", op.Name)
		}
		kv[op.Name] = *op.Value
		return nil
	case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
		return applyListOp(kv, op, base)
	}
	return topicErr(kerr.InvalidRequest, "Unknown alter configs operation %d for %s", op.Op, op.Name)
}

// applyListOp appends items missing from, or subtracts items present in, a
// list-typed key.
func applyListOp(kv map[string]string, op *kmsg.IncrementalAlterConfigsRequestResourceConfig, base listBase) error {
	def, known, isList := base(op.Name)
	switch {
	case !known:
		return configErr("unknown config %q", op.Name)
	case !isList:
		return configErr("Can't %s to key %s because its type is not LIST.", op.Op, op.Name)
	case op.Value == nil:
		return topicErr(kerr.InvalidRequest, "Null value not supported for: %s", op.Name)
	}
	cur, ok := kv[op.Name]
	if !ok {
		cur = def
	}
	items := splitList(cur)
	for _, v := range splitList(*op.Value) {
		if op.Op == kmsg.IncrementalAlterConfigOpAppend && !slices.Contains(items, v) {
			items = append(items, v)
		} else if op.Op == kmsg.IncrementalAlterConfigOpSubtract {
			items = slices.DeleteFunc(items, func(s string) bool { return s == v })
		}
	}
	kv[op.Name] = strings.Join(items, ",")
	return nil
}

func setChecked(overrides map[string]string, name, value string) error {
	if err := ValidateTopicConfig(name, value); err != nil {
		return configErr("%v", err)
	}
	overrides[name] = value
	return nil
}

// splitList splits a list value on commas, trimming items and dropping
// empty ones.
func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}
