package group

// The life of a consumer group's state between heartbeats: the shared
// group fields kept in line with it, each member's timer (session,
// static-leave and revocation deadlines) and what fencing a member does,
// and the group's turn into a classic group when it is empty.

import (
	"crypto/rand"
	"encoding/base64"
	"time"
)

// afterConsumerChange brings the shared group fields and the member
// timers in line with the consumer state.
func (g *group) afterConsumerChange() {
	st := g.cons.st
	g.protocolType = consumerProtocolType
	switch {
	case len(st.members) == 0 && g.state != groupEmpty:
		g.transition(groupEmpty)
	case len(st.members) > 0 && g.state != groupStable:
		g.transition(groupStable)
	}
	g.subscribed = g.consumerSubscribedNames(st)
	for id, t := range g.cons.timers {
		if st.members[id] == nil {
			t.t.Stop()
			delete(g.cons.timers, id)
		}
	}
	for _, m := range st.members {
		g.armMemberTimer(m)
	}
}

// armMemberTimer makes sure the member's timer fires by its earliest
// deadline; the callback re-arms itself for later ones.
func (g *group) armMemberTimer(m *cgMember) {
	due := m.nextDeadline()
	if due.IsZero() {
		return
	}
	d := max(due.Sub(g.c.clock.Now()), 0)
	if mt := g.cons.timers[m.id]; mt != nil {
		if due.Before(mt.at) {
			mt.t.Reset(d)
			mt.at = due
		}
		return
	}
	id := m.id
	g.cons.timers[id] = &memberTimer{t: g.c.clock.AfterFunc(d, func() { g.onMemberTimer(id) }), at: due}
}

func (m *cgMember) nextDeadline() time.Time {
	if !m.revokeBy.IsZero() && (m.deadline.IsZero() || m.revokeBy.Before(m.deadline)) {
		return m.revokeBy
	}
	return m.deadline
}

// onMemberTimer fences a member whose session expired, or that did not
// revoke in its rebalance timeout.
func (g *group) onMemberTimer(id string) {
	g.mu.Lock()
	defer g.unlock()
	if g.state == groupDead || g.cons == nil {
		return
	}
	delete(g.cons.timers, id)
	m := g.cons.st.members[id]
	if m == nil {
		return
	}
	now := g.c.clock.Now()
	due := m.nextDeadline()
	if due.After(now) {
		g.armMemberTimer(m)
		return
	}
	why := "session expired"
	if !m.revokeBy.IsZero() && !m.revokeBy.After(now) {
		why = "did not revoke within its rebalance timeout"
	}
	st := g.cons.st.clone()
	st.removeMember(st.members[id])
	if code := g.commitConsumer(g.cons.st, st); code != 0 {
		g.armMemberTimer(m) // try again once the log takes writes
		return
	}
	g.c.log.Info("consumer group member fenced", "group", g.name, "member", id, "reason", why)
	g.maybeDowngrade()
}

// stopConsumer stops every member timer (unload, or the group ends).
func (g *group) stopConsumer() {
	if g.cons == nil {
		return
	}
	for id, t := range g.cons.timers {
		t.t.Stop()
		delete(g.cons.timers, id)
	}
}

// dropConsumerIfUnused forgets a consumer group that a failed join
// created and that nothing persisted.
func (g *group) dropConsumerIfUnused() {
	if g.cons != nil && g.cons.st.epoch == 0 && len(g.cons.st.members) == 0 && len(g.offsets) == 0 &&
		g.generation == 0 && g.protocolType == "" {
		g.cons = nil
		g.dropIfUnused()
	}
}

// consumerEmpty reports whether a consumer group has no members (a
// JoinGroup may then turn it into a classic group).
func (g *group) consumerEmpty() bool { return g.cons == nil || len(g.cons.st.members) == 0 }

// toClassic turns an empty consumer group into a classic one, writing the
// tombstones of its consumer records; an error code if they failed.
func (g *group) toClassic() int16 {
	if g.cons == nil {
		return 0
	}
	if err := g.append(cgTombstones(g.name, g.cons.st)); err != nil {
		return appendErrorCode(err, false)
	}
	g.stopConsumer()
	g.cons = nil
	g.protocolType = ""
	return 0
}

// dropEmptyClassic tombstones the metadata record of an empty classic
// group (one that had members once) that becomes a consumer group, as
// Kafka does; its offsets stay.
func (g *group) dropEmptyClassic() int16 {
	if g.generation == 0 && g.protocolType == "" {
		return 0 // never persisted
	}
	if err := g.append([]offsetsRecord{{key: groupMetadataKey(g.name)}}); err != nil {
		return appendErrorCode(err, false)
	}
	g.generation, g.protocol, g.leader = 0, "", ""
	return 0
}

// consumerSubscribedNames is the union of the topics the members
// subscribe to (names, and those their regexes match now).
func (g *group) consumerSubscribedNames(st *cgState) map[string]bool {
	out := map[string]bool{}
	for name := range st.subscribed {
		out[name] = true
	}
	for _, m := range st.members {
		for _, t := range m.topics {
			out[t] = true
		}
	}
	return out
}

// newUUIDString is a random member id in Kafka's form for ids the
// coordinator makes (ConsumerGroupHeartbeat v0): a UUID in URL-safe
// base64 without padding.
func newUUIDString() string {
	var u [16]byte
	_, _ = rand.Read(u[:])
	return base64.RawURLEncoding.EncodeToString(u[:])
}
