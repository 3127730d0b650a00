package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"time"
)

// Result is what one run measured.
type Result struct {
	Config  Config    `json:"config"`
	Started time.Time `json:"started"`
	// Produce counts acknowledged records, from the first send to the last
	// acknowledgement.
	Produce Throughput `json:"produce"`
	// Consume counts records read back: while producing (produce-consume)
	// or afterwards from the start of the run's records (catch-up,
	// raw-fetch; raw-fetch counts response bytes).
	Consume        Throughput     `json:"consume"`
	ProduceLatency LatencySummary `json:"produce_ack_latency"`
	EndToEnd       LatencySummary `json:"end_to_end_latency"`
	// CommitLatency is EndTransaction(commit) of transactional producers
	// (Config.TxnRecords), from the call to its return.
	CommitLatency LatencySummary `json:"commit_latency,omitempty"`
	// SendLag (raw-produce at a fixed rate) is how late each request left
	// against its schedule: the client's own share of ProduceLatency.
	SendLag LatencySummary `json:"send_lag,omitempty"`
	// RoundTrip (raw-produce) runs from each request's write to its
	// response: ProduceLatency without the client's lateness and, with
	// requests pipelined, without the wait for a free slot.
	RoundTrip LatencySummary `json:"round_trip,omitempty"`
	// ProduceRequests and FetchRequests are the requests the run's
	// clients wrote over the measured span (catch-up: the whole run).
	ProduceRequests int64  `json:"produce_requests,omitempty"`
	FetchRequests   int64  `json:"fetch_requests,omitempty"`
	ProduceErrors   int64  `json:"produce_errors"`
	FirstError      string `json:"first_error,omitempty"`
	// BrokerLatency (--broker-metrics) is the broker's own latency over
	// the run, by API: from a complete request frame in its network loop
	// to the response written.
	BrokerLatency map[string]LatencySummary `json:"broker_latency,omitempty"`
	// ZeroCopy is filled by --zcprobe.
	ZeroCopy *ZeroCopyReport `json:"zero_copy,omitempty"`
}

// Throughput is records and bytes over a time span. MB is 10^6 bytes.
type Throughput struct {
	Records       int64   `json:"records"`
	Bytes         int64   `json:"bytes"`
	Seconds       float64 `json:"seconds"`
	RecordsPerSec float64 `json:"records_per_sec"`
	MBPerSec      float64 `json:"mb_per_sec"`
}

func newThroughput(records, bytes int64, d time.Duration) Throughput {
	t := Throughput{Records: records, Bytes: bytes, Seconds: d.Seconds()}
	if t.Seconds > 0 {
		t.RecordsPerSec = float64(records) / t.Seconds
		t.MBPerSec = float64(bytes) / t.Seconds / 1e6
	}
	return t
}

// WriteText prints r for a person.
func (r *Result) WriteText(w io.Writer) {
	c := r.Config
	rate := "max"
	if c.Rate > 0 {
		rate = fmt.Sprintf("%.0f rec/s", c.Rate)
	}
	fmt.Fprintf(w, "sluice bench: %s, topic %s (%d partitions), %d producers, %d consumers, %d B records, rate %s, acks=%s, compression=%s\n",
		c.Mode, c.Topic, c.Partitions, c.Producers, c.Consumers, c.RecordSize, rate, c.Acks, c.Compression)
	printTP := func(name string, t Throughput) {
		fmt.Fprintf(w, "  %-8s %10d records in %6.2fs: %10.0f records/s %8.1f MB/s\n",
			name, t.Records, t.Seconds, t.RecordsPerSec, t.MBPerSec)
	}
	printTP("produce", r.Produce)
	if r.Consume.Records > 0 || r.Consume.Bytes > 0 {
		printTP("consume", r.Consume)
	}
	printLat := func(name string, s LatencySummary) {
		if s.Count == 0 {
			return
		}
		fmt.Fprintf(w, "  %-8s latency ms: p50 %.3f  p90 %.3f  p99 %.3f  p99.9 %.3f  max %.3f  (n=%d)\n",
			name, s.P50, s.P90, s.P99, s.P999, s.Max, s.Count)
	}
	printLat("ack", r.ProduceLatency)
	printLat("e2e", r.EndToEnd)
	printLat("commit", r.CommitLatency)
	printLat("send lag", r.SendLag)
	printLat("rtt", r.RoundTrip)
	for _, api := range slices.Sorted(maps.Keys(r.BrokerLatency)) {
		printLat("broker "+api, r.BrokerLatency[api])
	}
	if r.ProduceRequests > 0 {
		fmt.Fprintf(w, "  requests: %d produce (%.1f records each)", r.ProduceRequests, float64(r.Produce.Records)/float64(r.ProduceRequests))
		if r.FetchRequests > 0 {
			fmt.Fprintf(w, ", %d fetch (%.1f records each)", r.FetchRequests, float64(r.Consume.Records)/float64(r.FetchRequests))
		}
		fmt.Fprintln(w)
	}
	if z := r.ZeroCopy; z != nil {
		fmt.Fprintf(w, "  zero-copy: %.4f of %d bytes sent to sockets by pid %d (%d zero-copy, %d copied; %s)\n",
			z.Fraction, z.ZeroCopyBytes+z.CopiedBytes, z.Pid, z.ZeroCopyBytes, z.CopiedBytes, z.Counts.Method)
	}
	if r.ProduceErrors > 0 {
		fmt.Fprintf(w, "  produce errors: %d (first: %s)\n", r.ProduceErrors, r.FirstError)
	}
}

// WriteJSONFile writes v as indented JSON to path.
func WriteJSONFile(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
