package controller

import (
	"testing"
)

// A 3-broker cluster loses the leader of an RF=3 topic to a SIGKILL: its
// heartbeat connection closes, it is fenced after the grace, a new leader
// from the ISR takes over at a higher epoch; the broker restarts, catches
// up and is unfenced, its leader takes it back into the ISR, and a
// preferred election moves leadership home.
func TestScenarioLeaderKilledAndBack(t *testing.T) {
	h := newHarness(t)
	h.brokers(3)
	res := h.c.CreateTopics(h.img, []CreateTopic{{Name: "orders", ID: [16]byte{7}, NumPartitions: 3, ReplicationFactor: 3}})
	if res.Topics[0].Err != nil {
		t.Fatal(res.Topics[0].Err)
	}
	h.commit(res.Records...)
	p0 := h.part("orders", 0)
	killed := p0.Leader
	if len(p0.ISR) != 3 || killed != p0.Replicas[0] {
		t.Fatalf("new partition %+v", p0)
	}
	heartbeatOthers := func() {
		for id := int32(1); id <= 3; id++ {
			if id != killed {
				h.heartbeat(id, nil)
			}
		}
	}

	// SIGKILL: the kernel closes the heartbeat connection.
	h.tick(1000)
	heartbeatOthers()
	h.c.ConnectionLost(killed, h.epoch(killed), h.now)
	h.tick(h.c.cfg.ConnectionLostGraceMs)
	h.wantBroker(killed, true, false)
	p := h.part("orders", 0)
	if p.Leader == killed || p.Leader != p0.Replicas[1] || p.LeaderEpoch <= p0.LeaderEpoch || len(p.ISR) != 2 {
		t.Fatalf("after the kill: %s (was %s)", state(p), state(p0))
	}
	for i, pi := range h.img.Topic("orders").Partitions {
		if pi.Leader == killed || pi.Hosts(killed) && len(pi.ISR) != 2 {
			t.Errorf("orders-%d: %s", i, state(pi))
		}
	}
	newLeader := p.Leader

	// The broker restarts: it registers (a new incarnation, a new epoch),
	// heartbeats before catching up (stays fenced), then after.
	h.tick(3000)
	heartbeatOthers()
	reg := h.register(killed, 2, nil)
	hb := h.heartbeat(killed, func(r *Heartbeat) { r.CurrentMetadataOffset = reg.BrokerEpoch - 1 })
	if !hb.IsFenced || hb.IsCaughtUp {
		t.Fatalf("unfenced before catching up: %+v", hb)
	}
	if hb := h.heartbeat(killed, nil); hb.IsFenced || !hb.IsCaughtUp {
		t.Fatalf("not unfenced once caught up: %+v", hb)
	}
	if h.part("orders", 0).Leader != newLeader {
		t.Fatalf("leadership moved on rejoin: %s", state(h.part("orders", 0)))
	}

	// It fetches and catches up; the leader brings it back into the ISR.
	p = h.part("orders", 0)
	ap := h.c.AlterPartition(h.img, AlterPartition{BrokerID: newLeader, BrokerEpoch: h.epoch(newLeader), Partitions: []AlterPartitionItem{
		{TopicID: [16]byte{7}, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, NewISR: append(ints(killed), p.ISR...)}}})
	if ap.Partitions[0].Err != nil {
		t.Fatal(ap.Partitions[0].Err)
	}
	h.commit(ap.Records...)

	// The imbalance check sees it; a preferred election moves leadership
	// back at a higher epoch still.
	if imb := LeaderImbalance(h.img)[killed]; imb.NotLed == 0 {
		t.Fatalf("no imbalance seen: %+v", imb)
	}
	before := h.part("orders", 0)
	el := h.c.ElectLeaders(h.img, ElectPreferred, []TopicPartition{{"orders", 0}})
	if el.Partitions[0].Err != nil {
		t.Fatal(el.Partitions[0].Err)
	}
	h.commit(el.Records...)
	after := h.part("orders", 0)
	if after.Leader != killed || after.LeaderEpoch != before.LeaderEpoch+1 || len(after.ISR) != 3 {
		t.Fatalf("after the preferred election: %s (before %s)", state(after), state(before))
	}
	t.Logf("orders-0: %s -> %s -> %s", state(p0), state(before), state(after))
}
