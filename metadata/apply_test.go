package metadata

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

var (
	idA = [16]byte{0xa}
	idB = [16]byte{0xb}
)

func part(id [16]byte, i int32) PartitionRecord { return SingleNodePartition(id, i, 1, 0) }

func setCfg(topic, k, v string) ConfigRecord {
	return ConfigRecord{ResourceType: ResourceTopic, ResourceName: topic, Name: k, Value: &v}
}

func delCfg(topic, k string) ConfigRecord {
	return ConfigRecord{ResourceType: ResourceTopic, ResourceName: topic, Name: k}
}

// applyAll applies recs one at a time, checking the invariants after each.
func applyAll(t *testing.T, recs ...Record) Image {
	t.Helper()
	var img Image
	for i, r := range recs {
		var err error
		if img, err = Apply(img, r); err != nil {
			t.Fatalf("record %d (%v): %v", i, r.Type(), err)
		}
		if err := img.Check(); err != nil {
			t.Fatalf("after record %d: %v", i, err)
		}
	}
	return img
}

func TestApply(t *testing.T) {
	img := applyAll(t,
		ClusterRecord{ClusterID: "c"},
		TopicRecord{Name: "a", TopicID: idA}, part(idA, 0), part(idA, 1),
		setCfg("a", "retention.ms", "1"), setCfg("a", "segment.ms", "2"),
		TopicRecord{Name: "b", TopicID: idB}, part(idB, 0),
		part(idA, 2), // CreatePartitions
		setCfg("a", "retention.ms", "3"), delCfg("a", "segment.ms"), delCfg("a", "absent"),
		ProducerIDsRecord{BrokerID: 1, NextProducerID: 1000},
		ProducerIDsRecord{BrokerID: 1, NextProducerID: 2000},
		RemoveTopicRecord{TopicID: idB},
	)
	if img.ClusterID() != "c" {
		t.Errorf("cluster id %q", img.ClusterID())
	}
	a := img.Topic("a")
	if a == nil || a.ID != idA || len(a.Partitions) != 3 || img.TopicByID(idA) != a {
		t.Fatalf("topic a: %+v", a)
	}
	if p := a.Partitions[2]; p.Leader != 1 || !reflect.DeepEqual(p.ISR, []int32{1}) || !p.Hosts(1) || p.Hosts(2) {
		t.Errorf("partition a-2: %+v", p)
	}
	if got := img.TopicConfigs("a"); !reflect.DeepEqual(got, map[string]string{"retention.ms": "3"}) {
		t.Errorf("configs of a: %v", got)
	}
	if img.Topic("b") != nil || img.TopicByID(idB) != nil || img.TopicCount() != 1 {
		t.Errorf("b survived its removal")
	}
	if got := img.ProducerIDs().NextProducerID; got != 2000 {
		t.Errorf("next producer id %d", got)
	}
}

func TestApplyRejects(t *testing.T) {
	base := applyAll(t, TopicRecord{Name: "a", TopicID: idA}, part(idA, 0), ProducerIDsRecord{NextProducerID: 1000}, ClusterRecord{ClusterID: "c"})
	bad := func(r PartitionRecord, f func(*PartitionRecord)) PartitionRecord { f(&r); return r }
	for name, r := range map[string]Record{
		"duplicate topic name":       TopicRecord{Name: "a", TopicID: idB},
		"duplicate topic id":         TopicRecord{Name: "b", TopicID: idA},
		"zero topic id":              TopicRecord{Name: "b"},
		"illegal topic name":         TopicRecord{Name: "a/b", TopicID: idB},
		"partition of unknown topic": part(idB, 0),
		"partition not next":         part(idA, 2),
		"partition again":            part(idA, 0),
		"no replicas":                bad(part(idA, 1), func(p *PartitionRecord) { p.Replicas, p.ISR, p.Leader = nil, nil, -1 }),
		"replica twice":              bad(part(idA, 1), func(p *PartitionRecord) { p.Replicas = []int32{1, 1} }),
		"isr not replicas":           bad(part(idA, 1), func(p *PartitionRecord) { p.ISR = []int32{1, 2} }),
		"leader not in isr":          bad(part(idA, 1), func(p *PartitionRecord) { p.Leader = 2 }),
		"negative epoch":             bad(part(idA, 1), func(p *PartitionRecord) { p.LeaderEpoch = -1 }),
		"config of unknown topic":    setCfg("b", "k", "v"),
		"config without name":        setCfg("a", "", "v"),
		"config bad resource":        ConfigRecord{ResourceType: 9, ResourceName: "a", Name: "k"},
		"config bad broker":          ConfigRecord{ResourceType: ResourceBroker, ResourceName: "x", Name: "k"},
		// Regression: a group id or value longer than the decoder reads
		// back was committed, and the log could not be read again.
		"config group id too long": ConfigRecord{ResourceType: ResourceGroup, ResourceName: strings.Repeat("g", MaxStringLen+1), Name: "k", Value: strp("v")},
		"config value too long":    ConfigRecord{ResourceType: ResourceGroup, ResourceName: "g", Name: "k", Value: strp(strings.Repeat("v", MaxStringLen+1))},
		"remove unknown topic":     RemoveTopicRecord{TopicID: idB},
		"producer ids backwards":   ProducerIDsRecord{NextProducerID: 999},
		"producer ids same":        ProducerIDsRecord{NextProducerID: 1000},
		"other cluster":            ClusterRecord{ClusterID: "d"},
		"empty cluster":            ClusterRecord{},
		"bad feature":              FeatureLevelRecord{Name: "", FeatureLevel: 1},
	} {
		before := base.Records()
		got, err := Apply(base, r)
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err %v, want ErrInvalid", name, err)
		}
		if !reflect.DeepEqual(got.Records(), before) || !reflect.DeepEqual(base.Records(), before) {
			t.Errorf("%s: a rejected record changed the image", name)
		}
	}
}

