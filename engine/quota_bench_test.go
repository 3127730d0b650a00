package engine_test

import (
	"context"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-broker/sluice/engine"
	"github.com/sluice-broker/sluice/internal/testbroker"
)

// BenchmarkQuotaLimitedProducer runs a producer that sends as fast as it
// can against a producer_byte_rate quota of 1 MiB/s for 30 s
// ($SLUICE_QUOTA_BENCH_SECONDS) and reports the rate it achieved and its
// ratio to the quota (the target: within 10%). The producer is
// franz-go, which also waits out the throttle_time_ms it is answered with,
// as Java's does; the broker mutes the connection for it either way.
//
//	go test ./engine -run XXX -bench QuotaLimitedProducer -benchtime 1x
func BenchmarkQuotaLimitedProducer(b *testing.B) {
	const quota = 1 << 20
	secs := 30
	if s, err := strconv.Atoi(os.Getenv("SLUICE_QUOTA_BENCH_SECONDS")); err == nil && s > 0 {
		secs = s
	}
	windows := int32(11) // quota.window.num ($SLUICE_QUOTA_BENCH_WINDOWS)
	if w, err := strconv.Atoi(os.Getenv("SLUICE_QUOTA_BENCH_WINDOWS")); err == nil && w > 1 {
		windows = int32(w)
	}
	tb := testbroker.Start(b, func(c *engine.Config) { c.Authz.QuotaWindowNum = windows })
	adm := tb.Admin(b)
	ctx := context.Background()
	if _, err := adm.CreateTopics(ctx, 1, 1, nil, "quota-bench"); err != nil {
		b.Fatal(err)
	}
	if _, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: kadm.StringPtr("limited")}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: quota}}}}); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		cl := tb.Client(b, kgo.ClientID("limited"), kgo.DefaultProduceTopic("quota-bench"),
			kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(5*time.Millisecond))
		value := make([]byte, 1000)
		var acked atomic.Int64
		start := time.Now()
		deadline := start.Add(time.Duration(secs) * time.Second)
		// Kafka's rate counts at least quota.window.num-1 windows (10 s)
		// of elapsed time, so a new client may first send about that
		// many seconds' worth at once; the steady rate is measured after
		// the first full span of samples (11 s).
		warm := start.Add(time.Duration(windows) * time.Second)
		var warmAcked int64 = -1
		for now := time.Now(); now.Before(deadline); now = time.Now() {
			if warmAcked < 0 && !now.Before(warm) {
				warmAcked = acked.Load()
			}
			cl.Produce(ctx, &kgo.Record{Value: value}, func(r *kgo.Record, err error) {
				if err == nil {
					acked.Add(int64(len(r.Value)))
				}
			})
		}
		// The rate is what was acknowledged within the window; what the
		// client still buffers is dropped with it.
		total, end := acked.Load(), time.Now()
		rate := float64(total) / end.Sub(start).Seconds()
		cl.Close()
		b.ReportMetric(rate/(1<<20), "MiB/s")
		b.ReportMetric(rate/quota, "rate/quota")
		if warmAcked >= 0 && secs > int(windows) {
			steady := float64(total-warmAcked) / end.Sub(warm).Seconds()
			b.ReportMetric(steady/quota, "steady/quota")
			b.Logf("after the first %d s: %.3f MiB/s (%.2f of the quota)", windows, steady/(1<<20), steady/quota)
		}
		b.Logf("%d s at producer_byte_rate=1 MiB/s, quota.window.num=%d: %.3f MiB/s of record values (%.2f of the quota)", secs, windows, rate/(1<<20), rate/quota)
	}
}
