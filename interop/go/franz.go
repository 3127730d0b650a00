package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// franz drives twmb/franz-go: kgo for producing and consuming, kadm for
// admin. Producers are idempotent by default in kgo; the non-idempotent
// runs disable it.
type franz struct {
	bootstrap string
	admin     *kadm.Client
	adminCl   *kgo.Client
	secure    []kgo.Opt // TLS and SASL on a secure listener (security.go)
}

func newFranz(bootstrap string, secure ...kgo.Opt) *franz {
	f := &franz{bootstrap: bootstrap, secure: secure}
	f.adminCl = f.client()
	f.admin = kadm.NewClient(f.adminCl)
	return f
}

func (f *franz) version() string     { return "franz-go " + moduleVersion("github.com/twmb/franz-go") }
func (f *franz) codecs() []string    { return []string{"none", "gzip", "snappy", "lz4", "zstd"} }
func (f *franz) canIdempotent() bool { return true }
func (f *franz) close()              { f.adminCl.Close() }
func (f *franz) client(opts ...kgo.Opt) *kgo.Client {
	base := append([]kgo.Opt{kgo.SeedBrokers(strings.Split(f.bootstrap, ",")...)}, f.secure...)
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		panic(err)
	}
	return cl
}

func (f *franz) createTopics(ctx context.Context, topics []string, partitions int32) error {
	resps, err := f.admin.CreateTopics(ctx, partitions, 1, nil, topics...)
	if err != nil {
		return err
	}
	for _, r := range resps.Sorted() {
		if r.Err != nil {
			return fmt.Errorf("create %s: %w (%s)", r.Topic, r.Err, r.ErrMessage)
		}
	}
	return nil
}

func (f *franz) createReplicated(ctx context.Context, topic string, partitions int32, rf int16, configs map[string]string) error {
	cfg := map[string]*string{}
	for k, v := range configs {
		cfg[k] = &v
	}
	r, err := f.admin.CreateTopic(ctx, partitions, rf, cfg, topic)
	if err == nil && r.Err != nil {
		err = fmt.Errorf("%w (%s)", r.Err, r.ErrMessage)
	}
	return err
}

func (f *franz) replicas(ctx context.Context, topic string) ([]partitionInfo, error) {
	td, err := f.admin.ListTopics(ctx, topic)
	if err != nil {
		return nil, err
	}
	d, ok := td[topic]
	if !ok {
		return nil, errors.New("topic not in metadata")
	}
	if d.Err != nil {
		return nil, d.Err
	}
	var out []partitionInfo
	for _, p := range d.Partitions.Sorted() {
		out = append(out, partitionInfo{partition: p.Partition, leader: p.Leader, replicas: p.Replicas, isr: p.ISR})
	}
	return out, nil
}

func (f *franz) partitionCount(ctx context.Context, topic string) (int, error) {
	td, err := f.admin.ListTopics(ctx, topic)
	if err != nil {
		return 0, err
	}
	d, ok := td[topic]
	if !ok {
		return 0, errors.New("topic not in metadata")
	}
	if d.Err != nil {
		return 0, d.Err
	}
	return len(d.Partitions), nil
}

func franzCodec(codec string) kgo.CompressionCodec {
	switch codec {
	case "gzip":
		return kgo.GzipCompression()
	case "snappy":
		return kgo.SnappyCompression()
	case "lz4":
		return kgo.Lz4Compression()
	case "zstd":
		return kgo.ZstdCompression()
	}
	return kgo.NoCompression()
}

func (f *franz) produce(ctx context.Context, topic, codec string, idempotent bool, recs []record) error {
	opts := []kgo.Opt{
		kgo.ProducerBatchCompression(franzCodec(codec)),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
	}
	if !idempotent {
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	cl := f.client(opts...)
	defer cl.Close()
	krs := make([]*kgo.Record, len(recs))
	for i, r := range recs {
		kr := &kgo.Record{Topic: topic, Key: r.Key, Value: r.Value, Timestamp: r.Timestamp}
		for _, h := range r.Headers {
			kr.Headers = append(kr.Headers, kgo.RecordHeader{Key: h.Key, Value: []byte(h.Value)})
		}
		krs[i] = kr
	}
	if err := cl.ProduceSync(ctx, krs...).FirstErr(); err != nil {
		return err
	}
	for i, kr := range krs {
		recs[i].Partition, recs[i].Offset = kr.Partition, kr.Offset
	}
	return nil
}

func fromKgo(kr *kgo.Record) record {
	r := record{Key: kr.Key, Value: kr.Value, Timestamp: kr.Timestamp, Partition: kr.Partition, Offset: kr.Offset}
	for _, h := range kr.Headers {
		r.Headers = append(r.Headers, header{h.Key, string(h.Value)})
	}
	return r
}

func (f *franz) consume(ctx context.Context, topic string, n int) ([]record, error) {
	cl := f.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	defer cl.Close()
	var out []record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
		if err := fs.Err0(); err != nil && !errors.Is(err, context.Canceled) {
			return out, err
		}
		fs.EachRecord(func(kr *kgo.Record) { out = append(out, fromKgo(kr)) })
	}
	return out, nil
}

