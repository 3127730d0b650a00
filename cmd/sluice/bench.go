package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sluice-broker/sluice/bench"
)

// benchCmd is `sluice bench`: the load generator, and its sub-commands.
//
//	sluice bench [flags]                 one load run against --brokers
//	sluice bench limits [flags]          the machine's loopback sendfile and write limits
//	sluice bench zcprobe [flags]         count a process's zero-copy vs copied socket bytes (eBPF, root)
//
// The side-by-side runner (Sluice vs Kafka vs kfake) is a command of its
// own, bench/cmd/benchcompare, so this binary links no test broker.
func benchCmd(args []string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(args) > 0 {
		switch args[0] {
		case "limits":
			return benchLimits(args[1:])
		case "zcprobe":
			return benchZCProbe(ctx, args[1:])
		}
	}
	return benchRun(ctx, args)
}

func benchRun(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: sluice bench [flags]
       sluice bench limits|zcprobe [flags]

Produces and consumes through franz-go against any Kafka-compatible broker and
reports throughput and produce-ack / end-to-end latency percentiles.

`)
		fs.PrintDefaults()
	}
	cfg := bench.DefaultConfig()
	cfg.RegisterFlags(fs)
	jsonOut := fs.String("json", "", "write the result as JSON to this file")
	zc := fs.Bool("zcprobe", false, "trace the broker with eBPF and report its zero-copy fraction (root; finds the pid listening on the first broker address)")
	zcPid := fs.Int("zcprobe-pid", 0, "pid to trace with --zcprobe instead of the listener's")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	var probe *bench.ZeroCopyProbe
	if *zc || *zcPid != 0 {
		p, err := bench.StartZeroCopyProbe(cfg.Brokers[0], *zcPid)
		if err != nil {
			fmt.Fprintln(os.Stderr, "sluice bench: zcprobe:", err)
		} else {
			probe = p
			defer probe.Close()
		}
	}
	res, err := bench.Run(ctx, cfg, os.Stderr)
	if res != nil {
		if probe != nil {
			zc := probe.Read()
			res.ZeroCopy = &zc
		}
		res.WriteText(os.Stdout)
		if *jsonOut != "" {
			if jerr := bench.WriteJSONFile(*jsonOut, res); jerr != nil && err == nil {
				err = jerr
			}
		}
	}
	return err
}

func benchLimits(args []string) error {
	fs := flag.NewFlagSet("bench limits", flag.ContinueOnError)
	dir := fs.String("dir", os.TempDir(), "directory on the data disk for the scratch files")
	size := fs.Int64("file-bytes", 256<<20, "scratch file size")
	d := fs.Duration("duration", 3*time.Second, "how long each measurement runs")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	l, err := bench.MeasureLimits(*dir, *size, *d)
	if err != nil {
		return err
	}
	fmt.Printf("loopback sendfile:  %8.0f MB/s\n", l.SendfileMBps)
	fmt.Printf("sequential write:   %8.0f MB/s (page cache), %.0f MB/s including fdatasync\n", l.WriteMBps, l.WriteSyncMBps)
	return nil
}

func benchZCProbe(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench zcprobe", flag.ContinueOnError)
	pid := fs.Int("pid", 0, "process to trace")
	addr := fs.String("listener", "127.0.0.1:9092", "trace the process listening on this address (if no --pid)")
	d := fs.Duration("duration", 10*time.Second, "how long to count (or until interrupted)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	p, err := bench.StartZeroCopyProbe(*addr, *pid)
	if err != nil {
		return err
	}
	defer p.Close()
	select {
	case <-ctx.Done():
	case <-time.After(*d):
	}
	r := p.Read()
	fmt.Printf("pid %d: zero-copy fraction %.4f: %d bytes zero-copy, %d copied\n", r.Pid, r.Fraction, r.ZeroCopyBytes, r.CopiedBytes)
	fmt.Printf("  sendfile %d, splice %d, write family %d (sockets %d, files %d, closed fds %d)\n",
		r.Counts.SendfileBytes, r.Counts.SpliceBytes, r.Counts.WriteBytes, r.Counts.SocketWriteBytes, r.Counts.FileWriteBytes, r.Counts.GoneWriteBytes)
	fmt.Printf("  method: %s\n", r.Counts.Method)
	if r.FallbackReason != "" {
		fmt.Printf("  (fexit unavailable: %s)\n", r.FallbackReason)
	}
	return nil
}
