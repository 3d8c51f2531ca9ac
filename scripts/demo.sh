#!/usr/bin/env bash
# make demo: the main job without a Relay. orchestrate measures the harness
# itself (blast → fake-upstream in one process, same report as with a Relay):
# three rates (1000, 5000, 10000/s), 5 s each, report and charts in out/demo/.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${DEMO_OUT:-out/demo}
echo "make demo: no --relay-bin, so orchestrate measures the harness itself (blast → fake-upstream)."
echo "With a Relay: bin/orchestrate --relay-bin ~/relay/target/release/relay --rates 200,500,1000"
bin/orchestrate --rates "${DEMO_RATES:-1000,5000,10000}" --duration 5s --warmup 1s --idle 1s --out "$out"
echo "report: $out/report.md (results.json, results.csv, *.svg)"
