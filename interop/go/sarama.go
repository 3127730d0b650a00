package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

// saramaClient drives IBM/sarama with its default protocol version
// (sarama.DefaultVersion), as most applications run it.
type saramaClient struct {
	addrs  []string
	client sarama.Client
	admin  sarama.ClusterAdmin
	// secure, when set, puts every connection on a secure listener
	// (security.go).
	secure func(*sarama.Config)
}

func saramaConfig() *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.ClientID = "sluice-interop-sarama"
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Return.Errors = true
	cfg.Metadata.AllowAutoTopicCreation = false
	return cfg
}

// config is saramaConfig with the client's secure settings, if any.
func (s *saramaClient) config() *sarama.Config {
	cfg := saramaConfig()
	if s.secure != nil {
		s.secure(cfg)
	}
	return cfg
}

func newSarama(bootstrap string) *saramaClient {
	if verbose {
		sarama.Logger = log.New(os.Stderr, "[sarama] ", log.Lmicroseconds)
	}
	return &saramaClient{addrs: strings.Split(bootstrap, ",")}
}

func (s *saramaClient) connect() error {
	if s.client != nil {
		return nil
	}
	cl, err := sarama.NewClient(s.addrs, s.config())
	if err != nil {
		return err
	}
	admin, err := sarama.NewClusterAdminFromClient(cl)
	if err != nil {
		cl.Close()
		return err
	}
	s.client, s.admin = cl, admin
	return nil
}

func (s *saramaClient) version() string {
	return fmt.Sprintf("sarama %s (protocol %s)", moduleVersion("github.com/IBM/sarama"), sarama.DefaultVersion)
}
func (s *saramaClient) codecs() []string    { return []string{"none", "gzip", "snappy", "lz4", "zstd"} }
func (s *saramaClient) canIdempotent() bool { return true }
func (s *saramaClient) close() {
	if s.admin != nil {
		s.admin.Close() // closes the client too
	}
}

func (s *saramaClient) createTopics(ctx context.Context, topics []string, partitions int32) error {
	if err := s.connect(); err != nil {
		return err
	}
	for _, t := range topics {
		if err := s.admin.CreateTopic(t, &sarama.TopicDetail{NumPartitions: partitions, ReplicationFactor: 1}, false); err != nil {
			return fmt.Errorf("create %s: %w", t, err)
		}
	}
	return nil
}

func (s *saramaClient) createReplicated(ctx context.Context, topic string, partitions int32, rf int16, configs map[string]string) error {
	if err := s.connect(); err != nil {
		return err
	}
	entries := map[string]*string{}
	for k, v := range configs {
		entries[k] = &v
	}
	return s.admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: partitions, ReplicationFactor: rf, ConfigEntries: entries}, false)
}

func (s *saramaClient) replicas(ctx context.Context, topic string) ([]partitionInfo, error) {
	if err := s.connect(); err != nil {
		return nil, err
	}
	md, err := s.admin.DescribeTopics([]string{topic})
	if err != nil {
		return nil, err
	}
	if len(md) != 1 {
		return nil, fmt.Errorf("%d topics in metadata", len(md))
	}
	if md[0].Err != sarama.ErrNoError {
		return nil, md[0].Err
	}
	var out []partitionInfo
	for _, p := range md[0].Partitions {
		out = append(out, partitionInfo{partition: p.ID, leader: p.Leader, replicas: p.Replicas, isr: p.Isr})
	}
	return out, nil
}

func (s *saramaClient) partitionCount(ctx context.Context, topic string) (int, error) {
	if err := s.connect(); err != nil {
		return 0, err
	}
	md, err := s.admin.DescribeTopics([]string{topic})
	if err != nil {
		return 0, err
	}
	if len(md) != 1 {
		return 0, fmt.Errorf("%d topics in metadata", len(md))
	}
	if md[0].Err != sarama.ErrNoError {
		return 0, md[0].Err
	}
	return len(md[0].Partitions), nil
}

func saramaCodec(codec string) sarama.CompressionCodec {
	switch codec {
	case "gzip":
		return sarama.CompressionGZIP
	case "snappy":
		return sarama.CompressionSnappy
	case "lz4":
		return sarama.CompressionLZ4
	case "zstd":
		return sarama.CompressionZSTD
	}
	return sarama.CompressionNone
}

func (s *saramaClient) produce(ctx context.Context, topic, codec string, idempotent bool, recs []record) error {
	cfg := s.config()
	cfg.Producer.Compression = saramaCodec(codec)
	if idempotent {
		cfg.Producer.Idempotent = true
		cfg.Net.MaxOpenRequests = 1
	}
	p, err := sarama.NewSyncProducer(s.addrs, cfg)
	if err != nil {
		return err
	}
	defer p.Close()
	msgs := make([]*sarama.ProducerMessage, len(recs))
	for i, r := range recs {
		m := &sarama.ProducerMessage{Topic: topic, Key: sarama.ByteEncoder(r.Key), Value: sarama.ByteEncoder(r.Value), Timestamp: r.Timestamp}
		for _, h := range r.Headers {
			m.Headers = append(m.Headers, sarama.RecordHeader{Key: []byte(h.Key), Value: []byte(h.Value)})
		}
		msgs[i] = m
	}
	if err := p.SendMessages(msgs); err != nil {
		var pe sarama.ProducerErrors
		if errors.As(err, &pe) && len(pe) > 0 {
			return fmt.Errorf("%d of %d failed, first: %w", len(pe), len(msgs), pe[0].Err)
		}
		return err
	}
	for i, m := range msgs {
		recs[i].Partition, recs[i].Offset = m.Partition, m.Offset
	}
	return nil
}

