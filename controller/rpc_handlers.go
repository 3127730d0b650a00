package controller

// The broker RPCs the CONTROLLER listener serves (rpc.go), one function
// per API key: each turns the request into a decision of the active
// controller (decide), commits its records and answers once they have.

import (
	"context"
	"crypto/rand"
	"errors"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/controller/quorum"
	"github.com/sluice-broker/sluice/metadata"
)

// rpcTimeout bounds how long a request waits for its decision to commit.
const rpcTimeout = 10 * time.Second

// decide runs fn as the active controller; it returns NOT_CONTROLLER when
// this node is not active, REQUEST_TIMED_OUT when the loop is stuck.
func (cs *connState) decide(fn func(a *active) *kerr.Error) *kerr.Error {
	ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
	defer cancel()
	var out *kerr.Error
	err := cs.s.submit(ctx, func(a *active) { out = fn(a) })
	switch {
	case errors.Is(err, errNotActive):
		return kerr.NotController
	case err != nil:
		return kerr.RequestTimedOut
	}
	return out
}

// commitErr maps a failed commit to the code the caller is answered with.
func commitErr(err error) *kerr.Error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrNotApplied):
		return kerr.UnknownServerError
	}
	return kerr.NotController // the quorum did not commit: ask again, elsewhere
}

func code(e *kerr.Error) int16 {
	if e == nil {
		return 0
	}
	return e.Code
}

func (cs *connState) serve(req kmsg.Request) kmsg.Response {
	switch req := req.(type) {
	case *kmsg.BrokerRegistrationRequest:
		return cs.register(req)
	case *kmsg.BrokerHeartbeatRequest:
		return cs.heartbeat(req)
	case *kmsg.UnregisterBrokerRequest:
		return cs.unregister(req)
	case *kmsg.AlterPartitionRequest:
		return cs.alterPartition(req)
	case *kmsg.DescribeQuorumRequest:
		return cs.describeQuorum(req)
	case *kmsg.AllocateProducerIDsRequest:
		return cs.allocateProducerIDs(req)
	case *kmsg.CreateTopicsRequest:
		return cs.createTopics(req)
	case *kmsg.CreatePartitionsRequest:
		return cs.createPartitions(req)
	case *kmsg.DeleteTopicsRequest:
		return cs.deleteTopics(req)
	case *kmsg.ElectLeadersRequest:
		return cs.electLeaders(req)
	case *kmsg.IncrementalAlterConfigsRequest:
		return cs.alterConfigs(req)
	case *kmsg.AlterPartitionAssignmentsRequest:
		return cs.alterReassignments(req)
	case *kmsg.ListPartitionReassignmentsRequest:
		return cs.listReassignments(req)
	case *kmsg.AlterUserSCRAMCredentialsRequest:
		return cs.alterScram(req) // scram.go
	case *kmsg.CreateACLsRequest: // authz.go
		return cs.createACLs(req)
	case *kmsg.DeleteACLsRequest:
		return cs.deleteACLs(req)
	case *kmsg.AlterClientQuotasRequest:
		return cs.alterClientQuotas(req)
	}
	return nil
}

func (cs *connState) register(req *kmsg.BrokerRegistrationRequest) kmsg.Response {
	resp := kmsg.NewPtrBrokerRegistrationResponse()
	reg := Registration{BrokerID: req.BrokerID, ClusterID: req.ClusterID, IncarnationID: req.IncarnationID, Rack: req.Rack}
	for _, l := range req.Listeners {
		reg.Endpoints = append(reg.Endpoints, metadata.Endpoint{Name: l.Name, Host: l.Host, Port: l.Port, SecurityProtocol: l.SecurityProtocol})
	}
	resp.ErrorCode = code(cs.decide(func(a *active) *kerr.Error {
		reg.NextOffset = a.s.store.NextOffset()
		res := a.ctrl.Register(a.s.store.Image(), reg, time.Now().UnixMilli())
		if res.Err != nil {
			a.s.log.Warn("broker registration refused", "broker", req.BrokerID, "cluster", req.ClusterID, "err", res.Err.Message)
			return res.Err
		}
		if err := a.commit(res.Records); err != nil {
			return commitErr(err)
		}
		resp.BrokerEpoch = res.BrokerEpoch
		a.s.log.Info("broker registered", "broker", req.BrokerID, "epoch", res.BrokerEpoch)
		return nil
	}))
	return resp
}

