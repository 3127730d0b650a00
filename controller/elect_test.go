package controller

import (
	"testing"

	"github.com/sluice-broker/sluice/metadata"
	"github.com/twmb/franz-go/pkg/kerr"
)

func setTopicConfig(topic, k, v string) metadata.ConfigRecord {
	return metadata.ConfigRecord{ResourceType: metadata.ResourceTopic, ResourceName: topic, Name: k, Value: &v}
}

// Fencing a leader elects the first ISR member, in replica order, that is
// unfenced and not shutting down; with none, the partition goes offline
// unless unclean election is allowed.
func TestElectionOnFence(t *testing.T) {
	for _, tc := range []struct {
		name     string
		replicas []int32
		isr      []int32 // set by AlterPartition before the fence
		setup    func(h *harness)
		want     string
	}{
		{"next in replica order", ints(1, 3, 2), nil, nil, "leader 3 isr [3 2] epochs 1/1"},
		{"ISR order does not matter, replica order does", ints(1, 2, 3), ints(1, 3, 2), nil, "leader 2 isr [3 2] epochs 1/2"},
		{"skips a fenced member", ints(1, 2, 3), nil, func(h *harness) { h.fenceNow(2) }, "leader 3 isr [3] epochs 1/2"},
		{"skips a shutting-down member", ints(1, 2, 3), nil, func(h *harness) {
			h.heartbeat(2, func(r *Heartbeat) { r.WantShutDown = true })
		}, "leader 3 isr [3] epochs 1/2"},
		{"none left: offline, the last member kept", ints(1, 2, 3), ints(1), nil, "leader -1 isr [1] epochs 1/2"},
		{"none in the ISR, unclean on the topic", ints(1, 2, 3), ints(1), func(h *harness) {
			h.commit(setTopicConfig("t", UncleanLeaderElectionConfig, "true"))
		}, "leader 2 isr [2] epochs 1/2"},
		{"none in the ISR, unclean by the controller's default", ints(1, 2, 3), ints(1), func(h *harness) {
			h.c.cfg.UncleanLeaderElection = true
		}, "leader 2 isr [2] epochs 1/2"},
		{"none in the ISR, unclean by the cluster's broker config", ints(1, 2, 3), ints(1), func(h *harness) {
			v := "true"
			h.commit(metadata.ConfigRecord{ResourceType: metadata.ResourceBroker, Name: UncleanLeaderElectionConfig, Value: &v})
		}, "leader 2 isr [2] epochs 1/2"},
		{"the topic's false beats the default", ints(1, 2, 3), ints(1), func(h *harness) {
			h.c.cfg.UncleanLeaderElection = true
			h.commit(setTopicConfig("t", UncleanLeaderElectionConfig, "false"))
		}, "leader -1 isr [1] epochs 1/2"},
		{"unclean skips fenced replicas", ints(1, 2, 3), ints(1), func(h *harness) {
			h.c.cfg.UncleanLeaderElection = true
			h.fenceNow(2)
		}, "leader 3 isr [3] epochs 1/2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.brokers(3)
			id := h.topic("t", tc.replicas)
			if tc.isr != nil {
				p := h.part("t", 0)
				res := h.c.AlterPartition(h.img, AlterPartition{BrokerID: 1, BrokerEpoch: h.epoch(1), Partitions: []AlterPartitionItem{
					{TopicID: id, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, NewISR: tc.isr}}})
				if res.Partitions[0].Err != nil {
					t.Fatal(res.Partitions[0].Err)
				}
				h.commit(res.Records...)
			}
			if tc.setup != nil {
				tc.setup(h)
			}
			h.fenceNow(1)
			h.wantState("t", 0, tc.want)
		})
	}
}

// fenceNow fences broker id as a closed connection does.
func (h *harness) fenceNow(id int32) {
	h.t.Helper()
	h.c.ConnectionLost(id, h.epoch(id), h.now)
	for other := range h.c.sessions {
		if other != id {
			h.c.sessions[other].deadlineMs = max(h.c.sessions[other].deadlineMs, h.now+1_000_000)
		}
	}
	h.tick(h.c.cfg.ConnectionLostGraceMs)
	if br, _ := h.img.Broker(id); !br.Fenced {
		h.t.Fatalf("broker %d not fenced", id)
	}
}

