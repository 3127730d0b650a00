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
// BROKER resources are refused as in AlterConfigs (no dynamic broker
// configs); BROKER_LOGGER and the other types answer INVALID_REQUEST.

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
	return b.alterResource(rr.ResourceType, rr.ResourceName, names, func() error {
		return b.alterTopicIncrementally(rr.ResourceName, rr.Configs, validateOnly)
	})
}

func (b *Broker) alterTopicIncrementally(name string, ops []kmsg.IncrementalAlterConfigsRequestResourceConfig, validateOnly bool) error {
	t, err := b.configTopic(name)
	if err != nil {
		return err
	}
	topicConfigMu.Lock()
	defer topicConfigMu.Unlock()
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

// applyConfigOp applies one operation to overrides, checking the result.
func (b *Broker) applyConfigOp(overrides map[string]string, op *kmsg.IncrementalAlterConfigsRequestResourceConfig) error {
	switch op.Op {
	case kmsg.IncrementalAlterConfigOpDelete:
		delete(overrides, op.Name)
		return nil
	case kmsg.IncrementalAlterConfigOpSet:
		if op.Value == nil {
			return topicErr(kerr.InvalidRequest, "Null value not supported for: %s", op.Name)
		}
		return setChecked(overrides, op.Name, *op.Value)
	case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
		return b.applyListOp(overrides, op)
	}
	return topicErr(kerr.InvalidRequest, "Unknown alter configs operation %d for %s", op.Op, op.Name)
}

// applyListOp appends items missing from, or subtracts items present in, a
// list-typed key.
func (b *Broker) applyListOp(overrides map[string]string, op *kmsg.IncrementalAlterConfigsRequestResourceConfig) error {
	k := topicKeys[op.Name]
	if k == nil {
		return configErr("unknown topic config %q", op.Name)
	}
	if k.typ != typeList {
		return configErr("Can't %s to key %s because its type is not LIST.", op.Op, op.Name)
	}
	if op.Value == nil {
		return topicErr(kerr.InvalidRequest, "Null value not supported for: %s", op.Name)
	}
	cur, ok := overrides[op.Name]
	if !ok {
		cur, _ = b.cfg.DefaultTopicValue(op.Name)
	}
	items := splitList(cur)
	for _, v := range splitList(*op.Value) {
		if op.Op == kmsg.IncrementalAlterConfigOpAppend && !slices.Contains(items, v) {
			items = append(items, v)
		} else if op.Op == kmsg.IncrementalAlterConfigOpSubtract {
			items = slices.DeleteFunc(items, func(s string) bool { return s == v })
		}
	}
	return setChecked(overrides, op.Name, strings.Join(items, ","))
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
