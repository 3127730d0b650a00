package check

import (
	"errors"
	"maps"
	"testing"
	"time"
)

// counts is an Anomalies' size by kind.
func counts(an Anomalies) map[Kind]int {
	out := map[Kind]int{}
	for k, s := range an {
		out[k] = len(s)
	}
	return out
}

// twoProducers: producers 0 and 1 interleave on partition 0 (values
// 0..5, acked at offsets 0..5 in send order); value 6 failed.
func twoProducers() *History {
	h := NewHistory()
	for i := range 6 {
		v := h.Send(i%2, 0)
		h.Done(v, int64(v), nil)
	}
	h.Done(h.Send(0, 0), 0, errors.New("timed out"))
	return h
}

func clean() map[int32]*Log {
	return map[int32]*Log{0: {HW: 6, Offsets: []int64{0, 1, 2, 3, 4, 5}, Values: []int{0, 1, 2, 3, 4, 5}}}
}

// TestCheckProducerAnomalies: what the final log and the producers'
// acknowledgements say, per kind; order is per producer.
func TestCheckProducerAnomalies(t *testing.T) {
	for _, tc := range []struct {
		name  string
		log   *Log
		extra func(h *History)
		want  map[Kind]int
	}{
		{"clean", clean()[0], nil, map[Kind]int{}},
		{"failed value present", &Log{HW: 7, Offsets: []int64{0, 1, 2, 3, 4, 5, 6}, Values: []int{0, 1, 2, 3, 4, 5, 6}}, nil, map[Kind]int{}},
		// 1 (producer 1) before 0 (producer 0): no order between producers.
		{"producers interleave", &Log{HW: 6, Offsets: []int64{0, 1, 2, 3, 4, 5}, Values: []int{1, 0, 3, 2, 5, 4}}, nil,
			map[Kind]int{Moved: 6}},
		// 2 after 4, both producer 0.
		{"reordered within producer", &Log{HW: 6, Offsets: []int64{0, 1, 2, 3, 4, 5}, Values: []int{0, 1, 4, 3, 2, 5}}, nil,
			map[Kind]int{Reordered: 1, Moved: 2}},
		{"lost", &Log{HW: 5, Offsets: []int64{0, 1, 2, 3, 4}, Values: []int{0, 1, 2, 3, 4}}, nil, map[Kind]int{Lost: 1}},
		{"two acks at one offset", clean()[0], func(h *History) { h.Done(h.Send(1, 0), 3, nil) },
			map[Kind]int{Inconsistent: 1, Lost: 1}},
	} {
		h := twoProducers()
		if tc.extra != nil {
			tc.extra(h)
		}
		if got := counts(h.Check(map[int32]*Log{0: tc.log}, nil)); !maps.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, h.Check(map[int32]*Log{0: tc.log}, nil), tc.want)
		}
	}
}

// TestCheckPolls: a consumer's polls must match the final log and rise
// within one assignment; a new session may start lower (redelivery).
func TestCheckPolls(t *testing.T) {
	for _, tc := range []struct {
		name  string
		polls []Poll
		want  map[Kind]int
	}{
		{"in order", []Poll{{0, 1, 0, 0, 0}, {0, 1, 0, 1, 1}, {0, 1, 0, 2, 2}}, map[Kind]int{}},
		{"redelivered in a new session", []Poll{{0, 1, 0, 2, 2}, {0, 2, 0, 1, 1}, {1, 1, 0, 0, 0}}, map[Kind]int{}},
		{"backwards in a session", []Poll{{0, 1, 0, 2, 2}, {0, 1, 0, 1, 1}}, map[Kind]int{NonMonotonic: 1}},
		{"repeated in a session", []Poll{{0, 1, 0, 2, 2}, {0, 1, 0, 2, 2}}, map[Kind]int{NonMonotonic: 1}},
		{"another value at the offset", []Poll{{0, 1, 0, 2, 4}}, map[Kind]int{Inconsistent: 1}},
		{"above the final hw", []Poll{{0, 1, 0, 6, 6}}, map[Kind]int{Inconsistent: 1}},
	} {
		h := twoProducers()
		for _, p := range tc.polls {
			h.Polled(p)
		}
		if got := counts(h.Check(clean(), nil)); !maps.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, h.Check(clean(), nil), tc.want)
		}
	}
}

