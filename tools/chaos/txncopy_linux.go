package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-broker/sluice/tools/chaos/check"
)

// copiers is the transactional read-process-write workload: members of one
// group consume the workload's topic and write each value to the same
// partition of the copy topic, in transactions that also commit the
// group's offsets (franz-go's GroupTransactSession: KIP-447 fencing by
// group generation, an abort when a rebalance or error cuts a transaction
// short). check.CheckCopy then holds the copy to exactly once.
type copiers struct {
	src, dst, group string
	cancel          context.CancelFunc
	wg              sync.WaitGroup
	// committed and aborted count ended transactions; errors, failed
	// Begin/End calls (a fenced or timed-out transaction, retried).
	committed, aborted, errors atomic.Int64
	// kinds counts the errors by kind (the Kafka error's name where there
	// is one), so a report shows what the copiers ran into, not only the
	// last error.
	kindsMu sync.Mutex
	kinds   map[string]int
	// copied is how many values the check found in the copy.
	copied int
}

// startCopiers starts n copiers from src to dst.
func startCopiers(seeds []string, src, dst string, n int) (*copiers, error) {
	ctx, cancel := context.WithCancel(context.Background())
	cp := &copiers{src: src, dst: dst, group: src + "-copier", cancel: cancel}
	for i := range n {
		s, err := kgo.NewGroupTransactSession(
			kgo.SeedBrokers(seeds...),
			kgo.TransactionalID(fmt.Sprintf("%s-copier-%d", src, i)),
			kgo.TransactionTimeout(20*time.Second),
			kgo.ConsumerGroup(cp.group), kgo.ConsumeTopics(src),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			kgo.SessionTimeout(groupSessionTimeout), kgo.FetchMaxWait(500*time.Millisecond),
			kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.MetadataMinAge(200*time.Millisecond), kgo.RecordDeliveryTimeout(60*time.Second),
		)
		if err != nil {
			cp.stop()
			return nil, err
		}
		cp.wg.Add(1)
		go func() { defer cp.wg.Done(); cp.run(ctx, s) }()
	}
	return cp, nil
}

// run copies until ctx ends, one transaction per poll.
func (cp *copiers) run(ctx context.Context, s *kgo.GroupTransactSession) {
	defer s.Close()
	for ctx.Err() == nil {
		fs := s.PollRecords(ctx, 500)
		if fs.IsClientClosed() || ctx.Err() != nil {
			return
		}
		if fs.Empty() {
			continue
		}
		committed, err := copyOnce(s, cp.dst, fs)
		switch {
		case err != nil:
			cp.fail(err)
			cp.settle(ctx, s)
		case committed:
			cp.committed.Add(1)
		default:
			cp.aborted.Add(1)
		}
	}
}

// copyOnce copies one poll's records in one transaction with the group's
// offsets for them. It commits only if every record was acknowledged: a
// session commits the offsets it polled whether or not the records
// produced in between made it, so a failed record must turn the end into
// an abort (the offsets then rewind and the records are copied again).
// Neither the records nor the end take the run's context: a transaction
// begun is finished, committed or aborted, even when the run stops
// meanwhile — a record failed by a cancelled context is how the first
// version of this copier committed offsets without their copies.
func copyOnce(s *kgo.GroupTransactSession, dst string, fs kgo.Fetches) (bool, error) {
	if err := s.Begin(); err != nil {
		return false, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	first := kgo.AbortingFirstErrPromise(s.Client())
	fs.EachRecord(func(r *kgo.Record) {
		s.Produce(ctx, &kgo.Record{Topic: dst, Partition: r.Partition, Value: r.Value}, first.Promise())
	})
	// Err waits for every promise; the end then commits only if none failed.
	produceErr := first.Err()
	committed, err := s.End(ctx, kgo.TransactionEndTry(produceErr == nil))
	if err == nil && produceErr != nil {
		err = fmt.Errorf("aborted: a copied record failed: %w", produceErr)
	}
	return committed, err
}

// settle follows a failed transaction: End can fail with the
// transaction still open in the client (an abort it could not confirm),
// and every Begin after would then fail, so it is aborted again, with a
// pause so that an outage is not counted thousands of times.
func (cp *copiers) settle(ctx context.Context, s *kgo.GroupTransactSession) {
	actx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.End(actx, kgo.TryAbort); err != nil {
		cp.fail(fmt.Errorf("abort after a failed transaction: %w", err))
	}
	select {
	case <-ctx.Done():
	case <-time.After(100 * time.Millisecond):
	}
}

func (cp *copiers) fail(err error) {
	cp.errors.Add(1)
	kind := err.Error()
	var ke *kerr.Error
	switch {
	case errors.As(err, &ke):
		kind = ke.Message
	case errors.Is(err, context.DeadlineExceeded):
		kind = "timeout"
	case len(kind) > 60:
		kind = kind[:60]
	}
	cp.kindsMu.Lock()
	defer cp.kindsMu.Unlock()
	if cp.kinds == nil {
		cp.kinds = map[string]int{}
	}
	cp.kinds[kind]++
}

// stop ends every copier; each aborts what it has open as it closes.
func (cp *copiers) stop() {
	cp.cancel()
	cp.wg.Wait()
}

// check reads the source and the copy at read_committed and the copier
// group's committed offsets, and holds the copy to exactly once.
func (cp *copiers) check(ctx context.Context, seeds []string, parts int) (check.Anomalies, error) {
	src, err := check.ReadCommitted(ctx, seeds, cp.src, parts)
	if err != nil {
		return nil, err
	}
	dst, err := check.ReadCommitted(ctx, seeds, cp.dst, parts)
	if err != nil {
		return nil, err
	}
	committed, err := committedOffsets(ctx, seeds, cp.group, cp.src)
	if err != nil {
		return nil, err
	}
	for _, l := range dst {
		cp.copied += len(l.Values)
	}
	return check.CheckCopy(src, dst, committed), nil
}

// summary is the copiers' line in the report.
func (cp *copiers) summary() string {
	s := fmt.Sprintf("%d transactions committed, %d aborted, %d Begin/End errors; %d values in the copy at read_committed", cp.committed.Load(), cp.aborted.Load(), cp.errors.Load(), cp.copied)
	cp.kindsMu.Lock()
	defer cp.kindsMu.Unlock()
	kinds := make([]string, 0, len(cp.kinds))
	for k := range cp.kinds {
		kinds = append(kinds, k)
	}
	slices.SortFunc(kinds, func(a, b string) int { return cp.kinds[b] - cp.kinds[a] })
	for i, k := range kinds {
		if i == 0 {
			s += " ("
		} else {
			s += ", "
		}
		s += fmt.Sprintf("%s: %d", k, cp.kinds[k])
	}
	if len(kinds) > 0 {
		s += ")"
	}
	return s
}
