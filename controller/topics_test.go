package controller

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"testing"

	"github.com/sluice-broker/sluice/metadata"
	"github.com/twmb/franz-go/pkg/kerr"
)

func brokersOn(racks ...string) []metadata.BrokerImage {
	var out []metadata.BrokerImage
	for i, r := range racks {
		br := metadata.BrokerImage{ID: int32(i)}
		if r != "" {
			br.Rack = rack(r)
		}
		out = append(out, br)
	}
	return out
}

// Kafka's own expectation (AdminUtils' testReplicaAssignment): brokers
// 0-4, 10 partitions, RF 3, start index 0.
func TestPlacementMatchesKafka(t *testing.T) {
	got := newPlacement(brokersOn("", "", "", "", ""), 0, 0).assign(0, 10, 3)
	want := [][]int32{{0, 1, 2}, {1, 2, 3}, {2, 3, 4}, {3, 4, 0}, {4, 0, 1}, {0, 2, 3}, {1, 3, 4}, {2, 4, 0}, {3, 0, 1}, {4, 1, 2}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("placement %v, want %v", got, want)
	}
}

// Kafka's getRackAlternatedBrokerList test.
func TestRackAlternated(t *testing.T) {
	got := rackAlternated(map[string][]int32{"rack1": {0, 5}, "rack3": {1, 2}, "rack2": {3, 4}})
	if want := []int32{0, 3, 1, 5, 4, 2}; !reflect.DeepEqual(got, want) {
		t.Errorf("%v, want %v", got, want)
	}
}

// Rack-aware placement (the properties Kafka's AdminRackAwareTest checks):
// each partition spans min(RF, racks) racks, replicas are distinct, and
// leaders and replicas spread evenly.
func TestPlacementRackAware(t *testing.T) {
	for _, tc := range []struct {
		racks      []string
		partitions int32
		rf         int
	}{
		{[]string{"a", "b", "b", "c", "c", "a"}, 6, 3},
		{[]string{"a", "b", "b", "c", "c", "a"}, 12, 2},
		{[]string{"a", "b", "c", "a", "b", "c"}, 12, 3},
		{[]string{"a", "a", "b", "b"}, 8, 3},
		{[]string{"a", "", "b", ""}, 8, 2}, // an unset rack is a rack of its own
	} {
		t.Run(fmt.Sprint(tc), func(t *testing.T) {
			live := brokersOn(tc.racks...)
			racks := len(slices.Compact(slices.Sorted(slices.Values(tc.racks))))
			for start := range live {
				as := newPlacement(live, start, start).assign(0, tc.partitions, tc.rf)
				leaders, replicas := map[int32]int{}, map[int32]int{}
				for p, rs := range as {
					seen := map[string]bool{}
					for i, r := range rs {
						if slices.Contains(rs[:i], r) {
							t.Fatalf("partition %d: %v twice", p, rs)
						}
						seen[tc.racks[r]] = true
						replicas[r]++
					}
					if len(rs) != tc.rf || len(seen) != min(tc.rf, racks) {
						t.Fatalf("start %d partition %d: %v spans %d racks", start, p, rs, len(seen))
					}
					leaders[rs[0]]++
				}
				if slices.Max(slices.Collect(maps.Values(leaders)))-slices.Min(slices.Collect(maps.Values(leaders))) > 1 {
					t.Errorf("start %d: leaders uneven %v", start, leaders)
				}
			}
		})
	}
}