func (cs *connState) heartbeat(req *kmsg.BrokerHeartbeatRequest) kmsg.Response {
	resp := kmsg.NewPtrBrokerHeartbeatResponse()
	resp.IsFenced = true
	cs.hbID, cs.hbEpoch, cs.hbSeen = req.BrokerID, req.BrokerEpoch, true
	hb := Heartbeat{BrokerID: req.BrokerID, BrokerEpoch: req.BrokerEpoch, CurrentMetadataOffset: req.CurrentMetadataOffset,
		WantFence: req.WantFence, WantShutDown: req.WantShutdown, Conn: cs.id}
	resp.ErrorCode = code(cs.decide(func(a *active) *kerr.Error {
		res := a.ctrl.Heartbeat(a.s.store.Image(), hb, time.Now().UnixMilli())
		if res.Err != nil {
			return res.Err
		}
		if err := a.commit(res.Records); err != nil {
			return commitErr(err)
		}
		resp.IsCaughtUp, resp.IsFenced, resp.ShouldShutdown = res.IsCaughtUp, res.IsFenced, res.ShouldShutDown
		return nil
	}))
	return resp
}

func (cs *connState) unregister(req *kmsg.UnregisterBrokerRequest) kmsg.Response {
	resp := kmsg.NewPtrUnregisterBrokerResponse()
	resp.ErrorCode = code(cs.decide(func(a *active) *kerr.Error {
		res := a.ctrl.Unregister(a.s.store.Image(), req.BrokerID)
		if res.Err != nil {
			return res.Err
		}
		return commitErr(a.commit(res.Records))
	}))
	return resp
}

func (cs *connState) alterPartition(req *kmsg.AlterPartitionRequest) kmsg.Response {
	resp := kmsg.NewPtrAlterPartitionResponse()
	resp.ErrorCode = code(cs.decide(func(a *active) *kerr.Error {
		img := a.s.store.Image()
		ap := AlterPartition{BrokerID: req.BrokerID, BrokerEpoch: req.BrokerEpoch}
		for _, t := range req.Topics {
			id := t.TopicID
			if req.Version < 2 {
				if ti := img.Topic(t.Topic); ti != nil {
					id = ti.ID
				}
			}
			for _, p := range t.Partitions {
				isr := p.NewISR
				for _, e := range p.NewEpochISR {
					isr = append(isr, e.BrokerID)
				}
				ap.Partitions = append(ap.Partitions, AlterPartitionItem{TopicID: id, Partition: p.Partition,
					LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, NewISR: isr})
			}
		}
		res := a.ctrl.AlterPartition(img, ap)
		if res.Err != nil {
			return res.Err
		}
		if err := a.commit(res.Records); err != nil {
			return commitErr(err)
		}
		alterPartitionAnswers(resp, req, img, res.Partitions)
		return nil
	}))
	return resp
}

func alterPartitionAnswers(resp *kmsg.AlterPartitionResponse, req *kmsg.AlterPartitionRequest, img metadata.Image, as []AlterPartitionAnswer) {
	byTopic := map[[16]byte]int{}
	for _, a := range as {
		i, ok := byTopic[a.TopicID]
		if !ok {
			t := kmsg.NewAlterPartitionResponseTopic()
			t.TopidID = a.TopicID // sic: kmsg spells it so
			if ti := img.TopicByID(a.TopicID); ti != nil && req.Version < 2 {
				t.Topic = ti.Name
			}
			resp.Topics = append(resp.Topics, t)
			i = len(resp.Topics) - 1
			byTopic[a.TopicID] = i
		}
		p := kmsg.NewAlterPartitionResponseTopicPartition()
		p.Partition, p.ErrorCode = a.Partition, code(a.Err)
		p.LeaderID, p.LeaderEpoch, p.PartitionEpoch, p.ISR = a.Leader, a.LeaderEpoch, a.PartitionEpoch, a.ISR
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, p)
	}
}

