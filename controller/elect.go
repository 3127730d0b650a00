package controller

import (
	"slices"

	"github.com/sluice-broker/sluice/metadata"
	"github.com/twmb/franz-go/pkg/kerr"
)

// eligibleFunc says whether a broker may lead or join an ISR.
type eligibleFunc func(id int32) bool

// eligibleIn returns the eligibility of brokers in img, with except never
// eligible (the broker a decision is taking away).
func eligibleIn(img metadata.Image, except int32) eligibleFunc {
	return func(id int32) bool { return id != except && img.BrokerEligible(id) }
}

// electClean returns the first replica, in assignment order, that is in
// isr and eligible, or -1.
func electClean(p *metadata.PartitionImage, isr []int32, ok eligibleFunc) int32 {
	for _, r := range p.Replicas {
		if slices.Contains(isr, r) && ok(r) {
			return r
		}
	}
	return -1
}

// electUnclean returns the first eligible replica, or -1.
func electUnclean(p *metadata.PartitionImage, ok eligibleFunc) int32 {
	for _, r := range p.Replicas {
		if ok(r) {
			return r
		}
	}
	return -1
}

// elect picks a leader from isr, or (when the topic allows it and the ISR
// has none) any eligible replica, whose ISR then becomes [leader]. It
// returns -1 and isr unchanged when there is no one.
func (c *Controller) elect(img metadata.Image, topic string, p *metadata.PartitionImage, isr []int32, ok eligibleFunc) (int32, []int32) {
	if l := electClean(p, isr, ok); l != -1 {
		return l, isr
	}
	if c.uncleanAllowed(img, topic) {
		if l := electUnclean(p, ok); l != -1 {
			return l, []int32{l}
		}
	}
	return -1, isr
}

// change builds the PartitionChangeRecord that takes p to leader and isr,
// and reports whether anything changes.
func change(t *metadata.TopicImage, i int, p *metadata.PartitionImage, leader int32, isr []int32) (metadata.PartitionChangeRecord, bool) {
	r := metadata.PartitionChangeRecord{TopicID: t.ID, Partition: int32(i), Leader: metadata.NoLeaderChange}
	if leader != p.Leader {
		r.Leader = leader
	}
	if !slices.Equal(isr, p.ISR) {
		r.ISR = isr
	}
	return r, r.Leader != metadata.NoLeaderChange || r.ISR != nil
}

// removeBroker takes broker id out of every partition's leadership and
// ISR, as fencing, controlled shutdown, re-registration and
// unregistration all do: a partition it leads gets a new leader from the
// rest of its ISR (or goes offline); an ISR it would empty keeps it as the
// last member (KIP-841), so the partition waits for it rather than lose
// what only it has.
func (c *Controller) removeBroker(b *batch, id int32) {
	img := b.image()
	ok := eligibleIn(img, id)
	for _, t := range img.Topics() {
		for i := range t.Partitions {
			p := &t.Partitions[i]
			if !slices.Contains(p.ISR, id) {
				continue
			}
			isr := without(p.ISR, id)
			if len(isr) == 0 {
				isr = p.ISR
			}
			leader := p.Leader
			if leader == id {
				leader, isr = c.elect(img, t.Name, p, isr, ok)
			}
			if r, changed := change(t, i, p, leader, isr); changed {
				b.add(r)
			}
		}
	}
}

// electOffline elects a leader for every leaderless partition broker id
// hosts, now that it is eligible.
func (c *Controller) electOffline(b *batch, id int32) {
	img := b.image()
	ok := eligibleIn(img, -1)
	for _, t := range img.Topics() {
		for i := range t.Partitions {
			p := &t.Partitions[i]
			if p.Leader != -1 || !p.Hosts(id) {
				continue
			}
			leader, isr := c.elect(img, t.Name, p, p.ISR, ok)
			if r, changed := change(t, i, p, leader, isr); changed && leader != -1 {
				b.add(r)
			}
		}
	}
}

func without(ns []int32, n int32) []int32 {
	out := make([]int32, 0, len(ns))
	for _, v := range ns {
		if v != n {
			out = append(out, v)
		}
	}
	return out
}

// ElectionType is ElectLeaders' election type, with Kafka's codes.
type ElectionType int8

const (
	ElectPreferred ElectionType = 0
	ElectUnclean   ElectionType = 1
)

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// ElectionResult is one partition's answer to ElectLeaders; Err is nil
// when a new leader is proposed.
type ElectionResult struct {
	TopicPartition
	Err *kerr.Error
}

// ElectLeadersResult is the records an ElectLeaders proposes and the
// per-partition answers to send once they commit.
type ElectLeadersResult struct {
	Result
	Partitions []ElectionResult
}

