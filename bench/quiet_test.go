package bench

import (
	"slices"
	"testing"
)

func TestParseCPUList(t *testing.T) {
	for in, want := range map[string][]int{"": nil, "1": {1}, "0,2": {0, 2}, "0-2,5": {0, 1, 2, 5}} {
		got, err := ParseCPUList(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("ParseCPUList(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"a", "2-1", "-1", "1-", "4096"} {
		if _, err := ParseCPUList(bad); err == nil {
			t.Errorf("ParseCPUList(%q) accepted", bad)
		}
	}
}

// TestClientFIFONeedsItsOwnCPUs: SCHED_FIFO on a Go process with more
// threads than CPUs livelocked a run (a spinning runtime thread starved
// its same-priority peer), so --client-fifo is refused unless the client
// is pinned and its GOMAXPROCS fits its CPUs. The refusal comes before
// anything is changed.
func TestClientFIFONeedsItsOwnCPUs(t *testing.T) {
	for _, q := range []Quiet{
		{ClientFIFO: 10},
		{ClientFIFO: 10, ClientCPUs: []int{0}, ClientGOMAXPROCS: 2},
		{ClientFIFO: 100, ClientCPUs: []int{0}},
	} {
		undo, err := q.Apply("127.0.0.1:1")
		undo()
		if err == nil {
			t.Errorf("%+v: accepted", q)
		}
	}
}
