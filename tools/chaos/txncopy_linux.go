package main

import (
	"context"
	"fmt"
	"sync"

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
	// copied is how many values the check found in the copy.
	copied int
}

// startCopiers starts n copiers from src to dst.
func startCopiers(seeds []string, src, dst string, n int) (*copiers, error) {
	ctx, cancel := context.WithCancel(context.Background())
	cp := &copiers{src: src, dst: dst, group: src + "-copier", cancel: cancel}
	for i := range n {
		o := copier.Options{Seeds: seeds, Src: src, Dst: dst, Group: cp.group,
			TransactionalID: fmt.Sprintf("%s-copier-%d", src, i), SessionTimeout: groupSessionTimeout}
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
	st := &cp.stats
	s := fmt.Sprintf("%d transactions committed, %d aborted, %d Begin/End errors; %d values in the copy at read_committed", st.Committed.Load(), st.Aborted.Load(), st.Errors.Load(), cp.copied)
	if e, ok := st.LastErr.Load().(string); ok {
		s += " (last: " + e + ")"
	}
	return s
}
