package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// node is one `sluice serve` process in its own network namespace.
type node struct {
	id      int32
	dir     string // config, log; data below
	dataDir string
	config  string
	logPath string
	// tmpfs: the data dir is a size-bounded tmpfs (the full-disk fault's
	// target).
	tmpfs bool
	// brokerOnly: started by add-broker (process.roles=broker); the only
	// kind remove-broker retires, as voters are fixed.
	brokerOnly bool
	// sec is the run's security: the node's listeners and logins.
	sec *security

	mu struct {
		sync.Mutex
		cmd  *exec.Cmd
		done chan struct{} // closed when cmd has exited
		// paused is set between SIGSTOP and SIGCONT.
		paused bool
		// started is when cmd was started.
		started time.Time
	}
}

func (n *node) addr() string           { return nodeAddr(n.id) + ":9092" }
func (n *node) controllerAddr() string { return nodeAddr(n.id) + ":9093" }

// writeConfig writes the node's server.properties.
func (n *node) writeConfig(roles, quorum string, extra []string) error {
	lines := append([]string{
		"process.roles=" + roles,
		fmt.Sprintf("node.id=%d", n.id),
		n.sec.listeners(n.addr(), n.controllerAddr()),
		"controller.listener.names=CONTROLLER",
		quorum,
		"log.dirs=" + n.dataDir,
	}, append(n.sec.nodeConfig(), extra...)...)
	n.config = filepath.Join(n.dir, "server.properties")
	return os.WriteFile(n.config, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
}

// prepare makes the node's directories (the data dir a tmpfs of
// tmpfsMB if n.tmpfs), writes its config and formats it.
func (n *node) prepare(bin, clusterID, roles, quorum string, extra []string, tmpfsMB int) error {
	n.dataDir = filepath.Join(n.dir, "data")
	n.logPath = filepath.Join(n.dir, "node.log")
	if err := os.MkdirAll(n.dataDir, 0o755); err != nil {
		return err
	}
	if n.tmpfs {
		if err := syscall.Mount("tmpfs", n.dataDir, "tmpfs", 0, fmt.Sprintf("size=%dm", tmpfsMB)); err != nil {
			return fmt.Errorf("tmpfs for node %d: %w", n.id, err)
		}
	}
	if err := n.writeConfig(roles, quorum, extra); err != nil {
		return err
	}
	return run(bin, append([]string{"format", "--cluster-id", clusterID, "--config", n.config}, n.sec.formatArgs()...)...)
}

// start runs the node in its namespace, appending to its log. `ip netns
// exec` execs the binary, so the pid is the broker's own.
func (n *node) start(bin string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	logf, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(logf, "\n==== chaos: start at %s ====\n", time.Now().UTC().Format(time.RFC3339Nano))
	cmd := exec.Command("ip", "netns", "exec", nsName(n.id), bin, "serve", "--config", n.config)
	cmd.Stdout, cmd.Stderr = logf, logf
	// The node dies with the harness, even when the harness is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	done := make(chan struct{})
	n.mu.cmd, n.mu.done, n.mu.paused, n.mu.started = cmd, done, false, time.Now()
	go func() {
		// The exit status goes to the log: a node that exits on its own
		// without a word was killed by a signal, and which one matters.
		err := cmd.Wait()
		fmt.Fprintf(logf, "==== chaos: exit at %s: %v ====\n", time.Now().UTC().Format(time.RFC3339Nano), err)
		logf.Close()
		close(done)
	}()
	return nil
}

// running reports whether the process is alive (paused counts).
func (n *node) running() bool {
	n.mu.Lock()
	done := n.mu.done
	n.mu.Unlock()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// startedAt is when the node's process was last started.
func (n *node) startedAt() time.Time {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.mu.started
}

func (n *node) paused() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.mu.paused
}

func (n *node) signal(s syscall.Signal) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.mu.cmd != nil && n.mu.cmd.Process != nil {
		n.mu.cmd.Process.Signal(s)
		switch s {
		case syscall.SIGSTOP:
			n.mu.paused = true
		case syscall.SIGCONT:
			n.mu.paused = false
		}
	}
}

// wait waits up to d for the process to exit; false if it is running.
func (n *node) wait(d time.Duration) bool {
	n.mu.Lock()
	done := n.mu.done
	n.mu.Unlock()
	if done == nil {
		return true
	}
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// kill SIGKILLs the node (resuming it first if paused) and waits.
func (n *node) kill() {
	n.signal(syscall.SIGCONT)
	n.signal(syscall.SIGKILL)
	n.wait(10 * time.Second)
}

// stop SIGTERMs the node (controlled shutdown); after d it is killed.
func (n *node) stop(d time.Duration) error {
	n.signal(syscall.SIGTERM)
	if !n.wait(d) {
		n.kill()
		return fmt.Errorf("node %d did not stop within %v of SIGTERM; killed", n.id, d)
	}
	return nil
}

// fillDisk writes a file into the node's tmpfs data dir until the
// filesystem is full and returns its path; the broker then meets ENOSPC.
func (n *node) fillDisk() (string, error) {
	if !n.tmpfs {
		return "", errors.New("not a tmpfs node")
	}
	path := filepath.Join(n.dataDir, ".chaos-fill")
	f, err := os.Create(path)
	if err != nil {
		return path, err
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for {
		if _, err := f.Write(buf); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return path, nil
			}
			return path, err
		}
	}
}

// tail returns the last n bytes of the node's log.
func (n *node) tail(max int64) string {
	f, err := os.Open(n.logPath)
	if err != nil {
		return ""
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > max {
		f.Seek(st.Size()-max, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	return string(b)
}
