package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sluice-broker/sluice/engine"
	"github.com/sluice-broker/sluice/internal/server"
	"github.com/sluice-broker/sluice/storage"
)

// serveFlags are the command-line settings; each overrides the config file.
type serveFlags struct {
	listen, advertise, dataDir, config, metrics, logLevel string
	nodeID                                                int
	net                                                   string
	netLoops                                              int
}

func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	var f serveFlags
	fs.StringVar(&f.listen, "listen", "", "HOST:PORT to listen on (default localhost:9092)")
	fs.StringVar(&f.advertise, "advertise", "", "HOST:PORT clients are told to connect to (default: the listen address)")
	fs.StringVar(&f.dataDir, "data-dir", "", "directory of the partition logs (default ./data)")
	fs.IntVar(&f.nodeID, "node-id", -1, "broker node id (default 1)")
	fs.StringVar(&f.config, "config", "", "Kafka-style server.properties file")
	fs.StringVar(&f.metrics, "metrics", "", "HOST:PORT to serve Prometheus /metrics on (off by default)")
	fs.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&f.net, "net", "", "network backend: uring, epoll, std or auto (config key sluice.net; default $SLUICE_NET, else the fastest this host supports)")
	fs.IntVar(&f.netLoops, "net-loops", 0, "event loops of the uring and epoll backends (config key sluice.net.loops; default one per core)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	logger, err := newLogger(f.logLevel)
	if err != nil {
		return err
	}
	cfg, err := loadConfig(f, logger)
	if err != nil {
		return err
	}
	sizeStorageCaches(logger)
	// Signals are caught before the start: a start opens every partition
	// (tens of seconds at 50,000), and SIGTERM's default action then
	// killed the process mid-way, leaving every log to a full recovery at
	// the next start. Now a stop asked for during the start follows it.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)
	srv, err := server.Start(server.Options{Config: cfg, Logger: logger, Metrics: f.metrics, Net: netBackend(cfg.Net), NetLoops: cfg.NetLoops})
	if err != nil {
		return err
	}
	return waitAndStop(srv, sig, logger)
}

// loadConfig layers: embedded defaults, then the SLUICE_NET environment
// variable (the network backend's default), then the config file, read
// once, then flags.
func loadConfig(f serveFlags, logger *slog.Logger) (engine.Config, error) {
	cfg := engine.DefaultConfig()
	if env := os.Getenv("SLUICE_NET"); env != "" {
		if err := cfg.Set("sluice.net", env); err != nil {
			return cfg, fmt.Errorf("SLUICE_NET: %w", err)
		}
	}
	if f.config != "" {
		if err := applyFile(&cfg, f.config, logger); err != nil {
			return cfg, err
		}
	}
	return cfg, applyFlags(&cfg, f)
}

func applyFile(cfg *engine.Config, path string, logger *slog.Logger) error {
	file, err := os.Open(path)
	if err != nil {
		return err
	}
	defer file.Close()
	unknown, err := cfg.ApplyProperties(file)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	for _, k := range unknown {
		logger.Warn("unknown config key ignored", "file", path, "key", k)
	}
	return nil
}

// applyFlags sets what the command line gives, over the file.
func applyFlags(cfg *engine.Config, f serveFlags) error {
	if f.listen != "" {
		cfg.Listen = f.listen
	}
	if f.advertise != "" {
		cfg.Advertise = f.advertise
	}
	if f.dataDir != "" {
		cfg.DataDir = f.dataDir
	}
	if f.nodeID >= 0 {
		cfg.NodeID = int32(f.nodeID)
	}
	if f.net != "" {
		if err := cfg.Set("sluice.net", f.net); err != nil {
			return fmt.Errorf("--net: %w", err)
		}
	}
	if f.netLoops > 0 {
		if err := cfg.Set("sluice.net.loops", strconv.Itoa(f.netLoops)); err != nil {
			return fmt.Errorf("--net-loops: %w", err)
		}
	}
	return nil
}

// netBackend is the server's name for a sluice.net value: "" picks the
// fastest backend the host supports (uring, else epoll, logging why).
func netBackend(v string) string {
	if v == "auto" {
		return ""
	}
	return v
}

// waitAndStop serves until SIGINT/SIGTERM, then stops accepting, finishes
// in-flight requests, flushes and marks a clean shutdown.
func waitAndStop(srv *server.Server, sig chan os.Signal, logger *slog.Logger) error {
	select {
	case s := <-sig:
		logger.Info("shutting down", "signal", s.String())
	case err := <-srv.Done():
		if err != nil {
			logger.Error("listener failed", "err", err)
		}
	case err := <-srv.Fatal():
		logger.Error("stopping", "err", err)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		return err
	}
	signal.Stop(sig)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	return srv.Shutdown(ctx)
}

func newLogger(level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.ToUpper(level))); err != nil {
		return nil, fmt.Errorf("bad --log-level %q", level)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l})), nil
}

// sizeStorageCaches raises RLIMIT_NOFILE's soft limit to the hard limit
// (Kafka's operations guide asks for a high one; Go has raised it at start
// since 1.19, and this makes it explicit and logged) and sizes storage's
// .log descriptor and index mapping caches from the descriptor limit and
// vm.max_map_count, so a broker with any number of partitions stays under
// both.
func sizeStorageCaches(logger *slog.Logger) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		logger.Warn("cannot read RLIMIT_NOFILE; storage caches keep their defaults", "err", err)
		return
	}
	if lim.Cur < lim.Max {
		raised := lim
		raised.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised); err == nil {
			lim = raised
		} else {
			logger.Warn("cannot raise RLIMIT_NOFILE", "soft", lim.Cur, "hard", lim.Max, "err", err)
		}
	}
	maps := readMaxMapCount()
	files, mapped := logFileBudget(lim.Cur), mappedSegmentBudget(maps)
	storage.SetMaxOpenLogFiles(files)
	storage.SetMaxMappedSegments(mapped)
	logger.Info("storage limits", "nofile", lim.Cur, "log_files", files, "max_map_count", maps, "mapped_segments", mapped)
}

// logFileBudget is how many segment .log descriptors to cache under a
// descriptor limit of nofile: a quarter of it (at least 1,024) is left to
// sockets, checkpoint files and the runtime, and the rest is split evenly
// between the cache and evicted descriptors whose close is delayed for a
// Region in flight (storage bounds those to the cache's size).
func logFileBudget(nofile uint64) int {
	reserve := max(nofile/4, 1024)
	if nofile < reserve+64 {
		return 32
	}
	return int(min((nofile-reserve)/2, 1<<20))
}

// mappedSegmentBudget is how many segments may keep their two index files
// mapped under vm.max_map_count: a quarter of the count (at least 4,096)
// is left to the heap, stacks, binaries and network rings.
func mappedSegmentBudget(maxMapCount uint64) int {
	reserve := max(maxMapCount/4, 4096)
	if maxMapCount < reserve+64 {
		return 32
	}
	return int(min((maxMapCount-reserve)/2, 1<<20))
}

// readMaxMapCount is vm.max_map_count, or Linux's default if unreadable.
func readMaxMapCount() uint64 {
	b, err := os.ReadFile("/proc/sys/vm/max_map_count")
	if err == nil {
		if n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil {
			return n
		}
	}
	return 65530
}
