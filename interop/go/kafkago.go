package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/compress"
)

// kafkaGo drives segmentio/kafka-go: Writer and Reader for data, Client for
// admin requests. kafka-go has no idempotent producer.
type kafkaGo struct {
	addrs  []string
	client *kafka.Client
	// transport (Client, Writer) and dialer (Reader) carry TLS and SASL
	// on a secure listener (security.go); nil: kafka-go's defaults.
	transport *kafka.Transport
	dialer    *kafka.Dialer
}

func newKafkaGo(bootstrap string) *kafkaGo {
	addrs := strings.Split(bootstrap, ",")
	return &kafkaGo{addrs: addrs, client: &kafka.Client{Addr: kafka.TCP(addrs...), Timeout: 20 * time.Second}}
}

// roundTripper is the Writer's transport: kafka-go's default unless the
// client is on a secure listener (a nil *Transport in the interface would
// not be the default).
func (k *kafkaGo) roundTripper() kafka.RoundTripper {
	if k.transport == nil {
		return nil
	}
	return k.transport
}

func (k *kafkaGo) version() string {
	return "kafka-go " + moduleVersion("github.com/segmentio/kafka-go")
}
func (k *kafkaGo) codecs() []string    { return []string{"none", "gzip", "snappy", "lz4", "zstd"} }
func (k *kafkaGo) canIdempotent() bool { return false }
func (k *kafkaGo) close()              {}

func (k *kafkaGo) createTopics(ctx context.Context, topics []string, partitions int32) error {
	req := &kafka.CreateTopicsRequest{}
	for _, t := range topics {
		req.Topics = append(req.Topics, kafka.TopicConfig{Topic: t, NumPartitions: int(partitions), ReplicationFactor: 1})
	}
	resp, err := k.client.CreateTopics(ctx, req)
	if err != nil {
		return err
	}
	for t, err := range resp.Errors {
		if err != nil {
			return fmt.Errorf("create %s: %w", t, err)
		}
	}
	return nil
}

func (k *kafkaGo) createReplicated(ctx context.Context, topic string, partitions int32, rf int16, configs map[string]string) error {
	tc := kafka.TopicConfig{Topic: topic, NumPartitions: int(partitions), ReplicationFactor: int(rf)}
	for k, v := range configs {
		tc.ConfigEntries = append(tc.ConfigEntries, kafka.ConfigEntry{ConfigName: k, ConfigValue: v})
	}
	resp, err := k.client.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{tc}})
	if err != nil {
		return err
	}
	return resp.Errors[topic]
}

func (k *kafkaGo) replicas(ctx context.Context, topic string) ([]partitionInfo, error) {
	md, err := k.client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return nil, err
	}
	for _, t := range md.Topics {
		if t.Name != topic {
			continue
		}
		if t.Error != nil {
			return nil, t.Error
		}
		var out []partitionInfo
		for _, p := range t.Partitions {
			pi := partitionInfo{partition: int32(p.ID), leader: int32(p.Leader.ID)}
			for _, r := range p.Replicas {
				pi.replicas = append(pi.replicas, int32(r.ID))
			}
			for _, r := range p.Isr {
				pi.isr = append(pi.isr, int32(r.ID))
			}
			out = append(out, pi)
		}
		return out, nil
	}
	return nil, errors.New("topic not in metadata")
}

func (k *kafkaGo) partitionCount(ctx context.Context, topic string) (int, error) {
	md, err := k.client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return 0, err
	}
	for _, t := range md.Topics {
		if t.Name == topic {
			if t.Error != nil {
				return 0, t.Error
			}
			return len(t.Partitions), nil
		}
	}
	return 0, errors.New("topic not in metadata")
}

func kafkaGoCodec(codec string) compress.Compression {
	switch codec {
	case "gzip":
		return kafka.Gzip
	case "snappy":
		return kafka.Snappy
	case "lz4":
		return kafka.Lz4
	case "zstd":
		return kafka.Zstd
	}
	return 0
}

