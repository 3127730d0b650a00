package engine

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics are the broker's Prometheus series. Per-API series are created
// once per API at start so the request path only indexes an array.
type Metrics struct {
	reg *prometheus.Registry

	requests [maxAPIKey]prometheus.Counter
	latency  [maxAPIKey]prometheus.Observer

	bytesIn, bytesOut     *prometheus.CounterVec
	recordsIn, recordsOut *prometheus.CounterVec
	connections           prometheus.Gauge

	written brokerLatencies // metrics_latency.go
}

// NewMetrics registers the broker's series on a fresh registry.
func NewMetrics() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	reqs := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_requests_total", Help: "Requests handled, by Kafka API.",
	}, []string{"api"})
	lat := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "sluice_request_duration_seconds",
		Help: "Time from a request's arrival to its response, by Kafka API (fetch includes long-poll wait).",
		// 5 µs to 3.3 s in steps of 1.5×: fine enough to tell a
		// produce's p50 (tens of µs) from its p99 (BENCHMARKS.md,
		// "Produce path"); beyond that, +Inf.
		Buckets: prometheus.ExponentialBuckets(5e-6, 1.5, 34),
	}, []string{"api"})
	topicCounter := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{"topic"})
	}
	m.bytesIn = topicCounter("sluice_topic_bytes_in_total", "Record-batch bytes appended, by topic.")
	m.bytesOut = topicCounter("sluice_topic_bytes_out_total", "Record-batch bytes sent to fetchers, by topic.")
	m.recordsIn = topicCounter("sluice_topic_records_in_total", "Records appended, by topic.")
	m.recordsOut = topicCounter("sluice_topic_records_out_total", "Records sent to fetchers (counted by batch header), by topic.")
	m.connections = prometheus.NewGauge(prometheus.GaugeOpts{Name: "sluice_open_connections", Help: "Open client connections."})
	m.reg.MustRegister(reqs, lat, m.bytesIn, m.bytesOut, m.recordsIn, m.recordsOut, m.connections,
		newLatencyCollector(&m.written), collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, a := range servedAPIs() {
		m.requests[a.key] = reqs.WithLabelValues(a.name)
		m.latency[a.key] = lat.WithLabelValues(a.name)
	}
	return m
}

// Handler serves /metrics.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

func (m *Metrics) requestStarted(a *api) { m.requests[a.key].Inc() }

func (m *Metrics) requestDone(r *Request, _ *Response) {
	if a := lookupAPI(r.Key); a != nil {
		m.latency[a.key].Observe(time.Since(r.Received).Seconds())
	}
}

// ConnOpened and ConnClosed track open connections; the network layer
// calls them.
func (m *Metrics) ConnOpened() { m.connections.Inc() }
func (m *Metrics) ConnClosed() { m.connections.Dec() }

// produced and fetched count record traffic per topic.
func (m *Metrics) produced(topic string, bytes, records int) {
	m.bytesIn.WithLabelValues(topic).Add(float64(bytes))
	m.recordsIn.WithLabelValues(topic).Add(float64(records))
}

func (m *Metrics) fetched(topic string, bytes, records int) {
	m.bytesOut.WithLabelValues(topic).Add(float64(bytes))
	m.recordsOut.WithLabelValues(topic).Add(float64(records))
}
