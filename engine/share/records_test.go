package share

import (
	"bytes"
	"reflect"
	"testing"
)

func TestRecordsRoundTrip(t *testing.T) {
	rack := "r1"
	tps := []TopicPartitions{{TopicID: [16]byte{1, 2}, Partitions: []int32{0, 3}}}
	batches := []StateBatch{{First: 5, Last: 9, State: Acknowledged, Count: 2}}
	for _, c := range []struct {
		v interface {
			AppendTo([]byte) []byte
			ReadFrom([]byte) error
		}
		empty any
	}{
		{&MemberValue{RackID: &rack, ClientID: "c", ClientHost: "/127.0.0.1", Subscribed: []string{"t1", "t2"}}, &MemberValue{}},
		{&GroupValue{Epoch: 7, MetadataHash: -3}, &GroupValue{}},
		{&TargetMetaValue{AssignmentEpoch: 7}, &TargetMetaValue{}},
		{&AssignmentValue{Partitions: tps}, &AssignmentValue{}},
		{&CurrentValue{MemberEpoch: 7, PreviousMemberEpoch: 6, Partitions: tps}, &CurrentValue{}},
		{&SnapshotValue{SnapshotEpoch: 1, StateEpoch: 2, LeaderEpoch: 3, StartOffset: 5, DeliveryCompleteCount: 5,
			CreateTimestamp: 10, WriteTimestamp: 11, Batches: batches}, &SnapshotValue{}},
		{&SnapshotValue{StartOffset: 5, DeliveryCompleteCount: -1}, &SnapshotValue{}},
		{&UpdateValue{SnapshotEpoch: 1, StartOffset: 5, DeliveryCompleteCount: -1, Batches: batches}, &UpdateValue{}},
	} {
		b := c.v.AppendTo(nil)
		got := c.empty.(interface{ ReadFrom([]byte) error })
		if err := got.ReadFrom(b); err != nil {
			t.Fatalf("%T: %v", c.v, err)
		}
		if !reflect.DeepEqual(got, c.v) {
			t.Fatalf("%T: read %+v, wrote %+v", c.v, got, c.v)
		}
		if err := got.ReadFrom(b[:len(b)-1]); err == nil {
			t.Fatalf("%T: a cut value decoded", c.v)
		}
	}
	for _, k := range []Key{
		{Type: TypeShareSnapshot, Group: "g", TopicID: [16]byte{9}, Partition: 4},
		{Type: TypeMemberMetadata, Group: "g", Member: "m"},
		{Type: TypeGroupMetadata, Group: "g"},
	} {
		got, err := ParseKey(k.AppendTo(nil))
		if err != nil || got != k {
			t.Fatalf("key %+v: read %+v, %v", k, got, err)
		}
	}
}

// The snapshot value's bytes, laid out by hand from Kafka's
// ShareSnapshotValue schema: what Kafka's serde reads.
func TestSnapshotValueLayout(t *testing.T) {
	v := SnapshotValue{SnapshotEpoch: 1, StateEpoch: 0, LeaderEpoch: 2, StartOffset: 3, DeliveryCompleteCount: -1,
		CreateTimestamp: 4, WriteTimestamp: 5, Batches: []StateBatch{{First: 3, Last: 4, State: Archived, Count: 6}}}
	want := []byte{
		0, 0, // version
		0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2, // snapshot, state, leader epochs
		0, 0, 0, 0, 0, 0, 0, 3, // start offset
		0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 5, // create, write timestamps
		2,                                                          // one batch
		0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 4, 4, 0, 6, 0, // first, last, state, count, tags
		0, // tags
	}
	if got := v.AppendTo(nil); !bytes.Equal(got, want) {
		t.Fatalf("snapshot bytes\n got %v\nwant %v", got, want)
	}
}

func FuzzRecords(f *testing.F) {
	f.Add((&SnapshotValue{StartOffset: 5, DeliveryCompleteCount: 3, Batches: []StateBatch{{1, 2, 2, 1}}}).AppendTo(nil))
	f.Add((&CurrentValue{Partitions: []TopicPartitions{{Partitions: []int32{1}}}}).AppendTo(nil))
	f.Add((&MemberValue{Subscribed: []string{"a"}}).AppendTo(nil))
	f.Add(Key{Type: TypeShareSnapshot, Group: "g"}.AppendTo(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = ParseKey(b)
		for _, v := range []interface{ ReadFrom([]byte) error }{
			&MemberValue{}, &GroupValue{}, &TargetMetaValue{}, &AssignmentValue{}, &CurrentValue{}, &SnapshotValue{}, &UpdateValue{},
		} {
			if v.ReadFrom(b) == nil {
				// What decodes re-encodes to a value that decodes alike.
				again := reflect.New(reflect.TypeOf(v).Elem()).Interface().(interface{ ReadFrom([]byte) error })
				if err := again.ReadFrom(v.(interface{ AppendTo([]byte) []byte }).AppendTo(nil)); err != nil {
					t.Fatalf("%T: re-encoded value does not decode: %v", v, err)
				}
			}
		}
	})
}
