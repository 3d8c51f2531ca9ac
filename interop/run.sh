#!/usr/bin/env bash
# Interop suite: relayload's Go code against Sentry's own code (pinned
# sentry-relay / sentry-sdk in interop/.venv). Builds the Go programs the
# tests run (interop-helper, fake-upstream, blast, standin-relay) into a
# temporary directory, exports their paths and runs pytest; extra arguments
# go to pytest.
# Exits non-zero on any failure, including "no tests collected" (pytest exit 5).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
venv="$here/.venv"
GO="${GO:-go}"

if [ ! -x "$venv/bin/python" ]; then
	echo "interop: creating $venv"
	python3 -m venv "$venv"
fi
# Reinstall only when requirements.txt changed since the last install.
stamp="$venv/.requirements.sha256"
want="$(sha256sum "$here/requirements.txt" | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
	echo "interop: installing requirements"
	"$venv/bin/python" -m pip install -q -r "$here/requirements.txt"
	echo "$want" >"$stamp"
fi

bindir="$(mktemp -d)"
trap 'rm -rf "$bindir"' EXIT
(cd "$root" && "$GO" build -o "$bindir/" ./internal/cmd/interop-helper ./cmd/fake-upstream ./cmd/blast ./internal/cmd/standin-relay)
export INTEROP_HELPER="$bindir/interop-helper"
export INTEROP_FAKE_UPSTREAM="$bindir/fake-upstream"
export INTEROP_BLAST="$bindir/blast"
export INTEROP_STANDIN_RELAY="$bindir/standin-relay"

cd "$here"
rc=0
"$venv/bin/python" -m pytest -p no:cacheprovider -q "$@" || rc=$?
if [ "$rc" -eq 5 ]; then
	echo "interop: pytest collected no tests" >&2
	exit 1
fi
exit "$rc"
