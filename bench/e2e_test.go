package bench

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/internal/testbroker"
)

// TestRunAgainstSluice is a ~2 s smoke run of the load generator against an
// in-process broker, in each mode.
func TestRunAgainstSluice(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a broker")
	}
	tb := testbroker.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	t.Run("produce-consume", func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.Brokers, cfg.Topic, cfg.Partitions = []string{tb.Addr}, "smoke-live", 2
		cfg.Rate, cfg.Duration, cfg.Progress = 1000, 1500*time.Millisecond, 0
		res, err := Run(ctx, cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.Produce.Records < 1000 || res.Consume.Records != res.Produce.Records {
			t.Fatalf("produced %d, consumed %d", res.Produce.Records, res.Consume.Records)
		}
		if res.ProduceLatency.Count != res.Produce.Records || res.EndToEnd.Count != res.Consume.Records {
			t.Fatalf("latency counts %d/%d", res.ProduceLatency.Count, res.EndToEnd.Count)
		}
		if res.ProduceErrors != 0 {
			t.Fatalf("errors: %s", res.FirstError)
		}
	})
	t.Run("transactions", func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.Brokers, cfg.Topic, cfg.Partitions = []string{tb.Addr}, "smoke-txn", 2
		cfg.Records, cfg.Consumers, cfg.Progress, cfg.TxnRecords = 1050, 0, 0, 100
		res, err := Run(ctx, cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		// 10 full transactions and the last one of 50.
		if res.Produce.Records != 1050 || res.CommitLatency.Count != 11 || res.ProduceErrors != 0 {
			t.Fatalf("produced %d, %d commits timed, errors %d (%s)", res.Produce.Records, res.CommitLatency.Count, res.ProduceErrors, res.FirstError)
		}
	})
	t.Run("catch-up-read-committed", func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.Brokers, cfg.Topic, cfg.Partitions, cfg.Mode = []string{tb.Addr}, "smoke-txn-read", 2, ModeCatchUp
		cfg.Records, cfg.Progress, cfg.TxnRecords = 1000, 0, 100
		res, err := Run(ctx, cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.Produce.Records != 1000 || res.Consume.Records != 1000 {
			t.Fatalf("produced %d, read %d at read_committed", res.Produce.Records, res.Consume.Records)
		}
	})
	t.Run("topic-settings", func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.Brokers, cfg.Topic, cfg.Partitions = []string{tb.Addr}, "smoke-settings", 2
		cfg.ReplicationFactor, cfg.MinInsyncReplicas = 1, 1
		cfg.Records, cfg.Consumers, cfg.Progress = 100, 0, 0
		if _, err := Run(ctx, cfg, nil); err != nil {
			t.Fatal(err)
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(tb.Addr))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		rcs, err := kadm.NewClient(cl).DescribeTopicConfigs(ctx, cfg.Topic)
		if err != nil {
			t.Fatal(err)
		}
		rc, err := rcs.On(cfg.Topic, nil)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, c := range rc.Configs {
			if c.Key == "min.insync.replicas" {
				found = true
				if c.MaybeValue() != "1" || c.Source != kmsg.ConfigSourceDynamicTopicConfig {
					t.Errorf("min.insync.replicas = %q from %v, want 1 set on the topic", c.MaybeValue(), c.Source)
				}
			}
		}
		if !found {
			t.Error("no min.insync.replicas in the topic's configs")
		}
	})
	for _, mode := range []Mode{ModeCatchUp, ModeRawFetch} {
		t.Run(string(mode), func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Brokers, cfg.Topic, cfg.Partitions = []string{tb.Addr}, "smoke-"+string(mode), 3
			cfg.Mode, cfg.Records, cfg.Acks, cfg.Progress = mode, 3000, "1", 0
			read := false
			res, err := RunWith(ctx, cfg, nil, Hooks{BeforeRead: func() { read = true }})
			if err != nil {
				t.Fatal(err)
			}
			if !read || res.Produce.Records != 3000 || res.Consume.Records != 3000 {
				t.Fatalf("hook %v, produced %d, read %d; want 3000 both", read, res.Produce.Records, res.Consume.Records)
			}
			if res.Consume.Bytes < 3000*1024 {
				t.Fatalf("read %d bytes", res.Consume.Bytes)
			}
		})
	}
}

