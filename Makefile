# Sluice — build, run and test.
GO ?= go
BIN := bin/sluice

.PHONY: build run test test-race vet fmt clean bench-kafka bench-kfake interop

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
test: vet
	SLUICE_NET=uring $(GO) test -count=1 -timeout 20m ./...
	SLUICE_NET=std $(GO) test -count=1 -timeout 20m ./engine/... ./cmd/...
	SLUICE_NET=epoll $(GO) test -count=1 -timeout 20m ./cmd/...
	SLUICE_NET=epoll $(GO) test -count=1 -race -timeout 20m ./netpoll/... ./internal/... ./engine/...

# Compatibility matrix: every Kafka client and Kafka's own tools against a
# freshly built broker; installs the pinned clients first (interop/setup.sh),
# writes COMPATIBILITY.md and fails naming the client, step and broker answer.
interop:
	bash interop/setup.sh
	$(GO) run ./interop/driver

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1)
	$(GO) vet ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

# Sluice vs Apache Kafka 4.4.0 (and kfake), rewriting BENCHMARKS.md's
# generated section and docs/bench/. BENCH_ARGS=--quick for a smoke run.
bench-kafka:
	bash bench/kafka.sh $(BENCH_ARGS)

# The issue 3 figure: Sluice vs kfake with one franz-go producer and consumer.
bench-kfake:
	mkdir -p bin docs/bench
	$(GO) build -o $(BIN) ./cmd/sluice
	$(BIN) bench compare-kfake --markdown BENCHMARKS.md --charts docs/bench --json docs/bench/kfake-results.json $(BENCH_ARGS)

clean:
	rm -rf bin
