# Sluice — build, run and test.
GO ?= go
BIN := bin/sluice
# The packages `make unit` tests: e.g. make unit PKG=./storage
PKG ?= ./...

.PHONY: build run test unit vet fmt clean bench-kafka bench-kafka-tls bench-kafka-cluster bench-kafka-partitions bench-kfake benchcompare interop interop-doc

build:
	$(GO) build -o $(BIN) ./cmd/sluice

# Runs a broker with embedded defaults: localhost:9092, data in ./data.
run:
	$(GO) run ./cmd/sluice serve

# Every test: unit, fuzz seed corpora, end-to-end against real brokers.
# The end-to-end suites (engine, cmd) run in full once per network backend,
# picked by SLUICE_NET: uring with everything else, std again, and epoll
# under the race detector (engine; that pass existed anyway, so epoll adds
# only the short cmd suite). netpoll's own tests are a matrix over all three.
# storage runs under the race detector too: its readers take no lock.
test: vet
	SLUICE_NET=uring $(GO) test -count=1 -timeout 20m ./...
	SLUICE_NET=std $(GO) test -count=1 -timeout 20m ./engine/... ./cmd/...
	SLUICE_NET=epoll $(GO) test -count=1 -timeout 20m ./cmd/...
	SLUICE_NET=epoll $(GO) test -count=1 -race -timeout 20m ./netpoll/... ./internal/... ./engine/... ./storage/...

# The edit-test loop: unit tests only (-short skips the suites that start
# brokers or clients), one backend, no race detector. PKG picks packages.
unit:
	$(GO) test -short -count=1 $(PKG)

# Compatibility matrix: every Kafka client and Kafka's own tools against a
# freshly built broker; installs the pinned clients first (interop/setup.sh)
# and fails naming the client, step and broker answer. The matrix goes to
# bin/COMPATIBILITY.md; interop-doc rewrites the tracked COMPATIBILITY.md.
interop:
	bash interop/setup.sh
	$(GO) run ./interop/driver

interop-doc:
	bash interop/setup.sh
	$(GO) run ./interop/driver -out COMPATIBILITY.md

# gofmt, go.mod tidy, go vet and staticcheck (pinned as a tool in go.mod).
vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1)
	$(GO) mod tidy -diff
	$(GO) vet ./...
	$(GO) tool staticcheck ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

# The side-by-side runner, beside bin/sluice (it starts Sluice from there).
benchcompare:
	mkdir -p bin
	$(GO) build -o $(BIN) ./cmd/sluice
	$(GO) build -o bin/benchcompare ./bench/cmd/benchcompare

# Sluice vs Apache Kafka 4.4.0 (and kfake), rewriting BENCHMARKS.md's
# generated section and docs/bench/. BENCH_ARGS=--quick for a smoke run.
bench-kafka:
	bash bench/kafka.sh $(BENCH_ARGS)

# Sluice vs Kafka 4.4.0 over TLS and SASL_SSL (SCRAM-SHA-512): BENCHMARKS.md's "TLS and SASL".
bench-kafka-tls:
	bash bench/kafka.sh --tls $(BENCH_ARGS)

# Three Sluice nodes vs three Kafka 4.4.0 nodes (RF=3 produce, failover,
# metadata, 10,000 partitions): BENCHMARKS.md's "Three-node cluster".
bench-kafka-cluster:
	bash bench/kafka.sh --cluster $(BENCH_ARGS)

# One Sluice vs one Kafka 4.4.0 broker at 1,000, 10,000 and (Sluice only)
# 50,000 partitions: BENCHMARKS.md's "Partition scale" (make bench-kafka
# runs 1,000 only).
bench-kafka-partitions:
	bash bench/kafka.sh --partitions $(BENCH_ARGS)

# The issue 3 figure: Sluice vs kfake with one franz-go producer and consumer.
bench-kfake: benchcompare
	mkdir -p docs/bench
	bin/benchcompare kfake --markdown BENCHMARKS.md --charts docs/bench --json docs/bench/kfake-results.json $(BENCH_ARGS)

clean:
	rm -rf bin

# Fault injection (issue 12, tools/chaos): brokers in network namespaces
# under kills, pauses, rolling restarts, network partitions, a full disk
# and a new broker, checked Jepsen-style; needs root. A long run:
# make chaos CHAOS_ARGS='--duration 30m' (RELIABILITY.md).
.PHONY: chaos
chaos: build
	$(GO) run ./tools/chaos --bin $(BIN) $(CHAOS_ARGS)
