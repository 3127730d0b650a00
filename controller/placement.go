package controller

import (
	"hash/fnv"
	"slices"

	"github.com/sluice-broker/sluice/metadata"
)

// placement is Kafka's replica assignment (AdminUtils.assignReplicasToBrokers):
// partition p's first replica is broker (p + start) mod n, and its
// followers follow at a shift that grows by one every n partitions, so
// leaders and follower pairs both spread evenly. With racks, the brokers
// are first arranged alternating racks, and a follower is skipped while
// its rack already holds a replica of the partition and a rack without
// one remains.
type placement struct {
	brokers []int32          // arranged: by id, or alternating racks
	rack    map[int32]string // nil: rack-unaware
	racks   int
	start   int // index of partition 0's first replica
	shift   int // follower shift of partition 0
}

// newPlacement arranges the eligible brokers of img. start and shift are
// Kafka's random start index and replica shift, chosen by the caller.
func newPlacement(live []metadata.BrokerImage, start, shift int) placement {
	pl := placement{start: start, shift: shift}
	byRack := map[string][]int32{}
	for _, br := range live {
		pl.brokers = append(pl.brokers, br.ID)
		byRack[br.RackOrEmpty()] = append(byRack[br.RackOrEmpty()], br.ID)
	}
	if len(byRack) == 1 && byRack[""] != nil {
		return pl // no broker has a rack
	}
	pl.rack = map[int32]string{}
	for _, br := range live {
		pl.rack[br.ID] = br.RackOrEmpty()
	}
	pl.racks = len(byRack)
	pl.brokers = rackAlternated(byRack)
	return pl
}

// rackAlternated lists brokers taking one from each rack in turn (racks
// by name, brokers by id within a rack): Kafka's
// getRackAlternatedBrokerList.
func rackAlternated(byRack map[string][]int32) []int32 {
	racks := make([]string, 0, len(byRack))
	total := 0
	for r, ids := range byRack {
		racks = append(racks, r)
		slices.Sort(ids)
		total += len(ids)
	}
	slices.Sort(racks)
	var out []int32
	next := map[string]int{}
	for i := 0; len(out) < total; i = (i + 1) % len(racks) {
		r := racks[i]
		if next[r] < len(byRack[r]) {
			out = append(out, byRack[r][next[r]])
			next[r]++
		}
	}
	return out
}

// assign returns the replicas of partitions first .. first+count-1.
// Invariant on entry: 1 <= rf <= len(pl.brokers).
func (pl placement) assign(first, count int32, rf int) [][]int32 {
	n := len(pl.brokers)
	shift := pl.shift
	out := make([][]int32, 0, count)
	for p := first; p < first+count; p++ {
		if p > 0 && int(p)%n == 0 {
			shift++
		}
		head := (int(p) + pl.start) % n
		if pl.rack == nil {
			out = append(out, pl.plain(head, shift, rf))
		} else {
			out = append(out, pl.rackAware(head, shift, rf))
		}
	}
	return out
}

func (pl placement) plain(head, shift, rf int) []int32 {
	n := len(pl.brokers)
	replicas := []int32{pl.brokers[head]}
	for j := 0; j < rf-1; j++ {
		replicas = append(replicas, pl.brokers[replicaIndex(head, shift, j, n)])
	}
	return replicas
}

func (pl placement) rackAware(head, shift, rf int) []int32 {
	n := len(pl.brokers)
	leader := pl.brokers[head]
	replicas := []int32{leader}
	racks := map[string]bool{pl.rack[leader]: true}
	for k := 0; len(replicas) < rf; k++ {
		br := pl.brokers[replicaIndex(head, shift*pl.racks, k, n)]
		rackOK := !racks[pl.rack[br]] || len(racks) == pl.racks
		if rackOK && !slices.Contains(replicas, br) {
			replicas = append(replicas, br)
			racks[pl.rack[br]] = true
		}
	}
	return replicas
}

// replicaIndex is Kafka's: the j-th follower of the partition whose first
// replica is at head sits 1 + (shift + j) mod (n - 1) places after it, so
// it is never the first replica.
func replicaIndex(head, shift, j, n int) int {
	return (head + 1 + (shift+j)%(n-1)) % n
}

// topicSeed picks a new topic's start index and shift (Kafka draws them
// at random) from its name, so decisions stay pure and topics still start
// on different brokers.
func topicSeed(name string, n int) (start, shift int) {
	h := fnv.New64a()
	h.Write([]byte(name))
	v := h.Sum64()
	return int(v % uint64(n)), int(v / uint64(n) % uint64(n))
}

// liveBrokers returns the brokers new replicas may be placed on: unfenced
// and not shutting down, by id.
func liveBrokers(img metadata.Image) []metadata.BrokerImage {
	var out []metadata.BrokerImage
	for _, br := range img.Brokers() {
		if br.Eligible() {
			out = append(out, br)
		}
	}
	return out
}