func (k *kafkaGo) produce(ctx context.Context, topic, codec string, idempotent bool, recs []record) error {
	var mu sync.Mutex
	placed := map[string][2]int64{}
	w := &kafka.Writer{
		Addr:         kafka.TCP(k.addrs...),
		Topic:        topic,
		Transport:    k.roundTripper(),
		Balancer:     &kafka.Hash{},
		RequiredAcks: kafka.RequireAll,
		Compression:  kafkaGoCodec(codec),
		BatchTimeout: 10 * time.Millisecond,
		// The Writer learns of a moved leader only from its transport's
		// metadata refresh (every 6 s), not from a failed write: retry for
		// longer than that, so a write to a broker that stopped gets
		// through to the new leader.
		MaxAttempts:     20,
		WriteBackoffMax: time.Second,
		Completion: func(msgs []kafka.Message, err error) {
			if err != nil {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for _, m := range msgs {
				r := record{Value: m.Value}
				placed[r.id()] = [2]int64{int64(m.Partition), m.Offset}
			}
		},
	}
	msgs := make([]kafka.Message, len(recs))
	for i, r := range recs {
		m := kafka.Message{Key: r.Key, Value: r.Value, Time: r.Timestamp}
		for _, h := range r.Headers {
			m.Headers = append(m.Headers, kafka.Header{Key: h.Key, Value: []byte(h.Value)})
		}
		msgs[i] = m
	}
	err := w.WriteMessages(ctx, msgs...)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	for i := range recs {
		if at, ok := placed[recs[i].id()]; ok {
			recs[i].Partition, recs[i].Offset = int32(at[0]), at[1]
		}
	}
	return nil
}

func fromKafkaGo(m kafka.Message) record {
	r := record{Key: m.Key, Value: m.Value, Timestamp: m.Time, Partition: int32(m.Partition), Offset: m.Offset}
	for _, h := range m.Headers {
		r.Headers = append(r.Headers, header{h.Key, string(h.Value)})
	}
	return r
}

func (k *kafkaGo) consume(ctx context.Context, topic string, n int) ([]record, error) {
	parts, err := k.partitionCount(ctx, topic)
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	msgs := make(chan kafka.Message)
	errs := make(chan error, parts)
	var wg sync.WaitGroup
	for p := 0; p < parts; p++ {
		r := kafka.NewReader(kafka.ReaderConfig{
			Brokers: k.addrs, Topic: topic, Partition: p,
			MaxWait: 200 * time.Millisecond, Dialer: k.dialer,
		})
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer r.Close()
			for {
				m, err := r.ReadMessage(rctx)
				if err != nil {
					if rctx.Err() == nil {
						errs <- fmt.Errorf("partition %d: %w", p, err)
					}
					return
				}
				select {
				case msgs <- m:
				case <-rctx.Done():
					return
				}
			}
		}()
	}
	defer wg.Wait()
	defer cancel()
	var out []record
	for len(out) < n {
		select {
		case m := <-msgs:
			out = append(out, fromKafkaGo(m))
		case err := <-errs:
			return out, err
		case <-ctx.Done():
			return out, ctx.Err()
		}
	}
	return out, nil
}

type kafkaGoMember struct {
	r *kafka.Reader
	// retried is, per partition, the last offset whose commit went through
	// only on a retry after the coordinator's connection was lost: the
	// rejoined generation may have fetched from the older committed offset
	// already, and delivers that record again.
	retried map[int]int64
}

// strategies: kafka-go's balancers (range, round-robin, rack affinity) are
// all eager.
func (k *kafkaGo) strategies() []string { return []string{"eager"} }

func (k *kafkaGo) newMember(ctx context.Context, group, topic, strategy string) (member, error) {
	r := kafka.NewReader(kafka.ReaderConfig{
		GroupBalancers:    []kafka.GroupBalancer{kafka.RangeGroupBalancer{}},
		Brokers:           k.addrs,
		Dialer:            k.dialer,
		GroupID:           group,
		Topic:             topic,
		StartOffset:       kafka.FirstOffset,
		CommitInterval:    0, // synchronous commits
		HeartbeatInterval: time.Second,
		MaxWait:           200 * time.Millisecond,
	})
	return &kafkaGoMember{r: r}, nil
}

