#!/bin/sh
# Not Relay: asked to run, it daemonizes as a service would (a child in a
# session of its own, setsid, that outlives it) and exits 0 once the
# daemon has left its process group. The daemon sleeps $DAEMON_SLEEP
# seconds, which a test makes unique to find it by.
[ "$1" = --version ] && { echo "daemonizing-not-relay 1.0"; exit 0; }
ready=$(mktemp -u)
setsid sh -c 'touch "$0"; exec sleep "$1"' "$ready" "${DAEMON_SLEEP:-600}" </dev/null >/dev/null 2>&1 &
while [ ! -e "$ready" ]; do sleep 0.05; done
rm -f "$ready"
exit 0
