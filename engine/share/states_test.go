package share

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestStatesWriteReadReload(t *testing.T) {
	log := &memLog{}
	s := NewStates(1, func() int64 { return 1000 })
	k := SPKey{Group: "g", TopicID: [16]byte{7}, Partition: 3}
	if _, _, code := s.Read(k); code != kerr.NotCoordinator.Code {
		t.Fatalf("read before load: code %d", code)
	}
	if _, err := s.LoadPartition(0, log); err != nil {
		t.Fatal(err)
	}
	if _, found, code := s.Read(k); found || code != 0 {
		t.Fatalf("uninitialized: found %v code %d", found, code)
	}
	v := SnapshotValue{StateEpoch: 1, StartOffset: 10, DeliveryCompleteCount: -1,
		Batches: []StateBatch{{First: 11, Last: 12, State: Acknowledged, Count: 1}}}
	if code := s.Write(k, v); code != 0 {
		t.Fatalf("write: %d", code)
	}
	v.StateEpoch = 0
	if code := s.Write(k, v); code != kerr.FencedStateEpoch.Code {
		t.Fatalf("stale state epoch: %d", code)
	}
	s2 := NewStates(1, func() int64 { return 2000 })
	if n, err := s2.LoadPartition(0, log); n != 1 || err != nil {
		t.Fatalf("reload: %d %v", n, err)
	}
	got, found, _ := s2.Read(k)
	if !found || got.StartOffset != 10 || !slices.Equal(got.Batches, []StateBatch{{11, 12, Acknowledged, 1}}) {
		t.Fatalf("reloaded %+v", got)
	}
	if code := s2.Delete(k); code != 0 {
		t.Fatal(code)
	}
	s3 := NewStates(1, func() int64 { return 3000 })
	if n, _ := s3.LoadPartition(0, log); n != 0 {
		t.Fatalf("deleted state reloaded: %d", n)
	}
}

func TestShareUpdateOverlaysSnapshot(t *testing.T) {
	base := &SnapshotValue{StartOffset: 0, Batches: []StateBatch{{0, 9, Available, 1}}}
	applyUpdate(base, &UpdateValue{StartOffset: 2, Batches: []StateBatch{{4, 5, Acknowledged, 1}}})
	want := []StateBatch{{2, 3, Available, 1}, {4, 5, Acknowledged, 1}, {6, 9, Available, 1}}
	if base.StartOffset != 2 || !slices.Equal(base.Batches, want) {
		t.Fatalf("merged %d %v, want 2 %v", base.StartOffset, base.Batches, want)
	}
}

// Kafka's key for the share coordinator, its topic id in Uuid.toString.
func TestCoordinatorKey(t *testing.T) {
	k := SPKey{Group: "g", TopicID: [16]byte{0xfb, 0xff}, Partition: 2}
	if got := k.CoordinatorKey(); got != "g:-_8AAAAAAAAAAAAAAAAAAA:2" {
		t.Fatalf("key %q", got)
	}
}

// A leader still holding a deleted share-partition's state is fenced: it
// cannot bring the state back under the epoch it loaded it at.
func TestStatesDeleteFencesOldEpoch(t *testing.T) {
	s := NewStates(1, func() int64 { return 1 })
	if _, err := s.LoadPartition(0, &memLog{}); err != nil {
		t.Fatal(err)
	}
	k := SPKey{Group: "g", Partition: 0}
	s.Write(k, SnapshotValue{StateEpoch: 2, StartOffset: 10})
	s.Delete(k)
	if code := s.Write(k, SnapshotValue{StateEpoch: 2, StartOffset: 12}); code != kerr.FencedStateEpoch.Code {
		t.Fatalf("write at the deleted epoch: code %d", code)
	}
	v, found, _ := s.Read(k)
	if found || v.StateEpoch != 3 {
		t.Fatalf("after delete: found %v epoch %d, want not found at epoch 3", found, v.StateEpoch)
	}
	if code := s.Write(k, SnapshotValue{StateEpoch: 3, StartOffset: 0}); code != 0 {
		t.Fatalf("reinitialize: code %d", code)
	}
}
