#!/usr/bin/env bash
# Sluice vs Apache Kafka, side by side (`make bench-kafka`).
#
# Fetches Apache Kafka's jars from Maven Central once (bench/kafka/pom.xml,
# into ~/.cache/sluice-bench/kafka-VERSION/libs), builds bin/sluice and
# bin/benchcompare, and runs `benchcompare kafka`, which starts Kafka, Sluice
# and kfake in turn on fresh data dirs, runs the workloads, and rewrites the
# generated part of BENCHMARKS.md, the charts in docs/bench/ and
# docs/bench/kafka-results.json.
#
# Arguments go to `benchcompare kafka`: e.g. --quick, --rounds 1,
# --only produce-1p-acks1,catch-up, --brokers kafka,sluice; then
# `benchcompare partitions` runs 1,000 partitions on each broker.
# With --cluster first (`make bench-kafka-cluster`), runs `benchcompare
# kafka-cluster` instead: three Kafka nodes against three Sluice nodes,
# writing BENCHMARKS.md's three-node section and docs/bench/cluster-*.
# With --partitions first (`make bench-kafka-partitions`), runs
# `benchcompare partitions` at 1,000, 10,000 (both) and 50,000 (Sluice)
# partitions: BENCHMARKS.md's "Partition scale".
# With --tls first (`make bench-kafka-tls`), runs `benchcompare tls`:
# produce, catch-up and connection set-up over TLS and SCRAM-SHA-512, the
# tables on stdout and the runs in docs/bench/tls-results.json.
# Needs java (17+) and mvn; run as root to get the zero-copy fraction.
set -euo pipefail
cd "$(dirname "$0")/.."

KAFKA_VERSION=4.4.0
CACHE="${SLUICE_BENCH_CACHE:-$HOME/.cache/sluice-bench}/kafka-$KAFKA_VERSION"
LIBS="$CACHE/libs"

if [ ! -f "$LIBS/kafka_2.13-$KAFKA_VERSION.jar" ]; then
	command -v mvn >/dev/null || { echo "bench/kafka.sh: needs mvn to fetch Kafka (apt-get install maven)" >&2; exit 1; }
	echo "bench/kafka.sh: fetching Apache Kafka $KAFKA_VERSION from Maven Central into $LIBS" >&2
	rm -rf "$LIBS.tmp"
	mvn -q -B -f bench/kafka/pom.xml dependency:copy-dependencies \
		-DincludeScope=runtime -DoutputDirectory="$LIBS.tmp"
	rm -rf "$LIBS"
	mv "$LIBS.tmp" "$LIBS"
fi
command -v java >/dev/null || echo "bench/kafka.sh: no java: Kafka will be left out" >&2

mkdir -p bin docs/bench
go build -o bin/sluice ./cmd/sluice
go build -o bin/benchcompare ./bench/cmd/benchcompare
if [ "${1:-}" = "--cluster" ]; then
	shift
	exec bin/benchcompare kafka-cluster --kafka-libs "$LIBS" \
		--markdown BENCHMARKS.md --charts docs/bench --json docs/bench/kafka-cluster-results.json "$@"
fi
if [ "${1:-}" = "--tls" ]; then # make bench-kafka-tls
	shift
	exec bin/benchcompare tls --kafka-libs "$LIBS" --json docs/bench/tls-results.json "$@"
fi
if [ "${1:-}" = "--partitions" ]; then # make bench-kafka-partitions: 1,000 to 50,000 partitions
	shift
	exec bin/benchcompare partitions --kafka-libs "$LIBS" --sizes 1000,10000,50000 --kafka-sizes 1000,10000 \
		--markdown BENCHMARKS.md --json docs/bench/partitions-results.json "$@"
fi
bin/benchcompare kafka --kafka-libs "$LIBS" \
	--markdown BENCHMARKS.md --charts docs/bench --json docs/bench/kafka-results.json "$@"
# The partition-scale workload at 1,000 partitions, about a minute (Kafka's
# JVM starts twice); `make bench-kafka-partitions` runs the larger sizes.
exec bin/benchcompare partitions --kafka-libs "$LIBS" --sizes 1000 --section partition-scale-1000 \
	--markdown BENCHMARKS.md --json docs/bench/partitions-1000-results.json
