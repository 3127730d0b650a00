package engine

import (
	"encoding/json"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Broker-side latency: for each API, an HDR histogram of the time from the
// network loop handing a complete request frame to the engine to the last
// byte of its response being written (netpoll.TimedReply). Unlike
// sluice_request_duration_seconds, which stops when the engine has built
// the response, it includes the produce batch's wait for the loop's flush,
// the hand-back of deferred replies to the loop and the write itself; it
// excludes the client and the time bytes sat in the socket before the loop
// read them. Prometheus buckets are too coarse to tell a 30 µs p50 from a
// 90 µs p99 reliably; HDR histograms at three significant digits are not,
// and recording into one allocates nothing.

// Values are microseconds from 1 µs to 60 s; slower ones count as 60 s.
const (
	latMinMicros = 1
	latMaxMicros = int64(60 * time.Second / time.Microsecond)
	latDigits    = 3
)

// apiLatency is one API's histogram. A histogram is about 140 KB, so one
// is made for an API only when it is first answered.
type apiLatency struct {
	mu struct {
		sync.Mutex
		h *hdrhistogram.Histogram
	}
}

// brokerLatencies are the per-API histograms, created on first use.
type brokerLatencies struct {
	byAPI [maxAPIKey]atomic.Pointer[apiLatency]
}

func (l *brokerLatencies) record(key int16, d time.Duration) {
	if key < 0 || int(key) >= maxAPIKey {
		return
	}
	a := l.byAPI[key].Load()
	if a == nil {
		a = l.create(key)
	}
	us := min(max(d.Microseconds(), latMinMicros), latMaxMicros)
	a.mu.Lock()
	_ = a.mu.h.RecordValue(us) // in range by the clamp
	a.mu.Unlock()
}

// create makes key's histogram unless another goroutine just did.
func (l *brokerLatencies) create(key int16) *apiLatency {
	a := &apiLatency{}
	a.mu.h = hdrhistogram.New(latMinMicros, latMaxMicros, latDigits)
	if l.byAPI[key].CompareAndSwap(nil, a) {
		return a
	}
	return l.byAPI[key].Load()
}

// snapshots copies every histogram made so far, by API name.
func (l *brokerLatencies) snapshots() map[string]*hdrhistogram.Snapshot {
	out := make(map[string]*hdrhistogram.Snapshot)
	for key := range l.byAPI {
		a := l.byAPI[key].Load()
		if a == nil {
			continue
		}
		a.mu.Lock()
		out[kmsg.NameForKey(int16(key))] = a.mu.h.Export()
		a.mu.Unlock()
	}
	return out
}

// latencyQuantiles are the quantiles the Prometheus summary reports.
var latencyQuantiles = []float64{0.5, 0.9, 0.99, 0.999}

// latencyCollector exports the histograms as Prometheus summaries
// (sluice_request_written_seconds), computed at scrape time.
type latencyCollector struct {
	l    *brokerLatencies
	desc *prometheus.Desc
}

func newLatencyCollector(l *brokerLatencies) *latencyCollector {
	return &latencyCollector{l: l, desc: prometheus.NewDesc("sluice_request_written_seconds",
		"Broker-side latency since the broker started, by Kafka API: from the network loop holding a complete request frame to its response written, a fetch's long poll included (HDR histogram; plaintext listeners).",
		[]string{"api"}, nil)}
}

func (c *latencyCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *latencyCollector) Collect(ch chan<- prometheus.Metric) {
	for key := range c.l.byAPI {
		a := c.l.byAPI[key].Load()
		if a == nil {
			continue
		}
		q := make(map[float64]float64, len(latencyQuantiles))
		a.mu.Lock()
		n, sum := a.mu.h.TotalCount(), a.mu.h.Mean()*float64(a.mu.h.TotalCount())/1e6
		for _, p := range latencyQuantiles {
			q[p] = float64(a.mu.h.ValueAtQuantile(p*100)) / 1e6
		}
		a.mu.Unlock()
		ch <- prometheus.MustNewConstSummary(c.desc, uint64(n), sum, q, kmsg.NameForKey(int16(key)))
	}
}

// LatencyHandler serves the broker-side histograms as JSON, an
// hdrhistogram-go Snapshot (microseconds) by API name, so that a load
// generator can take one before and one after its run and report the
// difference (`sluice bench --broker-metrics`).
func (m *Metrics) LatencyHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(m.written.snapshots())
	})
}

// requestWritten records a response written by the network layer.
func (m *Metrics) requestWritten(key int16, d time.Duration) { m.written.record(key, d) }
