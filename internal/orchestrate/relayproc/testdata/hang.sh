#!/bin/sh
# Not Relay: ignores --version and keeps running, its child holding the output.
sleep "${HANG_SECONDS:-600}"
