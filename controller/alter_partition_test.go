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

// TestAlterPartitionBatch: one request carrying many partitions of two
// topics (a leader's batched ISR expansions) is decided partition by
// partition — a stale one refused, an unchanged one answered as is — and
// the accepted changes come out as one set of records, one per changed
// partition, committed together.
func TestAlterPartitionBatch(t *testing.T) {
	h := newHarness(t)
	h.brokers(3)
	a := h.topic("a", ints(1, 2), ints(1, 3), ints(1, 2), ints(2, 1))
	b := h.topic("b", ints(1, 2, 3), ints(1, 3, 2))
	// Shrink every ISR led by broker 1 to [1] first, in one request.
	var shrink []AlterPartitionItem
	for _, tp := range []struct {
		id   [16]byte
		name string
		n    int
	}{{a, "a", 3}, {b, "b", 2}} {
		for i := range tp.n {
			p := h.part(tp.name, i)
			shrink = append(shrink, AlterPartitionItem{TopicID: tp.id, Partition: int32(i), LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, NewISR: ints(1)})
		}
	}
	res := h.c.AlterPartition(h.img, AlterPartition{BrokerID: 1, BrokerEpoch: h.epoch(1), Partitions: shrink})
	if res.Err != nil || len(res.Records) != 5 {
		t.Fatalf("shrink of 5: err %v, %d records", res.Err, len(res.Records))
	}
	for _, a := range res.Partitions {
		if a.Err != nil {
			t.Fatalf("%+v", a)
		}
	}
	h.commit(res.Records...)
	// Expand them back; a-1 is based on its old partition epoch (stale),
	// b-1 is already [1] (unchanged), a-3 is led by broker 2.
	expand := slices.Clone(shrink)
	for i := range expand {
		it := &expand[i]
		it.PartitionEpoch++
		it.NewISR = h.part(map[[16]byte]string{a: "a", b: "b"}[it.TopicID], int(it.Partition)).Replicas
		slices.Sort(it.NewISR)
	}
	expand[1].PartitionEpoch--
	expand[4].NewISR = ints(1)
	expand = append(expand, AlterPartitionItem{TopicID: a, Partition: 3, LeaderEpoch: 0, PartitionEpoch: 0, NewISR: ints(1)})
	res = h.c.AlterPartition(h.img, AlterPartition{BrokerID: 1, BrokerEpoch: h.epoch(1), Partitions: expand})
	want := []*kerr.Error{nil, kerr.InvalidUpdateVersion, nil, nil, nil, kerr.NotLeaderForPartition}
	for i, ans := range res.Partitions {
		if ans.Err != want[i] {
			t.Errorf("partition %d of the batch: %v, want %v", i, ans.Err, want[i])
		}
	}
	if res.Err != nil || len(res.Records) != 3 {
		t.Fatalf("err %v, %d records, want 3 (a-0, a-2, b-0)", res.Err, len(res.Records))
	}
	h.commit(res.Records...)
	h.wantState("a", 0, "leader 1 isr [1 2] epochs 0/2")
	h.wantState("a", 1, "leader 1 isr [1] epochs 0/1")
	h.wantState("a", 2, "leader 1 isr [1 2] epochs 0/2")
	h.wantState("b", 0, "leader 1 isr [1 2 3] epochs 0/2")
	h.wantState("b", 1, "leader 1 isr [1] epochs 0/1")
}
