package bench

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Mode selects what a run does.
type Mode string

const (
	// ModeProduceConsume runs producers and, if Consumers > 0, consumers
	// reading the records as they land (end-to-end latency).
	ModeProduceConsume Mode = "produce-consume"
	// ModeCatchUp first produces Records (or for Duration) with nobody
	// reading, then measures consumers reading it all back from the start:
	// the data is in the page cache, so this is the broker's read path.
	ModeCatchUp Mode = "catch-up"
	// ModeRawFetch is ModeCatchUp read back by RawFetch instead of franz-go.
	ModeRawFetch Mode = "raw-fetch"
	// ModeRawProduce produces with hand-built requests (rawproduce.go):
	// batches made once, many requests in flight, next to no client CPU,
	// so that the broker rather than the client is the limit.
	ModeRawProduce Mode = "raw-produce"
)

// Config is one load-generator run. The zero value is not valid; start from
// DefaultConfig.
type Config struct {
	Brokers    []string `json:"brokers"`
	Topic      string   `json:"topic"`
	Partitions int      `json:"partitions"`
	// ReplicationFactor of the topic the run creates (0 means 1).
	ReplicationFactor int `json:"replication_factor,omitempty"`
	// MinInsyncReplicas is the created topic's min.insync.replicas (0: the
	// broker's default).
	MinInsyncReplicas int           `json:"min_insync_replicas,omitempty"`
	Producers         int           `json:"producers"`
	Consumers         int           `json:"consumers"`
	RecordSize        int           `json:"record_size"`
	Rate              float64       `json:"rate"` // records/s over all producers; 0 = as fast as possible
	Duration          time.Duration `json:"duration_ns"`
	Records           int64         `json:"records"` // if > 0, produce exactly this many instead of running for Duration
	Acks              string        `json:"acks"`    // "0", "1" or "all"
	Compression       string        `json:"compression"`
	Linger            time.Duration `json:"linger_ns"`
	BatchBytes        int           `json:"batch_bytes"`
	// Compressible fills values with repeated text instead of random bytes.
	Compressible bool `json:"compressible"`
	Mode         Mode `json:"mode"`
	// TxnRecords, when > 0, makes each producer transactional: it commits
	// a transaction every TxnRecords records (acks=all, idempotent) and
	// the result carries the commit latency. Consumers then read at
	// read_committed.
	TxnRecords int `json:"txn_records,omitempty"`
	// KeepTopic skips creating the topic (it must exist).
	KeepTopic bool `json:"keep_topic"`
	// RawInFlight is how many requests each raw-produce connection keeps
	// in flight (0: 1).
	RawInFlight int `json:"raw_in_flight,omitempty"`
	// RawBatchRecords is the records in each raw-produce batch (0: as
	// many as fill BatchBytes, at most 64 KiB of values).
	RawBatchRecords int `json:"raw_batch_records,omitempty"`
	// RawPing makes raw-produce send ApiVersions v0 instead of Produce:
	// the same connections, pacing and histogram over the broker's
	// cheapest request, so that a latency run can be split into what the
	// network loop and the machine cost and what producing adds.
	RawPing bool `json:"raw_ping,omitempty"`
	// TLS makes every connection of the run TLS (tls.go), verifying the
	// broker against TLSCA (a PEM file; the system's roots if empty).
	// TLSCA alone implies TLS.
	TLS   bool   `json:"tls,omitempty"`
	TLSCA string `json:"tls_ca,omitempty"`
	// BrokerMetrics is a Sluice broker's metrics HOST:PORT (its --metrics
	// flag): the run reads the broker-side latency histograms there
	// before and after and reports the difference (Result.BrokerLatency).
	BrokerMetrics string `json:"broker_metrics,omitempty"`
	// Progress is how often the live line is printed; 0 disables it.
	Progress time.Duration `json:"-"`
}

// DefaultConfig is what `sluice bench` runs with no flags.
func DefaultConfig() Config {
	return Config{
		Brokers:     []string{"127.0.0.1:9092"},
		Topic:       "sluice-bench",
		Partitions:  1,
		Producers:   1,
		Consumers:   1,
		RecordSize:  1024,
		Duration:    10 * time.Second,
		Acks:        "all",
		Compression: "none",
		Linger:      0,
		BatchBytes:  1_000_000,
		Mode:        ModeProduceConsume,
		Progress:    time.Second,
	}
}

// headerSize is the run id and send time at the front of every value.
const headerSize = 16