// ElectLeaders runs Kafka's ElectLeaders: PREFERRED moves leadership to
// the first replica when it is in the ISR and eligible; UNCLEAN elects a
// leader for a partition that has none, from the ISR if it can, else the
// first eligible replica (ISR := [leader]) whatever the topic's config.
// A nil partitions elects for every partition; a partition named twice is
// answered INVALID_REQUEST the second time.
func (c *Controller) ElectLeaders(img metadata.Image, typ ElectionType, partitions []TopicPartition) ElectLeadersResult {
	if partitions == nil {
		partitions = allPartitions(img)
	}
	b := newBatch(img)
	seen := map[TopicPartition]bool{}
	var out ElectLeadersResult
	for _, tp := range partitions {
		err := kerr.InvalidRequest
		if !seen[tp] {
			err = c.electOne(img, b, typ, tp)
		}
		seen[tp] = true
		out.Partitions = append(out.Partitions, ElectionResult{tp, err})
	}
	out.Records = b.records()
	return out
}

// electOne decides one partition against img; the partitions of one
// request are distinct, so none sees another's change.
func (c *Controller) electOne(img metadata.Image, b *batch, typ ElectionType, tp TopicPartition) *kerr.Error {
	t := img.Topic(tp.Topic)
	if t == nil || tp.Partition < 0 || int(tp.Partition) >= len(t.Partitions) {
		return kerr.UnknownTopicOrPartition
	}
	p := &t.Partitions[tp.Partition]
	ok := eligibleIn(img, -1)
	leader, isr := int32(-1), p.ISR
	switch typ {
	case ElectPreferred:
		if p.Leader == p.Replicas[0] {
			return kerr.ElectionNotNeeded
		}
		leader = p.Replicas[0]
		if !slices.Contains(p.ISR, leader) || !ok(leader) {
			return kerr.PreferredLeaderNotAvailable
		}
	case ElectUnclean:
		if p.Leader != -1 {
			return kerr.ElectionNotNeeded
		}
		if leader = electClean(p, p.ISR, ok); leader == -1 {
			if leader = electUnclean(p, ok); leader != -1 {
				isr = []int32{leader}
			}
		}
		if leader == -1 {
			return kerr.EligibleLeadersNotAvailable
		}
	default:
		return kerr.InvalidRequest
	}
	r, _ := change(t, int(tp.Partition), p, leader, isr)
	b.add(r)
	return nil
}

func allPartitions(img metadata.Image) []TopicPartition {
	var out []TopicPartition
	for _, t := range img.Topics() {
		for i := range t.Partitions {
			out = append(out, TopicPartition{t.Name, int32(i)})
		}
	}
	return out
}

// Imbalance is one broker's leader imbalance: of the partitions whose
// preferred leader (first replica) it is, how many another broker leads.
type Imbalance struct {
	Preferred int // partitions it is the preferred leader of
	NotLed    int // of those, the ones it does not lead
}

// Ratio is NotLed / Preferred (0 for a broker preferred nowhere).
func (im Imbalance) Ratio() float64 {
	if im.Preferred == 0 {
		return 0
	}
	return float64(im.NotLed) / float64(im.Preferred)
}

// LeaderImbalance returns every preferred leader's imbalance, by broker
// id: the check behind auto.leader.rebalance.enable.
func LeaderImbalance(img metadata.Image) map[int32]Imbalance {
	out := map[int32]Imbalance{}
	for t := range img.AllTopics() {
		for _, p := range t.Partitions {
			pref := p.Replicas[0]
			im := out[pref]
			im.Preferred++
			if p.Leader != pref {
				im.NotLed++
			}
			out[pref] = im
		}
	}
	return out
}

// Rebalance is auto.leader.rebalance: for every broker whose imbalance
// exceeds percent (leader.imbalance.per.broker.percentage, Kafka: 10),
// a preferred election on each partition it should lead and can.
func (c *Controller) Rebalance(img metadata.Image, percent int) Result {
	imb := LeaderImbalance(img)
	var tps []TopicPartition
	for _, t := range img.Topics() {
		for i, p := range t.Partitions {
			pref := p.Replicas[0]
			if p.Leader != pref && imb[pref].Ratio()*100 > float64(percent) &&
				slices.Contains(p.ISR, pref) && img.BrokerEligible(pref) {
				tps = append(tps, TopicPartition{t.Name, int32(i)})
			}
		}
	}
	if len(tps) == 0 {
		return Result{}
	}
	return c.ElectLeaders(img, ElectPreferred, tps).Result
}
