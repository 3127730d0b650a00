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
	// BeforeEnd, when set, is called in each transaction after its records
	// were handed to the producer and before it ends; the fault tests use
	// it to hold a transaction open.
	BeforeEnd func(s *kgo.GroupTransactSession, records int)
}

// Stats count a copier's transactions.
type Stats struct {
	// Committed and Aborted count ended transactions; Errors, failed
	// Begin/End calls (a fenced or timed-out transaction, retried).
	Committed, Aborted, Errors atomic.Int64
	LastErr                    atomic.Value // string
}

func (st *Stats) fail(err error) {
	st.Errors.Add(1)
	st.LastErr.Store(err.Error())
}

// Session is the group transact session of o.
func Session(o Options) (*kgo.GroupTransactSession, error) {
	var opts []kgo.Opt
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

// Run copies until ctx ends, one transaction per poll, and closes s.
func Run(ctx context.Context, s *kgo.GroupTransactSession, o Options, st *Stats) {
	defer s.Close()
	for ctx.Err() == nil {
		fs := s.PollRecords(ctx, 500)
		if fs.IsClientClosed() || ctx.Err() != nil {
			return
		}
		if fs.Empty() {
			continue
		}
		if err := s.Begin(); err != nil {
			st.fail(err)
			continue
		}
		n := 0
		fs.EachRecord(func(r *kgo.Record) {
			s.Produce(ctx, &kgo.Record{Topic: o.Dst, Partition: r.Partition, Value: r.Value}, nil)
			n++
		})
		if o.BeforeEnd != nil {
			o.BeforeEnd(s, n)
		}
		// Not ctx: a transaction begun is ended, committed or aborted,
		// even when the run stops meanwhile.
		ectx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		committed, err := s.End(ectx, kgo.TryCommit)
		cancel()
		switch {
		case err != nil:
			st.fail(err)
		case committed:
			st.Committed.Add(1)
		default:
			st.Aborted.Add(1)
		}
	}
}
