#!/usr/bin/env bash
# Runs every Go fuzz target of the module for FUZZTIME each (one `go test -fuzz` invocation per
# target: Go fuzzes one target at a time), for `make fuzz`. `make test` replays their seeds only,
# as plain `go test` does.
# A crasher the fuzzer finds is written to the package's testdata/fuzz/<Target>/ and fails the
# run; commit it as a regression seed once the bug is fixed (plain `go test` replays it).
set -euo pipefail
FUZZTIME=${FUZZTIME:-5s}
cd "$(dirname "$0")/.."
status=0
while IFS=: read -r file name; do
  pkg=./$(dirname "$file")
  echo "fuzz: $name in $pkg for $FUZZTIME"
  # Go's fuzzer sometimes fails a run with "context deadline exceeded" when the time runs out
  # while a worker is busy, without a crasher: such a run is tried once more. A failure that
  # wrote a crasher (testdata/fuzz/<target>/) is never retried.
  for attempt in 1 2; do
    before=$( (ls "$pkg/testdata/fuzz/$name" 2>/dev/null || true) | wc -l)
    out=$(mktemp)
    if go test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" "$pkg" 2>&1 | tee "$out"; then
      rm -f "$out"
      break
    fi
    after=$( (ls "$pkg/testdata/fuzz/$name" 2>/dev/null || true) | wc -l)
    if [ "$attempt" = 1 ] && [ "$before" = "$after" ] && grep -q 'context deadline exceeded' "$out"; then
      echo "fuzz: $name ran out of time without a crasher (Go's fuzzer); trying once more"
      rm -f "$out"
      continue
    fi
    rm -f "$out"
    status=1
    break
  done
done < <(grep -rE --include='*_test.go' --exclude-dir=bin --exclude-dir=out --exclude-dir=.git '^func Fuzz[A-Za-z0-9_]+\(' . |
         sed -E 's/^\.\/([^:]+):func (Fuzz[A-Za-z0-9_]+)\(.*/\1:\2/' | sort)
exit $status
