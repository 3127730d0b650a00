package controller

// Config changes of every resource type (TOPIC, BROKER, GROUP), forwarded
// by brokers as IncrementalAlterConfigs of SETs and DELETEs and committed
// as ConfigRecords. The broker that forwards a change has checked it
// against its config table; the controller checks it again, with the
// table of its own node (ServiceConfig.ValidateConfigs), on the configs
// the resource would have, so that no broker can commit what the
// controller refuses.

import (
	"maps"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/metadata"
)

// ConfigValidator checks the configs a resource would have after a
// change: nil, or the error code and message to answer with. The engine
// provides it (engine.ConfigValidator): the config table lives there, and
// the controller does not import the engine.
type ConfigValidator func(res metadata.ConfigResource, configs map[string]string) (*kerr.Error, string)

// alterConfigs commits config changes, one resource at a time.
func (cs *connState) alterConfigs(req *kmsg.IncrementalAlterConfigsRequest) kmsg.Response {
	resp := kmsg.NewPtrIncrementalAlterConfigsResponse()
	for i := range req.Resources {
		res := &req.Resources[i]
		rr := kmsg.NewIncrementalAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = res.ResourceType, res.ResourceName
		var msg string
		rr.ErrorCode = code(cs.decide(func(a *active) *kerr.Error {
			recs, err, m := configRecords(a.s.store.Image(), res, cs.s.cfg.ValidateConfigs)
			msg = m
			if err != nil || req.ValidateOnly {
				return err
			}
			return commitErr(a.commit(recs))
		}))
		if msg != "" {
			rr.ErrorMessage = &msg
		}
		resp.Resources = append(resp.Resources, rr)
	}
	return resp
}

// configRecords decides one resource's change against img: the records to
// commit, or the error (and message) to answer with.
func configRecords(img metadata.Image, res *kmsg.IncrementalAlterConfigsRequestResource, validate ConfigValidator) ([]metadata.Record, *kerr.Error, string) {
	cr := metadata.ConfigResource{Type: metadata.ResourceType(res.ResourceType), Name: res.ResourceName}
	if err, msg := checkConfigResource(img, cr); err != nil {
		return nil, err, msg
	}
	next := maps.Clone(img.Configs(cr))
	if next == nil {
		next = map[string]string{}
	}
	var recs []metadata.Record
	for _, c := range res.Configs {
		r := metadata.ConfigRecord{ResourceType: cr.Type, ResourceName: cr.Name, Name: c.Name}
		switch {
		case c.Op == kmsg.IncrementalAlterConfigOpSet && c.Value != nil:
			r.Value = c.Value
			next[c.Name] = *c.Value
		case c.Op == kmsg.IncrementalAlterConfigOpDelete:
			delete(next, c.Name)
		default:
			return nil, kerr.InvalidRequest, "the controller takes SET with a value and DELETE only"
		}
		recs = append(recs, r)
	}
	if validate != nil {
		if err, msg := validate(cr, next); err != nil {
			return nil, err, msg
		}
	}
	// The raft log takes whatever is proposed, and a record Apply refuses
	// (a string over the log's limit) would stop every node applying it.
	if _, err := metadata.ApplyAll(img, recs); err != nil {
		return nil, kerr.InvalidRequest, err.Error()
	}
	return recs, nil, ""
}

// checkConfigResource checks that a resource can have configs: a topic
// that exists, a broker named by a node id (or "" for the cluster-wide
// default), a group with a name.
func checkConfigResource(img metadata.Image, cr metadata.ConfigResource) (*kerr.Error, string) {
	switch cr.Type {
	case metadata.ResourceTopic:
		if img.Topic(cr.Name) == nil {
			return kerr.UnknownTopicOrPartition, "Topic '" + cr.Name + "' does not exist."
		}
	case metadata.ResourceBroker:
		if n, err := strconv.ParseInt(cr.Name, 10, 32); cr.Name != "" && (err != nil || n < 0) {
			return kerr.InvalidRequest, "Node id must be an integer, but it is: " + cr.Name
		}
	case metadata.ResourceGroup:
		if cr.Name == "" {
			return kerr.InvalidRequest, "Group name must not be empty"
		}
	default:
		return kerr.InvalidRequest, "Unsupported resource type"
	}
	return nil, ""
}

// uncleanAllowed reports whether topic may elect a leader outside its
// ISR: KRaft's lookup of unclean.leader.election.enable — the topic's
// config, else this controller's own dynamic broker config, else the
// cluster-wide one, else the static default.
func (c *Controller) uncleanAllowed(img metadata.Image, topic string) bool {
	levels := []map[string]string{img.TopicConfigs(topic)}
	if c.cfg.NodeID >= 0 {
		levels = append(levels, img.Configs(metadata.ConfigResource{Type: metadata.ResourceBroker, Name: strconv.Itoa(int(c.cfg.NodeID))}))
	}
	levels = append(levels, img.Configs(metadata.ConfigResource{Type: metadata.ResourceBroker}))
	for _, kv := range levels {
		if v, ok := kv[UncleanLeaderElectionConfig]; ok {
			on, err := strconv.ParseBool(v)
			return err == nil && on
		}
	}
	return c.cfg.UncleanLeaderElection
}
