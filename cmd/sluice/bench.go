package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
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
//	sluice bench partitions [flags]      partition scale: create, write, idle, Metadata, stop, cold start
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
		case "partitions":
			return benchPartitions(ctx, args[1:])
		}
	}
	return benchRun(ctx, args)
}

func benchRun(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: sluice bench [flags]
       sluice bench limits|zcprobe|partitions [flags]

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
	quiet := bench.Quiet{}
	brokerCPUs := fs.String("broker-cpus", "", "pin every broker thread to these CPUs (taskset -c syntax; root; finds the pid listening on the first broker address)")
	clientCPUs := fs.String("client-cpus", "", "pin this load generator to these CPUs (taskset -c syntax)")
	fs.IntVar(&quiet.BrokerFIFO, "broker-fifo", 0, "run the broker's threads under SCHED_FIFO at this priority (1-99) for the run, then back to SCHED_OTHER (root)")
	fs.IntVar(&quiet.ClientFIFO, "client-fifo", 0, "run this load generator under SCHED_FIFO at this priority (1-99; root)")
	fs.IntVar(&quiet.BrokerPid, "broker-pid", 0, "the broker's pid for --broker-cpus/--broker-fifo instead of the listener's")
	fs.IntVar(&quiet.ClientGOMAXPROCS, "client-gomaxprocs", 0, "GOMAXPROCS of this load generator (0 = leave)")
	fs.IntVar(&quiet.ClientGOGC, "client-gogc", 0, "GOGC of this load generator (0 = leave)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	var err error
	if quiet.BrokerCPUs, err = bench.ParseCPUList(*brokerCPUs); err != nil {
		return err
	}
	if quiet.ClientCPUs, err = bench.ParseCPUList(*clientCPUs); err != nil {
		return err
	}
	if quiet.Active() {
		undo, err := quiet.Apply(cfg.Brokers[0])
		defer undo()
		if err != nil {
			return err
		}
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
	fmt.Printf("loopback sendfile:  %8.0f MB/s, sender %.3f CPU-s/GB\n", l.SendfileMBps, l.SendfileCPUPerGB)
	fmt.Printf("sequential write:   %8.0f MB/s (page cache), %.0f MB/s including fdatasync\n", l.WriteMBps, l.WriteSyncMBps)
	fmt.Printf("receive and write:  %8.0f MB/s, receiver %.3f CPU-s/GB (socket copy + page-cache copy)\n", l.ReceiveWriteMBps, l.ReceiveWriteCPUPerGB)
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

// benchPartitions is `sluice bench partitions`: the partition-scale
// workload against a broker it starts (Sluice from a binary, or Apache
// Kafka from its jars) or one already running.
func benchPartitions(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench partitions", flag.ContinueOnError)
	cfg := bench.PartitionScaleConfig{Log: os.Stderr}
	fs.IntVar(&cfg.Partitions, "partitions", 1000, "partitions in all")
	fs.IntVar(&cfg.Topics, "topics", 10, "topics they are spread over (one CreateTopics each)")
	fs.DurationVar(&cfg.Idle, "idle", 5*time.Second, "how long idle CPU is measured")
	fs.IntVar(&cfg.MetadataSamples, "metadata-samples", 9, "full Metadata requests timed (median reported)")
	fs.DurationVar(&cfg.Timeout, "timeout", 10*time.Minute, "bound on each step")
	sluiceBin := fs.String("sluice", "", "sluice binary to start (default: this one) unless --kafka-libs or --bootstrap")
	kafkaLibs := fs.String("kafka-libs", "", "start Apache Kafka (single-node KRaft) from the jars in this directory instead")
	java := fs.String("java", "java", "java binary for --kafka-libs")
	heap := fs.String("kafka-heap", "1G", "Kafka's -Xms/-Xmx")
	bootstrap := fs.String("bootstrap", "", "measure a broker already running at HOST:PORT (no shutdown or cold start)")
	fs.IntVar(&cfg.Pid, "pid", 0, "with --bootstrap: the broker's pid, for memory and CPU")
	dataDir := fs.String("data-dir", "", "data directory of the started broker (default: a temporary one, removed after)")
	jsonOut := fs.String("json", "", "write the result as JSON to this file")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if *bootstrap != "" {
		cfg.Bootstrap = *bootstrap
	} else {
		dir, cleanup, err := scaleDataDir(*dataDir)
		if err != nil {
			return err
		}
		defer cleanup()
		if err := startedBroker(&cfg, dir, *sluiceBin, *kafkaLibs, *java, *heap); err != nil {
			return err
		}
	}
	res, err := bench.RunPartitionScale(ctx, cfg)
	if res != nil {
		res.WriteText(os.Stdout)
		if *jsonOut != "" {
			if jerr := bench.WriteJSONFile(*jsonOut, res); jerr != nil && err == nil {
				err = jerr
			}
		}
	}
	return err
}

// startedBroker sets cfg up to start Kafka (libs given) or Sluice on dir,
// listening on free 127.0.0.1 ports.
func startedBroker(cfg *bench.PartitionScaleConfig, dir, sluiceBin, kafkaLibs, java, heap string) error {
	port, err := freeLocalPort()
	if err != nil {
		return err
	}
	cfg.Bootstrap = fmt.Sprintf("127.0.0.1:%d", port)
	if kafkaLibs != "" {
		cport, err := freeLocalPort()
		if err != nil {
			return err
		}
		cfg.Command, err = bench.KafkaCommand(java, kafkaLibs, dir, port, cport, heap)
		return err
	}
	if sluiceBin == "" {
		if sluiceBin, err = os.Executable(); err != nil {
			return err
		}
	}
	cfg.Command = bench.SluiceCommand(sluiceBin, cfg.Bootstrap, dir)
	return nil
}

func scaleDataDir(dir string) (string, func(), error) {
	if dir != "" {
		return dir, func() {}, os.MkdirAll(dir, 0o755)
	}
	dir, err := os.MkdirTemp("", "sluice-bench-partitions-")
	return dir, func() { os.RemoveAll(dir) }, err
}

// freeLocalPort is a TCP port free on 127.0.0.1 just now.
func freeLocalPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
