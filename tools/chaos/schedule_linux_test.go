package main

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// schedule draws n kinds the way a run does, marking a broker-only node
// as running after add-broker and gone after remove-broker, as a run's
// injector does.
func schedule(seed uint64, kinds []string, fixed bool, n int) []string {
	in := &injector{c: &cluster{nodes: make([]*node, 3)}, rng: rand.New(rand.NewPCG(seed, 12)), maxNode: 4}
	var out []string
	for i := range n {
		k := in.next(kinds, fixed, i)
		switch k {
		case "add-broker":
			in.added = true
		case "remove-broker":
			in.added = false
		}
		out = append(out, k)
	}
	return out
}

// TestScheduleFromSeed: one seed gives one sequence of faults (the run's
// report names the seed so a failure can be replayed); every kind comes up
// in a long enough run; add-broker and remove-broker alternate, starting
// with an add.
func TestScheduleFromSeed(t *testing.T) {
	a, b := schedule(7, allFaults, false, 200), schedule(7, allFaults, false, 200)
	if !slices.Equal(a, b) {
		t.Fatal("the same seed gave two schedules")
	}
	if slices.Equal(a, schedule(8, allFaults, false, 200)) {
		t.Error("seeds 7 and 8 gave one schedule")
	}
	for _, k := range allFaults {
		n := 0
		for _, x := range a {
			if x == k {
				n++
			}
		}
		if n == 0 {
			t.Errorf("%s drawn %d times in 200", k, n)
		}
	}
	var members []string
	for _, k := range a {
		if k == "add-broker" || k == "remove-broker" {
			members = append(members, k)
		}
	}
	for i, k := range members {
		if want := [2]string{"add-broker", "remove-broker"}[i%2]; k != want {
			t.Fatalf("membership changes %v: #%d is %s", members, i, k)
		}
	}
}

// TestScheduleFixed: --fixed injects the kinds in the order given,
// skipping add-broker while the broker it added runs.
func TestScheduleFixed(t *testing.T) {
	got := schedule(1, []string{"kill-leader", "add-broker", "pause-leader"}, true, 6)
	want := []string{"kill-leader", "add-broker", "pause-leader", "kill-leader", "pause-leader", "pause-leader"}
	if !slices.Equal(got, want) {
		t.Errorf("%v, want %v", got, want)
	}
}