func TestCreateTopics(t *testing.T) {
	h := newHarness(t)
	h.brokers(4, "a", "b", "a", "b")
	h.fenceNow(4) // three live brokers
	h.topic("taken", ints(1))
	id := func(b byte) [16]byte { return [16]byte{0xc, b} }
	for _, tc := range []struct {
		name string
		req  CreateTopic
		err  *kerr.Error
	}{
		{"rf above live brokers", CreateTopic{Name: "x", ID: id(1), NumPartitions: 1, ReplicationFactor: 4}, kerr.InvalidReplicationFactor},
		{"rf 0", CreateTopic{Name: "x", ID: id(1), NumPartitions: 1, ReplicationFactor: 0}, kerr.InvalidReplicationFactor},
		{"no partitions", CreateTopic{Name: "x", ID: id(1), NumPartitions: 0, ReplicationFactor: 1}, kerr.InvalidPartitions},
		{"name taken", CreateTopic{Name: "taken", ID: id(1), NumPartitions: 1, ReplicationFactor: 1}, kerr.TopicAlreadyExists},
		{"bad name", CreateTopic{Name: "a/b", ID: id(1), NumPartitions: 1, ReplicationFactor: 1}, kerr.InvalidTopicException},
		{"zero id", CreateTopic{Name: "x", NumPartitions: 1, ReplicationFactor: 1}, kerr.InvalidRequest},
		{"id taken", CreateTopic{Name: "x", ID: h.img.Topic("taken").ID, NumPartitions: 1, ReplicationFactor: 1}, kerr.InvalidRequest},
		{"assignments with a count", CreateTopic{Name: "x", ID: id(1), NumPartitions: 1, ReplicationFactor: -1, Assignments: [][]int32{{1}}}, kerr.InvalidRequest},
		{"empty assignments", CreateTopic{Name: "x", ID: id(1), NumPartitions: -1, ReplicationFactor: -1, Assignments: [][]int32{}}, kerr.InvalidPartitions},
		{"unknown broker", CreateTopic{Name: "x", ID: id(1), NumPartitions: -1, ReplicationFactor: -1, Assignments: [][]int32{{1, 9}}}, kerr.InvalidReplicaAssignment},
		{"broker twice", CreateTopic{Name: "x", ID: id(1), NumPartitions: -1, ReplicationFactor: -1, Assignments: [][]int32{{1, 1}}}, kerr.InvalidReplicaAssignment},
		{"rf differs", CreateTopic{Name: "x", ID: id(1), NumPartitions: -1, ReplicationFactor: -1, Assignments: [][]int32{{1, 2}, {1}}}, kerr.InvalidReplicaAssignment},
		{"empty replicas", CreateTopic{Name: "x", ID: id(1), NumPartitions: -1, ReplicationFactor: -1, Assignments: [][]int32{{}}}, kerr.InvalidReplicaAssignment},
		{"all fenced", CreateTopic{Name: "x", ID: id(1), NumPartitions: -1, ReplicationFactor: -1, Assignments: [][]int32{{4}}}, kerr.InvalidReplicaAssignment},
	} {
		res := h.c.CreateTopics(h.img, []CreateTopic{tc.req})
		if res.Topics[0].Err != tc.err || len(res.Records) != 0 {
			t.Errorf("%s: %v, want %v (records %v)", tc.name, res.Topics[0].Err, tc.err, res.Records)
		}
	}

	// Placed topics go on live brokers only, racks alternating; explicit
	// ones as given, with a fenced replica left out of the ISR; a name
	// twice in one request is taken the second time.
	res := h.c.CreateTopics(h.img, []CreateTopic{
		{Name: "placed", ID: id(2), NumPartitions: 6, ReplicationFactor: 2, Configs: map[string]string{"retention.ms": "1", "cleanup.policy": "compact"}},
		{Name: "explicit", ID: id(3), NumPartitions: -1, ReplicationFactor: -1, Assignments: [][]int32{{4, 2}, {3, 4}}},
		{Name: "defaults", ID: id(4), NumPartitions: -1, ReplicationFactor: -1},
		{Name: "placed", ID: id(5), NumPartitions: 1, ReplicationFactor: 1},
	})
	if errs := []*kerr.Error{res.Topics[0].Err, res.Topics[1].Err, res.Topics[2].Err, res.Topics[3].Err}; !reflect.DeepEqual(errs, []*kerr.Error{nil, nil, nil, kerr.TopicAlreadyExists}) {
		t.Fatalf("errors %v", errs)
	}
	h.commit(res.Records...)
	for i, p := range h.img.Topic("placed").Partitions {
		r0, r1 := p.Replicas[0], p.Replicas[1]
		if len(p.Replicas) != 2 || p.Hosts(4) || p.Leader != r0 || !reflect.DeepEqual(p.ISR, p.Replicas) {
			t.Errorf("placed-%d: %+v", i, p)
		}
		if r0 != 2 && r1 != 2 { // brokers 1 and 3 are rack a, 2 is rack b: every partition needs 2
			t.Errorf("placed-%d: %v is not rack-aware", i, p.Replicas)
		}
	}
	if got := h.img.TopicConfigs("placed"); !reflect.DeepEqual(got, map[string]string{"retention.ms": "1", "cleanup.policy": "compact"}) {
		t.Errorf("configs %v", got)
	}
	h.wantState("explicit", 0, "leader 2 isr [2] epochs 0/0")
	h.wantState("explicit", 1, "leader 3 isr [3] epochs 0/0")
	if d := h.img.Topic("defaults"); len(d.Partitions) != 1 || len(d.Partitions[0].Replicas) != 1 {
		t.Errorf("defaults: %+v", d.Partitions)
	}
}

func TestCreatePartitions(t *testing.T) {
	h := newHarness(t)
	h.brokers(3)
	h.topic("t", ints(2, 3))
	for _, tc := range []struct {
		name        string
		topic       string
		count       int32
		assignments [][]int32
		err         *kerr.Error
	}{
		{"unknown topic", "x", 2, nil, kerr.UnknownTopicOrPartition},
		{"not more", "t", 1, nil, kerr.InvalidPartitions},
		{"assignment count", "t", 3, [][]int32{{1, 2}}, kerr.InvalidReplicaAssignment},
		{"assignment rf", "t", 2, [][]int32{{1}}, kerr.InvalidReplicaAssignment},
		{"assignment unknown broker", "t", 2, [][]int32{{1, 7}}, kerr.InvalidReplicaAssignment},
	} {
		if res := h.c.CreatePartitions(h.img, tc.topic, tc.count, tc.assignments); res.Err != tc.err || res.Records != nil {
			t.Errorf("%s: %v, want %v", tc.name, res.Err, tc.err)
		}
	}
	res := h.c.CreatePartitions(h.img, "t", 4, nil)
	h.commit(res.Records...)
	// Kafka continues from partition 0's first replica (broker 2, index 1).
	var got [][]int32
	for _, p := range h.img.Topic("t").Partitions {
		got = append(got, p.Replicas)
	}
	if want := [][]int32{{2, 3}, {3, 2}, {1, 3}, {2, 3}}; !reflect.DeepEqual(got, want) {
		t.Errorf("replicas %v, want %v", got, want)
	}
	h.commit(h.c.CreatePartitions(h.img, "t", 5, [][]int32{{1, 3}}).Records...)
	h.wantState("t", 4, "leader 1 isr [1 3] epochs 0/0")
	h.fenceNow(1)
	h.fenceNow(2)
	if res := h.c.CreatePartitions(h.img, "t", 6, nil); res.Err != kerr.InvalidReplicationFactor {
		t.Errorf("rf 2 on one live broker: %v", res.Err)
	}
}
