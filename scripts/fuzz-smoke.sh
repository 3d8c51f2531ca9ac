#!/usr/bin/env bash
# Runs every fuzz target of the module for FUZZTIME (default 5s) each.
# go test -fuzz takes one package and one target at a time, hence the loop.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-5s}
status=0
for pkg in $(go list ./...); do
  for target in $(go test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true); do
    echo "== $pkg $target ($fuzztime)"
    if ! go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg" 2>&1 | tail -n 3; then
      status=1
    fi
  done
done
exit $status
