#!/usr/bin/env bash
# Builds the test control-plane binaries (kube-apiserver and etcd; kube-scheduler,
# kube-controller-manager and kubectl of the same release) from the Go module proxy into
# the bed's tool cache (hack/tooldir.sh: k8s/<version>-<recipe>/), once per version. envtest's usual download (setup-envtest) needs GitHub and
# GCS, which this project's machines cannot reach; the module proxy is always there.
#
# Usage: hack/ensure-control-plane.sh [--dir | dir] prints the directory to use as KUBEBUILDER_ASSETS.
set -euo pipefail

KUBE_VERSION=${KUBE_VERSION:-v1.35.4}
ETCD_VERSION=${ETCD_VERSION:-v3.5.21}
root=$(cd "$(dirname "$0")/.." && pwd)
dest=$("$root/hack/tooldir.sh" k8s "$KUBE_VERSION-etcd-$ETCD_VERSION" hack/ensure-control-plane.sh)
case ${1:-} in --dir) echo "$dest"; exit 0 ;; "") ;; *) dest=$1 ;; esac
mkdir -p "$(dirname "$dest")"
exec 9>"$dest.lock" && flock 9 # one build at a time, whichever clone asks
mkdir -p "$dest"

log() { echo "ensure-control-plane: $*" >&2; }

# Each binary is built in its own throw-away module, never in the project's go.mod: kube-apiserver
# needs the kubernetes repository's staging replaces, and etcd its own dependency set.
export GOFLAGS=-mod=mod
export GOWORK=off
# As Kubernetes' and etcd's releases are built, and as every other tool of the bed: without cgo,
# so that the packages these builds share with the others compile once on a first run.
export CGO_ENABLED=0

if [ ! -x "$dest/etcd" ]; then
  log "building etcd $ETCD_VERSION (once; about a minute)"
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  cat >"$work/go.mod" <<EOF
module local/etcd

go 1.24

require go.etcd.io/etcd/server/v3 $ETCD_VERSION
EOF
  cat >"$work/main.go" <<'EOF'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
EOF
  (cd "$work" && go mod tidy >&2 && go build -trimpath -ldflags "-s -w" -o "$dest/etcd.tmp" . && mv "$dest/etcd.tmp" "$dest/etcd")
  rm -rf "$work"
  trap - EXIT
fi

# kube-apiserver for every control plane; kube-scheduler and kube-controller-manager for the guests
# whose addons are scheduled (test/guest); kubectl for the tests that run the docs' commands: all
# from the same throw-away module, so that their shared packages compile once.
missing=()
for b in kube-apiserver kube-scheduler kube-controller-manager kubectl; do
  [ -x "$dest/$b" ] || missing+=("$b")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "building ${missing[*]} $KUBE_VERSION (once; 3 to 5 minutes each cold on 2 cores)"
  minor=${KUBE_VERSION#v1.}
  minor=${minor%%.*}
  staging_version="v0.${KUBE_VERSION#v1.}"
  gomod=$(go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')
  [ -f "$gomod" ] || { log "cannot download k8s.io/kubernetes@$KUBE_VERSION"; exit 1; }
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  {
    echo "module local/kube-control-plane"
    echo
    echo "go 1.25"
    echo
    echo "require ("
    echo "	k8s.io/kubernetes $KUBE_VERSION"
    # Every staging module the kubernetes go.mod points at ./staging is required at its published
    # version (kubernetes requires v0.0.0): the version a build is labelled with, so that the
    # packages compile as the other tools' copies of the same version do.
    sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/.*#\t\1 '"$staging_version"'#p' "$gomod"
    echo ")"
    echo
    echo "replace ("
    # ... and replaced by its published copy (the kubernetes go.mod's replace, of ./staging, does
    # not carry over to a module that requires it).
    sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/.*#\t\1 => \1 '"$staging_version"'#p' "$gomod"
    echo ")"
  } >"$work/go.mod"
  pkg=k8s.io/component-base/version
  # No `go mod tidy` here: some staging modules these binaries never import are missing on the
  # proxy, and -mod=mod only fetches what the build needs.
  for b in "${missing[@]}"; do
    (cd "$work" && go build -mod=mod -trimpath \
      -ldflags "-s -w -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor" \
      -o "$dest/$b.tmp" "k8s.io/kubernetes/cmd/$b" &&
      mv "$dest/$b.tmp" "$dest/$b")
  done
  rm -rf "$work"
  trap - EXIT
fi

echo "$dest"
