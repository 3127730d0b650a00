package controller

import (
	"testing"

	"github.com/sluice-broker/sluice/metadata"
	"github.com/twmb/franz-go/pkg/kerr"
)

// FuzzController drives a cluster of up to 4 brokers through any sequence
// of events — registrations, heartbeats (caught up or not, wanting fence
// or shutdown), closed connections, time passing, topics and partitions
// created, ISR changes (current or stale), elections, unregistrations,
// unclean-election configs — committing every decision at once. Every
// batch must apply, keep the image's invariants (every leader ∈ ISR, no
// fenced or shutting-down leader, ISR ⊆ replicas) and never move an epoch
// back; a refused request proposes nothing; a broker's epoch grows across
// unregistration too.
func FuzzController(f *testing.F) {
	// Register and unfence 3 brokers, create an RF=3 topic, kill a broker,
	// let it return, elect preferred.
	f.Add([]byte{0, 1, 0, 2, 0, 3, 1, 1, 0, 1, 2, 0, 1, 3, 0, 4, 0, 3, 3, 2, 1, 3, 1, 0, 1, 1, 0, 5, 0, 0, 0, 1, 6, 0, 0})
	f.Add([]byte{0, 1, 0, 2, 1, 1, 0, 1, 2, 0, 4, 1, 2, 2, 1, 1, 2, 3, 2, 3, 3, 7, 1, 9, 1, 6, 1, 1, 8, 1, 3})
	f.Add([]byte{0, 1, 0, 2, 0, 3, 0, 4, 1, 1, 0, 1, 2, 0, 1, 3, 0, 1, 4, 0, 4, 2, 3, 3, 10, 1, 1, 2, 3, 4, 3, 5, 1, 1, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		h := newHarness(t)
		maxEpoch := map[int32]int64{}
		next := func() int {
			if len(b) == 0 {
				return 0
			}
			v := b[0]
			b = b[1:]
			return int(v)
		}
		broker := func() int32 { return int32(next()%4 + 1) }
		topics := []string{"a", "b", "c"}
		for len(b) > 0 {
			h.step(next(), next, broker, topics)
			for _, br := range h.img.Brokers() {
				if br.Epoch < maxEpoch[br.ID] {
					t.Fatalf("broker %d epoch %d after %d", br.ID, br.Epoch, maxEpoch[br.ID])
				}
				maxEpoch[br.ID] = br.Epoch
			}
		}
	})
}

// step runs one fuzz event.
func (h *harness) step(op int, next func() int, broker func() int32, topics []string) {
	h.t.Helper()
	refused := func(what string, err *kerr.Error, recs []metadata.Record) {
		if err != nil && len(recs) != 0 {
			h.t.Fatalf("%s refused (%v) but proposes %v", what, err, recs)
		}
	}
	switch op % 12 {
	case 0:
		h.register(broker(), byte(next()), nil)
	case 1:
		id := broker()
		if _, ok := h.img.Broker(id); !ok {
			return
		}
		behind := int64(next() % 3)
		flags := next()
		res := h.heartbeat(id, func(r *Heartbeat) {
			r.CurrentMetadataOffset -= behind * 5
			r.WantFence, r.WantShutDown = flags&1 != 0, flags&2 != 0
		})
		refused("heartbeat", res.Err, res.Records)
	case 2:
		id := broker()
		h.c.ConnectionLost(id, h.epoch(id), h.now)
	case 3:
		h.tick([]int64{0, 100, 500, 2000, 9000}[next()%5])
	case 4:
		name := topics[next()%len(topics)]
		ct := CreateTopic{Name: name, ID: [16]byte{0xf, name[0]}, NumPartitions: int32(next() % 4), ReplicationFactor: int16(next() % 4)}
		if next()%3 == 0 {
			ct.NumPartitions, ct.ReplicationFactor = -1, -1
			ct.Assignments = [][]int32{{broker(), broker()}, {broker(), broker()}}
		}
		res := h.c.CreateTopics(h.img, []CreateTopic{ct})
		refused("create topic", res.Topics[0].Err, res.Records)
		h.commit(res.Records...)
	case 5:
		t := h.img.Topic(topics[next()%len(topics)])
		if t == nil {
			return
		}
		i := next() % len(t.Partitions)
		p := t.Partitions[i]
		sender := p.Leader
		if next()%4 == 0 {
			sender = broker()
		}
		var isr []int32
		for _, r := range p.Replicas {
			if next()%3 != 0 {
				isr = append(isr, r)
			}
		}
		stale := int32(next() % 2)
		res := h.c.AlterPartition(h.img, AlterPartition{BrokerID: sender, BrokerEpoch: h.epoch(sender), Partitions: []AlterPartitionItem{
			{TopicID: t.ID, Partition: int32(i), LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch - stale, NewISR: isr}}})
		if res.Err != nil {
			refused("alter partition", res.Err, res.Records)
		} else {
			refused("alter partition", res.Partitions[0].Err, res.Records)
		}
		h.commit(res.Records...)
	case 6:
		var tps []TopicPartition
		if next()%2 == 0 {
			tps = []TopicPartition{{topics[next()%len(topics)], int32(next() % 3)}}
		}
		h.commit(h.c.ElectLeaders(h.img, ElectionType(next()%2), tps).Records...)
	case 7:
		res := h.c.Unregister(h.img, broker())
		refused("unregister", res.Err, res.Records)
		h.commit(res.Records...)
	case 8:
		name := topics[next()%len(topics)]
		res := h.c.CreatePartitions(h.img, name, int32(next()%5), nil)
		refused("create partitions", res.Err, res.Records)
		h.commit(res.Records...)
	case 9:
		name := topics[next()%len(topics)]
		if h.img.Topic(name) != nil {
			h.commit(setTopicConfig(name, UncleanLeaderElectionConfig, []string{"true", "false"}[next()%2]))
		}
	case 10:
		h.commit(h.c.Rebalance(h.img, next()%100).Records...)
	case 11:
		t := h.img.Topic(topics[next()%len(topics)])
		if t == nil {
			return
		}
		var target []int32 // nil: cancel
		if n := next() % 5; n > 0 {
			for range n {
				target = append(target, broker())
			}
		}
		res := h.c.AlterPartitionReassignments(h.img, []Reassignment{{TopicPartition{t.Name, int32(next() % len(t.Partitions))}, target}}, next()%2 == 0)
		refused("reassign", res.Partitions[0].Err, res.Records)
		h.commit(res.Records...)
	}
}
