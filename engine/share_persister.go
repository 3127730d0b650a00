package engine

// The share-partition leader's persister: it reads and writes a
// share-partition's state at the share coordinator, in process when this
// broker leads the key's partition of __share_group_state, else with
// ReadShareGroupState / WriteShareGroupState / DeleteShareGroupState
// (keys 84-86) to the broker that does (a franz-go client of the cluster,
// made on first use). The coordinator's answer NOT_COORDINATOR or
// COORDINATOR_NOT_AVAILABLE reaches the client, which retries.

import (
	"context"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/engine/share"
)

// sharePersistTimeout bounds one remote state call.
const sharePersistTimeout = 5 * time.Second

// shareRPC is the lazily made client to other brokers' share coordinators.
type shareRPC struct {
	mu sync.Mutex
	cl *kgo.Client
}

// stateLeader is the broker leading k's state partition, and whether it
// is this one.
func (s *shareBroker) stateLeader(k share.SPKey) (leader int32, local bool, code int16) {
	p := s.states.PartitionFor(k)
	if s.states.Loaded(p) {
		return s.b.cfg.NodeID, true, 0
	}
	ti := s.b.image().Topic(shareStateTopic)
	if s.b.cluster == nil || ti == nil || int(p) >= len(ti.Partitions) || ti.Partitions[p].Leader < 0 {
		return -1, false, kerr.CoordinatorNotAvailable.Code
	}
	if l := ti.Partitions[p].Leader; l != s.b.cfg.NodeID {
		return l, false, 0
	}
	return -1, false, kerr.CoordinatorLoadInProgress.Code // leads it, not loaded yet
}

