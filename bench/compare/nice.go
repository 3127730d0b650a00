package compare

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// setNice gives every thread of this process nice level n. On Linux
// setpriority(PRIO_PROCESS, 0, n) changes only the calling thread, and a
// new thread or child process takes the level of the thread it was
// cloned from: Go starts threads and forks children from any of its
// threads, so all of them are set, and whatever starts later inherits n.
func setNice(n int) error {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return unix.Setpriority(unix.PRIO_PROCESS, 0, n)
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := unix.Setpriority(unix.PRIO_PROCESS, tid, n); err != nil && err != unix.ESRCH {
			return err
		}
	}
	return nil
}

// threadNice is the nice level of thread tid of this process.
func threadNice(tid int) (int, error) {
	// getpriority returns 20 - nice, to keep the result non-negative.
	p, err := unix.Getpriority(unix.PRIO_PROCESS, tid)
	return 20 - p, err
}