// TestRawProduceAgainstSluice sends a known number of hand-built batches
// over several pipelined connections and checks that the log holds exactly
// those records, every request acknowledged without error.
func TestRawProduceAgainstSluice(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a broker")
	}
	tb := testbroker.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, acks := range []string{"1", "all"} {
		cfg := DefaultConfig()
		cfg.Brokers, cfg.Topic, cfg.Partitions = []string{tb.Addr}, "raw-produce-"+acks, 5
		cfg.Mode, cfg.Acks, cfg.Consumers, cfg.Progress = ModeRawProduce, acks, 0, 0
		cfg.Producers, cfg.RawInFlight, cfg.RawBatchRecords, cfg.Records = 3, 4, 10, 6000
		res, err := Run(ctx, cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.ProduceErrors != 0 {
			t.Fatalf("acks=%s: %d errors, first: %s", acks, res.ProduceErrors, res.FirstError)
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(tb.Addr))
		if err != nil {
			t.Fatal(err)
		}
		ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, cfg.Topic)
		cl.Close()
		if err != nil {
			t.Fatal(err)
		}
		var stored int64
		ends.Each(func(o kadm.ListedOffset) { stored += o.Offset })
		if res.Produce.Records != stored || stored < cfg.Records {
			t.Fatalf("acks=%s: %d records acknowledged, %d in the log, want at least %d and equal", acks, res.Produce.Records, stored, cfg.Records)
		}
		if res.Produce.Bytes != stored*int64(cfg.RecordSize) || res.ProduceLatency.Count == 0 {
			t.Fatalf("acks=%s: %d value bytes, %d latencies", acks, res.Produce.Bytes, res.ProduceLatency.Count)
		}
	}
}

// TestRawPingAgainstSluice: --ping sends ApiVersions over the raw-produce
// machinery, counts one "record" per answered request and writes nothing.
func TestRawPingAgainstSluice(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a broker")
	}
	tb := testbroker.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := DefaultConfig()
	cfg.Brokers, cfg.Topic, cfg.Partitions = []string{tb.Addr}, "raw-ping", 1
	cfg.Mode, cfg.Acks, cfg.Consumers, cfg.Progress = ModeRawProduce, "1", 0, 0
	cfg.Producers, cfg.RawInFlight, cfg.RawPing, cfg.Records = 2, 2, true, 500
	res, err := Run(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.ProduceErrors != 0 || res.Produce.Records < 500 || res.Produce.Bytes != 0 || res.ProduceLatency.Count != res.Produce.Records {
		t.Fatalf("errors %d (%s), %d answered, %d bytes, %d latencies", res.ProduceErrors, res.FirstError, res.Produce.Records, res.Produce.Bytes, res.ProduceLatency.Count)
	}
}

// TestBrokerLatencyCountsEveryProduce: --broker-metrics reports, for the
// run alone, one broker-side latency per produce request the run wrote
// (the in-process broker's /debug/latency served on 127.0.0.1).
func TestBrokerLatencyCountsEveryProduce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a broker")
	}
	tb := testbroker.Start(t)
	hs := httptest.NewServer(tb.Broker.Metrics().LatencyHandler())
	defer hs.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := DefaultConfig()
	cfg.Brokers, cfg.Topic, cfg.Mode, cfg.Consumers = []string{tb.Addr}, "smoke-broker-latency", ModeRawProduce, 0
	cfg.RawBatchRecords, cfg.Rate, cfg.Duration, cfg.Progress = 1, 500, time.Second, 0
	cfg.BrokerMetrics = strings.TrimPrefix(hs.URL, "http://")
	res, err := Run(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := res.BrokerLatency["Produce"]
	if res.ProduceRequests < 400 || p.Count != res.ProduceRequests {
		t.Fatalf("%d produce requests written, %d timed by the broker", res.ProduceRequests, p.Count)
	}
	t.Logf("broker-side produce: p50 %.3f ms, p99 %.3f ms over %d requests", p.P50, p.P99, p.Count)
}
