package group

// The target assignment of a consumer group and each member's way to it.
//
// A member moves toward its target in steps, as Kafka's
// CurrentAssignmentBuilder does:
//
//	Stable ── new target ──▶ partitions to give up?
//	                            yes: Unrevoked (keeps its epoch; holds target ∩ held,
//	                                 the rest pending revocation)
//	                            no:  takes target partitions no one else holds,
//	                                 epoch = assignment epoch; Unreleased while some
//	                                 are still held by others, else Stable
//	Unrevoked ── heartbeat owning none of the pending ──▶ epoch+1, reconcile again
//	Unreleased ── every heartbeat ──▶ reconcile again (takes what was released)

import (
	"slices"
	"sort"
)

// refreshTopics resolves every member's subscription against the topics
// that exist now (regexes re-evaluated) and reports whether the
// subscribed topics' metadata changed (a topic created, deleted or given
// more partitions): the group epoch must then move.
func (g *group) refreshTopics(st *cgState) bool {
	now := g.resolveSubscribed(st)
	if maps2Equal(now, st.subscribed) {
		return false
	}
	st.subscribed = now
	return true
}

func maps2Equal(a, b map[string]topicSnapshot) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// resolveSubscribed lists the subscribed topics that exist, by name.
func (g *group) resolveSubscribed(st *cgState) map[string]topicSnapshot {
	out := map[string]topicSnapshot{}
	topics := g.c.cfg.Consumer.Topics
	if topics == nil {
		return out
	}
	// Each name and each regex once, however many members share them.
	wanted, regexes := map[string]bool{}, map[string]bool{}
	for _, m := range st.members {
		for _, name := range m.topics {
			wanted[name] = true
		}
		if m.regex != "" {
			regexes[m.regex] = true
		}
	}
	if len(regexes) > 0 {
		names := topics.Names()
		for re := range regexes {
			for _, name := range matchRegex(re, names) {
				wanted[name] = true
			}
		}
	}
	for name := range wanted {
		if t, ok := topics.ByName(name); ok {
			out[name] = topicSnapshot{id: t.ID, partitions: t.Partitions}
		}
	}
	return out
}

// matchRegex lists the names a subscription regex matches (none if it
// does not compile: it was checked when the member sent it).
func matchRegex(re string, names []string) []string {
	r, err := compileRegex(re)
	if err != nil {
		return nil
	}
	var out []string
	for _, n := range names {
		if r.MatchString(n) {
			out = append(out, n)
		}
	}
	return out
}

// memberTopicIDs lists the ids of the topics a member subscribes to (by
// name or regex) that exist in st.subscribed, sorted.
func (st *cgState) memberTopicIDs(m *cgMember, names []string) [][16]byte {
	seen := map[[16]byte]bool{}
	for _, n := range m.topics {
		if t, ok := st.subscribed[n]; ok {
			seen[t.id] = true
		}
	}
	if m.regex != "" {
		for _, n := range matchRegex(m.regex, names) {
			if t, ok := st.subscribed[n]; ok {
				seen[t.id] = true
			}
		}
	}
	ids := make([][16]byte, 0, len(seen))
	for id := range seen {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return string(ids[i][:]) < string(ids[j][:]) })
	return ids
}

// computeTarget recomputes the target assignment at the group epoch.
func (g *group) computeTarget(st *cgState) {
	in := &assignInput{topics: map[[16]byte]TopicMeta{}}
	var names []string
	if t := g.c.cfg.Consumer.Topics; t != nil {
		names = t.Names()
		for _, snap := range st.subscribed {
			if meta, ok := t.ByID(snap.id); ok {
				meta.Partitions = snap.partitions
				in.topics[snap.id] = meta
			}
		}
	}
	for _, id := range st.sortedMemberIDs() {
		m := st.members[id]
		in.members = append(in.members, assignMember{id: id, rack: m.rackID,
			topics: st.memberTopicIDs(m, names), prev: st.target[id]})
	}
	st.target = runAssignor(g.chooseAssignor(st), in)
	st.targetEpoch = st.epoch
}

// chooseAssignor is the assignor most members asked for (ties by name),
// else the first of group.consumer.assignors.
func (g *group) chooseAssignor(st *cgState) string {
	votes := map[string]int{}
	for _, m := range st.members {
		if m.assignor != "" {
			votes[m.assignor]++
		}
	}
	best := ""
	for name, n := range votes {
		if best == "" || n > votes[best] || n == votes[best] && name < best {
			best = name
		}
	}
	if best == "" {
		best = g.c.assignors()[0]
	}
	return best
}

