#!/usr/bin/env bash
# Builds the Cluster API managers the test bed runs as processes, from the Go module proxy into
# <name>-<version>/ in the bed's tool cache (hack/tooldir.sh), once per version: the RKE2 and K3s providers (bootstrap and
# control-plane managers), the core manager of the previous Cluster API minor (the provider
# is built on the current one; one e2e scenario runs it on the previous one), and the current
# one's core, kubeadm bootstrap and control-plane managers (one scenario turns on their in-place
# update gates). Each is built in
# its own throw-away module, never in the project's go.mod: they are built on other Cluster API
# and controller-runtime versions than ours.
#
# Usage: hack/ensure-providers.sh [--dir | dir] prints the directory holding the providers.
# The previous minor's core is built only with PREVIOUS_CAPI=1 (`make test-full` sets it: only its
# scenario runs it); `make test` leaves it out of a first run's builds.
#
# In <dir>/<name>-<version>/: <part>-manager for each part (bootstrap, controlplane; core for the
# module's root package), and module-dir (a file holding the module's directory in the module
# cache, where the bed reads CRDs and webhooks).
set -euo pipefail

RKE2_VERSION=${RKE2_VERSION:-v0.21.0}
K3S_VERSION=${K3S_VERSION:-v0.4.0}
CAPI_PREVIOUS_VERSION=${CAPI_PREVIOUS_VERSION:-v1.13.6}
root=$(cd "$(dirname "$0")/.." && pwd)
CAPI_VERSION=${CAPI_VERSION:-$(awk '$1 == "sigs.k8s.io/cluster-api" {print $2}' "$root/go.mod")}
dest=$("$root/hack/tooldir.sh" providers "rke2-$RKE2_VERSION-k3s-$K3S_VERSION-capi-$CAPI_PREVIOUS_VERSION-$CAPI_VERSION" hack/ensure-providers.sh)
case ${1:-} in --dir) echo "$dest"; exit 0 ;; "") ;; *) dest=$1 ;; esac
mkdir -p "$(dirname "$dest")"
exec 9>"$dest.lock" && flock 9 # one build at a time, whichever clone asks
mkdir -p "$dest"

log() { echo "ensure-providers: $*" >&2; }

export GOFLAGS=-mod=mod
export GOWORK=off
export CGO_ENABLED=0

# binary <part>: the manager's file name ('/' as '-'); "." is the module's root package (CAPI's
# core before v1.14).
binary() {
  if [ "$1" = . ]; then echo core-manager; else echo "${1//\//-}-manager"; fi
}

# build <name> <module> <version> <part>...
build() {
  local name=$1 module=$2 version=$3
  shift 3
  local parts=("$@")
  local out=$dest/$name-$version
  mkdir -p "$out"
  local dir
  dir=$(go mod download -json "$module@$version" | sed -n 's/.*"Dir": "\(.*\)",/\1/p')
  [ -d "$dir" ] || { log "cannot download $module@$version"; exit 1; }
  echo "$dir" >"$out/module-dir"
  local part missing=0
  for part in "${parts[@]}"; do
    [ -x "$out/$(binary "$part")" ] || missing=1
  done
  if [ "$missing" = 0 ]; then
    return
  fi
  log "building $module $version (once; a few minutes cold on 2 cores)"
  local work
  work=$(mktemp -d)
  trap "rm -rf '$work'" EXIT
  # The provider's own go.mod, renamed: the same dependency versions (and replaces, which a
  # required module's go.mod would not carry over) as its release was built with.
  sed "s#^module .*#module local/$name#" "$dir/go.mod" >"$work/go.mod"
  cp "$dir/go.sum" "$work/go.sum"
  chmod u+w "$work/go.mod" "$work/go.sum"
  if [ "$name" = k3s ]; then
    patch_k3s "$dir" "$work"
  fi
  (cd "$work" && go mod edit -require="$module@$version")
  # Since v1.14 CAPI's API is a module of its own, replaced by its directory in CAPI's go.mod:
  # outside the repository it is the published module at the same version.
  if grep -q "$module/api => ./api" "$work/go.mod"; then
    (cd "$work" && go mod edit -dropreplace="$module/api" -require="$module/api@$version")
  fi
  for part in "${parts[@]}"; do
    local bin pkg=$module
    bin=$(binary "$part")
    [ "$part" = . ] || pkg=$module/$part
    if [ ! -x "$out/$bin" ]; then
      (cd "$work" && go build -trimpath -ldflags "-s -w" -o "$out/$bin.tmp" "$pkg" &&
        mv "$out/$bin.tmp" "$out/$bin")
    fi
  done
  rm -rf "$work"
  trap - EXIT
}

# K3s's managers (v0.3.0 and v0.4.0) listen for webhooks on :9443, a literal in bootstrap/main.go and
# controlplane/main.go with no flag, so its two processes could not share one host (in a cluster
# each has its pod's network). The build uses a copy of the module whose literal reads
# CAPI_K3S_WEBHOOK_PORT (9443 when unset); nothing else changes.
patch_k3s() {
  local dir=$1 work=$2 part
  cp -r "$dir" "$work/src"
  chmod -R u+w "$work/src"
  for part in bootstrap controlplane; do
    grep -q 'Port: 9443,' "$work/src/$part/main.go" || { log "k3s $part/main.go: no 'Port: 9443,' to patch"; exit 1; }
    sed -i 's/Port: 9443,/Port: webhookPortFromEnv(),/' "$work/src/$part/main.go"
    cat >"$work/src/$part/webhook_port.go" <<'GO'
package main

import (
	"os"
	"strconv"
)

// webhookPortFromEnv is added by the test bed's build (hack/ensure-providers.sh).
func webhookPortFromEnv() int {
	if port, err := strconv.Atoi(os.Getenv("CAPI_K3S_WEBHOOK_PORT")); err == nil {
		return port
	}
	return 9443
}
GO
  done
  (cd "$work" && go mod edit -replace="$(sed -n 's/^module //p' "$dir/go.mod")=./src")
}

# The modules build side by side: each spends part of its time downloading and linking,
# which a core left idle can spend compiling another.
pids=()
build rke2 github.com/rancher/cluster-api-provider-rke2 "$RKE2_VERSION" bootstrap controlplane &
pids+=($!)
build k3s github.com/k3s-io/cluster-api-k3s "$K3S_VERSION" bootstrap controlplane &
pids+=($!)
if [ "${PREVIOUS_CAPI:-0}" = 1 ]; then
  build capi sigs.k8s.io/cluster-api "$CAPI_PREVIOUS_VERSION" . &
  pids+=($!)
fi
# go.mod's Cluster API as processes, for the scenario that turns its in-place update gates on.
build capi sigs.k8s.io/cluster-api "$CAPI_VERSION" core bootstrap/kubeadm controlplane/kubeadm &
pids+=($!)
failed=0
for pid in "${pids[@]}"; do
  wait "$pid" || failed=1
done
[ "$failed" = 0 ] || { log "a build failed (above)"; exit 1; }

echo "$dest"