func fromSarama(m *sarama.ConsumerMessage) record {
	r := record{Key: m.Key, Value: m.Value, Timestamp: m.Timestamp, Partition: m.Partition, Offset: m.Offset}
	for _, h := range m.Headers {
		r.Headers = append(r.Headers, header{string(h.Key), string(h.Value)})
	}
	return r
}

func (s *saramaClient) consume(ctx context.Context, topic string, n int) ([]record, error) {
	c, err := sarama.NewConsumer(s.addrs, s.config())
	if err != nil {
		return nil, err
	}
	defer c.Close()
	parts, err := c.Partitions(topic)
	if err != nil {
		return nil, err
	}
	msgs := make(chan *sarama.ConsumerMessage)
	errs := make(chan error, len(parts))
	for _, p := range parts {
		pc, err := c.ConsumePartition(topic, p, sarama.OffsetOldest)
		if err != nil {
			return nil, fmt.Errorf("partition %d: %w", p, err)
		}
		defer pc.AsyncClose()
		go func() {
			for {
				select {
				case m, ok := <-pc.Messages():
					if !ok {
						return
					}
					select {
					case msgs <- m:
					case <-ctx.Done():
						return
					}
				case e, ok := <-pc.Errors():
					if ok {
						errs <- e
					}
					return
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	var out []record
	for len(out) < n {
		select {
		case m := <-msgs:
			out = append(out, fromSarama(m))
		case err := <-errs:
			return out, err
		case <-ctx.Done():
			return out, ctx.Err()
		}
	}
	return out, nil
}

type saramaMember struct {
	group sarama.ConsumerGroup
	topic string
}

func (s *saramaClient) strategies() []string { return []string{"eager", "cooperative"} }

func (s *saramaClient) newMember(ctx context.Context, group, topic, strategy string) (member, error) {
	cfg := s.config()
	cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategyRange()}
	if strategy == "cooperative" {
		cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategyCooperativeSticky()}
	}
	cfg.Consumer.Offsets.AutoCommit.Enable = false
	g, err := sarama.NewConsumerGroup(s.addrs, group, cfg)
	if err != nil {
		return nil, err
	}
	return &saramaMember{group: g, topic: topic}, nil
}

// saramaHandler commits each message synchronously before reporting it.
type saramaHandler struct {
	got func(record)
	mu  sync.Mutex
	err error
}

func (h *saramaHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *saramaHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

// ConsumeClaim commits whatever has arrived, then reports it. Commits are
// batched: sarama shares one connection per broker between fetches and
// commits, so each commit can wait behind a long-polling fetch (as it would
// against Kafka, which answers a connection's requests in order).
func (h *saramaHandler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for {
		var batch []*sarama.ConsumerMessage
		select {
		case m, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			batch = append(batch, m)
		case <-sess.Context().Done():
			return nil
		}
	drain:
		for {
			select {
			case m, ok := <-claim.Messages():
				if !ok {
					break drain
				}
				batch = append(batch, m)
			default:
				break drain
			}
		}
		sess.MarkMessage(batch[len(batch)-1], "")
		start := time.Now()
		sess.Commit()
		if verbose {
			logf("sarama: %s/%d: %d records committed in %v", claim.Topic(), claim.Partition(), len(batch), time.Since(start))
		}
		for _, m := range batch {
			h.got(fromSarama(m))
		}
	}
}

func (m *saramaMember) run(ctx context.Context, got func(record)) error {
	h := &saramaHandler{got: got}
	go func() {
		for err := range m.group.Errors() {
			logf("sarama group error: %v", err)
		}
	}()
	for ctx.Err() == nil {
		if err := m.group.Consume(ctx, []string{m.topic}, h); err != nil {
			if errors.Is(err, sarama.ErrClosedConsumerGroup) {
				return nil
			}
			return err
		}
	}
	return ctx.Err()
}

func (m *saramaMember) close() error { return m.group.Close() }

func (s *saramaClient) listOffsets(ctx context.Context, topic string) (map[int32]int64, map[int32]int64, error) {
	if err := s.connect(); err != nil {
		return nil, nil, err
	}
	parts, err := s.client.Partitions(topic)
	if err != nil {
		return nil, nil, err
	}
	earliest, latest := map[int32]int64{}, map[int32]int64{}
	for _, p := range parts {
		if earliest[p], err = s.client.GetOffset(topic, p, sarama.OffsetOldest); err != nil {
			return nil, nil, fmt.Errorf("earliest of %d: %w", p, err)
		}
		if latest[p], err = s.client.GetOffset(topic, p, sarama.OffsetNewest); err != nil {
			return nil, nil, fmt.Errorf("latest of %d: %w", p, err)
		}
	}
	return earliest, latest, nil
}

func (s *saramaClient) offsetForTime(ctx context.Context, topic string, partition int32, ts time.Time) (int64, error) {
	if err := s.connect(); err != nil {
		return 0, err
	}
	return s.client.GetOffset(topic, partition, ts.UnixMilli())
}

func (s *saramaClient) describeConfig(ctx context.Context, topic, key string) (string, error) {
	if err := s.connect(); err != nil {
		return "", err
	}
	entries, err := s.admin.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: topic})
	if err != nil {
		return "", err
	}
	for _, e := range entries {
		if e.Name == key {
			return e.Value, nil
		}
	}
	return "", nil
}

func (s *saramaClient) alterConfig(ctx context.Context, topic, key, value string) error {
	if err := s.connect(); err != nil {
		return err
	}
	return s.admin.IncrementalAlterConfig(sarama.TopicResource, topic,
		map[string]sarama.IncrementalAlterConfigsEntry{key: {Operation: sarama.IncrementalAlterConfigsOperationSet, Value: &value}}, false)
}
