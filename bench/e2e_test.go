package bench

import (
	"context"
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
