package engine

// Metadata changes of a broker in a cluster: the broker checks what it
// owns (names, configs against the config table), forwards the request to
// the active controller, which places and commits it, and answers once its
// own image has the change, so a client that asks this broker next sees
// it.

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/controller"
	"github.com/sluice-broker/sluice/metadata"
)

// imageWait bounds how long a forwarded change waits to reach this
// broker's image after the controller committed it.
const imageWait = 10 * time.Second

// forwardCreateTopic creates one topic through the controller: rt as the
// client sent it (partitions, replication factor or assignments) with the
// validated overrides.
func (l *clusterLink) forwardCreateTopic(rt kmsg.CreateTopicsRequestTopic, overrides map[string]string, validateOnly bool) (*Topic, error) {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version = 7 // topic ids in the answer
	req.ValidateOnly = validateOnly
	req.TimeoutMillis = int32(imageWait.Milliseconds())
	rt.Configs = nil
	for k, v := range overrides {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = k, kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, c)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := l.call(controller.LineAdmin, req)
	if err != nil {
		return nil, topicErr(kerr.RequestTimedOut, "no active controller answered: %v", err)
	}
	r := resp.(*kmsg.CreateTopicsResponse)
	if len(r.Topics) != 1 {
		return nil, topicErr(kerr.UnknownServerError, "controller answered %d topics", len(r.Topics))
	}
	if ec := r.Topics[0].ErrorCode; ec != 0 {
		return nil, topicErr(kerr.ErrorForCode(ec).(*kerr.Error), "controller refused topic %q: %v", rt.Topic, kerr.ErrorForCode(ec))
	}
	if validateOnly {
		return nil, nil
	}
	id := r.Topics[0].TopicID
	if !l.waitImage(func(img metadata.Image) bool { return img.TopicByID(id) != nil }) {
		return nil, topicErr(kerr.RequestTimedOut, "topic %q created but not yet in this broker's metadata", rt.Topic)
	}
	l.b.log.Info("created topic", "topic", rt.Topic, "through", "controller")
	return l.b.TopicByID(id), nil
}

func (l *clusterLink) waitImage(ok func(metadata.Image) bool) bool {
	ctx, cancel := context.WithTimeout(l.ctx, imageWait)
	defer cancel()
	return l.awaitImage(ctx, ok)
}

// forwardDeleteTopic deletes a topic through the controller.
func (l *clusterLink) forwardDeleteTopic(ti *metadata.TopicImage) error {
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.Version = 6
	t := kmsg.NewDeleteTopicsRequestTopic()
	t.TopicID = ti.ID
	req.Topics = append(req.Topics, t)
	resp, err := l.call(controller.LineAdmin, req)
	if err != nil {
		return topicErr(kerr.RequestTimedOut, "no active controller answered: %v", err)
	}
	r := resp.(*kmsg.DeleteTopicsResponse)
	if len(r.Topics) == 1 && r.Topics[0].ErrorCode != 0 {
		return topicErr(kerr.ErrorForCode(r.Topics[0].ErrorCode).(*kerr.Error), "controller refused to delete %q", ti.Name)
	}
	if !l.waitImage(func(img metadata.Image) bool { return img.TopicByID(ti.ID) == nil }) {
		return topicErr(kerr.RequestTimedOut, "topic %q deleted but still in this broker's metadata", ti.Name)
	}
	return nil
}

// forwardCreatePartitions grows a topic through the controller.
func (l *clusterLink) forwardCreatePartitions(name string, total int32, as []kmsg.CreatePartitionsRequestTopicAssignment, validateOnly bool) error {
	req := kmsg.NewPtrCreatePartitionsRequest()
	req.Version = 3
	req.ValidateOnly = validateOnly
	t := kmsg.NewCreatePartitionsRequestTopic()
	t.Topic, t.Count, t.Assignment = name, total, as
	req.Topics = append(req.Topics, t)
	resp, err := l.call(controller.LineAdmin, req)
	if err != nil {
		return topicErr(kerr.RequestTimedOut, "no active controller answered: %v", err)
	}
	r := resp.(*kmsg.CreatePartitionsResponse)
	if len(r.Topics) == 1 && r.Topics[0].ErrorCode != 0 {
		return topicErr(kerr.ErrorForCode(r.Topics[0].ErrorCode).(*kerr.Error), "controller refused partitions of %q", name)
	}
	if validateOnly {
		return nil
	}
	if !l.waitImage(func(img metadata.Image) bool {
		ti := img.Topic(name)
		return ti != nil && int32(len(ti.Partitions)) >= total
	}) {
		return topicErr(kerr.RequestTimedOut, "partitions of %q created but not yet in this broker's metadata", name)
	}
	return nil
}

