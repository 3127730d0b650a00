package controller

// AlterPartitionReassignments (key 45) and ListPartitionReassignments
// (key 46) on the CONTROLLER listener, as brokers forward them
// (engine/45_*.go, engine/46_*.go).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (cs *connState) alterReassignments(req *kmsg.AlterPartitionAssignmentsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	allowRF := req.Version < 1 || req.AllowReplicationFactorChange
	resp.AllowReplicationFactorChange = allowRF
	var reqs []Reassignment
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			reqs = append(reqs, Reassignment{TopicPartition{t.Topic, p.Partition}, p.Replicas})
		}
	}
	var res ReassignResult
	all := cs.decide(func(a *active) *kerr.Error {
		res = a.ctrl.AlterPartitionReassignments(a.s.store.Image(), reqs, allowRF)
		if len(res.Records) > 0 {
			a.s.log.Info("partition reassignment", "records", describe(res.Records))
		}
		return commitErr(a.commit(res.Records))
	})
	if all != nil {
		resp.ErrorCode = all.Code
		return resp
	}
	byTopic := map[string]int{}
	for _, p := range res.Partitions {
		i, ok := byTopic[p.Topic]
		if !ok {
			t := kmsg.NewAlterPartitionAssignmentsResponseTopic()
			t.Topic = p.Topic
			resp.Topics = append(resp.Topics, t)
			i = len(resp.Topics) - 1
			byTopic[p.Topic] = i
		}
		rp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
		rp.Partition, rp.ErrorCode = p.Partition, code(p.Err)
		if p.Message != "" {
			rp.ErrorMessage = kmsg.StringPtr(p.Message)
		}
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, rp)
	}
	return resp
}

func (cs *connState) listReassignments(req *kmsg.ListPartitionReassignmentsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	var tps []TopicPartition
	if req.Topics != nil {
		tps = []TopicPartition{}
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				tps = append(tps, TopicPartition{t.Topic, p})
			}
		}
	}
	var ongoing []OngoingReassignment
	resp.ErrorCode = code(cs.decide(func(a *active) *kerr.Error {
		ongoing = ListPartitionReassignments(a.s.store.Image(), tps)
		return nil
	}))
	byTopic := map[string]int{}
	for _, o := range ongoing {
		i, ok := byTopic[o.Topic]
		if !ok {
			t := kmsg.NewListPartitionReassignmentsResponseTopic()
			t.Topic = o.Topic
			resp.Topics = append(resp.Topics, t)
			i = len(resp.Topics) - 1
			byTopic[o.Topic] = i
		}
		rp := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
		rp.Partition, rp.Replicas = o.Partition, o.Replicas
		rp.AddingReplicas, rp.RemovingReplicas = nonNil(o.Adding), nonNil(o.Removing)
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, rp)
	}
	return resp
}