func (m *kafkaGoMember) run(ctx context.Context, got func(record)) error {
	for {
		msg, err := m.r.FetchMessage(ctx)
		if err != nil {
			return err
		}
		if last, ok := m.retried[msg.Partition]; ok && msg.Offset <= last {
			logf("kafka-go: %d@%d again after its commit was retried; skipped", msg.Partition, msg.Offset)
			continue
		}
		err = m.r.CommitMessages(ctx, msg)
		for err != nil && connectionLost(err) && ctx.Err() == nil {
			// The coordinator went away (a broker stopping): kafka-go
			// rejoins through the new one; commit again there.
			logf("kafka-go: commit of %d@%d: %v; again", msg.Partition, msg.Offset, err)
			time.Sleep(200 * time.Millisecond)
			if err = m.r.CommitMessages(ctx, msg); err == nil {
				if m.retried == nil {
					m.retried = map[int]int64{}
				}
				m.retried[msg.Partition] = msg.Offset
			}
		}
		if err != nil {
			if rebalancing(err) {
				// The group moved on; the next generation resumes from
				// the last committed offset, so this record comes again.
				logf("kafka-go: commit of %d@%d during a rebalance: %v", msg.Partition, msg.Offset, err)
				continue
			}
			return fmt.Errorf("commit: %w", err)
		}
		got(fromKafkaGo(msg))
	}
}

func (m *kafkaGoMember) close() error { return m.r.Close() }

// connectionLost reports whether err is the coordinator's connection
// failing rather than an answer from it.
func connectionLost(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, net.ErrClosed) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED)
}

func (k *kafkaGo) listOffsets(ctx context.Context, topic string) (map[int32]int64, map[int32]int64, error) {
	parts, err := k.partitionCount(ctx, topic)
	if err != nil {
		return nil, nil, err
	}
	var reqs []kafka.OffsetRequest
	for p := 0; p < parts; p++ {
		reqs = append(reqs, kafka.FirstOffsetOf(p), kafka.LastOffsetOf(p))
	}
	resp, err := k.client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{topic: reqs}})
	if err != nil {
		return nil, nil, err
	}
	earliest, latest := map[int32]int64{}, map[int32]int64{}
	for _, po := range resp.Topics[topic] {
		if po.Error != nil {
			return nil, nil, fmt.Errorf("partition %d: %w", po.Partition, po.Error)
		}
		earliest[int32(po.Partition)], latest[int32(po.Partition)] = po.FirstOffset, po.LastOffset
	}
	return earliest, latest, nil
}

func (k *kafkaGo) offsetForTime(ctx context.Context, topic string, partition int32, ts time.Time) (int64, error) {
	resp, err := k.client.ListOffsets(ctx, &kafka.ListOffsetsRequest{
		Topics: map[string][]kafka.OffsetRequest{topic: {kafka.TimeOffsetOf(int(partition), ts)}},
	})
	if err != nil {
		return 0, err
	}
	for _, po := range resp.Topics[topic] {
		if po.Error != nil {
			return 0, po.Error
		}
		for off := range po.Offsets {
			return off, nil
		}
	}
	return 0, errors.New("no offset in ListOffsets response")
}

func (k *kafkaGo) describeConfig(ctx context.Context, topic, key string) (string, error) {
	resp, err := k.client.DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{
		Resources: []kafka.DescribeConfigRequestResource{{ResourceType: kafka.ResourceTypeTopic, ResourceName: topic}},
	})
	if err != nil {
		return "", err
	}
	for _, r := range resp.Resources {
		if r.Error != nil {
			return "", r.Error
		}
		for _, e := range r.ConfigEntries {
			if e.ConfigName == key {
				return e.ConfigValue, nil
			}
		}
	}
	return "", nil
}

func (k *kafkaGo) alterConfig(ctx context.Context, topic, key, value string) error {
	resp, err := k.client.IncrementalAlterConfigs(ctx, &kafka.IncrementalAlterConfigsRequest{
		Resources: []kafka.IncrementalAlterConfigsRequestResource{{
			ResourceType: kafka.ResourceTypeTopic, ResourceName: topic,
			Configs: []kafka.IncrementalAlterConfigsRequestConfig{{Name: key, Value: value, ConfigOperation: kafka.ConfigOperationSet}},
		}},
	})
	if err != nil {
		return err
	}
	for _, r := range resp.Resources {
		if r.Error != nil {
			return r.Error
		}
	}
	return nil
}

// rebalancing reports whether a commit failed because the group is between
// generations (Kafka answers REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION or
// UNKNOWN_MEMBER_ID then).
func rebalancing(err error) bool {
	return errors.Is(err, kafka.RebalanceInProgress) || errors.Is(err, kafka.IllegalGeneration) ||
		errors.Is(err, kafka.UnknownMemberId)
}
