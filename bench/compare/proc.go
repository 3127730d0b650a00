package compare

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's CPU times; it is
// 100 on every Linux architecture Go supports.
const clockTicks = 100

// ProcStats is a process's CPU time so far and its peak resident set.
type ProcStats struct {
	CPU     time.Duration `json:"cpu_ns"` // user + system
	PeakRSS int64         `json:"peak_rss_bytes"`
	RSS     int64         `json:"rss_bytes"`
	Threads int           `json:"threads"`
	Sampled time.Time     `json:"sampled"`
}

// ReadProcStats reads /proc/<pid>/stat and /proc/<pid>/status.
func ReadProcStats(pid int) (ProcStats, error) {
	st := ProcStats{Sampled: time.Now()}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return st, err
	}
	// The command name (field 2) is in parentheses and may hold spaces:
	// count fields from the last ')'.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return st, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(stat[i+1:]))
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return st, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	stt, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return st, fmt.Errorf("/proc/%d/stat: bad cpu times", pid)
	}
	st.CPU = time.Duration(ut+stt) * time.Second / clockTicks

	status, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return st, err
	}
	defer status.Close()
	sc := bufio.NewScanner(status)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		switch k {
		case "VmHWM":
			st.PeakRSS = parseKB(v)
		case "VmRSS":
			st.RSS = parseKB(v)
		case "Threads":
			st.Threads, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return st, sc.Err()
}

// parseKB parses "  1234 kB" into bytes.
func parseKB(v string) int64 {
	n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
	return n << 10
}
