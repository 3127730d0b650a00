// Package copier is the transactional read-process-write job of Sluice's
// fault tests: a member of a consumer group reads a topic at
// read_committed and writes each value to the same partition of a copy
// topic, in transactions that also commit the group's offsets (franz-go's
// GroupTransactSession: KIP-447 fencing by group generation, an abort
// when a rebalance or an error cuts a transaction short). The chaos
// harness (tools/chaos) runs copiers as goroutines beside its faults;
// internal/testcluster runs one as a process it SIGKILLs. check.CheckCopy
// holds the copy to exactly once.
package copier

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Options name one copier.
type Options struct {
	Seeds           []string
	Src, Dst, Group string
	TransactionalID string
	// SessionTimeout is the group member's session.timeout.ms;
	// HeartbeatInterval its heartbeat.interval.ms (0: franz-go's 3s).
	SessionTimeout, HeartbeatInterval time.Duration
	// BeforeEnd, when set, is called in each transaction whose records
	// were all acknowledged, before it ends; the fault tests use it to
	// hold a transaction open.
	BeforeEnd func(s *kgo.GroupTransactSession, records int)
	// ClientOpts are more options of the session's client (the fault
	// tests' hooks).
	ClientOpts []kgo.Opt
}

// Stats count a copier's transactions.
type Stats struct {
	// Committed and Aborted count ended transactions; Errors, failed
	// transactions (a fenced or timed-out one, a record that failed).
	Committed, Aborted, Errors atomic.Int64
	// Renewed counts sessions replaced because they could not begin.
	Renewed atomic.Int64
	// OnError, when set, is told every error counted in Errors.
	OnError func(error)
}

func (st *Stats) fail(err error) {
	st.Errors.Add(1)
	if st.OnError != nil {
		st.OnError(err)
	}
}

// Session is the group transact session of o.
func Session(o Options) (*kgo.GroupTransactSession, error) {
	opts := append([]kgo.Opt(nil), o.ClientOpts...)
	if o.HeartbeatInterval > 0 {
		opts = append(opts, kgo.HeartbeatInterval(o.HeartbeatInterval))
	}
	return kgo.NewGroupTransactSession(append(opts,
		kgo.SeedBrokers(o.Seeds...),
		kgo.TransactionalID(o.TransactionalID),
		kgo.TransactionTimeout(20*time.Second),
		kgo.ConsumerGroup(o.Group), kgo.ConsumeTopics(o.Src),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.SessionTimeout(o.SessionTimeout), kgo.FetchMaxWait(500*time.Millisecond),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.MetadataMinAge(200*time.Millisecond), kgo.RecordDeliveryTimeout(60*time.Second),
	)...)
}

// errBegin marks CopyOnce's errors from Begin: the session cannot start a
// transaction, however often it is asked.
var errBegin = errors.New("begin")

// Run copies until ctx ends, one transaction per poll, and closes s (or
// the session that replaced it). A session that cannot begin a
// transaction — its producer id failed for good, as franz-go makes it
// after errors it does not retry, or a transaction stays open that no
// abort could end — is closed and replaced by a new one of o, as Kafka
// asks of a producer with a fatal error: the new one's InitProducerID
// fences the old epoch and aborts what it left open, and it rejoins the
// group. Without it one refused login could end a copier for the rest of
// a run.
func Run(ctx context.Context, s *kgo.GroupTransactSession, o Options, st *Stats) {
	defer func() {
		if s != nil {
			s.Close()
		}
	}()
	for ctx.Err() == nil {
		fs := s.PollRecords(ctx, 500)
		if fs.IsClientClosed() || ctx.Err() != nil {
			return
		}
		if fs.Empty() {
			continue
		}
		committed, err := CopyOnce(s, o.Dst, fs, o.BeforeEnd)
		switch {
		case errors.Is(err, errBegin):
			st.fail(err)
			s.Close()
			if s = renew(ctx, o, st); s == nil {
				return
			}
		case err != nil:
			st.fail(err)
			settle(ctx, s, st)
		case committed:
			st.Committed.Add(1)
		default:
			st.Aborted.Add(1)
		}
	}
}

// CopyOnce copies one poll's records in one transaction with the group's
// offsets for them. It commits only if every record was acknowledged: a
// session commits the offsets it polled whether or not the records
// produced in between made it, so a failed record must turn the end into
// an abort (the offsets then rewind and the records are copied again).
// Neither the records nor the end take the run's context: a transaction
// begun is finished, committed or aborted, even when the run stops
// meanwhile — a record failed by a cancelled context is how the first
// version of this copier committed offsets without their copies.
// beforeEnd (may be nil) is Options.BeforeEnd.
func CopyOnce(s *kgo.GroupTransactSession, dst string, fs kgo.Fetches, beforeEnd func(*kgo.GroupTransactSession, int)) (bool, error) {
	if err := s.Begin(); err != nil {
		return false, fmt.Errorf("%w: %w", errBegin, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	first := kgo.AbortingFirstErrPromise(s.Client())
	n := 0
	fs.EachRecord(func(r *kgo.Record) {
		s.Produce(ctx, &kgo.Record{Topic: dst, Partition: r.Partition, Value: r.Value}, first.Promise())
		n++
	})
	// Err waits for every promise; the end then commits only if none failed.
	produceErr := first.Err()
	if produceErr == nil && beforeEnd != nil {
		beforeEnd(s, n)
	}
	committed, err := s.End(ctx, kgo.TransactionEndTry(produceErr == nil))
	if err == nil && produceErr != nil {
		err = fmt.Errorf("aborted: a copied record failed: %w", produceErr)
	}
	return committed, err
}

// renew returns a new session of o, trying every second until one is
// made; nil once ctx ends.
func renew(ctx context.Context, o Options, st *Stats) *kgo.GroupTransactSession {
	st.Renewed.Add(1)
	for ctx.Err() == nil {
		s, err := Session(o)
		if err == nil {
			return s
		}
		st.fail(fmt.Errorf("new session: %w", err))
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	return nil
}

// settle follows a failed transaction: End can fail with the
// transaction still open in the client (an abort it could not confirm),
// and every Begin after would then fail, so it is aborted again, with a
// pause so that an outage is not counted thousands of times.
func settle(ctx context.Context, s *kgo.GroupTransactSession, st *Stats) {
	actx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.End(actx, kgo.TryAbort); err != nil {
		st.fail(fmt.Errorf("abort after a failed transaction: %w", err))
	}
	select {
	case <-ctx.Done():
	case <-time.After(100 * time.Millisecond):
	}
}
