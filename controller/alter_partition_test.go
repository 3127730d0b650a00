package controller

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestAlterPartition(t *testing.T) {
	// Partition t-0 on 1, 2, 3, 4, led by 1, at leader epoch 1 and
	// partition epoch 2 (after a leader move and back); broker 4 fenced,
	// broker 3 shutting down.
	setup := func(t *testing.T) (*harness, [16]byte) {
		h := newHarness(t)
		h.brokers(5)
		id := h.topic("t", ints(1, 2, 3, 4))
		h.fenceNow(4)
		h.heartbeat(3, func(r *Heartbeat) { r.WantShutDown = true })
		h.wantState("t", 0, "leader 1 isr [1 2] epochs 0/2")
		return h, id
	}
	for _, tc := range []struct {
		name   string
		sender int32
		edit   func(*AlterPartitionItem)
		err    *kerr.Error
		want   string // the partition after, when accepted
	}{
		{"shrink", 1, func(it *AlterPartitionItem) { it.NewISR = ints(1) }, nil, "leader 1 isr [1] epochs 0/3"},
		{"unchanged: nothing to commit", 1, func(it *AlterPartitionItem) { it.NewISR = ints(1, 2) }, nil, "leader 1 isr [1 2] epochs 0/2"},
		{"stale partition epoch", 1, func(it *AlterPartitionItem) { it.PartitionEpoch--; it.NewISR = ints(1) }, kerr.InvalidUpdateVersion, ""},
		{"stale leader epoch", 1, func(it *AlterPartitionItem) { it.LeaderEpoch = -1; it.NewISR = ints(1) }, kerr.FencedLeaderEpoch, ""},
		{"epoch from the future", 1, func(it *AlterPartitionItem) { it.PartitionEpoch++; it.NewISR = ints(1) }, kerr.NotController, ""},
		{"not the leader", 2, func(it *AlterPartitionItem) { it.NewISR = ints(2) }, kerr.NotLeaderForPartition, ""},
		{"fenced new member", 1, func(it *AlterPartitionItem) { it.NewISR = ints(1, 2, 4) }, kerr.IneligibleReplica, ""},
		{"shutting-down new member", 1, func(it *AlterPartitionItem) { it.NewISR = ints(1, 2, 3) }, kerr.IneligibleReplica, ""},
		{"not a replica", 1, func(it *AlterPartitionItem) { it.NewISR = ints(1, 5) }, kerr.InvalidRequest, ""},
		{"without the leader", 1, func(it *AlterPartitionItem) { it.NewISR = ints(2) }, kerr.InvalidRequest, ""},
		{"empty", 1, func(it *AlterPartitionItem) { it.NewISR = nil }, kerr.InvalidRequest, ""},
		{"duplicate member", 1, func(it *AlterPartitionItem) { it.NewISR = ints(1, 2, 2) }, kerr.InvalidRequest, ""},
		{"unknown topic id", 1, func(it *AlterPartitionItem) { it.TopicID[0]++ }, kerr.UnknownTopicID, ""},
		{"unknown partition", 1, func(it *AlterPartitionItem) { it.Partition = 1 }, kerr.UnknownTopicOrPartition, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, id := setup(t)
			p := h.part("t", 0)
			it := AlterPartitionItem{TopicID: id, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch}
			tc.edit(&it)
			res := h.c.AlterPartition(h.img, AlterPartition{BrokerID: tc.sender, BrokerEpoch: h.epoch(tc.sender), Partitions: []AlterPartitionItem{it}})
			a := res.Partitions[0]
			if res.Err != nil || a.Err != tc.err {
				t.Fatalf("err %v / %v, want %v", res.Err, a.Err, tc.err)
			}
			if tc.err != nil {
				if len(res.Records) != 0 {
					t.Errorf("refused change proposes %v", res.Records)
				}
				return
			}
			h.commit(res.Records...)
			h.wantState("t", 0, tc.want)
			if now := h.part("t", 0); a.Leader != now.Leader || a.LeaderEpoch != now.LeaderEpoch ||
				a.PartitionEpoch != now.PartitionEpoch || !slices.Equal(a.ISR, now.ISR) {
				t.Errorf("answer %+v, committed %s", a, state(now))
			}
		})
	}
	t.Run("stale broker epoch", func(t *testing.T) {
		h, _ := setup(t)
		if res := h.c.AlterPartition(h.img, AlterPartition{BrokerID: 1, BrokerEpoch: h.epoch(1) - 1}); res.Err != kerr.StaleBrokerEpoch {
			t.Errorf("err %v", res.Err)
		}
		if res := h.c.AlterPartition(h.img, AlterPartition{BrokerID: 9}); res.Err != kerr.StaleBrokerEpoch {
			t.Errorf("unknown broker: %v", res.Err)
		}
	})
	t.Run("a partition twice", func(t *testing.T) {
		h, id := setup(t)
		p := h.part("t", 0)
		it := AlterPartitionItem{TopicID: id, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, NewISR: ints(1)}
		res := h.c.AlterPartition(h.img, AlterPartition{BrokerID: 1, BrokerEpoch: h.epoch(1), Partitions: []AlterPartitionItem{it, it}})
		if res.Partitions[0].Err != nil || res.Partitions[1].Err != kerr.InvalidRequest || len(res.Records) != 1 {
			t.Errorf("%+v", res)
		}
	})
}
