#!/usr/bin/env bash
# Runs the Go tests of `make test`: the end-to-end suite as two processes (E2E_SHARD=1 and 2,
# each with its own bed; test/e2e/e2e_suite_test.go splits the specs by file) alongside the
# module's other packages as two more, one package at a time each: four processes on the
# machine's two cores, where one e2e process left a core mostly idle. The environment
# (IMAGES_DIR, KUBEBUILDER_ASSETS, ...) is the Makefile's. The first half of the packages
# prints as it runs; the second half's output and each shard's follow once they have ended; a
# shard's slowest specs are in out/e2e-timings-<shard>.md.
#
# Usage: hack/test.sh [go test flags, e.g. -count=1]
set -uo pipefail
GO=${GO:-go}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=$root/out
mkdir -p "$out"
flags=(-timeout "${TEST_TIMEOUT:-70m}" "$@")

# Built once (compiled and vetted), so that the two shards do not both compile it.
if ! built=$("$GO" test "${flags[@]}" -run '^$' ./test/e2e 2>&1); then
  echo "$built"
  exit 1
fi
if ! all=$("$GO" list ./...); then
  exit 1
fi
# The other packages run as two processes, one package at a time each: as one, it ended about
# eight minutes after the shards (out/test-processes.txt), since the shards' many processes took
# most of the cores. The first takes the simulated Harvester's, the bed's and the config tests
# (about half of the packages' time), the second the rest.
first='/test/(harvestersim|bed|config)$'
mapfile -t packages1 < <(grep -E "$first" <<<"$all")
mapfile -t packages2 < <(grep -v '/test/e2e$' <<<"$all" | grep -Ev "$first")

# Each run is a job of its own process group (job control on), so that stopping this script
# stops the test binaries too: go test passes no SIGTERM on to the binary it runs. The script
# waits with `wait`, which a signal interrupts, so its traps run at once.
groups=()
stop() {
  local g
  for g in "${groups[@]}"; do
    kill -TERM -- "-$g" 2>/dev/null
  done
}
trap stop EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP
# Each process writes when it ended (seconds from the start of the three) and its exit status
# to out/test-processes.txt: the phase ends with the slowest, so this says which to shorten.
start=$(date +%s)
: >"$out/test-processes.txt"
timed() {
  local name=$1 rc=0
  shift
  "$@" || rc=$?
  echo "$name $(($(date +%s) - start)) s, exit $rc" >>"$out/test-processes.txt"
  return "$rc"
}
set -m
for shard in 1 2; do
  E2E_SHARD=$shard E2E_TIMINGS=$out/e2e-timings-$shard.md \
    timed "e2e-$shard" "$GO" test "${flags[@]}" ./test/e2e >"$out/e2e-$shard.log" 2>&1 &
  groups+=("$!")
done
timed packages-1 "$GO" test -p 1 "${flags[@]}" "${packages1[@]}" &
groups+=("$!")
timed packages-2 "$GO" test -p 1 "${flags[@]}" "${packages2[@]}" >"$out/packages-2.log" 2>&1 &
groups+=("$!")
set +m

status=0
wait "${groups[2]}" || status=1
wait "${groups[3]}" || status=1
echo "--- the other packages, second half ---"
cat "$out/packages-2.log"
for shard in 1 2; do
  wait "${groups[$((shard - 1))]}" || status=1
  echo "--- end-to-end suite, shard $shard of 2 ---"
  cat "$out/e2e-$shard.log"
done
echo "--- when each process ended ---"
cat "$out/test-processes.txt"
if [ "$status" -ne 0 ]; then
  # The end of make test's output is often all a reader (or CI's summary) sees: the first
  # failed spec's message, without colours, cut short, comes last.
  for shard in 1 2; do
    first=$(sed 's/\x1b\[[0-9;]*m//g' "$out/e2e-$shard.log" |
      awk '/^ *\[FAILED\] / && !seen {on=1; seen=1} on {print} on && /In \[[A-Za-z]+\] at:/ {exit}' |
      cut -c1-180 | head -n 22)
    if [ -n "$first" ]; then
      echo "--- shard $shard's first failure, in short (all of it in out/e2e-$shard.log) ---"
      echo "$first"
    fi
  done
fi
exit $status
