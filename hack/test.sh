#!/usr/bin/env bash
# Runs the Go tests of `make test`: the end-to-end suite as two processes (E2E_SHARD=1 and 2,
# each with its own bed; test/e2e/e2e_suite_test.go splits the specs by file) alongside the
# module's other packages, one package at a time: three processes on the machine's two cores,
# where one e2e process left a core mostly idle. The environment (IMAGES_DIR,
# KUBEBUILDER_ASSETS, ...) is the Makefile's. Each shard's output follows once it has ended; its
# slowest specs are in out/e2e-timings-<shard>.md.
#
# Usage: hack/test.sh [go test flags, e.g. -count=1]
set -uo pipefail
GO=${GO:-go}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=$root/out
mkdir -p "$out"
flags=(-timeout "${TEST_TIMEOUT:-45m}" "$@")

# Built once (compiled and vetted), so that the two shards do not both compile it.
if ! built=$("$GO" test "${flags[@]}" -run '^$' ./test/e2e 2>&1); then
  echo "$built"
  exit 1
fi

pids=()
for shard in 1 2; do
  E2E_SHARD=$shard E2E_TIMINGS=$out/e2e-timings-$shard.md \
    "$GO" test "${flags[@]}" ./test/e2e >"$out/e2e-$shard.log" 2>&1 &
  pids+=("$!")
done
# Stop the shards if this script is stopped.
trap 'kill "${pids[@]}" 2>/dev/null' EXIT

mapfile -t packages < <("$GO" list ./... | grep -v '/test/e2e$')
status=0
"$GO" test -p 1 "${flags[@]}" "${packages[@]}" || status=1

for shard in 1 2; do
  wait "${pids[$((shard - 1))]}" || status=1
  echo "--- end-to-end suite, shard $shard of 2 ---"
  cat "$out/e2e-$shard.log"
done
trap - EXIT
exit $status