// RegisterFlags binds c's fields to flags on fs, with c's values as defaults.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.Func("brokers", "comma-separated bootstrap HOST:PORT list (default "+strings.Join(c.Brokers, ",")+")", func(s string) error {
		c.Brokers = SplitList(s)
		if len(c.Brokers) == 0 {
			return errors.New("empty broker list")
		}
		return nil
	})
	fs.StringVar(&c.Topic, "topic", c.Topic, "topic to produce to and consume from")
	fs.IntVar(&c.Partitions, "partitions", c.Partitions, "partitions of the topic (created by the run)")
	fs.IntVar(&c.ReplicationFactor, "replication-factor", c.ReplicationFactor, "replication factor of the created topic (0 = 1)")
	fs.IntVar(&c.MinInsyncReplicas, "min-insync-replicas", c.MinInsyncReplicas, "min.insync.replicas of the created topic (0 = the broker's default)")
	fs.IntVar(&c.Producers, "producers", c.Producers, "producer clients")
	fs.IntVar(&c.Consumers, "consumers", c.Consumers, "consumer clients (partitions are split between them; 0 = produce only)")
	fs.IntVar(&c.RecordSize, "record-size", c.RecordSize, "value size in bytes (at least 16)")
	fs.Float64Var(&c.Rate, "rate", c.Rate, "records/s over all producers, 0 = as fast as possible")
	fs.DurationVar(&c.Duration, "duration", c.Duration, "how long to produce")
	fs.Int64Var(&c.Records, "records", c.Records, "produce exactly this many records instead of running for --duration")
	fs.StringVar(&c.Acks, "acks", c.Acks, "0, 1 or all")
	fs.StringVar(&c.Compression, "compression", c.Compression, "none, gzip, snappy, lz4 or zstd")
	fs.DurationVar(&c.Linger, "linger", c.Linger, "producer linger")
	fs.IntVar(&c.BatchBytes, "batch-bytes", c.BatchBytes, "producer max batch bytes")
	fs.BoolVar(&c.Compressible, "compressible", c.Compressible, "compressible values (repeated text) instead of random bytes")
	fs.IntVar(&c.RawInFlight, "in-flight", c.RawInFlight, "raw-produce: requests in flight per connection (--producers is the connection count)")
	fs.BoolVar(&c.RawPing, "ping", c.RawPing, "raw-produce: send ApiVersions v0 instead of Produce (the round trip without the produce path)")
	fs.IntVar(&c.RawBatchRecords, "batch-records", c.RawBatchRecords, "raw-produce: records per batch (0 = up to 64 KiB of values)")
	fs.Func("mode", "produce-consume, catch-up, raw-fetch or raw-produce (default "+string(c.Mode)+")", func(s string) error {
		c.Mode = Mode(s)
		return nil
	})
	fs.BoolVar(&c.KeepTopic, "keep-topic", c.KeepTopic, "use the existing topic instead of creating it")
	fs.IntVar(&c.TxnRecords, "txn-records", c.TxnRecords, "transactional producers committing every N records (0 = not transactional)")
	fs.BoolVar(&c.TLS, "tls", c.TLS, "connect over TLS (verified against --tls-ca, else the system's roots)")
	fs.StringVar(&c.TLSCA, "tls-ca", c.TLSCA, "PEM file of the CA certificates to trust (implies --tls)")
	fs.StringVar(&c.BrokerMetrics, "broker-metrics", c.BrokerMetrics, "a Sluice broker's metrics HOST:PORT: report its broker-side latency per API over the run (from /debug/latency)")
	fs.DurationVar(&c.Progress, "progress", c.Progress, "live progress interval, 0 = quiet")
}

// Validate reports the first thing wrong with c.
func (c *Config) Validate() error {
	switch {
	case len(c.Brokers) == 0:
		return errors.New("no brokers")
	case c.Topic == "":
		return errors.New("no topic")
	case c.Partitions < 1:
		return errors.New("--partitions must be at least 1")
	case c.ReplicationFactor < 0 || c.ReplicationFactor > 32767:
		return errors.New("--replication-factor must be between 0 and 32767")
	case c.MinInsyncReplicas < 0 || c.MinInsyncReplicas > max(c.ReplicationFactor, 1):
		return errors.New("--min-insync-replicas must be between 0 and the replication factor")
	case c.Producers < 1:
		return errors.New("--producers must be at least 1")
	case c.Consumers < 0:
		return errors.New("--consumers must not be negative")
	case c.RecordSize < headerSize:
		return fmt.Errorf("--record-size must be at least %d (run id and timestamp)", headerSize)
	case c.Rate < 0:
		return errors.New("--rate must not be negative")
	case c.Records <= 0 && c.Duration <= 0:
		return errors.New("need --duration or --records")
	case c.BatchBytes < c.RecordSize+128:
		return errors.New("--batch-bytes must hold at least one record")
	case c.TxnRecords < 0:
		return errors.New("--txn-records must not be negative")
	case c.TxnRecords > 0 && c.Acks != "all" && c.Acks != "-1":
		return errors.New("--txn-records needs --acks all (transactions are idempotent)")
	case c.TxnRecords > 0 && (c.Mode == ModeRawFetch || c.Mode == ModeRawProduce):
		return errors.New("--txn-records runs with franz-go producers (not the raw modes)")
	}
	if _, err := c.acks(); err != nil {
		return err
	}
	if _, err := c.codec(); err != nil {
		return err
	}
	switch c.Mode {
	case ModeProduceConsume, ModeCatchUp, ModeRawFetch:
	case ModeRawProduce:
		if c.Acks == "0" {
			return errors.New("--mode raw-produce needs --acks 1 or all (it counts acknowledgements)")
		}
		if c.RawInFlight < 0 || c.RawBatchRecords < 0 {
			return errors.New("--in-flight and --batch-records must not be negative")
		}
	default:
		return fmt.Errorf("unknown --mode %q", c.Mode)
	}
	if (c.Mode == ModeCatchUp || c.Mode == ModeRawFetch) && c.Consumers < 1 {
		return fmt.Errorf("--mode %s needs at least one consumer", c.Mode)
	}
	return nil
}

func (c *Config) acks() (kgo.Acks, error) {
	switch c.Acks {
	case "0":
		return kgo.NoAck(), nil
	case "1":
		return kgo.LeaderAck(), nil
	case "all", "-1":
		return kgo.AllISRAcks(), nil
	}
	return kgo.Acks{}, fmt.Errorf("unknown --acks %q (0, 1 or all)", c.Acks)
}

func (c *Config) codec() (kgo.CompressionCodec, error) {
	switch c.Compression {
	case "none", "":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.CompressionCodec{}, fmt.Errorf("unknown --compression %q", c.Compression)
}

// rawBatchRecords is the records per raw-produce batch.
func (c *Config) rawBatchRecords() int {
	if c.RawBatchRecords > 0 {
		return c.RawBatchRecords
	}
	return max(1, min(c.BatchBytes, 64<<10)/c.RecordSize)
}

// SplitList splits a comma-separated flag value, dropping empty items.
func SplitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
