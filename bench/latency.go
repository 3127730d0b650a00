package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// Latencies are recorded in microseconds, from 1 µs to 5 minutes, to three
// significant digits.
const (
	minLatencyMicros = 1
	maxLatencyMicros = int64(5 * time.Minute / time.Microsecond)
	latencyDigits    = 3
)

// Recorder is a concurrency-safe latency histogram.
type Recorder struct {
	mu struct {
		sync.Mutex
		h *hdrhistogram.Histogram
	}
}

// NewRecorder returns an empty recorder.
func NewRecorder() *Recorder {
	r := &Recorder{}
	r.mu.h = hdrhistogram.New(minLatencyMicros, maxLatencyMicros, latencyDigits)
	return r
}

// Record adds one latency; values outside the range are clamped to it, so a
// pathological stall still shows up as the maximum.
func (r *Recorder) Record(d time.Duration) {
	us := d.Microseconds()
	if us < minLatencyMicros {
		us = minLatencyMicros
	}
	if us > maxLatencyMicros {
		us = maxLatencyMicros
	}
	r.mu.Lock()
	_ = r.mu.h.RecordValue(us) // in range by the clamp above
	r.mu.Unlock()
}

// Summary returns the percentiles recorded so far.
func (r *Recorder) Summary() LatencySummary {
	r.mu.Lock()
	defer r.mu.Unlock()
	return summarize(r.mu.h)
}

// LatencySummary is a latency distribution in milliseconds.
type LatencySummary struct {
	Count int64   `json:"count"`
	Mean  float64 `json:"mean_ms"`
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
	P99   float64 `json:"p99_ms"`
	P999  float64 `json:"p99_9_ms"`
	Max   float64 `json:"max_ms"`
}

func summarize(h *hdrhistogram.Histogram) LatencySummary {
	if h.TotalCount() == 0 {
		return LatencySummary{}
	}
	ms := func(us int64) float64 { return float64(us) / 1000 }
	return LatencySummary{
		Count: h.TotalCount(),
		Mean:  h.Mean() / 1000,
		P50:   ms(h.ValueAtQuantile(50)),
		P90:   ms(h.ValueAtQuantile(90)),
		P99:   ms(h.ValueAtQuantile(99)),
		P999:  ms(h.ValueAtQuantile(99.9)),
		Max:   ms(h.Max()),
	}
}

// Percentile returns the named percentile ("p50", "p90", "p99", "p99.9",
// "max"), and false for any other name.
func (s LatencySummary) Percentile(name string) (float64, bool) {
	switch name {
	case "p50":
		return s.P50, true
	case "p90":
		return s.P90, true
	case "p99":
		return s.P99, true
	case "p99.9":
		return s.P999, true
	case "max":
		return s.Max, true
	}
	return 0, false
}

// BrokerLatency reads the broker-side latency histograms a Sluice broker
// serves on its metrics address (/debug/latency: from a complete request
// frame in the network loop to its response written, per API). A run
// takes one reading before and one after and reports the difference.
type BrokerLatency struct {
	url    string
	client http.Client
}

// NewBrokerLatency reads from the metrics listener at hostport.
func NewBrokerLatency(hostport string) *BrokerLatency {
	return &BrokerLatency{url: "http://" + hostport + "/debug/latency", client: http.Client{Timeout: 10 * time.Second}}
}

// Read returns the histograms so far, by API name.
func (b *BrokerLatency) Read(ctx context.Context) (map[string]*hdrhistogram.Snapshot, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := b.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", b.url, resp.Status)
	}
	var out map[string]*hdrhistogram.Snapshot
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&out); err != nil {
		return nil, fmt.Errorf("%s: %w", b.url, err)
	}
	return out, nil
}

// BrokerLatencyDelta summarizes what was recorded between two readings,
// per API; APIs with nothing new are left out. The broker records
// microseconds, as Recorder does.
func BrokerLatencyDelta(before, after map[string]*hdrhistogram.Snapshot) map[string]LatencySummary {
	out := make(map[string]LatencySummary)
	for api, a := range after {
		counts := slices.Clone(a.Counts)
		if b := before[api]; b != nil && len(b.Counts) == len(counts) {
			for i, n := range b.Counts {
				counts[i] -= n
			}
		}
		d := *a
		d.Counts = counts
		h := hdrhistogram.Import(&d)
		if h.TotalCount() > 0 {
			out[api] = summarize(h)
		}
	}
	return out
}
