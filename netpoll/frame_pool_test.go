package netpoll

import "testing"

// TestManyPartitionFramesPooled: a produce request with a batch for each
// of 16 partitions is several MiB; such frames come from the pool, not a
// fresh zeroed allocation per request (which doubled the broker's RSS from
// 1 to 16 partitions).
func TestManyPartitionFramesPooled(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	for _, n := range []int{1 << 20, 5 << 20, 16 << 20} {
		putFrame(getFrame(n))
		allocs := testing.AllocsPerRun(50, func() { putFrame(getFrame(n)) })
		if allocs != 0 {
			t.Errorf("a %d-byte frame: %.1f allocations per request", n, allocs)
		}
	}
	if f := getFrame(17 << 20); cap(*f) != 17<<20 {
		t.Errorf("a frame above the largest class got capacity %d", cap(*f))
	}
}
