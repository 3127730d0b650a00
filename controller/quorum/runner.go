package quorum

import (
	"context"
	"log/slog"
	"sync"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
)

// Runner owns a Node on one goroutine: it ticks it on a wall-clock
// ticker, steps inbound messages, submits proposals and processes Ready
// after each. Everything that touches the Node goes through that
// goroutine, so the Node itself needs no locks.
type Runner struct {
	node  *Node
	tick  time.Duration
	log   *slog.Logger
	inbox chan *pb.Message
	calls chan func(*Node)
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once
	// failed holds the error that stopped the loop (persisting failed):
	// a member that cannot write its log must stop taking part.
	failed error
}

// NewRunner wraps n; Start begins its loop.
func NewRunner(n *Node, tick time.Duration, log *slog.Logger) *Runner {
	return &Runner{node: n, tick: tick, log: log, inbox: make(chan *pb.Message, 4096),
		calls: make(chan func(*Node), 1024), stop: make(chan struct{}), done: make(chan struct{})}
}

// Start runs the loop until Stop.
func (r *Runner) Start() { go r.run() }

// Deliver hands an inbound message to the loop; it drops the message when
// the inbox is full (raft retransmits).
func (r *Runner) Deliver(m *pb.Message) {
	select {
	case r.inbox <- m:
	default:
	}
}

// Report passes a transport's delivery failures to raft.
func (r *Runner) Report(to uint64, unreachable, snapshotFailed bool) {
	r.Do(func(n *Node) {
		switch {
		case snapshotFailed:
			n.rn.ReportSnapshot(to, 1) // raft.SnapshotFailure
		case unreachable:
			n.rn.ReportUnreachable(to)
		default:
			n.rn.ReportSnapshot(to, 0) // raft.SnapshotFinish
		}
	})
}

// Do runs fn on the loop's goroutine, asynchronously.
func (r *Runner) Do(fn func(*Node)) {
	select {
	case r.calls <- fn:
	case <-r.done:
	}
}

// Propose submits data and waits until it is applied on this member, the
// proposal is refused, or ctx ends.
func (r *Runner) Propose(ctx context.Context, data []byte) error {
	res := make(chan error, 1)
	r.Do(func(n *Node) { n.Propose(data, func(err error) { res <- err }) })
	select {
	case err := <-res:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-r.done:
		return ErrStopped
	}
}

// ErrStopped answers calls made after the runner stopped.
var ErrStopped = errorString("quorum: stopped")

type errorString string

func (e errorString) Error() string { return string(e) }

// Stop ends the loop and waits for it.
func (r *Runner) Stop() {
	r.once.Do(func() { close(r.stop) })
	<-r.done
}

// Err is the error that stopped the loop on its own, if any.
func (r *Runner) Err() error {
	select {
	case <-r.done:
		return r.failed
	default:
		return nil
	}
}

func (r *Runner) run() {
	defer close(r.done)
	t := time.NewTicker(r.tick)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
			r.node.Tick()
		case m := <-r.inbox:
			if err := r.node.Step(m); err != nil {
				r.log.Debug("raft refused message", "err", err)
			}
		case fn := <-r.calls:
			fn(r.node)
		}
		if !r.process() {
			return
		}
	}
}

// process drains Ready until raft has nothing left; false stops the loop.
func (r *Runner) process() bool {
	for {
		did, err := r.node.Process()
		if err != nil {
			r.failed = err
			r.log.Error("controller quorum member stopped", "err", err)
			return false
		}
		if !did {
			return true
		}
	}
}
