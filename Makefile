# Sluice — build, run and test.
GO ?= go
BIN := bin/sluice

.PHONY: build run test test-race vet fmt clean

build:
	$(GO) build -o $(BIN) ./cmd/sluice

# Runs a broker with embedded defaults: localhost:9092, data in ./data.
run:
	$(GO) run ./cmd/sluice serve

# Every test: unit, fuzz seed corpora, end-to-end against real brokers.
# The engine's end-to-end suite also runs under the race detector.
test: vet
	$(GO) test -count=1 -timeout 20m ./...
	$(GO) test -count=1 -race -timeout 20m ./netpoll/... ./internal/... ./engine/...

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1)
	$(GO) vet ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf bin