// describeQuorum answers from raft's status on this node; only the leader
// knows the voters' progress, so a follower answers NOT_LEADER_OR_FOLLOWER
// as KRaft does.
func (cs *connState) describeQuorum(req *kmsg.DescribeQuorumRequest) kmsg.Response {
	resp := kmsg.NewPtrDescribeQuorumResponse()
	st := make(chan quorumStatus, 1)
	cs.s.runner.Do(func(n *quorum.Node) { st <- statusOf(n) })
	var qs quorumStatus
	select {
	case qs = <-st:
	case <-time.After(rpcTimeout):
		resp.ErrorCode = kerr.RequestTimedOut.Code
		return resp
	}
	for _, t := range req.Topics {
		rt := kmsg.NewDescribeQuorumResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewDescribeQuorumResponseTopicPartition()
			rp.Partition = p.Partition
			if qs.lead != uint64(cs.s.cfg.NodeID) {
				rp.ErrorCode = kerr.NotLeaderForPartition.Code
			}
			rp.LeaderID, rp.LeaderEpoch, rp.HighWatermark = int32(qs.lead), int32(qs.term), int64(qs.commit)
			for _, v := range qs.voters {
				rs := kmsg.NewDescribeQuorumResponseTopicPartitionReplicaState()
				rs.ReplicaID, rs.LogEndOffset = int32(v.id), int64(v.match)
				rs.LastFetchTimestamp, rs.LastCaughtUpTimestamp = -1, -1
				rp.CurrentVoters = append(rp.CurrentVoters, rs)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	for id, addr := range cs.s.cfg.Voters {
		host, port, _ := net.SplitHostPort(addr)
		n := kmsg.NewDescribeQuorumResponseNode()
		n.NodeID = id
		l := kmsg.NewDescribeQuorumResponseNodeListener()
		l.Name, l.Host, l.Port = "CONTROLLER", host, uint16(atoiOr(port, 0))
		n.Listeners = append(n.Listeners, l)
		resp.Nodes = append(resp.Nodes, n)
	}
	return resp
}

type quorumStatus struct {
	lead, term, commit uint64
	voters             []struct{ id, match uint64 }
}

func statusOf(n *quorum.Node) quorumStatus {
	st := n.Status()
	qs := quorumStatus{lead: st.Lead, term: st.GetTerm(), commit: st.GetCommit()}
	for id, pr := range st.Progress {
		qs.voters = append(qs.voters, struct{ id, match uint64 }{id, pr.Match})
	}
	return qs
}

func atoiOr(s string, def int) int {
	n := 0
	if s == "" {
		return def
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return def
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// producerIDBlock is the size of the blocks AllocateProducerIds hands out
// (Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE).
const producerIDBlock = 1000

func (cs *connState) allocateProducerIDs(req *kmsg.AllocateProducerIDsRequest) kmsg.Response {
	resp := kmsg.NewPtrAllocateProducerIDsResponse()
	resp.ErrorCode = code(cs.decide(func(a *active) *kerr.Error {
		img := a.s.store.Image()
		if br, ok := img.Broker(req.BrokerID); !ok || br.Epoch != req.BrokerEpoch {
			return kerr.StaleBrokerEpoch
		}
		start := img.ProducerIDs().NextProducerID
		rec := metadata.ProducerIDsRecord{BrokerID: req.BrokerID, BrokerEpoch: req.BrokerEpoch, NextProducerID: start + producerIDBlock}
		if err := a.commit([]metadata.Record{rec}); err != nil {
			return commitErr(err)
		}
		resp.ProducerIDStart, resp.ProducerIDLen = start, producerIDBlock
		return nil
	}))
	return resp
}

func (cs *connState) createTopics(req *kmsg.CreateTopicsRequest) kmsg.Response {
	resp := kmsg.NewPtrCreateTopicsResponse()
	var topics []CreateTopic
	for _, t := range req.Topics {
		ct := CreateTopic{Name: t.Topic, NumPartitions: t.NumPartitions, ReplicationFactor: t.ReplicationFactor, Configs: map[string]string{}}
		_, _ = rand.Read(ct.ID[:])
		for _, as := range t.ReplicaAssignment {
			for len(ct.Assignments) <= int(as.Partition) {
				ct.Assignments = append(ct.Assignments, nil)
			}
			if as.Partition >= 0 {
				ct.Assignments[as.Partition] = as.Replicas
			}
		}
		for _, c := range t.Configs {
			if c.Value != nil {
				ct.Configs[c.Name] = *c.Value
			}
		}
		topics = append(topics, ct)
	}
	var res CreateTopicsResult
	all := cs.decide(func(a *active) *kerr.Error {
		img := a.s.store.Image()
		res = a.ctrl.CreateTopics(img, topics)
		if req.ValidateOnly {
			return nil
		}
		return commitErr(a.commit(res.Records))
	})
	for i, t := range req.Topics {
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = t.Topic, t.NumPartitions, t.ReplicationFactor
		rt.ErrorCode = code(all)
		if all == nil && i < len(res.Topics) {
			rt.ErrorCode = code(res.Topics[i].Err)
			rt.TopicID = topics[i].ID
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

func (cs *connState) createPartitions(req *kmsg.CreatePartitionsRequest) kmsg.Response {
	resp := kmsg.NewPtrCreatePartitionsResponse()
	for _, t := range req.Topics {
		rt := kmsg.NewCreatePartitionsResponseTopic()
		rt.Topic = t.Topic
		var as [][]int32
		for _, a := range t.Assignment {
			as = append(as, a.Replicas)
		}
		rt.ErrorCode = code(cs.decide(func(a *active) *kerr.Error {
			res := a.ctrl.CreatePartitions(a.s.store.Image(), t.Topic, t.Count, as)
			if res.Err != nil || req.ValidateOnly {
				return res.Err
			}
			return commitErr(a.commit(res.Records))
		}))
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

func (cs *connState) deleteTopics(req *kmsg.DeleteTopicsRequest) kmsg.Response {
	resp := kmsg.NewPtrDeleteTopicsResponse()
	type one struct {
		name *string
		id   [16]byte
	}
	var asked []one
	for _, n := range req.TopicNames {
		asked = append(asked, one{name: &n})
	}
	for _, t := range req.Topics {
		asked = append(asked, one{name: t.Topic, id: t.TopicID})
	}
	for _, t := range asked {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		rt.Topic, rt.TopicID = t.name, t.id
		rt.ErrorCode = code(cs.decide(func(a *active) *kerr.Error {
			img := a.s.store.Image()
			ti := img.TopicByID(t.id)
			if t.name != nil && *t.name != "" {
				ti = img.Topic(*t.name)
			}
			if ti == nil {
				return kerr.UnknownTopicOrPartition
			}
			rt.TopicID = ti.ID
			return commitErr(a.commit([]metadata.Record{metadata.RemoveTopicRecord{TopicID: ti.ID}}))
		}))
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

func (cs *connState) electLeaders(req *kmsg.ElectLeadersRequest) kmsg.Response {
	resp := kmsg.NewPtrElectLeadersResponse()
	var tps []TopicPartition
	if req.Topics != nil {
		tps = []TopicPartition{}
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				tps = append(tps, TopicPartition{Topic: t.Topic, Partition: p})
			}
		}
	}
	var res ElectLeadersResult
	all := cs.decide(func(a *active) *kerr.Error {
		res = a.ctrl.ElectLeaders(a.s.store.Image(), ElectionType(req.ElectionType), tps)
		return commitErr(a.commit(res.Records))
	})
	resp.ErrorCode = code(all)
	if all != nil {
		return resp
	}
	byTopic := map[string]int{}
	for _, p := range res.Partitions {
		i, ok := byTopic[p.Topic]
		if !ok {
			t := kmsg.NewElectLeadersResponseTopic()
			t.Topic = p.Topic
			resp.Topics = append(resp.Topics, t)
			i = len(resp.Topics) - 1
			byTopic[p.Topic] = i
		}
		rp := kmsg.NewElectLeadersResponseTopicPartition()
		rp.Partition, rp.ErrorCode = p.Partition, code(p.Err)
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, rp)
	}
	return resp
}
