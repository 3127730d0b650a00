package group

import (
	"fmt"
	"testing"
)

// BenchmarkConsumerHeartbeatSteady is one heartbeat of a settled member
// in a group of 500 members on 2,000 partitions: nothing changes, nothing
// is written.
func BenchmarkConsumerHeartbeatSteady(b *testing.B) {
	h := newConsumerHarness(b)
	h.topics.add("t", 2000)
	var ms []*fakeMember
	for i := range 500 {
		m := &fakeMember{id: fmt.Sprintf("m%03d", i), group: "g", topics: []string{"t"}}
		ms = append(ms, m)
	}
	for round := 0; round < 4; round++ {
		for _, m := range ms {
			h.applyAnswer(m, h.c.ConsumerHeartbeat(h.request(m)))
		}
	}
	m := ms[0]
	req := h.request(m)
	b.ResetTimer()
	for range b.N {
		if res := h.c.ConsumerHeartbeat(req); res.ErrorCode != 0 || res.HasAssignment {
			b.Fatalf("steady heartbeat: %+v", res)
		}
	}
}

// BenchmarkUniformAssignJoin is the target computed when a 501st member
// joins a group of 500 on 2,000 partitions (every member keeping its
// previous target where it can).
func BenchmarkUniformAssignJoin(b *testing.B) {
	id := [16]byte{1}
	in := &assignInput{topics: map[[16]byte]TopicMeta{id: {Name: "t", ID: id, Partitions: 2000}}}
	for i := range 500 {
		in.members = append(in.members, assignMember{id: fmt.Sprintf("m%03d", i), topics: [][16]byte{id}})
	}
	first := runAssignor(AssignorUniform, in)
	for i := range in.members {
		in.members[i].prev = first[in.members[i].id]
	}
	in.members = append(in.members, assignMember{id: "m500", topics: [][16]byte{id}})
	b.ResetTimer()
	for range b.N {
		runAssignor(AssignorUniform, in)
	}
}