// readState is the coordinator's state of k; found is false for a
// share-partition never initialized.
func (s *shareBroker) readState(k share.SPKey) (share.SnapshotValue, bool, int16) {
	leader, local, code := s.stateLeader(k)
	switch {
	case code != 0:
		return share.SnapshotValue{}, false, code
	case local:
		return s.states.Read(k)
	}
	req := kmsg.NewPtrReadShareGroupStateRequest()
	req.GroupID = k.Group
	rp := kmsg.NewReadShareGroupStateRequestTopicPartition()
	rp.Partition, rp.LeaderEpoch = k.Partition, -1
	req.Topics = []kmsg.ReadShareGroupStateRequestTopic{{TopicID: k.TopicID, Partitions: []kmsg.ReadShareGroupStateRequestTopicPartition{rp}}}
	resp := kmsg.NewPtrReadShareGroupStateResponse()
	if code := s.call(leader, req, resp); code != 0 {
		return share.SnapshotValue{}, false, code
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return share.SnapshotValue{}, false, kerr.UnknownServerError.Code
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 || p.StartOffset < 0 {
		return share.SnapshotValue{StateEpoch: p.StateEpoch}, false, p.ErrorCode
	}
	v := share.SnapshotValue{StateEpoch: p.StateEpoch, LeaderEpoch: -1, StartOffset: p.StartOffset, DeliveryCompleteCount: -1}
	for _, b := range p.StateBatches {
		v.Batches = append(v.Batches, share.StateBatch{First: b.FirstOffset, Last: b.LastOffset, State: share.RecordState(b.DeliveryState), Count: b.DeliveryCount})
	}
	return v, true, 0
}

// writeState stores k's whole state at the coordinator.
func (s *shareBroker) writeState(k share.SPKey, v share.SnapshotValue) int16 {
	leader, local, code := s.stateLeader(k)
	switch {
	case code != 0:
		return code
	case local:
		return s.states.Write(k, v)
	}
	req := kmsg.NewPtrWriteShareGroupStateRequest()
	req.GroupID = k.Group
	wp := kmsg.NewWriteShareGroupStateRequestTopicPartition()
	wp.Partition, wp.StateEpoch, wp.LeaderEpoch, wp.StartOffset = k.Partition, v.StateEpoch, v.LeaderEpoch, v.StartOffset
	wp.DeliveryCompleteCount = v.DeliveryCompleteCount
	for _, b := range v.Batches {
		wp.StateBatches = append(wp.StateBatches, kmsg.WriteShareGroupStateRequestTopicPartitionStateBatch{
			FirstOffset: b.First, LastOffset: b.Last, DeliveryState: int8(b.State), DeliveryCount: b.Count})
	}
	req.Topics = []kmsg.WriteShareGroupStateRequestTopic{{TopicID: k.TopicID, Partitions: []kmsg.WriteShareGroupStateRequestTopicPartition{wp}}}
	resp := kmsg.NewPtrWriteShareGroupStateResponse()
	if code := s.call(leader, req, resp); code != 0 {
		return code
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return kerr.UnknownServerError.Code
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}

// deleteState removes k's state at the coordinator.
func (s *shareBroker) deleteState(k share.SPKey) int16 {
	leader, local, code := s.stateLeader(k)
	switch {
	case code != 0:
		return code
	case local:
		return s.states.Delete(k)
	}
	req := kmsg.NewPtrDeleteShareGroupStateRequest()
	req.GroupID = k.Group
	req.Topics = []kmsg.DeleteShareGroupStateRequestTopic{{TopicID: k.TopicID,
		Partitions: []kmsg.DeleteShareGroupStateRequestTopicPartition{{Partition: k.Partition}}}}
	resp := kmsg.NewPtrDeleteShareGroupStateResponse()
	if code := s.call(leader, req, resp); code != 0 {
		return code
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return kerr.UnknownServerError.Code
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}

// call sends req to broker id and decodes the answer into resp; a failed
// round trip is COORDINATOR_NOT_AVAILABLE (the client retries).
func (s *shareBroker) call(id int32, req kmsg.Request, resp kmsg.Response) int16 {
	cl, err := s.rpc.client(s.b)
	if err != nil {
		s.b.log.Warn("share persister: no client", "err", err)
		return kerr.CoordinatorNotAvailable.Code
	}
	ctx, cancel := context.WithTimeout(context.Background(), sharePersistTimeout)
	defer cancel()
	got, err := cl.Broker(int(id)).Request(ctx, req)
	if err != nil {
		s.b.log.Warn("share persister: request to the share coordinator failed", "broker", id, "err", err)
		return kerr.CoordinatorNotAvailable.Code
	}
	switch r := resp.(type) {
	case *kmsg.ReadShareGroupStateResponse:
		*r = *got.(*kmsg.ReadShareGroupStateResponse)
	case *kmsg.WriteShareGroupStateResponse:
		*r = *got.(*kmsg.WriteShareGroupStateResponse)
	case *kmsg.DeleteShareGroupStateResponse:
		*r = *got.(*kmsg.DeleteShareGroupStateResponse)
	}
	return 0
}

// client makes the franz-go client seeded with every broker of the image.
func (r *shareRPC) client(b *Broker) (*kgo.Client, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cl != nil {
		return r.cl, nil
	}
	img := b.image()
	var seeds []string
	for _, br := range img.Brokers() {
		if host, port, ok := brokerEndpoint(img, br.ID); ok {
			seeds = append(seeds, net.JoinHostPort(host, strconv.Itoa(int(port))))
		}
	}
	opts := append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.ClientID("sluice-share-persister")}, b.cfg.InterBroker.ClientOpts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	r.cl = cl
	return cl, nil
}

func (r *shareRPC) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cl != nil {
		r.cl.Close()
		r.cl = nil
	}
}

// ---- the coordinator's side (keys 83-87) ----

// coordinatorCheck makes sure the state topic exists (single node: and
// is loaded) before a coordinator API touches it.
func (s *shareBroker) coordinatorCheck() int16 { return s.ensureStates() }

func (s *shareBroker) coordinatorRead(k share.SPKey) (share.SnapshotValue, bool, int16) {
	if code := s.coordinatorCheck(); code != 0 {
		return share.SnapshotValue{}, false, code
	}
	return s.states.Read(k)
}

func (s *shareBroker) coordinatorWrite(k share.SPKey, v share.SnapshotValue) int16 {
	if code := s.coordinatorCheck(); code != 0 {
		return code
	}
	return s.states.Write(k, v)
}
