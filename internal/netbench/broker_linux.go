package main

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sluice-broker/sluice/engine"
	"github.com/sluice-broker/sluice/internal/server"
	"github.com/sluice-broker/sluice/netpoll"
)

// serveMain is the child: a real broker on one backend, printing its
// address and serving until SIGTERM.
func serveMain(backend, dataDir string, loops, workers int, accept string) error {
	cfg := engine.DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.DataDir = dataDir
	cfg.OffsetsTopicPartitions = 4
	cfg.RetentionCheckInterval = time.Second
	cfg.Log.FileDeleteDelayMs = 0 // bounded disk (or tmpfs) use under produce
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	srv, err := server.Start(server.Options{Config: cfg, Logger: logger, Net: backend, NetLoops: loops,
		NetTune: func(o *netpoll.Options) { o.Workers, o.Accept = workers, accept }})
	if err != nil {
		return err
	}
	fmt.Printf("ADDR %s %s\n", srv.Addr(), srv.Net())
	if path := os.Getenv("NETBENCH_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return srv.Shutdown(ctx)
}

// brokerProc is a broker child process.
type brokerProc struct {
	name    string // label in reports
	backend string
	addr    string
	dataDir string
	cmd     *exec.Cmd

	batchSize int // of the fetch topic, once loaded
}

func startBroker(name, backend, dataDir string, loops, workers int, accept string, env []string) (*brokerProc, error) {
	bin := os.Args[0]
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "NETBENCH_BIN="); ok {
			bin = v // an A/B run against another build
		}
	}
	cmd := exec.Command(bin, "-serve", "-net", backend, "-data", dataDir,
		"-loops", strconv.Itoa(loops), "-workers", strconv.Itoa(workers), "-accept", accept)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM} // no orphans if netbench dies
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(out)
	if !sc.Scan() {
		cmd.Process.Kill()
		return nil, fmt.Errorf("broker %s did not start", name)
	}
	f := strings.Fields(sc.Text())
	if len(f) != 3 || f[0] != "ADDR" {
		cmd.Process.Kill()
		return nil, fmt.Errorf("broker %s said %q", name, sc.Text())
	}
	if f[2] != backend {
		cmd.Process.Kill()
		return nil, fmt.Errorf("broker %s runs %s, not %s", name, f[2], backend)
	}
	return &brokerProc{name: name, backend: backend, addr: f[1], dataDir: dataDir, cmd: cmd}, nil
}

func (b *brokerProc) stop() {
	b.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { b.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		b.cmd.Process.Kill()
	}
}

// cpu is the broker's user+system CPU time so far.
func (b *brokerProc) cpu() time.Duration {
	if b.cmd == nil {
		return 0
	}
	return procCPU(b.cmd.Process.Pid)
}

// rss is the broker's resident memory in bytes.
func (b *brokerProc) rss() int64 { return procRSS(b.cmd.Process.Pid) }

const clockTicks = 100 // USER_HZ on Linux

func procCPU(pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(raw)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	// Fields after the command: state is [0]; utime [11], stime [12].
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / clockTicks
}

func procRSS(pid int) int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			kb, _ := strconv.ParseInt(strings.Fields(line)[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}
