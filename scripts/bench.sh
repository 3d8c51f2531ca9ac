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

# The comparison's calibration: false positives on held-out recordings and in
# simulation, and the resolution of a 10-minute design; a failure here means
# the verdicts lost their stated error rate.
echo "== the comparison's calibration (internal/compare)"
go test -run '^$' -bench 'HeldOut|SimulatedCoverage' -benchtime 1x ./internal/compare/ 2>&1 | tee "$out/compare.txt" | grep -E '^(ok|FAIL|---|\s+calibrate)' || true

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

# The harness's own CPU next to a relay's, per step, with the stand-in (a
# test fixture, not Relay: CI has none). Its cost per envelope is not
# Relay's, so read the harness's cores per 1,000 envelopes/s, not the share.
echo "== harness perturbation (orchestrate with the stand-in relay, capacity 1,000/s)"; loadavg
standin=$(mktemp -d)
go build -o "$standin/" ./internal/cmd/standin-relay
printf 'standin: {capacity: 1000}\n' > "$standin/config.yml"
hdur=10s; [ -n "${BENCH_QUICK:-}" ] && hdur=4s
bin/orchestrate --relay-bin "$standin/standin-relay" --relay-config "$standin/config.yml" --rates 200,600,900 \
  --rounds 2 --duration "$hdur" --idle 1s --quiet --out "$out/harness" > "$out/harness.log" 2>&1 || { echo "orchestrate failed:"; tail -5 "$out/harness.log"; }
python3 - "$out/harness/results.json" <<'PY' | tee "$out/harness-perturbation.txt"
import json, statistics, sys
steps = json.load(open(sys.argv[1]))["steps"]
print(f"{'rate':>6} {'harness cores':>14} {'per 1k/s':>9} {'relay cores':>12} {'share':>7}")
for rate in sorted({s["target_rate"] for s in steps}):
    got = [s["cpu"] for s in steps if s["target_rate"] == rate and s["cpu"].get("harness_cores")]
    if not got:
        continue
    h = statistics.median(c["harness_cores"] for c in got)
    r = statistics.median(c["load_cores"] for c in got)
    print(f"{rate:>6.0f} {h:>14.3f} {1000 * h / rate:>9.3f} {r:>12.3f} {100 * h / r if r else 0:>6.1f}%")
PY
rm -rf "$standin"
loadavg
