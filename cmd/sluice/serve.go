package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/sluice-broker/sluice/engine"
	"github.com/sluice-broker/sluice/internal/server"
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
	backend, loops, err := netSettings(f)
	if err != nil {
		return err
	}
	srv, err := server.Start(server.Options{Config: cfg, Logger: logger, Metrics: f.metrics, Net: backend, NetLoops: loops})
	if err != nil {
		return err
	}
	return waitAndStop(srv, logger)
}

// loadConfig layers: embedded defaults, then the config file, then flags.
func loadConfig(f serveFlags, logger *slog.Logger) (engine.Config, error) {
	cfg := engine.DefaultConfig()
	if f.config != "" {
		file, err := os.Open(f.config)
		if err != nil {
			return cfg, err
		}
		unknown, err := cfg.ApplyProperties(file)
		file.Close()
		if err != nil {
			return cfg, fmt.Errorf("%s: %w", f.config, err)
		}
		for _, k := range unknown {
			if isNetKey(k) {
				continue
			}
			logger.Warn("unknown config key ignored", "file", f.config, "key", k)
		}
	}
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
	return cfg, nil
}

// waitAndStop serves until SIGINT/SIGTERM, then stops accepting, finishes
// in-flight requests, flushes and marks a clean shutdown.
func waitAndStop(srv *server.Server, logger *slog.Logger) error {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	select {
	case s := <-sig:
		logger.Info("shutting down", "signal", s.String())
	case err := <-srv.Done():
		if err != nil {
			logger.Error("listener failed", "err", err)
		}
	}
	signal.Stop(sig)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
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
