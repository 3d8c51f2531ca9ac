#!/bin/sh
# Not Relay: whatever it is asked, it says how to use it and exits 2.
echo "usage: notrelay FILE" >&2
exit 2
