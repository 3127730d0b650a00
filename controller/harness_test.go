package controller

import (
	"fmt"
	"slices"
	"testing"

	"github.com/sluice-broker/sluice/metadata"
)

const cluster = "q1Sh-9_ISia_zwGINzRvyQ"

// harness is a controller over an image that commits each decision's
// records at once, checking after each batch that they apply and keep the
// invariants, and that no epoch went back.
type harness struct {
	t   testing.TB
	c   *Controller
	img metadata.Image
	// next is the offset of the next record (records are numbered from 0,
	// as FileStore numbers them).
	next int64
	now  int64
}

func newHarness(t testing.TB) *harness {
	cfg := DefaultConfig(cluster)
	h := &harness{t: t, c: New(cfg)}
	h.commit(metadata.ClusterRecord{ClusterID: cluster})
	return h
}

func (h *harness) commit(recs ...metadata.Record) {
	h.t.Helper()
	img, err := metadata.ApplyAll(h.img, recs)
	if err != nil {
		h.t.Fatalf("records do not apply: %v", err)
	}
	if err := Check(img); err != nil {
		h.t.Fatalf("after %v: %v", recs, err)
	}
	if err := epochsGrow(h.img, img); err != nil {
		h.t.Fatal(err)
	}
	h.img = img
	h.next += int64(len(recs))
}

func epochsGrow(before, after metadata.Image) error {
	for _, b := range before.Brokers() {
		if a, ok := after.Broker(b.ID); ok && a.Epoch < b.Epoch {
			return fmt.Errorf("broker %d epoch %d -> %d", b.ID, b.Epoch, a.Epoch)
		}
	}
	for bt := range before.AllTopics() {
		at := after.TopicByID(bt.ID)
		if at == nil {
			continue
		}
		for i, bp := range bt.Partitions {
			ap := at.Partitions[i]
			if ap.LeaderEpoch < bp.LeaderEpoch || ap.PartitionEpoch < bp.PartitionEpoch {
				return fmt.Errorf("partition %s-%d epochs %d/%d -> %d/%d", bt.Name, i, bp.LeaderEpoch, bp.PartitionEpoch, ap.LeaderEpoch, ap.PartitionEpoch)
			}
		}
	}
	return nil
}

func rack(s string) *string { return &s }

func (h *harness) register(id int32, incarnation byte, rk *string) RegistrationResult {
	h.t.Helper()
	res := h.c.Register(h.img, Registration{BrokerID: id, ClusterID: cluster, IncarnationID: [16]byte{byte(id), incarnation},
		Endpoints: []metadata.Endpoint{{Name: "PLAINTEXT", Host: "localhost", Port: uint16(9090 + id)}}, Rack: rk, NextOffset: h.next}, h.now)
	h.commit(res.Records...)
	return res
}

func (h *harness) epoch(id int32) int64 {
	br, _ := h.img.Broker(id)
	return br.Epoch
}

// heartbeat sends broker id's heartbeat, caught up with the whole log.
func (h *harness) heartbeat(id int32, f func(*Heartbeat)) HeartbeatResult {
	h.t.Helper()
	req := Heartbeat{BrokerID: id, BrokerEpoch: h.epoch(id), CurrentMetadataOffset: h.next - 1}
	if f != nil {
		f(&req)
	}
	res := h.c.Heartbeat(h.img, req, h.now)
	h.commit(res.Records...)
	return res
}

// brokers registers and unfences brokers 1..n (racks, when given, by id).
func (h *harness) brokers(n int32, racks ...string) {
	h.t.Helper()
	for id := int32(1); id <= n; id++ {
		var rk *string
		if len(racks) > 0 {
			rk = rack(racks[id-1])
		}
		h.register(id, 1, rk)
	}
	for id := int32(1); id <= n; id++ {
		if res := h.heartbeat(id, nil); res.Err != nil || res.IsFenced {
			h.t.Fatalf("broker %d not unfenced: %+v", id, res)
		}
	}
}

func (h *harness) tick(ms int64) Result {
	h.t.Helper()
	h.now += ms
	res := h.c.Tick(h.img, h.now)
	h.commit(res.Records...)
	return res
}

// topic creates a topic with explicit assignments and returns its id.
func (h *harness) topic(name string, assignments ...[]int32) [16]byte {
	h.t.Helper()
	id := [16]byte{0xee, byte(len(name)), name[0]}
	res := h.c.CreateTopics(h.img, []CreateTopic{{Name: name, ID: id, NumPartitions: -1, ReplicationFactor: -1, Assignments: assignments}})
	if res.Topics[0].Err != nil {
		h.t.Fatalf("create %s: %v", name, res.Topics[0].Err)
	}
	h.commit(res.Records...)
	return id
}

func (h *harness) part(topic string, i int) metadata.PartitionImage {
	return h.img.Topic(topic).Partitions[i]
}

// state is a partition's leader, ISR and epochs in one comparable string.
func state(p metadata.PartitionImage) string {
	return fmt.Sprintf("leader %d isr %v epochs %d/%d", p.Leader, p.ISR, p.LeaderEpoch, p.PartitionEpoch)
}

func (h *harness) wantState(topic string, i int, want string) {
	h.t.Helper()
	if got := state(h.part(topic, i)); got != want {
		h.t.Errorf("%s-%d: %s, want %s", topic, i, got, want)
	}
}

func (h *harness) wantBroker(id int32, fenced, shutdown bool) {
	h.t.Helper()
	br, ok := h.img.Broker(id)
	if !ok || br.Fenced != fenced || br.InControlledShutdown != shutdown {
		h.t.Errorf("broker %d: registered %v fenced %v shutdown %v, want fenced %v shutdown %v",
			id, ok, br.Fenced, br.InControlledShutdown, fenced, shutdown)
	}
}

func ints(v ...int32) []int32 { return slices.Clone(v) }