type franzMember struct{ cl *kgo.Client }

func (f *franz) strategies() []string { return []string{"eager", "cooperative", "kip848"} }

func (f *franz) newMember(ctx context.Context, group, topic, strategy string) (member, error) {
	balancer := kgo.CooperativeStickyBalancer()
	if strategy == "eager" {
		balancer = kgo.RangeBalancer()
	}
	var protocol []kgo.Opt
	if strategy == "kip848" {
		// The broker assigns (ConsumerGroupHeartbeat); the balancer is
		// what franz-go falls back to on a broker without it.
		protocol = append(protocol, kgo.ServerSideBalancer())
	}
	cl := f.client(append(protocol,
		kgo.Balancers(balancer),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		// Records handed out by a poll are committed before the next
		// rebalance may start, so nothing is delivered twice.
		kgo.BlockRebalanceOnPoll(),
	)...)
	return &franzMember{cl: cl}, nil
}

func (m *franzMember) run(ctx context.Context, got func(record)) error {
	for {
		fs := m.cl.PollRecords(ctx, 100)
		if ctx.Err() != nil {
			m.cl.AllowRebalance()
			return ctx.Err()
		}
		if err := fs.Err0(); err != nil {
			m.cl.AllowRebalance()
			return err
		}
		recs := fs.Records()
		if len(recs) > 0 {
			if err := m.cl.CommitRecords(ctx, recs...); err != nil {
				m.cl.AllowRebalance()
				return fmt.Errorf("commit: %w", err)
			}
			for _, kr := range recs {
				got(fromKgo(kr))
			}
		}
		m.cl.AllowRebalance()
	}
}

func (m *franzMember) close() error {
	m.cl.Close() // leaves the group
	return nil
}

func (f *franz) listOffsets(ctx context.Context, topic string) (map[int32]int64, map[int32]int64, error) {
	collect := func(l kadm.ListedOffsets, err error) (map[int32]int64, error) {
		if err != nil {
			return nil, err
		}
		if err := l.Error(); err != nil {
			return nil, err
		}
		out := map[int32]int64{}
		l.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
		return out, nil
	}
	earliest, err := collect(f.admin.ListStartOffsets(ctx, topic))
	if err != nil {
		return nil, nil, fmt.Errorf("earliest: %w", err)
	}
	latest, err := collect(f.admin.ListEndOffsets(ctx, topic))
	if err != nil {
		return nil, nil, fmt.Errorf("latest: %w", err)
	}
	return earliest, latest, nil
}

func (f *franz) offsetForTime(ctx context.Context, topic string, partition int32, ts time.Time) (int64, error) {
	l, err := f.admin.ListOffsetsAfterMilli(ctx, ts.UnixMilli(), topic)
	if err != nil {
		return 0, err
	}
	o, ok := l.Lookup(topic, partition)
	if !ok {
		return 0, errors.New("partition missing from ListOffsets response")
	}
	return o.Offset, o.Err
}

func (f *franz) describeConfig(ctx context.Context, topic, key string) (string, error) {
	rcs, err := f.admin.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return "", err
	}
	rc, err := rcs.On(topic, nil)
	if err != nil {
		return "", err
	}
	if rc.Err != nil {
		return "", fmt.Errorf("%w (%s)", rc.Err, rc.ErrMessage)
	}
	for _, c := range rc.Configs {
		if c.Key == key {
			return c.MaybeValue(), nil
		}
	}
	return "", nil
}

func (f *franz) alterConfig(ctx context.Context, topic, key, value string) error {
	resps, err := f.admin.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: key, Value: &value}}, topic)
	if err != nil {
		return err
	}
	for _, r := range resps {
		if r.Err != nil {
			return fmt.Errorf("%w (%s)", r.Err, r.ErrMessage)
		}
	}
	return nil
}
