#!/usr/bin/env bash
# Runs every Go fuzz target of the module for FUZZTIME each (one `go test -fuzz` invocation per
# target: Go fuzzes one target at a time). `make test` runs them briefly, `make fuzz` longer.
# A crasher the fuzzer finds is written to the package's testdata/fuzz/<Target>/ and fails the
# run; commit it as a regression seed once the bug is fixed (plain `go test` replays it).
set -euo pipefail
FUZZTIME=${FUZZTIME:-5s}
cd "$(dirname "$0")/.."
status=0
while IFS=: read -r file name; do
  pkg=./$(dirname "$file")
  echo "fuzz: $name in $pkg for $FUZZTIME"
  if ! go test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" "$pkg"; then
    status=1
  fi
done < <(grep -rE --include='*_test.go' --exclude-dir=bin --exclude-dir=out --exclude-dir=.git '^func Fuzz[A-Za-z0-9_]+\(' . |
         sed -E 's/^\.\/([^:]+):func (Fuzz[A-Za-z0-9_]+)\(.*/\1:\2/' | sort)
exit $status
