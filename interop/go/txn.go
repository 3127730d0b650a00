package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kgo"
)

// transactor is a client with a transactional producer and a
// read_committed consumer (kafka-go has neither).
type transactor interface {
	// runTxns runs the transactions in order with one producer of id.
	runTxns(ctx context.Context, topic, id string, txns []txn) error
	// readCommitted reads every partition at read_committed until each
	// has shown the value end, and returns the other values.
	readCommitted(ctx context.Context, topic string, partitions int32, end string) ([]string, error)
}

// txn is one transaction: values to partitions, then a commit or abort.
type txn struct {
	commit bool
	recs   []txnRecord
}

type txnRecord struct {
	partition int32
	value     string
}

const txnPartitions, txnRecords = 3, 30

// txnScenario commits one transaction, aborts another and commits an END
// marker record per partition; read_committed must read exactly the
// committed values.
func txnScenario(ctx context.Context, c client, name string) (string, error) {
	t, ok := c.(transactor)
	if !ok {
		return "", errNoTxn
	}
	topic := name + "-txn"
	if err := c.createTopics(ctx, []string{topic}, txnPartitions); err != nil {
		return "", err
	}
	values := func(prefix string) (recs []txnRecord, vs []string) {
		for i := range txnRecords {
			v := fmt.Sprintf("%s-%d", prefix, i)
			recs = append(recs, txnRecord{int32(i % txnPartitions), v})
			vs = append(vs, v)
		}
		return recs, vs
	}
	committed, want := values("c")
	aborted, _ := values("a")
	var end []txnRecord
	for p := range int32(txnPartitions) {
		end = append(end, txnRecord{p, "END"})
	}
	txns := []txn{{true, committed}, {false, aborted}, {true, end}}
	if err := t.runTxns(ctx, topic, name+"-txn-id", txns); err != nil {
		return "", err
	}
	got, err := t.readCommitted(ctx, topic, txnPartitions, "END")
	if err != nil {
		return "", err
	}
	sort.Strings(got)
	sort.Strings(want)
	if strings.Join(got, ",") != strings.Join(want, ",") {
		return "", fmt.Errorf("read_committed read %d values %v, want the %d committed ones", len(got), got, len(want))
	}
	return fmt.Sprintf("%d committed, %d aborted (unseen) over %d partitions; read_committed read exactly the committed ones",
		txnRecords, txnRecords, txnPartitions), nil
}

var errNoTxn = errors.New("client has no transactional producer")

func (f *franz) runTxns(ctx context.Context, topic, id string, txns []txn) error {
	cl := f.client(kgo.TransactionalID(id), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DefaultProduceTopic(topic))
	defer cl.Close()
	for _, t := range txns {
		if err := cl.BeginTransaction(); err != nil {
			return err
		}
		for _, r := range t.recs {
			if err := cl.ProduceSync(ctx, &kgo.Record{Partition: r.partition, Value: []byte(r.value)}).FirstErr(); err != nil {
				return err
			}
		}
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(t.commit)); err != nil {
			return err
		}
	}
	return nil
}

func (f *franz) readCommitted(ctx context.Context, topic string, partitions int32, end string) ([]string, error) {
	cl := f.client(kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	defer cl.Close()
	ended := map[int32]bool{}
	var out []string
	for len(ended) < int(partitions) {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return out, fmt.Errorf("%d of %d partitions reached %s: %w", len(ended), partitions, end, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Value) == end {
				ended[r.Partition] = true
			} else {
				out = append(out, string(r.Value))
			}
		})
	}
	return out, nil
}

func (s *saramaClient) runTxns(ctx context.Context, topic, id string, txns []txn) error {
	cfg := s.config()
	cfg.Producer.Idempotent, cfg.Net.MaxOpenRequests = true, 1
	cfg.Producer.Transaction.ID = id
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	p, err := sarama.NewSyncProducer(s.addrs, cfg)
	if err != nil {
		return err
	}
	defer p.Close()
	for _, t := range txns {
		if err := p.BeginTxn(); err != nil {
			return err
		}
		for _, r := range t.recs {
			if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Partition: r.partition, Value: sarama.StringEncoder(r.value)}); err != nil {
				return err
			}
		}
		end := p.CommitTxn
		if !t.commit {
			end = p.AbortTxn
		}
		if err := end(); err != nil {
			return err
		}
	}
	return nil
}

func (s *saramaClient) readCommitted(ctx context.Context, topic string, partitions int32, end string) ([]string, error) {
	cfg := s.config()
	cfg.Consumer.IsolationLevel = sarama.ReadCommitted
	c, err := sarama.NewConsumer(s.addrs, cfg)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	msgs := make(chan *sarama.ConsumerMessage)
	for p := range partitions {
		pc, err := c.ConsumePartition(topic, p, sarama.OffsetOldest)
		if err != nil {
			return nil, fmt.Errorf("partition %d: %w", p, err)
		}
		defer pc.AsyncClose()
		go func() {
			for m := range pc.Messages() {
				select {
				case msgs <- m:
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	ended := map[int32]bool{}
	var out []string
	for len(ended) < int(partitions) {
		select {
		case m := <-msgs:
			if string(m.Value) == end {
				ended[m.Partition] = true
			} else {
				out = append(out, string(m.Value))
			}
		case <-ctx.Done():
			return out, fmt.Errorf("%d of %d partitions reached %s: %w", len(ended), partitions, end, ctx.Err())
		}
	}
	return out, nil
}
