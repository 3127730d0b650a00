package bench

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluice-broker/sluice/tools/zcprobe"
)

// Quiet makes a latency run less at the mercy of a shared machine: the
// broker and the load generator on CPUs of their own, the broker's threads
// under SCHED_FIFO so that nothing of normal priority preempts them, and
// the load generator's own Go runtime settings. Affinity and the real-time
// class need root (CAP_SYS_NICE). Threads created later inherit both from
// the thread that creates them, so setting every thread the process has at
// the start covers the run. Undo puts the broker back to SCHED_OTHER (SCHED_NORMAL; its
// CPU set is left as it was set: restore it with taskset if needed).
//
// The broker's GOGC and GOMAXPROCS are its own environment's, set where it
// is started (BENCHMARKS.md, "Tail latency"); a Go broker moved to one CPU
// lowers GOMAXPROCS to 1 by itself (Go 1.25+), unless GOMAXPROCS is set.
type Quiet struct {
	// BrokerPid is the broker's pid; 0 finds the process listening on
	// the first broker address.
	BrokerPid  int
	BrokerCPUs []int // empty: leave the broker's affinity alone
	ClientCPUs []int // empty: leave this process's affinity alone
	// BrokerFIFO, when in 1..99, is the SCHED_FIFO priority of every
	// broker thread for the run.
	BrokerFIFO int
	// ClientFIFO is the same for this process (its pacing timer and
	// reader then wait for no one of normal priority either).
	ClientFIFO int
	// ClientGOMAXPROCS and ClientGOGC set this process's runtime (0 and
	// -1 leave them; ClientGOGC 0 is not "off", use a large value).
	ClientGOMAXPROCS int
	ClientGOGC       int
}

// Active reports whether q changes anything.
func (q *Quiet) Active() bool {
	return len(q.BrokerCPUs) > 0 || len(q.ClientCPUs) > 0 || q.BrokerFIFO > 0 || q.ClientFIFO > 0 || q.ClientGOMAXPROCS > 0 || q.ClientGOGC > 0
}

// Apply sets everything up; broker is the address used to find the
// broker's pid. The returned undo (never nil) is to be called after the
// run.
func (q *Quiet) Apply(broker string) (undo func(), err error) {
	undo = func() {}
	if q.BrokerFIFO > 99 || q.ClientFIFO > 99 {
		return undo, errors.New("SCHED_FIFO priority must be 1..99")
	}
	if q.ClientFIFO > 0 && len(q.ClientCPUs) > 0 && q.ClientGOMAXPROCS == 0 {
		// A Go process whose threads outnumber its CPUs livelocks under
		// SCHED_FIFO: a thread that spins waiting for another of the
		// same priority on the same CPU never lets it run (seen here).
		q.ClientGOMAXPROCS = len(q.ClientCPUs)
	}
	if q.ClientFIFO > 0 && (len(q.ClientCPUs) == 0 || q.ClientGOMAXPROCS > len(q.ClientCPUs)) {
		return undo, errors.New("--client-fifo needs --client-cpus and no more GOMAXPROCS than CPUs (a spinning thread would starve its peers)")
	}
	if q.ClientGOMAXPROCS > 0 {
		runtime.GOMAXPROCS(q.ClientGOMAXPROCS)
	}
	if q.ClientGOGC > 0 {
		debug.SetGCPercent(q.ClientGOGC)
	}
	if len(q.ClientCPUs) > 0 {
		if err := eachThread(os.Getpid(), pinTo(q.ClientCPUs)); err != nil {
			return undo, fmt.Errorf("client affinity: %w", err)
		}
	}
	if q.ClientFIFO > 0 {
		if err := eachThread(os.Getpid(), schedPolicy(unix.SCHED_FIFO, q.ClientFIFO)); err != nil {
			return undo, fmt.Errorf("client SCHED_FIFO: %w", err)
		}
	}
	if len(q.BrokerCPUs) == 0 && q.BrokerFIFO == 0 {
		return undo, nil
	}
	pid := q.BrokerPid
	if pid == 0 {
		if pid, err = zcprobe.ListenerPID(broker); err != nil {
			return undo, fmt.Errorf("finding the broker's pid: %w", err)
		}
	}
	if len(q.BrokerCPUs) > 0 {
		if err := eachThread(pid, pinTo(q.BrokerCPUs)); err != nil {
			return undo, fmt.Errorf("broker affinity: %w", err)
		}
	}
	if q.BrokerFIFO > 0 && len(q.BrokerCPUs) > 0 {
		// The same livelock as the client's: a Go broker moved to fewer
		// CPUs than its GOMAXPROCS lowers GOMAXPROCS by itself, but only
		// at its next periodic check (about a second; Go 1.25+). Start
		// the broker under taskset to skip this wait.
		time.Sleep(2 * time.Second)
	}
	if q.BrokerFIFO > 0 {
		undo = func() { _ = eachThread(pid, schedPolicy(unix.SCHED_NORMAL, 0)) }
		if err := eachThread(pid, schedPolicy(unix.SCHED_FIFO, q.BrokerFIFO)); err != nil {
			undo()
			return func() {}, fmt.Errorf("broker SCHED_FIFO: %w", err)
		}
	}
	return undo, nil
}

func pinTo(cpus []int) func(tid int) error {
	var set unix.CPUSet
	for _, c := range cpus {
		set.Set(c)
	}
	return func(tid int) error { return unix.SchedSetaffinity(tid, &set) }
}

func schedPolicy(policy uint32, prio int) func(tid int) error {
	return func(tid int) error {
		return unix.SchedSetAttr(tid, &unix.SchedAttr{Policy: policy, Priority: uint32(prio)}, 0)
	}
}

// eachThread applies fn to every thread of pid. A thread that exits
// meanwhile (ESRCH) is not an error.
func eachThread(pid int, fn func(tid int) error) error {
	tasks, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "task"))
	if err != nil {
		return err
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := fn(tid); err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("thread %d: %w", tid, err)
		}
	}
	return nil
}

// ParseCPUList reads a CPU list as taskset -c takes it ("0", "1,3",
// "0-2"); "" is none.
func ParseCPUList(s string) ([]int, error) {
	var out []int
	for _, part := range SplitList(s) {
		lo, hi, isRange := strings.Cut(part, "-")
		if !isRange {
			hi = lo
		}
		a, err1 := strconv.Atoi(lo)
		b, err2 := strconv.Atoi(hi)
		if err1 != nil || err2 != nil || a < 0 || b < a || b >= 1024 {
			return nil, fmt.Errorf("bad CPU list %q", s)
		}
		for c := a; c <= b; c++ {
			out = append(out, c)
		}
	}
	return out, nil
}