// A batch applies whole or not at all.
func TestApplyAllIsAtomic(t *testing.T) {
	img, err := ApplyAll(Image{}, []Record{TopicRecord{Name: "a", TopicID: idA}, part(idA, 0), part(idA, 5)})
	if err == nil || img.Topic("a") != nil {
		t.Fatalf("half a batch applied: %v, %+v", err, img.Topic("a"))
	}
}

// Apply never changes the image it is given.
func TestApplyIsPure(t *testing.T) {
	img := applyAll(t, TopicRecord{Name: "a", TopicID: idA}, part(idA, 0), setCfg("a", "k", "1"))
	before := img.Records()
	applyAll(t, append(before, part(idA, 1), setCfg("a", "k", "2"), setCfg("a", "j", "3"), RemoveTopicRecord{TopicID: idA})...)
	for _, r := range []Record{part(idA, 1), setCfg("a", "k", "2"), delCfg("a", "k"), RemoveTopicRecord{TopicID: idA}} {
		if _, err := Apply(img, r); err != nil {
			t.Fatal(err)
		}
	}
	if !reflect.DeepEqual(img.Records(), before) || len(img.Topic("a").Partitions) != 1 {
		t.Fatalf("image changed under Apply: %v", img.Records())
	}
}

// genRecords turns fuzz bytes into records over a small world (3 topic ids,
// 3 names, nodes 0-3), so that sequences often apply and reach deep states.
func genRecords(b []byte) []Record {
	ids := [][16]byte{{1}, {2}, {3}}
	names := []string{"a", "b", "a.b"}
	var recs []Record
	next := func() int32 {
		if len(b) == 0 {
			return 0
		}
		v := b[0]
		b = b[1:]
		return int32(v)
	}
	nodes := func() []int32 {
		n := next() % 4
		out := make([]int32, n)
		for i := range out {
			out[i] = next() % 4
		}
		return out
	}
	nullable := func() []int32 {
		if next()%3 == 0 {
			return nil
		}
		return nodes()
	}
	for len(b) > 0 {
		switch next() % 13 {
		case 0:
			recs = append(recs, TopicRecord{Name: names[next()%3], TopicID: ids[next()%3]})
		case 1:
			recs = append(recs, PartitionRecord{TopicID: ids[next()%3], Partition: next() % 4, Replicas: nodes(), ISR: nodes(),
				Leader: next()%5 - 1, LeaderEpoch: next() % 3, PartitionEpoch: next() % 3})
		case 2:
			v := string(rune('a' + next()%3))
			r := ConfigRecord{ResourceType: []ResourceType{ResourceTopic, ResourceBroker, ResourceGroup, 7}[next()%4],
				ResourceName: names[next()%3], Name: []string{"k", "j"}[next()%2], Value: &v}
			if next()%2 == 0 {
				r.Value = nil
			}
			recs = append(recs, r)
		case 3:
			recs = append(recs, RemoveTopicRecord{TopicID: ids[next()%3]})
		case 4:
			recs = append(recs, ProducerIDsRecord{BrokerID: next() % 3, NextProducerID: int64(next()) * 100})
		case 5:
			recs = append(recs, ClusterRecord{ClusterID: names[next()%3]})
		case 6:
			recs = append(recs, FeatureLevelRecord{Name: names[next()%3], FeatureLevel: int16(next())})
		case 7:
			recs = append(recs, RegisterBrokerRecord{BrokerID: next() % 4, BrokerEpoch: int64(next() % 8), Fenced: next()%2 == 0})
		case 8:
			recs = append(recs, UnregisterBrokerRecord{BrokerID: next() % 4, BrokerEpoch: int64(next() % 8)})
		case 9:
			recs = append(recs, FenceBrokerRecord{BrokerID: next() % 4, BrokerEpoch: int64(next() % 8)})
		case 10:
			recs = append(recs, UnfenceBrokerRecord{BrokerID: next() % 4, BrokerEpoch: int64(next() % 8)})
		case 11:
			recs = append(recs, BrokerRegistrationChangeRecord{BrokerID: next() % 4, BrokerEpoch: int64(next() % 8),
				Fenced: int8(next()%4 - 1), InControlledShutdown: int8(next()%3 - 1)})
		case 12:
			recs = append(recs, PartitionChangeRecord{TopicID: ids[next()%3], Partition: next()%3 - 1, Leader: next()%6 - 2,
				ISR: nullable(), Replicas: nullable(), AddingReplicas: nullable(), RemovingReplicas: nullable()})
		}
	}
	return recs
}

