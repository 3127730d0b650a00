package group

// Server-side assignors of consumer-protocol groups (KIP-848): the
// coordinator, not a member, decides the target assignment. Two, by the
// names Kafka gives them, chosen by a member's ServerAssignor or else the
// first of group.consumer.assignors:
//
//   - uniform (the default): every subscribed partition goes to one of its
//     subscribers, counts as even as the subscriptions allow, sticky (a
//     partition stays with its member unless balance needs it elsewhere),
//     and rack-aware: among the members that may take a partition at equal
//     cost, one in a rack holding a replica is preferred.
//   - range: per topic, its subscribers sorted by member id take contiguous
//     ranges of partitions, the first n%m one more (co-partitioned topics
//     land together). Not rack-aware.
//
// Both are pure functions of their input: the same members, subscriptions
// and topics give the same assignment, whatever the order maps iterate in.

import (
	"slices"
	"sort"
	"strings"
)

// Assignor names.
const (
	AssignorUniform = "uniform"
	AssignorRange   = "range"
)

// knownAssignor reports whether name is an assignor Sluice runs.
func knownAssignor(name string) bool { return name == AssignorUniform || name == AssignorRange }

// tidp names one partition by topic id.
type tidp struct {
	topic [16]byte
	part  int32
}

// assignment maps a topic id to its partitions. Invariant: each slice is
// sorted, without duplicates, and not empty.
type assignment map[[16]byte][]int32

// assignInput is what an assignor decides from.
type assignInput struct {
	// members sorted by id.
	members []assignMember
	// topics by id: the subscribed topics that exist.
	topics map[[16]byte]TopicMeta
}

// assignMember is one member as the assignor sees it.
type assignMember struct {
	id     string
	rack   string
	topics [][16]byte // subscribed topic ids that exist, sorted
	prev   assignment // the member's current target (for stickiness)
}

// runAssignor computes a target assignment with the named assignor;
// every member of in gets an entry (possibly empty).
func runAssignor(name string, in *assignInput) map[string]assignment {
	if name == AssignorRange {
		return assignRange(in)
	}
	return assignUniform(in)
}

// sortedTopicIDs lists the topics of in in a stable order (by name, then
// id), so results do not depend on map order.
func (in *assignInput) sortedTopicIDs() [][16]byte {
	ids := make([][16]byte, 0, len(in.topics))
	for id := range in.topics {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool {
		a, b := in.topics[ids[i]], in.topics[ids[j]]
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return string(a.ID[:]) < string(b.ID[:])
	})
	return ids
}

// assignRange is the range assignor.
func assignRange(in *assignInput) map[string]assignment {
	out := emptyAssignments(in)
	for _, tid := range in.sortedTopicIDs() {
		var subs []string
		for _, m := range in.members {
			if slices.Contains(m.topics, tid) {
				subs = append(subs, m.id)
			}
		}
		if len(subs) == 0 {
			continue
		}
		n := in.topics[tid].Partitions
		per, extra := n/int32(len(subs)), n%int32(len(subs))
		next := int32(0)
		for i, id := range subs {
			k := per
			if int32(i) < extra {
				k++
			}
			for p := next; p < next+k; p++ {
				out[id].add(tid, p)
			}
			next += k
		}
	}
	return out
}

func emptyAssignments(in *assignInput) map[string]assignment {
	out := make(map[string]assignment, len(in.members))
	for _, m := range in.members {
		out[m.id] = assignment{}
	}
	return out
}

// uniformState is the uniform assignor's working state.
type uniformState struct {
	in      *assignInput
	members map[string]*assignMember
	owner   map[tidp]string          // current owner of each placed partition
	owned   map[string]map[tidp]bool // member → partitions it holds
	subs    map[[16]byte][]string    // topic → subscribers, sorted
}

// assignUniform is the uniform assignor: keep what members had and may
// still have, place the rest on the least-loaded subscriber, then move
// partitions from the most to the least loaded member until no move can
// narrow the gap.
func assignUniform(in *assignInput) map[string]assignment {
	s := &uniformState{in: in, members: map[string]*assignMember{}, owner: map[tidp]string{},
		owned: map[string]map[tidp]bool{}, subs: map[[16]byte][]string{}}
	for i := range in.members {
		m := &in.members[i]
		s.members[m.id] = m
		s.owned[m.id] = map[tidp]bool{}
		for _, tid := range m.topics {
			s.subs[tid] = append(s.subs[tid], m.id)
		}
	}
	s.keepPrevious()
	s.placeRest()
	s.balance()
	out := emptyAssignments(in)
	for tp, id := range s.owner {
		out[id].add(tp.topic, tp.part)
	}
	for _, a := range out {
		a.sortAll()
	}
	return out
}

// keepPrevious keeps each member's previous partitions that it still
// subscribes to and that still exist (the first claimant in member order
// wins a partition two members held).
func (s *uniformState) keepPrevious() {
	for _, m := range s.in.members {
		for tid, parts := range m.prev {
			t, ok := s.in.topics[tid]
			if !ok || !slices.Contains(m.topics, tid) {
				continue
			}
			for _, p := range parts {
				tp := tidp{tid, p}
				if p < t.Partitions && s.owner[tp] == "" {
					s.give(tp, m.id)
				}
			}
		}
	}
}

func (s *uniformState) give(tp tidp, id string) {
	if old := s.owner[tp]; old != "" {
		delete(s.owned[old], tp)
	}
	s.owner[tp] = id
	s.owned[id][tp] = true
}

