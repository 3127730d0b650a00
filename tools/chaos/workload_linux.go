package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/tools/chaos/check"
)

// workload is the clients of one run: producers sending unique values
// round-robin over the partitions at a fixed rate, and consumers of one
// group polling and committing after every poll. Everything they see
// goes to the history.
type workload struct {
	h      *check.History
	topic  string
	parts  int
	group  string
	cancel context.CancelFunc
	wg     sync.WaitGroup
	prods  []*kgo.Client
}

// producerOpts: base (seeds, security) and acks=all making franz-go's
// default idempotent producer; acks=1 turns idempotence off, as Kafka
// requires.
func producerOpts(base []kgo.Opt, acksAll bool) []kgo.Opt {
	opts := append(slices.Clip(base),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.MetadataMinAge(100*time.Millisecond),
		kgo.RecordDeliveryTimeout(60*time.Second),
		kgo.MaxBufferedRecords(5000),
		kgo.ProducerLinger(2*time.Millisecond),
	)
	if acksAll {
		return append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	}
	return append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
}

// startWorkload starts producers and consumers, clients of base (seeds,
// security); rate is records per second per producer.
func startWorkload(base []kgo.Opt, h *check.History, topic string, parts, producers, consumers, rate int, acksAll bool) (*workload, error) {
	ctx, cancel := context.WithCancel(context.Background())
	w := &workload{h: h, topic: topic, parts: parts, group: topic + "-group", cancel: cancel}
	for i := range producers {
		cl, err := kgo.NewClient(producerOpts(base, acksAll)...)
		if err != nil {
			w.stop(0)
			return nil, err
		}
		w.prods = append(w.prods, cl)
		w.wg.Add(1)
		go func() { defer w.wg.Done(); w.produce(ctx, cl, i, rate) }()
	}
	for i := range consumers {
		w.wg.Add(1)
		go func() { defer w.wg.Done(); w.consume(ctx, base, i) }()
	}
	return w, nil
}

// produce sends one value every 1/rate s until ctx ends.
func (w *workload) produce(ctx context.Context, cl *kgo.Client, id, rate int) {
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		p := int32((i + id) % w.parts)
		v := w.h.Send(id, p)
		r := &kgo.Record{Topic: w.topic, Partition: p, Value: []byte(strconv.Itoa(v))}
		// Not ctx: a value sent must get its answer even after the stop.
		cl.Produce(context.Background(), r, func(r *kgo.Record, err error) { w.h.Done(v, r.Offset, err) })
	}
}

// consume polls as a group member, records every record with its
// assignment session, and commits what it polled before the next poll.
func (w *workload) consume(ctx context.Context, base []kgo.Opt, id int) {
	var mu sync.Mutex
	session := 0
	bump := func(context.Context, *kgo.Client, map[string][]int32) { mu.Lock(); session++; mu.Unlock() }
	current := func() int { mu.Lock(); defer mu.Unlock(); return session }
	cl, err := kgo.NewClient(append(slices.Clip(base), kgo.ConsumerGroup(w.group), kgo.ConsumeTopics(w.topic),
		kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(), kgo.FetchMaxWait(500*time.Millisecond),
		kgo.SessionTimeout(groupSessionTimeout), kgo.MetadataMinAge(200*time.Millisecond),
		kgo.OnPartitionsAssigned(bump), kgo.OnPartitionsRevoked(bump), kgo.OnPartitionsLost(bump))...)
	if err != nil {
		return
	}
	defer cl.Close()
	for ctx.Err() == nil {
		fs := cl.PollRecords(ctx, 1000)
		s := current()
		_, gen := cl.GroupMetadata()
		offsets := map[int32]kgo.EpochOffset{}
		fs.EachRecord(func(r *kgo.Record) {
			v, err := strconv.Atoi(string(r.Value))
			if err != nil {
				v = -1
			}
			w.h.Polled(check.Poll{Consumer: id, Session: s, Partition: r.Partition, Offset: r.Offset, Value: v})
			offsets[r.Partition] = kgo.EpochOffset{Epoch: r.LeaderEpoch, Offset: r.Offset + 1}
		})
		if len(offsets) > 0 {
			w.commit(ctx, cl, id, offsets, func(commitGen int32) bool { return current() != s || commitGen != gen })
		}
		cl.AllowRebalance()
	}
}

// commit commits offsets synchronously and records those the coordinator
// accepted; stale reports whether the assignment they were polled in has
// changed since: the callbacks ran, or the commit went out under another
// generation than the poll's (franz-go holds a commit until a join and
// sync ends, then sends it under the new generation, before the
// assignment callbacks run under BlockRebalanceOnPoll).
func (w *workload) commit(ctx context.Context, cl *kgo.Client, id int, offsets map[int32]kgo.EpochOffset, stale func(commitGen int32) bool) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cl.CommitOffsetsSync(cctx, map[string]map[int32]kgo.EpochOffset{w.topic: offsets},
		func(_ *kgo.Client, req *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			if err != nil || resp == nil || req == nil {
				return
			}
			st := stale(req.Generation)
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					if p.ErrorCode == 0 {
						w.h.Committed(check.Commit{Consumer: id, Partition: p.Partition, Offset: offsets[p.Partition].Offset, Stale: st})
					}
				}
			}
		})
}

// stop ends the workload; producers get up to flush to have every value
// answered (what is still unanswered stays indeterminate).
func (w *workload) stop(flush time.Duration) error {
	w.cancel()
	w.wg.Wait()
	var errs []error
	for _, cl := range w.prods {
		ctx, cancel := context.WithTimeout(context.Background(), flush)
		if err := cl.Flush(ctx); err != nil {
			errs = append(errs, fmt.Errorf("flush: %w", err))
		}
		cancel()
		cl.Close()
	}
	return errors.Join(errs...)
}

// committedOffsets asks the group's coordinator for its committed offsets.
func committedOffsets(ctx context.Context, seeds []string, sec []kgo.Opt, group, topic string) (map[int32]int64, error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, sec...)...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	resp, err := kadm.NewClient(cl).FetchOffsets(ctx, group)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("offset fetch: %w", err)
	}
	out := map[int32]int64{}
	for p, o := range resp[topic] {
		if o.At >= 0 {
			out[p] = o.At
		}
	}
	return out, nil
}
