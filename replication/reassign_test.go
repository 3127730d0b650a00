package replication

import (
	"slices"
	"testing"
)

// A reassignment adds replica 4 at the same leader epoch: the leader
// starts tracking it, proposes it into the ISR once it has fetched up to
// the high watermark (not before), and forgets replica 1 when the
// completed reassignment drops it, so the HW no longer waits for it.
func TestLeaderReplicasChangeAtSameEpoch(t *testing.T) {
	l := NewLeader(cfg, 2, 3, 7, []int32{1, 2, 3}, []int32{1, 2, 3}, 100, 100, 0)
	l.OnFollowerFetch(1, 100, 1)
	l.OnFollowerFetch(3, 100, 1)
	if _, p := l.OnFollowerFetch(4, 100, 1); p != nil {
		t.Fatalf("a fetch from a non-replica proposed %+v", p)
	}
	l.SetReplicas([]int32{2, 3, 4, 1})
	l.OnISRCommitted([]int32{1, 2, 3}, 8)
	if got := l.FollowerLEO(4); got != -1 {
		t.Fatalf("new replica's log end %d before it fetched", got)
	}
	if _, p := l.OnFollowerFetch(4, 50, 2); p != nil {
		t.Fatalf("expansion proposed below the HW: %+v", p)
	}
	_, p := l.OnFollowerFetch(4, 100, 3)
	if p == nil || !slices.Equal(p.ISR, []int32{1, 2, 3, 4}) || p.PartitionEpoch != 8 {
		t.Fatalf("expansion %+v", p)
	}
	// The controller completes the reassignment: replicas [2 3 4].
	l.SetReplicas([]int32{2, 3, 4})
	l.OnISRCommitted([]int32{2, 3, 4}, 9)
	if got := l.FollowerLEO(1); got != -1 {
		t.Errorf("removed replica still tracked (log end %d)", got)
	}
	l.OnAppend(120)
	l.OnFollowerFetch(3, 120, 4)
	l.OnFollowerFetch(4, 120, 4)
	if hw := l.HighWatermark(); hw != 120 {
		t.Errorf("HW %d, want 120 without the removed replica", hw)
	}
}
