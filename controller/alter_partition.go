package controller

import (
	"slices"

	"github.com/sluice-broker/sluice/metadata"
	"github.com/twmb/franz-go/pkg/kerr"
)

// AlterPartition is an AlterPartition request (key 56): a leader's ISR
// changes, each based on the partition state it last saw.
type AlterPartition struct {
	BrokerID    int32
	BrokerEpoch int64
	Partitions  []AlterPartitionItem
}

// AlterPartitionItem is one partition's proposed ISR.
type AlterPartitionItem struct {
	TopicID        [16]byte
	Partition      int32
	LeaderEpoch    int32
	PartitionEpoch int32
	NewISR         []int32
}

// AlterPartitionResult is the records an AlterPartition proposes and the
// answers to send once they commit. Err, when set, answers the whole
// request.
type AlterPartitionResult struct {
	Result
	Err        *kerr.Error
	Partitions []AlterPartitionAnswer
}

// AlterPartitionAnswer is one partition's answer: Err, or the partition's
// state once the change commits.
type AlterPartitionAnswer struct {
	TopicID        [16]byte
	Partition      int32
	Err            *kerr.Error
	Leader         int32
	LeaderEpoch    int32
	PartitionEpoch int32
	ISR            []int32
}

// AlterPartition commits a leader's ISR changes, with Kafka's checks in
// Kafka's order: epochs above the controller's mean this controller is
// behind (NOT_CONTROLLER); a stale leader epoch is FENCED_LEADER_EPOCH, a
// stale partition epoch INVALID_UPDATE_VERSION; a sender that does not
// lead is NOT_LEADER_OR_FOLLOWER; an ISR that is empty, has duplicates,
// leaves out the leader or names a non-replica is INVALID_REQUEST; one with
// a fenced or shutting-down member is INELIGIBLE_REPLICA (KIP-841). An
// unchanged ISR proposes nothing and answers the current state.
func (c *Controller) AlterPartition(img metadata.Image, req AlterPartition) AlterPartitionResult {
	if br, ok := img.Broker(req.BrokerID); !ok || br.Epoch != req.BrokerEpoch {
		return AlterPartitionResult{Err: kerr.StaleBrokerEpoch}
	}
	b := newBatch(img)
	var out AlterPartitionResult
	type key struct {
		id [16]byte
		p  int32
	}
	seen := map[key]bool{}
	for _, it := range req.Partitions {
		key := key{it.TopicID, it.Partition}
		a := AlterPartitionAnswer{TopicID: it.TopicID, Partition: it.Partition, Err: kerr.InvalidRequest}
		if !seen[key] {
			a = c.alterOne(img, b, req.BrokerID, it)
		}
		seen[key] = true
		out.Partitions = append(out.Partitions, a)
	}
	out.Records = b.records()
	return out
}

func (c *Controller) alterOne(img metadata.Image, b *batch, sender int32, it AlterPartitionItem) AlterPartitionAnswer {
	a := AlterPartitionAnswer{TopicID: it.TopicID, Partition: it.Partition}
	t := img.TopicByID(it.TopicID)
	if t == nil {
		a.Err = kerr.UnknownTopicID
		return a
	}
	if it.Partition < 0 || int(it.Partition) >= len(t.Partitions) {
		a.Err = kerr.UnknownTopicOrPartition
		return a
	}
	p := &t.Partitions[it.Partition]
	if a.Err = checkAlter(img, p, sender, it); a.Err != nil {
		return a
	}
	a.Leader, a.LeaderEpoch, a.PartitionEpoch, a.ISR = p.Leader, p.LeaderEpoch, p.PartitionEpoch, p.ISR
	if r, changed := isrChange(img, t, int(it.Partition), p, it.NewISR); changed {
		b.add(r)
		a.PartitionEpoch, a.ISR = p.PartitionEpoch+1, it.NewISR
		if r.ISR != nil {
			a.ISR = r.ISR // the change completed a reassignment (reassign.go)
		}
		if r.Leader != metadata.NoLeaderChange {
			a.Leader, a.LeaderEpoch = r.Leader, p.LeaderEpoch+1
		}
	}
	return a
}

func checkAlter(img metadata.Image, p *metadata.PartitionImage, sender int32, it AlterPartitionItem) *kerr.Error {
	switch {
	case it.LeaderEpoch > p.LeaderEpoch || it.PartitionEpoch > p.PartitionEpoch:
		return kerr.NotController
	case it.LeaderEpoch < p.LeaderEpoch:
		return kerr.FencedLeaderEpoch
	case it.PartitionEpoch < p.PartitionEpoch:
		return kerr.InvalidUpdateVersion
	case p.Leader != sender:
		return kerr.NotLeaderForPartition // NOT_LEADER_OR_FOLLOWER
	}
	isr := it.NewISR
	if len(isr) == 0 || !slices.Contains(isr, sender) {
		return kerr.InvalidRequest
	}
	for i, r := range isr {
		if slices.Contains(isr[:i], r) || !p.Hosts(r) {
			return kerr.InvalidRequest
		}
	}
	for _, r := range isr {
		if !img.BrokerEligible(r) {
			return kerr.IneligibleReplica
		}
	}
	return nil
}
