#!/usr/bin/env bash
# Fails when the committed generated files (deepcopy, CRDs, RBAC, webhook configuration) or
# go.mod/go.sum differ from what `make generate manifests` and `go mod tidy` produce.
# It regenerates in place, so after a failure the tree holds the current files: review and commit.
set -euo pipefail
cd "$(dirname "$0")/.."

generated=(api/v1alpha1/zz_generated.deepcopy.go config/crd/bases config/rbac/role.yaml config/webhook/manifests.yaml test/crds/kubevirt)
before=$(mktemp -d)
trap 'rm -rf "$before"' EXIT
for path in "${generated[@]}"; do
  mkdir -p "$before/$(dirname "$path")"
  if [ -e "$path" ]; then cp -r "$path" "$before/$path"; fi
done

make --no-print-directory generate manifests >/dev/null

stale=0
for path in "${generated[@]}"; do
  if ! diff -r -u "$before/$path" "$path"; then
    stale=1
  fi
done
if ! go mod tidy -diff; then
  echo "go.mod/go.sum are not tidy: run 'go mod tidy'" >&2
  stale=1
fi
if [ "$stale" -ne 0 ]; then
  echo "generated files are stale: run 'make generate manifests' and commit the result" >&2
  exit 1
fi
echo "generated files are current"