// A broker unfenced again is elected where a partition waits for it (it
// was the last ISR member), and where unclean election is allowed.
func TestUnfenceElectsOffline(t *testing.T) {
	h := newHarness(t)
	h.brokers(3)
	h.topic("one", ints(1))
	h.topic("two", ints(2, 1))
	h.fenceNow(1)
	h.fenceNow(2)
	h.wantState("one", 0, "leader -1 isr [1] epochs 1/1")
	h.wantState("two", 0, "leader -1 isr [2] epochs 1/2")
	h.heartbeat(1, nil)
	h.wantState("one", 0, "leader 1 isr [1] epochs 2/2")
	h.wantState("two", 0, "leader -1 isr [2] epochs 1/2") // 1 is not in its ISR
	h.commit(setTopicConfig("two", UncleanLeaderElectionConfig, "true"))
	h.fenceNow(1)
	h.heartbeat(1, nil)
	h.wantState("two", 0, "leader 1 isr [1] epochs 2/3")
}

func TestElectLeaders(t *testing.T) {
	h := newHarness(t)
	h.brokers(3)
	h.topic("p", ints(1, 2, 3), ints(2, 3, 1), ints(3, 1, 2), ints(1, 2, 3))
	h.topic("u", ints(1, 2))
	// Broker 1 goes and comes back: it leads nothing and is in no ISR.
	h.fenceNow(1)
	h.heartbeat(1, nil)
	h.wantState("p", 0, "leader 2 isr [2 3] epochs 1/1")
	// The leaders of p-0 and u-0 take it back into their ISRs; p-3's does
	// not (yet).
	for _, tp := range []TopicPartition{{"p", 0}, {"u", 0}} {
		p := h.part(tp.Topic, int(tp.Partition))
		res := h.c.AlterPartition(h.img, AlterPartition{BrokerID: p.Leader, BrokerEpoch: h.epoch(p.Leader), Partitions: []AlterPartitionItem{
			{TopicID: h.img.Topic(tp.Topic).ID, Partition: tp.Partition, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch,
				NewISR: append(ints(1), p.ISR...)}}})
		h.commit(res.Records...)
	}
	imb := LeaderImbalance(h.img)
	if imb[1] != (Imbalance{Preferred: 3, NotLed: 3}) || imb[2].Ratio() != 0 || imb[3].Ratio() != 0 {
		t.Errorf("imbalance %+v", imb)
	}
	res := h.c.ElectLeaders(h.img, ElectPreferred, []TopicPartition{{"p", 0}, {"p", 1}, {"p", 3}, {"p", 9}, {"x", 0}, {"p", 0}})
	want := []*kerr.Error{nil, kerr.ElectionNotNeeded, kerr.PreferredLeaderNotAvailable, kerr.UnknownTopicOrPartition,
		kerr.UnknownTopicOrPartition, kerr.InvalidRequest}
	for i, r := range res.Partitions {
		if r.Err != want[i] {
			t.Errorf("preferred %v: %v, want %v", r.TopicPartition, r.Err, want[i])
		}
	}
	h.commit(res.Records...)
	h.wantState("p", 0, "leader 1 isr [1 2 3] epochs 2/3")
	// auto.leader.rebalance: broker 1 leads 1 of its 3 (67%).
	if r := h.c.Rebalance(h.img, 70); len(r.Records) != 0 {
		t.Errorf("67%% is under 70%%, yet %v", r.Records)
	}
	h.commit(h.c.Rebalance(h.img, 10).Records...)
	h.wantState("u", 0, "leader 1 isr [1 2] epochs 2/3")
	h.wantState("p", 3, "leader 2 isr [2 3] epochs 1/1") // 1 is not in its ISR

	// UNCLEAN: only where there is no leader.
	h.fenceNow(1)
	h.fenceNow(2)
	h.wantState("u", 0, "leader -1 isr [2] epochs 4/5")
	h.heartbeat(1, nil)
	un := h.c.ElectLeaders(h.img, ElectUnclean, []TopicPartition{{"u", 0}, {"p", 1}})
	if un.Partitions[0].Err != nil || un.Partitions[1].Err != kerr.ElectionNotNeeded {
		t.Errorf("unclean: %+v", un.Partitions)
	}
	h.commit(un.Records...)
	h.wantState("u", 0, "leader 1 isr [1] epochs 5/6")
	h.fenceNow(1)
	if un := h.c.ElectLeaders(h.img, ElectUnclean, []TopicPartition{{"u", 0}}); un.Partitions[0].Err != kerr.EligibleLeadersNotAvailable {
		t.Errorf("unclean with no one: %v", un.Partitions[0].Err)
	}
	if bad := h.c.ElectLeaders(h.img, 7, []TopicPartition{{"u", 0}}); bad.Partitions[0].Err != kerr.InvalidRequest {
		t.Errorf("unknown election type: %v", bad.Partitions[0].Err)
	}
	// nil elects everywhere it can.
	h.heartbeat(1, nil)
	h.heartbeat(2, nil)
	all := h.c.ElectLeaders(h.img, ElectPreferred, nil)
	if len(all.Partitions) != 5 {
		t.Errorf("all partitions: %+v", all.Partitions)
	}
}
