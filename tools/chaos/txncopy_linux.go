package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-broker/sluice/tools/chaos/check"
	"github.com/sluice-broker/sluice/tools/chaos/copier"
)

// copiers is the transactional read-process-write workload: members of one
// group consume the workload's topic and write each value to the same
// partition of the copy topic (package copier), in transactions that also
// commit the group's offsets. check.CheckCopy then holds the copy to
// exactly once.
type copiers struct {
	src, dst, group string
	cancel          context.CancelFunc
	wg              sync.WaitGroup
	stats           copier.Stats
	// kinds counts the errors by kind (the Kafka error's name where there
	// is one), so a report shows what the copiers ran into, not only the
	// last error.
	kindsMu sync.Mutex
	kinds   map[string]int
	// logf logs the first errors of each kind in full, with their time,
	// to be set beside the faults.
	logf func(format string, args ...any)
	// copied is how many values the check found in the copy.
	copied int
}

// startCopiers starts n copiers from src to dst, clients of seeds with
// the run's security options sec. Their franz-go clients log at info
// level to clientLog (nil: nowhere): how each session decided to end its
// transactions, which the copiers' errors alone do not tell.
func startCopiers(seeds []string, sec []kgo.Opt, src, dst string, n int, logf func(string, ...any), clientLog io.Writer) (*copiers, error) {
	ctx, cancel := context.WithCancel(context.Background())
	cp := &copiers{src: src, dst: dst, group: src + "-copier", cancel: cancel, logf: logf}
	cp.stats.OnError = cp.kind
	for i := range n {
		id := fmt.Sprintf("%s-copier-%d", src, i)
		opts := slices.Clip(sec)
		if clientLog != nil {
			prefix := func() string { return time.Now().UTC().Format("15:04:05.000 ") + id + " " }
			opts = append(opts, kgo.WithLogger(kgo.BasicLogger(clientLog, kgo.LogLevelInfo, prefix)))
		}
		o := copier.Options{Seeds: seeds, ClientOpts: opts, Src: src, Dst: dst, Group: cp.group,
			TransactionalID: id, SessionTimeout: groupSessionTimeout}
		s, err := copier.Session(o)
		if err != nil {
			cp.stop()
			return nil, err
		}
		cp.wg.Add(1)
		go func() { defer cp.wg.Done(); copier.Run(ctx, s, o, &cp.stats) }()
	}
	return cp, nil
}

// logFirstErrors is how many errors of each kind the copiers log in full.
const logFirstErrors = 3

// kind counts a copier's error by kind.
func (cp *copiers) kind(err error) {
	kind := err.Error()
	var ke *kerr.Error
	var ne *net.OpError
	switch {
	case errors.As(err, &ke):
		kind = ke.Message
	case errors.As(err, &ne):
		// Without the address, so a broker down counts as one kind.
		kind = ne.Op + ": " + ne.Err.Error()
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
	if n := cp.kinds[kind]; n <= logFirstErrors && cp.logf != nil {
		cp.logf("  copier error %s (%d): %v", kind, n, err)
	}
}

// stop ends every copier; each aborts what it has open as it closes.
func (cp *copiers) stop() {
	cp.cancel()
	cp.wg.Wait()
}

// check reads the source and the copy at read_committed and the copier
// group's committed offsets, and holds the copy to exactly once.
func (cp *copiers) check(ctx context.Context, seeds []string, sec []kgo.Opt, parts int) (check.Anomalies, error) {
	src, err := check.ReadCommitted(ctx, seeds, cp.src, parts, sec...)
	if err != nil {
		return nil, err
	}
	dst, err := check.ReadCommitted(ctx, seeds, cp.dst, parts, sec...)
	if err != nil {
		return nil, err
	}
	committed, err := committedOffsets(ctx, seeds, sec, cp.group, cp.src)
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
	st := &cp.stats
	s := fmt.Sprintf("%d transactions committed, %d aborted, %d Begin/End errors, %d sessions renewed; %d values in the copy at read_committed", st.Committed.Load(), st.Aborted.Load(), st.Errors.Load(), st.Renewed.Load(), cp.copied)
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
