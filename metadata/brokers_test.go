package metadata

import (
	"errors"
	"reflect"
	"testing"
)

func reg(id int32, epoch int64) RegisterBrokerRecord {
	return RegisterBrokerRecord{BrokerID: id, IncarnationID: [16]byte{byte(id), byte(epoch)}, BrokerEpoch: epoch, Fenced: true,
		Endpoints: []Endpoint{{Name: "PLAINTEXT", Host: "localhost", Port: uint16(9090 + id)}}}
}

// rf3 is partition i of topic id on brokers 1, 2, 3, led by 1.
func rf3(id [16]byte, i int32) PartitionRecord {
	return PartitionRecord{TopicID: id, Partition: i, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1}
}

func TestApplyBrokers(t *testing.T) {
	img := applyAll(t,
		reg(1, 10), reg(2, 11), reg(3, 12),
		UnfenceBrokerRecord{BrokerID: 1, BrokerEpoch: 10},
		UnfenceBrokerRecord{BrokerID: 2, BrokerEpoch: 11},
		BrokerRegistrationChangeRecord{BrokerID: 3, BrokerEpoch: 12, Fenced: FenceChangeUnfence},
		BrokerRegistrationChangeRecord{BrokerID: 2, BrokerEpoch: 11, InControlledShutdown: ShutdownChangeEnter},
		FenceBrokerRecord{BrokerID: 1, BrokerEpoch: 10},
		reg(1, 20), // a new incarnation replaces the old
		UnregisterBrokerRecord{BrokerID: 3, BrokerEpoch: 12},
	)
	want := map[int32]struct {
		epoch            int64
		fenced, shutdown bool
	}{1: {20, true, false}, 2: {11, false, true}}
	got := img.Brokers()
	if len(got) != len(want) {
		t.Fatalf("brokers %+v", got)
	}
	for _, b := range got {
		w := want[b.ID]
		if b.Epoch != w.epoch || b.Fenced != w.fenced || b.InControlledShutdown != w.shutdown {
			t.Errorf("broker %d: %+v, want %+v", b.ID, b, w)
		}
	}
	if b, _ := img.Broker(1); b.IncarnationID != reg(1, 20).IncarnationID || b.Endpoints[0].Port != 9091 {
		t.Errorf("broker 1 registration %+v", b)
	}
	if img.BrokerEligible(1) || img.BrokerEligible(2) || img.BrokerEligible(3) || img.IsEmpty() {
		t.Errorf("eligibility")
	}
	checkSnapshotRoundTrip(t, img)
}

func TestApplyPartitionChange(t *testing.T) {
	base := []Record{TopicRecord{Name: "a", TopicID: idA}, rf3(idA, 0)}
	for _, tc := range []struct {
		name          string
		change        PartitionChangeRecord
		want          PartitionImage
		leaderBumped  bool
		partitionEpoc int32
	}{
		{"shrink isr", PartitionChangeRecord{TopicID: idA, Leader: NoLeaderChange, ISR: []int32{1, 3}},
			PartitionImage{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 3}, Leader: 1, PartitionEpoch: 1}, false, 1},
		{"new leader", PartitionChangeRecord{TopicID: idA, Leader: 2, ISR: []int32{2, 3}},
			PartitionImage{Replicas: []int32{1, 2, 3}, ISR: []int32{2, 3}, Leader: 2, LeaderEpoch: 1, PartitionEpoch: 1}, true, 1},
		{"same leader bumps the epoch", PartitionChangeRecord{TopicID: idA, Leader: 1},
			PartitionImage{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1}, true, 1},
		{"offline", PartitionChangeRecord{TopicID: idA, Leader: -1, ISR: []int32{1}},
			PartitionImage{Replicas: []int32{1, 2, 3}, ISR: []int32{1}, Leader: -1, LeaderEpoch: 1, PartitionEpoch: 1}, true, 1},
		{"unclean election", PartitionChangeRecord{TopicID: idA, Leader: 3, ISR: []int32{3}},
			PartitionImage{Replicas: []int32{1, 2, 3}, ISR: []int32{3}, Leader: 3, LeaderEpoch: 1, PartitionEpoch: 1}, true, 1},
		{"nothing changes but the partition epoch", PartitionChangeRecord{TopicID: idA, Leader: NoLeaderChange},
			PartitionImage{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1, PartitionEpoch: 1}, false, 1},
		{"reassignment adds", PartitionChangeRecord{TopicID: idA, Leader: NoLeaderChange, Replicas: []int32{1, 2, 3, 4},
			AddingReplicas: []int32{4}, RemovingReplicas: []int32{3}},
			PartitionImage{Replicas: []int32{1, 2, 3, 4}, ISR: []int32{1, 2, 3}, Leader: 1, PartitionEpoch: 1,
				AddingReplicas: []int32{4}, RemovingReplicas: []int32{3}}, false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			img := applyAll(t, append(base, tc.change)...)
			if got := img.TopicByID(idA).Partitions[0]; !reflect.DeepEqual(got, tc.want) {
				t.Errorf("partition %+v, want %+v", got, tc.want)
			}
			checkSnapshotRoundTrip(t, img)
		})
	}
	// A reassignment completes by clearing its lists with empty ones.
	img := applyAll(t, append(base,
		PartitionChangeRecord{TopicID: idA, Leader: NoLeaderChange, Replicas: []int32{1, 2, 3, 4}, AddingReplicas: []int32{4}, RemovingReplicas: []int32{3}},
		PartitionChangeRecord{TopicID: idA, Leader: NoLeaderChange, Replicas: []int32{1, 2, 4}, ISR: []int32{1, 2, 4},
			AddingReplicas: []int32{}, RemovingReplicas: []int32{}})...)
	if p := img.TopicByID(idA).Partitions[0]; p.AddingReplicas != nil || p.RemovingReplicas != nil || p.PartitionEpoch != 2 {
		t.Errorf("after the reassignment: %+v", p)
	}
}

