# relayload — build, test and measure. `make help` lists the targets.
GO      ?= go
BIN     := bin
PKGS    := ./...
FUZZTIME ?= 5s

.PHONY: help build test interop bench fuzz lint demo relay-report e2e clean

help:
	@echo "make demo     the harness check: what blast and the fake upstream move alone, the ceiling of any measurement here"
	@echo "make test     go test -p 3 -race -count=1 ./... (the test command CI runs, uncached)"
	@echo "make interop  checks against Sentry's own code (pinned sentry-relay, sentry-sdk in a venv)"
	@echo "make lint     gofmt, go vet, go mod tidy -diff, no pointers outside the repo"
	@echo "make fuzz     a short smoke run of every fuzz target (FUZZTIME=$(FUZZTIME) each)"
	@echo "make bench    Go benchmarks and side-by-side load benchmarks; installs vegeta v12.13.0 with go install"
	@echo "              into a temp dir (needs the Go module proxy; VEGETA=path uses yours; if it fails, blast runs alone)"
	@echo "make build    binaries in $(BIN)/"
	@echo "make clean    remove $(BIN)/"
	@echo "make help     this list"
	@echo "make relay-report RELAY_BIN=PATH  cost per kind, capacity, max rate, perf of errors: one report in out/relay-report/"
	@echo "make e2e RELAY_BIN=PATH           the tests against a real Relay (skipped without RELAY_BIN)"

build:
	$(GO) build -o $(BIN)/ ./cmd/...

# -p 3: much of the suite waits on real processes, sockets and timers (about
# 1.2 of 2 cores busy with -p 2), so three packages run at once.
test:
	@echo "make test: the whole suite, uncached, takes about 4-6 minutes on a 2-CPU machine (longer while"
	@echo "           it is busy); a line per package comes as the packages finish, long gaps are normal."
	$(GO) test -p 3 -race -count=1 -parallel 4 -timeout 15m $(PKGS)

interop:
	bash interop/run.sh

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	@$(GO) mod tidy -diff || { echo "go.mod/go.sum are not what go mod tidy makes them (see above): run go mod tidy"; exit 1; }
	@! git grep -n '\.\./shared' -- . ':!Makefile' || { echo "the repo must stand alone: the lines above point outside it"; exit 1; }

fuzz:
	FUZZTIME=$(FUZZTIME) bash scripts/fuzz-smoke.sh

bench:
	bash scripts/bench.sh

demo: build
	bash scripts/demo.sh

# Measures the Relay you built yourself; nothing here fetches or builds one.
relay-report: build
	@test -n "$(RELAY_BIN)" || { echo "make relay-report needs RELAY_BIN=path/to/relay"; exit 2; }
	$(BIN)/orchestrate relay-report --relay-bin "$(RELAY_BIN)" --out out/relay-report $(if $(PERF),--perf,) $(if $(DURATION),--duration $(DURATION),)

e2e:
	RELAY_BIN="$(RELAY_BIN)" $(GO) test -count=1 -v -timeout 30m ./e2e/

clean:
	rm -rf $(BIN)
