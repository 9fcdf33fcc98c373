#!/usr/bin/env bash
# Builds the Cluster API Operator (sigs.k8s.io/cluster-api-operator), the program Rancher Turtles
# compiles in to install providers from its CAPIProvider objects, from the Go module proxy into
# the bed's tool cache (hack/tooldir.sh), once per version, with its CRDs next to it. The e2e bed
# runs it as its own process against a management apiserver. It is built in a copy of its own
# module (its go.mod pins an older Cluster API than the provider's), never in the project's go.mod.
#
# Usage: hack/ensure-capi-operator.sh [--dir | dir] prints the directory holding the binary
# (`manager`) and the CRDs (`crd/*.yaml`).
set -euo pipefail

CAPI_OPERATOR_VERSION=${CAPI_OPERATOR_VERSION:-v0.27.0}
CAPI_VERSION=${CAPI_OPERATOR_CAPI_VERSION:-v1.12.8}
module=sigs.k8s.io/cluster-api-operator
root=$(cd "$(dirname "$0")/.." && pwd)
dest=$("$root/hack/tooldir.sh" capi-operator "$CAPI_OPERATOR_VERSION" hack/ensure-capi-operator.sh)
case ${1:-} in --dir) echo "$dest"; exit 0 ;; "") ;; *) dest=$1 ;; esac
mkdir -p "$(dirname "$dest")"
exec 9>"$dest.lock" && flock 9 # one build at a time, whichever clone asks

log() { echo "ensure-capi-operator: $*" >&2; }

export GOWORK=off
export GOFLAGS=-mod=mod

src=
source_dir() {
  [ -n "$src" ] || src=$(go mod download -json "$module@$CAPI_OPERATOR_VERSION" | sed -n 's/.*"Dir": "\(.*\)",/\1/p')
  [ -f "$src/go.mod" ] || { log "cannot download $module@$CAPI_OPERATOR_VERSION"; exit 1; }
}

if [ ! -x "$dest/manager" ]; then
  log "building $module $CAPI_OPERATOR_VERSION (once; a few minutes cold)"
  source_dir
  mkdir -p "$dest"
  work=$(mktemp -d)
  trap 'chmod -R u+w "$work"; rm -rf "$work"' EXIT
  # The module cache is read-only; the build runs in a writable copy of the module, with its
  # own go.mod and go.sum.
  cp -r "$src/." "$work/"
  chmod -R u+w "$work"
  # Its go.mod pins Cluster API v1.12.7, which the module proxy does not serve: the next patch
  # release of that minor stands in (the clusterctl library the operator installs with).
  (cd "$work" && go mod edit -require=sigs.k8s.io/cluster-api@$CAPI_VERSION && go mod tidy)
  (cd "$work" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$dest/manager.tmp" ./cmd && mv "$dest/manager.tmp" "$dest/manager")
fi
if [ ! -d "$dest/crd" ]; then
  source_dir
  rm -rf "$dest/crd" && mkdir -p "$dest/crd"
  # The CRD bases: the bed serves the storage version alone, without conversion webhooks.
  cp "$src"/config/crd/bases/*.yaml "$dest/crd/"
  chmod -R u+w "$dest/crd"
fi
echo "$dest"
