#!/usr/bin/env bash
# Runs a command and records how long it took: a line "<name> <seconds> <exit status>" appended
# to $TIMINGS (default out/timings.txt), and "<name>: <seconds> s" on stderr. `make test` times
# each of its phases with it (docs/development.md gives the figures).
#
# Usage: hack/timed.sh <name> <command> [args...]
set -uo pipefail
name=${1:?usage: hack/timed.sh <name> <command> [args...]}
shift
root=$(cd "$(dirname "$0")/.." && pwd)
timings=${TIMINGS:-$root/out/timings.txt}
mkdir -p "$(dirname "$timings")"
start=$(date +%s)
"$@"
status=$?
took=$(($(date +%s) - start))
echo "$name $took $status" >>"$timings"
echo "$name: $took s" >&2
exit $status
