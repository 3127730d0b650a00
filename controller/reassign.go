package controller

// Partition reassignment (KIP-455), as KRaft's controller runs it, with
// the record types every other change uses.
//
// A reassignment to target T of a partition whose replicas are C writes
// one PartitionChangeRecord: replicas := T followed by C∖T, adding :=
// T∖C (C without the replicas a reassignment in progress is adding),
// removing := C∖T; the ISR and the leader stay. Brokers open the
// adding replicas as followers and the leader takes them into the ISR
// (AlterPartition) once they have caught up. The AlterPartition that makes
// every replica of T an ISR member also completes the reassignment in the
// same record: replicas := T, ISR := ISR ∩ T, adding and removing cleared,
// and a leader outside T hands over to the first ISR member of T. Brokers
// that are no longer replicas delete their logs. Cancelling (null
// replicas) reverts to the replicas before it: C := replicas∖adding, the
// adding replicas leave the ISR, and one of them that leads hands over;
// it is refused when that would leave no in-sync replica (unless the
// topic allows unclean election).
//
// The state is the image's (replicas, adding, removing), so a controller
// that takes over mid-reassignment carries on from its image; nothing of a
// reassignment lives in the Controller.

import (
	"fmt"
	"slices"

	"github.com/sluice-broker/sluice/metadata"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Reassignment is one partition of an AlterPartitionReassignments request
// (key 45): its target replicas, or nil to cancel the reassignment in
// progress.
type Reassignment struct {
	TopicPartition
	Replicas []int32
}

// ReassignResult is the records an AlterPartitionReassignments proposes
// and the per-partition answers to send once they commit.
type ReassignResult struct {
	Result
	Partitions []ReassignAnswer
}

// ReassignAnswer is one partition's answer: Err is nil when the
// reassignment (or its cancellation) is under way.
type ReassignAnswer struct {
	TopicPartition
	Err     *kerr.Error
	Message string
}

// AlterPartitionReassignments starts, replaces or cancels reassignments.
// Each partition is decided against img (a partition named twice is
// INVALID_REQUEST the second time), so a request over every partition of
// a large topic costs one copy of it, not one per partition. A target is
// refused INVALID_REPLICA_ASSIGNMENT when it is empty, names a broker
// twice or one that is not registered, or adds a broker that is fenced or
// shutting down; INVALID_REPLICATION_FACTOR when it changes the
// replication factor and allowRFChange is false (KIP-860). A partition
// that does not exist is UNKNOWN_TOPIC_OR_PARTITION; cancelling where
// nothing is in progress, NO_REASSIGNMENT_IN_PROGRESS; a cancel that would
// leave no in-sync replica, INVALID_REPLICA_ASSIGNMENT.
func (c *Controller) AlterPartitionReassignments(img metadata.Image, reqs []Reassignment, allowRFChange bool) ReassignResult {
	b := newBatch(img)
	var out ReassignResult
	seen := map[TopicPartition]bool{}
	for _, r := range reqs {
		msg, err := "partition named twice", kerr.InvalidRequest
		if !seen[r.TopicPartition] {
			msg, err = c.reassignOne(img, b, r, allowRFChange)
		}
		seen[r.TopicPartition] = true
		out.Partitions = append(out.Partitions, ReassignAnswer{TopicPartition: r.TopicPartition, Err: err, Message: msg})
	}
	out.Records = b.records()
	return out
}

// reassignOne decides one partition; a refusal comes with a message for
// the client.
func (c *Controller) reassignOne(img metadata.Image, b *batch, r Reassignment, allowRFChange bool) (string, *kerr.Error) {
	t := img.Topic(r.Topic)
	if t == nil || r.Partition < 0 || int(r.Partition) >= len(t.Partitions) {
		return "", kerr.UnknownTopicOrPartition
	}
	p := &t.Partitions[r.Partition]
	st := stateOf(p)
	if r.Replicas == nil {
		if !st.reassigning() {
			return "", kerr.NoReassignmentInProgress
		}
		if !st.revert(img, c.uncleanAllowed(img, t.Name)) {
			return "no replica from before the reassignment is in sync: cancelling would lose records", kerr.InvalidReplicaAssignment
		}
	} else {
		if msg := invalidTarget(img, p, r.Replicas); msg != "" {
			return msg, kerr.InvalidReplicaAssignment
		}
		if !allowRFChange && len(r.Replicas) != len(originalReplicas(p)) {
			return "the reassignment would change the replication factor", kerr.InvalidReplicationFactor
		}
		st.start(r.Replicas)
		st.tryComplete(img)
	}
	if rec, changed := st.record(t, int(r.Partition), p); changed {
		b.add(rec)
	}
	return "", nil
}

// invalidTarget says what is wrong with target as p's new replicas, or "".
func invalidTarget(img metadata.Image, p *metadata.PartitionImage, target []int32) string {
	switch {
	case len(target) == 0:
		return "empty replica list"
	case len(target) > len(img.Brokers()): // and bounds the quadratic checks below
		return "more replicas than registered brokers"
	}
	for i, r := range target {
		if slices.Contains(target[:i], r) {
			return fmt.Sprintf("broker %d is named twice", r)
		}
		if _, ok := img.Broker(r); !ok {
			return fmt.Sprintf("broker %d is not registered", r)
		}
		if !p.Hosts(r) && !img.BrokerEligible(r) {
			return fmt.Sprintf("new replica %d is on a broker that is fenced or shutting down", r)
		}
	}
	return ""
}

// originalReplicas is p's replicas before the reassignment in progress.
func originalReplicas(p *metadata.PartitionImage) []int32 {
	return minus(p.Replicas, p.AddingReplicas)
}

// partState is a partition's placement and leadership as a decision
// changes it, before it becomes a PartitionChangeRecord.
type partState struct {
	replicas, isr    []int32
	leader           int32
	adding, removing []int32
}

func stateOf(p *metadata.PartitionImage) partState {
	return partState{replicas: p.Replicas, isr: p.ISR, leader: p.Leader, adding: p.AddingReplicas, removing: p.RemovingReplicas}
}

func (st *partState) reassigning() bool { return len(st.adding) > 0 || len(st.removing) > 0 }

// start begins moving the partition from its current replicas to target.
// A reassignment in progress is replaced: every current replica outside
// the target is removed, and the target's replicas outside the replicas
// before it (replicas minus adding) are being added, so the same target
// sent twice changes nothing. (A replica the first target added and the
// second drops is removing, not adding: a cancel then keeps it, as
// Kafka's revert does.)
func (st *partState) start(target []int32) {
	current, original := st.replicas, minus(st.replicas, st.adding)
	st.adding, st.removing = minus(target, original), minus(current, target)
	st.replicas = append(slices.Clone(target), st.removing...)
}

// tryComplete finishes the reassignment when every target replica is in
// the ISR: the removing replicas leave the replicas and the ISR, and a
// leader among them hands over to the first ISR member of the target that
// may lead. It waits (returns false) while a target replica is out of the
// ISR or no target replica can lead.
func (st *partState) tryComplete(img metadata.Image) bool {
	if !st.reassigning() {
		return false
	}
	target := minus(st.replicas, st.removing)
	isr := minus(st.isr, st.removing)
	for _, r := range target {
		if !slices.Contains(isr, r) {
			return false
		}
	}
	leader := st.leader
	if !slices.Contains(target, leader) {
		if leader = firstEligible(img, target, isr); leader == -1 {
			return false
		}
	}
	st.replicas, st.isr, st.leader, st.adding, st.removing = target, isr, leader, nil, nil
	return true
}

// revert cancels the reassignment: the replicas go back to those before
// it and the adding replicas leave the ISR. A leader among them hands
// over to the first original ISR member that may lead. When no original
// replica is in the ISR any more, only an unclean election can cancel:
// the first eligible original replica leads with an ISR of itself, and
// without unclean (or with no such replica) revert refuses (false).
func (st *partState) revert(img metadata.Image, unclean bool) bool {
	original := minus(st.replicas, st.adding)
	isr := minus(st.isr, st.adding)
	leader := st.leader
	if !slices.Contains(isr, leader) {
		leader = firstEligible(img, original, isr)
	}
	if len(isr) == 0 {
		if leader = firstEligible(img, original, original); !unclean || leader == -1 {
			return false
		}
		isr = []int32{leader}
	}
	st.replicas, st.isr, st.leader, st.adding, st.removing = original, isr, leader, nil, nil
	return true
}

// firstEligible returns the first of replicas that is in isr and may lead,
// or -1.
func firstEligible(img metadata.Image, replicas, isr []int32) int32 {
	for _, r := range replicas {
		if slices.Contains(isr, r) && img.BrokerEligible(r) {
			return r
		}
	}
	return -1
}

// record is the PartitionChangeRecord that takes partition i of t from p
// to st, carrying only what changes; false when nothing does.
func (st *partState) record(t *metadata.TopicImage, i int, p *metadata.PartitionImage) (metadata.PartitionChangeRecord, bool) {
	r := metadata.PartitionChangeRecord{TopicID: t.ID, Partition: int32(i), Leader: metadata.NoLeaderChange}
	changed := false
	if st.leader != p.Leader {
		r.Leader, changed = st.leader, true
	}
	if !slices.Equal(st.isr, p.ISR) {
		r.ISR, changed = nonNil(st.isr), true
	}
	if !slices.Equal(st.replicas, p.Replicas) {
		r.Replicas, changed = st.replicas, true
	}
	if !slices.Equal(st.adding, p.AddingReplicas) {
		r.AddingReplicas, changed = nonNil(st.adding), true
	}
	if !slices.Equal(st.removing, p.RemovingReplicas) {
		r.RemovingReplicas, changed = nonNil(st.removing), true
	}
	return r, changed
}

// isrChange is the change an AlterPartition makes: the new ISR, and the
// completion of the partition's reassignment when it brings the last
// target replica in.
func isrChange(img metadata.Image, t *metadata.TopicImage, i int, p *metadata.PartitionImage, isr []int32) (metadata.PartitionChangeRecord, bool) {
	st := stateOf(p)
	st.isr = isr
	st.tryComplete(img)
	return st.record(t, i, p)
}

// OngoingReassignment is one partition's reassignment in progress, as
// ListPartitionReassignments (key 46) shows it.
type OngoingReassignment struct {
	TopicPartition
	Replicas, Adding, Removing []int32
}

// ListPartitionReassignments returns the reassignments in progress among
// the named partitions (nil: every partition), sorted by topic and
// partition. Unknown partitions and those not being reassigned are left
// out, as Kafka does.
func ListPartitionReassignments(img metadata.Image, tps []TopicPartition) []OngoingReassignment {
	if tps == nil {
		tps = allPartitions(img)
	}
	var out []OngoingReassignment
	seen := map[TopicPartition]bool{}
	for _, tp := range tps {
		t := img.Topic(tp.Topic)
		if seen[tp] || t == nil || tp.Partition < 0 || int(tp.Partition) >= len(t.Partitions) {
			continue
		}
		seen[tp] = true
		p := &t.Partitions[tp.Partition]
		if len(p.AddingReplicas) > 0 || len(p.RemovingReplicas) > 0 {
			out = append(out, OngoingReassignment{TopicPartition: tp, Replicas: p.Replicas, Adding: p.AddingReplicas, Removing: p.RemovingReplicas})
		}
	}
	return out
}

// minus returns the members of a not in b, in a's order (never nil).
func minus(a, b []int32) []int32 {
	out := make([]int32, 0, len(a))
	for _, v := range a {
		if !slices.Contains(b, v) {
			out = append(out, v)
		}
	}
	return out
}

func nonNil(vs []int32) []int32 {
	if vs == nil {
		return []int32{}
	}
	return vs
}