// placeRest gives every unplaced partition to its least-loaded
// subscriber, in topic and partition order.
func (s *uniformState) placeRest() {
	for _, tid := range s.in.sortedTopicIDs() {
		subs := s.subs[tid]
		if len(subs) == 0 {
			continue
		}
		for p := int32(0); p < s.in.topics[tid].Partitions; p++ {
			tp := tidp{tid, p}
			if s.owner[tp] == "" {
				s.give(tp, s.pickLeast(tp, subs, ""))
			}
		}
	}
}

// pickLeast chooses among candidates (sorted ids, skipping except) the one
// holding the fewest partitions; at equal counts, one whose rack holds a
// replica of tp, then the smallest id.
func (s *uniformState) pickLeast(tp tidp, candidates []string, except string) string {
	best, bestN, bestRack := "", 0, false
	for _, id := range candidates {
		if id == except {
			continue
		}
		n, rack := len(s.owned[id]), s.rackMatch(id, tp)
		if best == "" || n < bestN || n == bestN && rack && !bestRack {
			best, bestN, bestRack = id, n, rack
		}
	}
	return best
}

// rackMatch reports whether the member's rack holds a replica of tp.
func (s *uniformState) rackMatch(id string, tp tidp) bool {
	rack := s.members[id].rack
	if rack == "" {
		return false
	}
	racks := s.in.topics[tp.topic].Racks
	if int(tp.part) >= len(racks) {
		return false
	}
	return slices.Contains(racks[tp.part], rack)
}

// balance moves partitions from a member to a subscriber holding at least
// two fewer, until none can move. Each move narrows the spread of counts,
// so the loop ends; candidates are scanned in a fixed order.
func (s *uniformState) balance() {
	for moved := true; moved; {
		moved = false
		for _, from := range s.byLoadDesc() {
			if tp, to, ok := s.findMove(from); ok {
				s.give(tp, to)
				moved = true
				break
			}
		}
	}
}

// byLoadDesc lists member ids, most partitions first (ties by id).
func (s *uniformState) byLoadDesc() []string {
	ids := make([]string, 0, len(s.in.members))
	for _, m := range s.in.members {
		ids = append(ids, m.id)
	}
	sort.SliceStable(ids, func(i, j int) bool { return len(s.owned[ids[i]]) > len(s.owned[ids[j]]) })
	return ids
}

// findMove finds a partition of from that a subscriber with at least two
// fewer partitions can take; a partition whose rack the taker matches and
// from does not is preferred. The least-loaded subscribers of each topic
// are found once per call, not once per partition.
func (s *uniformState) findMove(from string) (tidp, string, bool) {
	tps := make([]tidp, 0, len(s.owned[from]))
	for tp := range s.owned[from] {
		tps = append(tps, tp)
	}
	sort.Slice(tps, func(i, j int) bool { return tidpLess(tps[i], tps[j]) })
	n := len(s.owned[from])
	least := map[[16]byte][]string{}
	var found tidp
	foundTo, foundScore := "", -1
	for _, tp := range tps {
		cands, ok := least[tp.topic]
		if !ok {
			cands = s.leastLoaded(s.subs[tp.topic], from, n-2)
			least[tp.topic] = cands
		}
		if len(cands) == 0 {
			continue
		}
		to := cands[0]
		for _, c := range cands {
			if s.rackMatch(c, tp) {
				to = c
				break
			}
		}
		score := 0
		if s.rackMatch(to, tp) && !s.rackMatch(from, tp) {
			score = 1
		}
		if score > foundScore {
			found, foundTo, foundScore = tp, to, score
		}
	}
	return found, foundTo, foundScore >= 0
}

// leastLoaded lists, in id order, the candidates other than except that
// hold the fewest partitions, if that is at most limit.
func (s *uniformState) leastLoaded(candidates []string, except string, limit int) []string {
	var out []string
	low := 0
	for _, id := range candidates {
		n := len(s.owned[id])
		switch {
		case id == except || n > limit:
		case len(out) == 0 || n < low:
			out, low = append(out[:0], id), n
		case n == low:
			out = append(out, id)
		}
	}
	return out
}

func tidpLess(a, b tidp) bool {
	if c := strings.Compare(string(a.topic[:]), string(b.topic[:])); c != 0 {
		return c < 0
	}
	return a.part < b.part
}

// ---- assignment helpers ----

// add inserts p unsorted; call sortAll after a series of adds.
func (a assignment) add(tid [16]byte, p int32) { a[tid] = append(a[tid], p) }

func (a assignment) sortAll() {
	for tid, ps := range a {
		slices.Sort(ps)
		a[tid] = slices.Compact(ps)
	}
}

func (a assignment) has(tid [16]byte, p int32) bool {
	_, ok := slices.BinarySearch(a[tid], p)
	return ok
}

// count is the number of partitions.
func (a assignment) count() int {
	n := 0
	for _, ps := range a {
		n += len(ps)
	}
	return n
}

func (a assignment) clone() assignment {
	out := make(assignment, len(a))
	for tid, ps := range a {
		out[tid] = slices.Clone(ps)
	}
	return out
}

func (a assignment) equal(b assignment) bool {
	if len(a) != len(b) {
		return false
	}
	for tid, ps := range a {
		if !slices.Equal(ps, b[tid]) {
			return false
		}
	}
	return true
}

// filter returns the partitions of a for which keep is true.
func (a assignment) filter(keep func(tid [16]byte, p int32) bool) assignment {
	out := assignment{}
	for tid, ps := range a {
		for _, p := range ps {
			if keep(tid, p) {
				out[tid] = append(out[tid], p)
			}
		}
	}
	return out
}

// sortedTopics lists a's topic ids in byte order.
func (a assignment) sortedTopics() [][16]byte {
	ids := make([][16]byte, 0, len(a))
	for tid := range a {
		ids = append(ids, tid)
	}
	sort.Slice(ids, func(i, j int) bool { return string(ids[i][:]) < string(ids[j][:]) })
	return ids
}
