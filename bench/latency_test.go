package bench

import (
	"testing"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// TestBrokerLatencyDelta: a run reports only what the broker recorded
// between its two readings, per API, and leaves out APIs with nothing new.
func TestBrokerLatencyDelta(t *testing.T) {
	h := hdrhistogram.New(1, 60_000_000, 3)
	for i := 0; i < 100; i++ {
		_ = h.RecordValue(5000) // before the run: 5 ms
	}
	idle := hdrhistogram.New(1, 60_000_000, 3)
	_ = idle.RecordValue(7)
	before := map[string]*hdrhistogram.Snapshot{"Produce": h.Export(), "Metadata": idle.Export()}
	for i := 0; i < 10; i++ {
		_ = h.RecordValue(30) // during the run: 30 µs
	}
	after := map[string]*hdrhistogram.Snapshot{"Produce": h.Export(), "Metadata": idle.Export()}
	d := BrokerLatencyDelta(before, after)
	p, ok := d["Produce"]
	if !ok || p.Count != 10 || p.P50 != 0.03 || p.Max != 0.03 {
		t.Fatalf("Produce over the run: %+v; want 10 at 0.03 ms", p)
	}
	if _, ok := d["Metadata"]; ok || len(d) != 1 {
		t.Fatalf("APIs with nothing new are reported: %v", d)
	}
}
