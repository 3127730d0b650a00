// Command benchcompare runs Sluice side by side with Apache Kafka and
// franz-go's kfake and writes BENCHMARKS.md's generated sections
// (`make bench-kafka`, `make bench-kfake`).
//
//	benchcompare kafka [flags]        Sluice vs Apache Kafka (and kfake)
//	benchcompare kfake [flags]        Sluice vs kfake, the issue 3 figure
//	benchcompare kafka-cluster [flags] three Sluice nodes vs three Kafka nodes
//	benchcompare share [flags]        ten share consumers on one partition, Sluice vs Kafka
//	benchcompare partitions [flags]   partition scale: one Sluice vs one Kafka broker
//	benchcompare report [flags]       re-render BENCHMARKS.md and charts from a saved --json
//	benchcompare rebalance [flags]    one member joining a group: classic vs KIP-848, Sluice vs Kafka
//	benchcompare tls [flags]          produce, catch-up and connection set-up over TLS and SCRAM, Sluice vs Kafka
//	benchcompare serve-kfake [flags]  serve kfake in this process (the runner starts it)
//
// It starts Sluice from the sluice binary beside it (--sluice-bin to
// choose another).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/sluice-broker/sluice/bench/compare"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	args := os.Args[2:]
	var err error
	switch os.Args[1] {
	case "kafka":
		err = compare.Main(ctx, args, compare.SuiteKafka)
	case "kfake":
		err = compare.Main(ctx, args, compare.SuiteKfake)
	case "kafka-cluster":
		err = compare.ClusterMain(ctx, args)
	case "share":
		err = compare.ShareMain(ctx, args)
	case "partitions":
		err = compare.PartitionsMain(ctx, args)
	case "report":
		err = compare.ReportMain(args)
	case "rebalance":
		err = compare.RebalanceMain(ctx, args)
	case "tls":
		err = compare.TLSMain(ctx, args)
	case "serve-kfake":
		err = compare.KfakeMain(ctx, args)
	case "help", "-h", "--help":
		usage()
	default:
		fmt.Fprintf(os.Stderr, "benchcompare: unknown command %q\n\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchcompare:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprint(os.Stderr, `benchcompare: Sluice side by side with Apache Kafka and kfake.

Usage:
  benchcompare kafka [flags]        Sluice vs Apache Kafka (and kfake); BENCHMARKS.md
  benchcompare kfake [flags]        Sluice vs kfake, one franz-go producer and consumer
  benchcompare kafka-cluster [flags] three Sluice nodes vs three Kafka 4.4 nodes (RF=3,
                                    failover, metadata, 10,000 partitions); BENCHMARKS.md
  benchcompare share [flags]        ten share consumers of one partition acknowledging every
                                    record: records/s, redelivery p50/p99, Sluice vs Kafka 4.4
  benchcompare partitions [flags]   thousands of partitions on one Sluice and one Kafka
                                    broker: creation, memory, Metadata, stop, cold start
  benchcompare report [flags]       re-render BENCHMARKS.md and charts from a saved --json
  benchcompare rebalance [flags]    one member joining a group: classic vs KIP-848, Sluice vs Kafka
  benchcompare tls [flags]          produce, catch-up and connection set-up (TLS, SCRAM-SHA-512)
                                    over PLAINTEXT and SSL, Sluice vs Kafka 4.4; tables on stdout
  benchcompare serve-kfake [flags]  serve franz-go's kfake broker (started by the runner)

Flags of each: benchcompare COMMAND -h.
`)
}