// FuzzApply: applying any sequence of records never panics, keeps the
// invariants, never changes an earlier image, keeps producer ids
// monotonic, and every image survives its own snapshot (Records) and the
// encoding of those records.
func FuzzApply(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1, 0, 0, 1, 1, 1, 1, 1, 1, 0, 0, 2, 0, 0, 0, 1, 3, 0, 4, 1, 5})
	f.Add([]byte{0, 1, 1, 1, 1, 0, 2, 2, 2, 0, 0, 0, 0, 2, 0, 1, 0, 0, 3, 1, 0, 2, 1})
	// Brokers 1 and 2 register, 1 is unfenced and shut down, topic a gets
	// an RF=2 partition, then a leader change and an ISR shrink.
	f.Add([]byte{7, 1, 1, 0, 7, 2, 2, 0, 10, 1, 1, 11, 1, 1, 1, 2,
		0, 0, 0, 1, 0, 0, 2, 1, 2, 2, 1, 2, 2, 0, 0,
		12, 0, 1, 4, 1, 2, 2, 1, 2, 0, 0,
		12, 0, 1, 1, 1, 1, 2, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		var img Image
		for _, r := range genRecords(b) {
			before := img.Records()
			next, err := Apply(img, r)
			if !reflect.DeepEqual(img.Records(), before) {
				t.Fatalf("%v changed the image it was applied to", r.Type())
			}
			if err != nil {
				if !errors.Is(err, ErrInvalid) {
					t.Fatalf("%v: error %v does not wrap ErrInvalid", r.Type(), err)
				}
				continue
			}
			if err := next.Check(); err != nil {
				t.Fatalf("after %#v: %v", r, err)
			}
			if next.ProducerIDs().NextProducerID < img.ProducerIDs().NextProducerID {
				t.Fatalf("producer ids went backwards")
			}
			checkEpochsGrow(t, img, next)
			img = next
		}
		checkSnapshotRoundTrip(t, img)
	})
}

func checkSnapshotRoundTrip(t *testing.T, img Image) {
	t.Helper()
	recs := img.Records()
	var enc []Record
	for _, r := range recs {
		d, err := DecodeRecord(AppendRecord(nil, r))
		if err != nil {
			t.Fatal(err)
		}
		enc = append(enc, d)
	}
	again, err := ApplyAll(Image{}, enc)
	if err != nil {
		t.Fatalf("snapshot does not apply: %v", err)
	}
	if !reflect.DeepEqual(again.Records(), recs) {
		t.Fatalf("snapshot round trip: %v, want %v", again.Records(), recs)
	}
}

// checkEpochsGrow fails if a broker's or a partition's epoch went backwards
// between two images.
func checkEpochsGrow(t *testing.T, before, after Image) {
	t.Helper()
	for _, b := range before.Brokers() {
		if a, ok := after.Broker(b.ID); ok && a.Epoch < b.Epoch {
			t.Fatalf("broker %d epoch %d -> %d", b.ID, b.Epoch, a.Epoch)
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
				t.Fatalf("partition %s-%d epochs %d/%d -> %d/%d", bt.Name, i, bp.LeaderEpoch, bp.PartitionEpoch, ap.LeaderEpoch, ap.PartitionEpoch)
			}
		}
	}
}
