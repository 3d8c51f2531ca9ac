#!/usr/bin/env bash
# make bench: Go micro-benchmarks, then side-by-side load benchmarks from
# separate processes on loopback (fake-upstream under sinkload; blast vs
# vegeta against a null sink and against fake-upstream). Every run is bounded
# in time. The machine is shared: the load average is printed with each part,
# and ratios measured in one run are the figures to trust.
#
#   BENCH_COUNT=5      -count of the Go benchmarks (medians are reported by benchstat if installed)
#   BENCH_QUICK=1      shorter load runs
#   VEGETA=path        use this vegeta binary (default: go install into a temp dir)
set -euo pipefail
cd "$(dirname "$0")/.."
count=${BENCH_COUNT:-5}
dur=5s; [ -n "${BENCH_QUICK:-}" ] && dur=2s
out=${BENCH_OUT:-out/bench}
mkdir -p "$out" bin
loadavg() { echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"; }

echo "== Go benchmarks (-count $count) → $out/go.txt"; loadavg
go test -run '^$' -bench . -benchmem -count "$count" \
  ./envelope/ ./internal/compression/ ./internal/canary/ ./internal/statsd/ ./relayauth/ ./upstream/ ./internal/pool/ 2>&1 | tee "$out/go.txt" | grep -E '^(Benchmark|ok|FAIL)' || true

go build -o bin/ ./cmd/... ./internal/cmd/sinkload ./internal/cmd/blastbench

echo "== fake-upstream CPU per envelope (sinkload, separate processes)"; loadavg
bin/sinkload --spawn bin/fake-upstream --rate 20000 --duration "$dur" --bodies synthetic --connections 256 | tee "$out/sink-20k-synthetic.txt"
bin/sinkload --spawn bin/fake-upstream --rate 10000 --duration "$dur" --bodies pool --connections 256 | tee "$out/sink-10k-pool.txt"

echo "== blast vs vegeta (same rates, same null sink, one run)"; loadavg
vegeta=${VEGETA:-}
if [ -z "$vegeta" ]; then
  gobin=$(mktemp -d)
  trap 'rm -rf "$gobin"' EXIT
  if GOBIN="$gobin" go install github.com/tsenart/vegeta/v12@v12.13.0; then vegeta="$gobin/vegeta"; fi
fi
args=(-blast bin/blast -rates 10000,20000 -clients fasthttp,net/http -repeat 2 -duration "$dur")
[ -n "$vegeta" ] && args+=(-vegeta "$vegeta" -vegeta-workers default,128)
bin/blastbench "${args[@]}" | tee "$out/blast-vs-vegeta.txt"
loadavg
