#!/bin/sh
"$WRAPPED_BIN" "$@"
