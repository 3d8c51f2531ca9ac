#!/usr/bin/env bash
# make demo: the harness check, without a Relay. orchestrate measures the
# harness itself (blast → fake-upstream in one process, same report as with
# a Relay) and bisects for the highest rate it keeps up with: the ceiling
# for any Relay measurement on this machine. Bounded: at most 6 probes of 3 s
# windows (under a minute on 2 cores); report and charts in out/demo/.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${DEMO_OUT:-out/demo}
echo "make demo: no --relay-bin, so orchestrate measures the harness itself (blast → fake-upstream)."
echo "With a Relay: bin/orchestrate --relay-bin ~/relay/target/release/relay --rates 200,500,1000"
bin/orchestrate --find-max --rates "${DEMO_RATES:-5000,60000}" --find-max-probes 6 \
	--duration 3s --warmup 500ms --idle 0s --pool 2000 --out "$out"
echo "report: $out/report.md (results.json, results.csv, *.svg)"
