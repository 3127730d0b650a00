package compare

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sluice-broker/sluice/bench"
)

// MachineInfo describes where a comparison ran.
type MachineInfo struct {
	CPUs        int    `json:"cpus"`
	CPUModel    string `json:"cpu_model"`
	MemTotal    string `json:"mem_total"`
	Kernel      string `json:"kernel"`
	GoVersion   string `json:"go_version"`
	JavaVersion string `json:"java_version"`
	Kafka       string `json:"kafka_version"`
	FranzGo     string `json:"franz_go_version"`
	Kfake       string `json:"kfake_version"`
	Commit      string `json:"commit"`
}

// DescribeMachine gathers MachineInfo; java is the binary Kafka runs on.
func DescribeMachine(java string) MachineInfo {
	m := MachineInfo{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), Kafka: KafkaVersion}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		m.Kernel = unix.ByteSliceToString(u.Sysname[:]) + " " + unix.ByteSliceToString(u.Release[:]) + " " + unix.ByteSliceToString(u.Machine[:])
	}
	m.CPUModel = procField("/proc/cpuinfo", "model name")
	if b, err := bench.MemInfo("MemTotal"); err == nil {
		m.MemTotal = fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
	}
	if out, err := exec.Command(java, "-version").CombinedOutput(); err == nil {
		m.JavaVersion = strings.SplitN(strings.TrimSpace(string(out)), "\n", 2)[0]
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			switch d.Path {
			case "github.com/twmb/franz-go":
				m.FranzGo = d.Version
			case "github.com/twmb/franz-go/pkg/kfake":
				m.Kfake = d.Version
			}
		}
		var rev, dirty string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					dirty = " (with uncommitted changes)"
				}
			}
		}
		if rev != "" {
			m.Commit = rev + dirty
		}
	}
	// Built with -buildvcs=false: ask git in the working directory. The
	// files this tool writes itself do not make the tree dirty.
	if m.Commit == "" {
		if out, err := exec.Command("git", "rev-parse", "HEAD").Output(); err == nil {
			m.Commit = strings.TrimSpace(string(out))
			if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no", "--", ".", ":!BENCHMARKS.md", ":!docs/bench").Output(); err == nil && len(bytes.TrimSpace(st)) > 0 {
				m.Commit += " (with uncommitted changes)"
			}
		}
	}
	return m
}

// procField returns the value of the first "key: value" line of a /proc file.
func procField(path, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.Join(strings.Fields(v), " ")
		}
	}
	return ""
}
