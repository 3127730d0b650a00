package engine

import (
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestRequestWrittenAllocatesNothing pins the recording of broker-side
// latency, which runs once per response on the network loop.
func TestRequestWrittenAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under the race detector")
	}
	m := NewMetrics()
	resp := newResponse()
	resp.metrics, resp.key = m, kmsg.Produce.Int16()
	resp.Written(time.Microsecond) // the first answer of an API makes its histogram
	if n := testing.AllocsPerRun(1000, func() { resp.Written(42 * time.Microsecond) }); n != 0 {
		t.Fatalf("%.1f allocations per recorded response", n)
	}
}

// TestLatencyHandlerServesHistograms: /debug/latency returns, by API name,
// histograms holding what was recorded (microseconds), which a load
// generator can difference.
func TestLatencyHandlerServesHistograms(t *testing.T) {
	m := NewMetrics()
	for _, d := range []time.Duration{10 * time.Microsecond, 20 * time.Microsecond, 3 * time.Millisecond} {
		m.requestWritten(kmsg.Produce.Int16(), d)
	}
	m.requestWritten(kmsg.Fetch.Int16(), 90*time.Second) // past the range: counted as its top
	rec := httptest.NewRecorder()
	m.LatencyHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/debug/latency", nil))
	var got map[string]*hdrhistogram.Snapshot
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	produce := hdrhistogram.Import(got["Produce"])
	if produce.TotalCount() != 3 || produce.ValueAtQuantile(50) != 20 || produce.Max() < 2990 {
		t.Fatalf("Produce: count %d, p50 %d µs, max %d µs; want 3, 20, ~3000", produce.TotalCount(), produce.ValueAtQuantile(50), produce.Max())
	}
	if fetch := hdrhistogram.Import(got["Fetch"]); fetch.TotalCount() != 1 || fetch.Max() < latMaxMicros*99/100 {
		t.Fatalf("Fetch: count %d, max %d; want 1 at the range's top", fetch.TotalCount(), fetch.Max())
	}
	if len(got) != 2 {
		t.Fatalf("APIs %v: want only Produce and Fetch", got)
	}
}