// TestCheckCommits: successful commits never go down, and the final
// committed offset is not below the last of them.
func TestCheckCommits(t *testing.T) {
	for _, tc := range []struct {
		name      string
		commits   []Commit
		committed map[int32]int64
		want      map[Kind]int
	}{
		{"rising", []Commit{{0, 0, 2, false}, {1, 0, 4, false}, {1, 0, 4, false}}, map[int32]int64{0: 4}, map[Kind]int{}},
		{"not fetched", []Commit{{0, 0, 2, false}}, nil, map[Kind]int{}},
		{"backwards", []Commit{{0, 0, 4, false}, {1, 0, 2, false}}, map[int32]int64{0: 4}, map[Kind]int{CommitBackwards: 1}},
		{"final below last", []Commit{{0, 0, 4, false}}, map[int32]int64{0: 3}, map[Kind]int{CommitBackwards: 1}},
		{"final missing", []Commit{{0, 0, 4, false}}, map[int32]int64{}, map[Kind]int{CommitBackwards: 1}},
		// A zombie's commit from an old assignment, made under its new
		// generation: legal in Kafka's protocol, and not an anomaly.
		{"stale backwards", []Commit{{0, 0, 4, false}, {1, 0, 2, true}, {0, 0, 5, false}}, map[int32]int64{0: 5}, map[Kind]int{}},
		{"stale last", []Commit{{0, 0, 4, false}, {1, 0, 2, true}}, map[int32]int64{0: 2}, map[Kind]int{}},
		// The new owner resumes from the stale commit's offset.
		{"after a stale one", []Commit{{0, 0, 4, false}, {1, 0, 2, true}, {0, 0, 3, false}}, map[int32]int64{0: 3}, map[Kind]int{}},
		{"below a stale one", []Commit{{1, 0, 2, true}, {0, 0, 1, false}}, map[int32]int64{0: 2}, map[Kind]int{CommitBackwards: 1}},
	} {
		h := twoProducers()
		for _, c := range tc.commits {
			h.Committed(c)
		}
		if got := counts(h.Check(clean(), tc.committed)); !maps.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, h.Check(clean(), tc.committed), tc.want)
		}
	}
}

// TestFirstAck: recovery is measured from the first value sent after the
// fault that was acknowledged, on the faulted partition.
func TestFirstAck(t *testing.T) {
	h := NewHistory()
	h.Done(h.Send(0, 0), 0, nil)
	since := time.Now()
	time.Sleep(time.Millisecond) // distinct Sent times; not a timing assertion
	a := h.Send(0, 0)
	b := h.Send(0, 1)
	if _, ok := h.FirstAck(0, since); ok {
		t.Error("an acknowledgement before the fault counted")
	}
	h.Done(b, 0, nil)
	if _, ok := h.FirstAck(0, since); ok {
		t.Error("another partition's acknowledgement counted")
	}
	if _, ok := h.FirstAck(-1, since); !ok {
		t.Error("any partition: no acknowledgement found")
	}
	h.Done(a, 1, nil)
	if _, ok := h.FirstAck(0, since); !ok {
		t.Error("partition 0: no acknowledgement found")
	}
}

// TestCheckCopy: a copy equal to the source below the committed offset is
// clean; a missing, an extra and a different value are each named.
func TestCheckCopy(t *testing.T) {
	src := map[int32]*Log{0: {HW: 5, Offsets: []int64{0, 1, 2, 3, 4}, Values: []int{10, 11, 12, 13, 14}}}
	// Copy offsets skip the commit markers.
	copyOf := func(vs ...int) map[int32]*Log {
		l := &Log{}
		for i, v := range vs {
			l.Offsets, l.Values = append(l.Offsets, int64(2*i)), append(l.Values, v)
		}
		return map[int32]*Log{0: l}
	}
	for _, tc := range []struct {
		name string
		dst  map[int32]*Log
		want Kind
	}{
		{"exact", copyOf(10, 11, 12), ""},
		{"lost", copyOf(10, 11), Lost},
		{"duplicate", copyOf(10, 11, 12, 12), Duplicate},
		{"aborted visible", copyOf(10, 11, 12, 13), Duplicate},
		{"foreign", copyOf(10, 12, 11), Foreign},
	} {
		an := CheckCopy(src, tc.dst, map[int32]int64{0: 3})
		if tc.want == "" {
			if an.Total() != 0 {
				t.Errorf("%s: %v", tc.name, an)
			}
			continue
		}
		if len(an[tc.want]) != 1 || an.Total() != 1 {
			t.Errorf("%s: %v, want one %s", tc.name, an, tc.want)
		}
	}
}