// allocateProducerIDs takes a block of producer ids from the controller
// (AllocateProducerIds, key 67).
func (l *clusterLink) allocateProducerIDs(size int64) (int64, error) {
	req := kmsg.NewPtrAllocateProducerIDsRequest()
	req.BrokerID, req.BrokerEpoch = l.b.cfg.NodeID, l.epoch.Load()
	resp, err := l.call(controller.LineAdmin, req)
	if err != nil {
		return 0, err
	}
	r := resp.(*kmsg.AllocateProducerIDsResponse)
	if r.ErrorCode != 0 {
		return 0, kerr.ErrorForCode(r.ErrorCode)
	}
	if int64(r.ProducerIDLen) < size {
		return 0, kerr.UnknownServerError
	}
	return r.ProducerIDStart, nil
}

// clusterTopicRequest is the CreateTopics entry of a topic the broker
// creates itself (auto-creation, __consumer_offsets, __share_group_state): partitions and the
// configured replication factor.
func (b *Broker) clusterTopicRequest(name string, partitions int32) kmsg.CreateTopicsRequestTopic {
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, int16(b.cfg.DefaultReplicationFactor)
	if name == offsetsTopic || name == shareStateTopic || name == txnStateTopic { // Kafka: share.coordinator.state.topic.replication.factor, default 3
		live := 0
		for _, br := range b.image().Brokers() {
			if br.Eligible() {
				live++
			}
		}
		rf := b.cfg.OffsetsTopicReplicationFactor
		if name == txnStateTopic {
			rf = b.cfg.TxnStateReplicationFactor
		}
		rt.ReplicationFactor = int16(max(1, min(int(rf), live)))
	}
	return rt
}

// forwardConfigs commits a resource's config changes (ConfigRecords, as
// resourceConfigChanges builds them) through the controller as an
// IncrementalAlterConfigs of SETs and DELETEs, which the controller
// validates again, and waits until this broker's image has the resource's
// configs equal to want.
func (l *clusterLink) forwardConfigs(res metadata.ConfigResource, changes []metadata.Record, want map[string]string) error {
	if len(changes) == 0 {
		return nil
	}
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.Version = 1
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceType(res.Type), res.Name
	for _, r := range changes {
		cr := r.(metadata.ConfigRecord)
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value, c.Op = cr.Name, cr.Value, kmsg.IncrementalAlterConfigOpSet
		if cr.Value == nil {
			c.Op = kmsg.IncrementalAlterConfigOpDelete
		}
		rr.Configs = append(rr.Configs, c)
	}
	req.Resources = append(req.Resources, rr)
	resp, err := l.call(controller.LineAdmin, req)
	if err != nil {
		return topicErr(kerr.RequestTimedOut, "no active controller answered: %v", err)
	}
	r := resp.(*kmsg.IncrementalAlterConfigsResponse)
	if len(r.Resources) == 1 && r.Resources[0].ErrorCode != 0 {
		msg := fmt.Sprintf("controller refused configs of %s", res.Name)
		if m := r.Resources[0].ErrorMessage; m != nil && *m != "" {
			msg = *m
		}
		return topicErr(kerr.ErrorForCode(r.Resources[0].ErrorCode).(*kerr.Error), "%s", msg)
	}
	if !l.waitImage(func(img metadata.Image) bool { return maps.Equal(img.Configs(res), want) }) {
		return topicErr(kerr.RequestTimedOut, "configs of %s changed but not yet in this broker's metadata", res.Name)
	}
	return nil
}

// forwardAdmin sends an admin request the controller answers whole (keys
// 45 and 46) and relays its answer; with no controller answering, the
// request's top-level error is REQUEST_TIMED_OUT.
func (l *clusterLink) forwardAdmin(req kmsg.Request) kmsg.Response {
	resp, err := l.call(controller.LineAdmin, req)
	if err == nil {
		return resp
	}
	out := req.ResponseKind()
	switch out := out.(type) {
	case *kmsg.AlterPartitionAssignmentsResponse:
		out.ErrorCode = kerr.RequestTimedOut.Code
	case *kmsg.ListPartitionReassignmentsResponse:
		out.ErrorCode = kerr.RequestTimedOut.Code
	}
	return out
}
