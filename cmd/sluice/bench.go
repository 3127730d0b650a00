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
//	sluice bench compare [flags]         Sluice vs Apache Kafka (and kfake), BENCHMARKS.md
//	sluice bench compare-kfake [flags]   Sluice vs kfake, the issue 3 figure
//	sluice bench limits [flags]          the machine's loopback sendfile and write limits
//	sluice bench kfake [flags]           serve franz-go's kfake broker (a comparison helper)
func benchCmd(args []string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(args) > 0 {
		switch args[0] {
		case "compare":
			return bench.CompareMain(ctx, args[1:], bench.SuiteKafka)
		case "compare-kfake":
			return bench.CompareMain(ctx, args[1:], bench.SuiteKfake)
		case "limits":
			return benchLimits(args[1:])
		case "kfake":
			return bench.KfakeMain(ctx, args[1:])
		}
	}
	return benchRun(ctx, args)
}

func benchRun(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: sluice bench [flags]
       sluice bench compare|compare-kfake|limits|kfake [flags]

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