func (st *cgState) sortedMemberIDs() []string {
	ids := make([]string, 0, len(st.members))
	for id := range st.members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// dropDeletedTopics removes partitions of topics that no longer exist
// from every member's holdings: there is nothing left to revoke (as
// Kafka drops them), and a member still reporting them must not block
// the others.
func (g *group) dropDeletedTopics(st *cgState) {
	topics := g.c.cfg.Consumer.Topics
	if topics == nil {
		return
	}
	gone := map[[16]byte]bool{}
	for _, m := range st.members {
		for _, a := range []assignment{m.assigned, m.pending} {
			for tid := range a {
				if _, seen := gone[tid]; !seen {
					_, exists := topics.ByID(tid)
					gone[tid] = !exists
				}
			}
		}
	}
	for id, m := range st.members {
		holds := false
		for tid, isGone := range gone {
			holds = holds || isGone && (m.assigned[tid] != nil || m.pending[tid] != nil)
		}
		if !holds {
			continue
		}
		m = st.own(id)
		for tid, isGone := range gone {
			if isGone {
				delete(m.assigned, tid)
				delete(m.pending, tid)
			}
		}
		if m.state == memberUnrevoked && m.pending.count() == 0 {
			m.state = memberStable // nothing left to revoke: reconcile moves it on
		}
	}
}

// reconcile moves m one step toward its target. owned is what the member
// reports holding (nil: not reported, so it is assumed to hold all it
// was given).
func (st *cgState) reconcile(m *cgMember, owned []TopicPartitions) {
	switch m.state {
	case memberUnrevoked:
		if owned == nil || ownsAny(owned, m.pending) {
			return
		}
		st.nextAssignment(m, m.epoch+1)
	case memberUnreleased:
		st.nextAssignment(m, m.epoch)
	case memberStable:
		if m.epoch != st.targetEpoch {
			st.nextAssignment(m, m.epoch)
		}
	default:
		st.nextAssignment(m, st.targetEpoch)
	}
}

// nextAssignment is one reconciliation step at epoch (the member's epoch
// if it must still revoke).
func (st *cgState) nextAssignment(m *cgMember, epoch int32) {
	target := st.target[m.id]
	keep := m.assigned.filter(func(tid [16]byte, p int32) bool { return target.has(tid, p) })
	revoke := m.assigned.filter(func(tid [16]byte, p int32) bool { return !target.has(tid, p) })
	if revoke.count() > 0 {
		m.state, m.assigned, m.pending = memberUnrevoked, keep, revoke
		m.setEpoch(epoch)
		return
	}
	held := st.heldByOthers(m.id)
	unreleased := false
	for tid, ps := range target {
		for _, p := range ps {
			switch {
			case keep.has(tid, p):
			case held[tidp{tid, p}]:
				unreleased = true
			default:
				keep.add(tid, p)
			}
		}
	}
	keep.sortAll()
	m.assigned, m.pending = keep, assignment{}
	m.state = memberStable
	if unreleased {
		m.state = memberUnreleased
	}
	m.setEpoch(st.targetEpoch)
}

func (m *cgMember) setEpoch(e int32) {
	if e != m.epoch {
		m.prevEpoch, m.epoch = m.epoch, e
	}
}

// heldByOthers is every partition another member holds or must still
// revoke.
func (st *cgState) heldByOthers(self string) map[tidp]bool {
	out := map[tidp]bool{}
	for id, o := range st.members {
		if id == self {
			continue
		}
		for _, a := range []assignment{o.assigned, o.pending} {
			for tid, ps := range a {
				for _, p := range ps {
					out[tidp{tid, p}] = true
				}
			}
		}
	}
	return out
}

// ownsAny reports whether owned includes any partition of a.
func ownsAny(owned []TopicPartitions, a assignment) bool {
	for _, t := range owned {
		for _, p := range t.Partitions {
			if a.has(t.TopicID, p) {
				return true
			}
		}
	}
	return false
}

// ownedWithin reports whether every owned partition is in a.
func ownedWithin(owned []TopicPartitions, a assignment) bool {
	for _, t := range owned {
		for _, p := range t.Partitions {
			if !a.has(t.TopicID, p) {
				return false
			}
		}
	}
	return true
}

// ownedEquals reports whether owned is exactly a.
func ownedEquals(owned []TopicPartitions, a assignment) bool {
	n := 0
	for _, t := range owned {
		n += len(t.Partitions)
	}
	return n == a.count() && ownedWithin(owned, a)
}

// toTopicPartitions lists a by topic id order.
func (a assignment) toTopicPartitions() []TopicPartitions {
	out := make([]TopicPartitions, 0, len(a))
	for _, tid := range a.sortedTopics() {
		out = append(out, TopicPartitions{TopicID: tid, Partitions: slices.Clone(a[tid])})
	}
	return out
}