func TestApplyRejectsClusterRecords(t *testing.T) {
	base := applyAll(t, reg(1, 10), reg(2, 11), TopicRecord{Name: "a", TopicID: idA}, rf3(idA, 0))
	pc := func(f func(*PartitionChangeRecord)) PartitionChangeRecord {
		r := PartitionChangeRecord{TopicID: idA, Leader: NoLeaderChange}
		f(&r)
		return r
	}
	for name, r := range map[string]Record{
		"register negative id":              reg(-1, 12),
		"register negative epoch":           reg(3, -1),
		"register epoch not above":          reg(1, 10),
		"register epoch below":              reg(1, 9),
		"unregister unknown":                UnregisterBrokerRecord{BrokerID: 3, BrokerEpoch: 10},
		"unregister stale epoch":            UnregisterBrokerRecord{BrokerID: 1, BrokerEpoch: 9},
		"fence unknown":                     FenceBrokerRecord{BrokerID: 3},
		"fence stale epoch":                 FenceBrokerRecord{BrokerID: 1, BrokerEpoch: 11},
		"unfence unknown":                   UnfenceBrokerRecord{BrokerID: 3},
		"unfence stale epoch":               UnfenceBrokerRecord{BrokerID: 2, BrokerEpoch: 10},
		"change stale epoch":                BrokerRegistrationChangeRecord{BrokerID: 2, BrokerEpoch: 10, Fenced: FenceChangeFence},
		"change bad fenced":                 BrokerRegistrationChangeRecord{BrokerID: 2, BrokerEpoch: 11, Fenced: 2},
		"change bad shutdown":               BrokerRegistrationChangeRecord{BrokerID: 2, BrokerEpoch: 11, InControlledShutdown: -1},
		"change of unknown topic":           pc(func(r *PartitionChangeRecord) { r.TopicID = idB }),
		"change of unknown partition":       pc(func(r *PartitionChangeRecord) { r.Partition = 1 }),
		"change of negative partition":      pc(func(r *PartitionChangeRecord) { r.Partition = -1 }),
		"isr not replicas":                  pc(func(r *PartitionChangeRecord) { r.ISR = []int32{1, 4} }),
		"leader not in isr":                 pc(func(r *PartitionChangeRecord) { r.Leader = 2; r.ISR = []int32{1, 3} }),
		"leader not in the isr kept":        pc(func(r *PartitionChangeRecord) { r.Leader = 4 }),
		"leader below -2":                   pc(func(r *PartitionChangeRecord) { r.Leader = -3 }),
		"replicas without the isr":          pc(func(r *PartitionChangeRecord) { r.Replicas = []int32{1, 2} }),
		"replicas twice":                    pc(func(r *PartitionChangeRecord) { r.Replicas = []int32{1, 2, 3, 3} }),
		"empty replicas":                    pc(func(r *PartitionChangeRecord) { r.Replicas = []int32{} }),
		"adding not a replica":              pc(func(r *PartitionChangeRecord) { r.AddingReplicas = []int32{4} }),
		"removing not a replica":            pc(func(r *PartitionChangeRecord) { r.RemovingReplicas = []int32{4} }),
		"adding and removing":               pc(func(r *PartitionChangeRecord) { r.AddingReplicas, r.RemovingReplicas = []int32{3}, []int32{3} }),
		"unclean election without [leader]": pc(func(r *PartitionChangeRecord) { r.Leader = 3; r.ISR = []int32{1} }),
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

// A PartitionChangeRecord applied in a batch that then fails leaves the
// image it started from alone (the partitions are copied, not shared).
func TestPartitionChangeIsPure(t *testing.T) {
	img := applyAll(t, TopicRecord{Name: "a", TopicID: idA}, rf3(idA, 0))
	before := img.Records()
	if _, err := Apply(img, PartitionChangeRecord{TopicID: idA, Leader: 2, ISR: []int32{2}}); err != nil {
		t.Fatal(err)
	}
	if _, err := ApplyAll(img, []Record{PartitionChangeRecord{TopicID: idA, Leader: 3, ISR: []int32{3}}, part(idB, 0)}); err == nil {
		t.Fatal("bad batch applied")
	}
	if !reflect.DeepEqual(img.Records(), before) {
		t.Fatalf("image changed under Apply")
	}
}
