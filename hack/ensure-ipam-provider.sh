#!/usr/bin/env bash
# Builds Cluster API's in-cluster IPAM provider (sigs.k8s.io/cluster-api-ipam-provider-in-cluster)
# from the Go module proxy into the bed's tool cache (hack/tooldir.sh), once per version, with the CRDs
# of its pools next to it. The e2e bed runs it as its own process against the management
# apiserver. It is built on an older Cluster API (v1.11) than the provider (v1.14), so it is
# built in a copy of its own module, never in the project's go.mod.
#
# Usage: hack/ensure-ipam-provider.sh [--dir | dir] prints the directory holding the binary
# (`manager`), the CRDs (`crd/*.yaml`) and the webhook configurations (`webhook/manifests.yaml`).
set -euo pipefail

IPAM_VERSION=${IPAM_VERSION:-v1.1.0}
module=sigs.k8s.io/cluster-api-ipam-provider-in-cluster
root=$(cd "$(dirname "$0")/.." && pwd)
dest=$("$root/hack/tooldir.sh" ipam-in-cluster "$IPAM_VERSION" hack/ensure-ipam-provider.sh)
case ${1:-} in --dir) echo "$dest"; exit 0 ;; "") ;; *) dest=$1 ;; esac
mkdir -p "$(dirname "$dest")"
exec 9>"$dest.lock" && flock 9 # one build at a time, whichever clone asks

log() { echo "ensure-ipam-provider: $*" >&2; }

export GOWORK=off
export GOFLAGS=-mod=mod

src=
source_dir() {
  [ -n "$src" ] || src=$(go mod download -json "$module@$IPAM_VERSION" | sed -n 's/.*"Dir": "\(.*\)",/\1/p')
  [ -f "$src/go.mod" ] || { log "cannot download $module@$IPAM_VERSION"; exit 1; }
}

if [ ! -x "$dest/manager" ]; then
  log "building $module $IPAM_VERSION (once; a few minutes cold)"
  source_dir
  mkdir -p "$dest"
  work=$(mktemp -d)
  trap 'chmod -R u+w "$work"; rm -rf "$work"' EXIT
  # The module cache is read-only; the build runs in a writable copy of the module, with the
  # module's own go.mod and go.sum (its pinned, checksummed dependency set).
  cp -r "$src/." "$work/"
  chmod -R u+w "$work"
  (cd "$work" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$dest/manager.tmp" . && mv "$dest/manager.tmp" "$dest/manager")
fi
if [ ! -d "$dest/crd" ] || [ ! -f "$dest/webhook/manifests.yaml" ]; then
  source_dir
  rm -rf "$dest/crd" "$dest/webhook" && mkdir -p "$dest/crd" "$dest/webhook"
  # The CRD bases only: the kustomize patches add conversion webhooks the bed does not serve
  # (it uses the storage version, v1alpha2, alone). The webhook configurations as generated,
  # before kustomize names them and points them at its Service: the bed does both.
  cp "$src"/config/crd/bases/*.yaml "$dest/crd/"
  cp "$src/config/webhook/manifests.yaml" "$dest/webhook/"
  chmod -R u+w "$dest/crd" "$dest/webhook"
fi
echo "$dest"
