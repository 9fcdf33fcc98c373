#!/usr/bin/env bash
# Builds KubeVirt's own admission (the validators and mutators virt-api serves) from the Go module
# proxy into the bed's tool cache (hack/tooldir.sh), once per version, with every CustomResourceDefinition
# KubeVirt's operator installs (crds/*.yaml). The version is the one Harvester's go.mod names
# (Harvester v1.8.0 runs KubeVirt v1.7.0). The e2e bed runs the program against every simulated
# Harvester's apiserver (test/harvestersim/kubevirt.go).
#
# Usage: hack/ensure-kubevirt.sh [--dir | dir] prints the directory holding `virt-api-admission`,
# `virt-controller` (KubeVirt's own, cmd/virt-controller) and `crds/`.
#
# virt-api is one TLS server for KubeVirt's aggregated API (consoles, VNC, subresources, which need
# virt-handler on a real host) and its admission webhooks. The build adds a small program,
# cmd/bed-virt-api-admission, that serves only the webhooks, each with the very handler virt-api
# registers for it (pkg/virt-api/webhooks/{validating,mutating}-webhook, the same cluster
# configuration from the KubeVirt custom resource, the same informers), and registers the webhook
# configurations KubeVirt's operator generates for virt-api (components.NewVirtAPI*
# WebhookConfiguration), pointed at a loopback URL instead of the virt-api Service. Nothing of
# KubeVirt's is changed.
#
# Built in a throw-away module holding KubeVirt's own go.mod (renamed): the same dependency
# versions and replaces as its release, except the two replaces into its staging directory, which
# the module's zip does not carry (kubevirt.io/api and client-go of the same version are required
# from the proxy instead).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
harvester=${HARVESTER_VERSION:-$(awk '$1 == "github.com/harvester/harvester" {print $2}' "$root/go.mod")}
log() { echo "ensure-kubevirt: $*" >&2; }

export GOWORK=off
export GOFLAGS=-mod=mod
export CGO_ENABLED=0

moddir() { (cd "$root" && go mod download -json "$1" | sed -n 's/.*"Dir": "\(.*\)",/\1/p'); }

# The Makefile pins KUBEVIRT_VERSION, so that --dir (print the directory, build nothing) needs no
# download; a build checks the pin against Harvester's go.mod.
if [ "${1:-}" = --dir ] && [ -n "${KUBEVIRT_VERSION:-}" ]; then
  "$root/hack/tooldir.sh" kubevirt "$KUBEVIRT_VERSION" hack/ensure-kubevirt.sh hack/kubevirt
  exit 0
fi
hdir=$(moddir "github.com/harvester/harvester@$harvester")
harvesters=$(awk '$1 == "kubevirt.io/kubevirt" {print $2; exit}' "$hdir/go.mod")
[ -n "$harvesters" ] || { log "harvester $harvester's go.mod names no kubevirt.io/kubevirt"; exit 1; }
KUBEVIRT_VERSION=${KUBEVIRT_VERSION:-$harvesters}
if [ "$KUBEVIRT_VERSION" != "$harvesters" ]; then
  log "KUBEVIRT_VERSION=$KUBEVIRT_VERSION, but Harvester $harvester runs KubeVirt $harvesters: change the Makefile's pin with Harvester's"
  exit 1
fi
dest=$("$root/hack/tooldir.sh" kubevirt "$KUBEVIRT_VERSION" hack/ensure-kubevirt.sh hack/kubevirt)
case ${1:-} in --dir) echo "$dest"; exit 0 ;; "") ;; *) dest=$1 ;; esac
mkdir -p "$(dirname "$dest")"
exec 9>"$dest.lock" && flock 9 # one build at a time, whichever clone asks
if [ -x "$dest/virt-api-admission" ] && [ -x "$dest/virt-controller" ] && [ -f "$dest/crds/.complete" ]; then
  echo "$dest"
  exit 0
fi
src=$(moddir "kubevirt.io/kubevirt@$KUBEVIRT_VERSION")
[ -f "$src/go.mod" ] || { log "cannot download kubevirt.io/kubevirt@$KUBEVIRT_VERSION"; exit 1; }
mkdir -p "$dest"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
sed -e 's#^module .*#module local/kubevirt#' -e '/=> \.\/staging/d' "$src/go.mod" >"$work/go.mod"
cp "$src/go.sum" "$work/go.sum"
chmod u+w "$work/go.mod" "$work/go.sum"
(cd "$work" && go mod edit -require="kubevirt.io/kubevirt@$KUBEVIRT_VERSION" \
  -require="kubevirt.io/api@$KUBEVIRT_VERSION" -require="kubevirt.io/client-go@$KUBEVIRT_VERSION")
# KubeVirt's programs take their namespace from the service-account file a pod has
# (/var/run/secrets/kubernetes.io/serviceaccount/namespace), else "kubevirt"
# (kubevirt.io/client-go/util.GetNamespace). A process on the bed's host has no such file, and
# Harvester runs KubeVirt in harvester-system: the build uses a copy of client-go whose
# GetNamespace reads KUBEVIRT_NAMESPACE first. Nothing else changes.
clientgo=$(cd "$work" && go mod download -json "kubevirt.io/client-go@$KUBEVIRT_VERSION" | sed -n 's/.*"Dir": "\(.*\)",/\1/p')
cp -r "$clientgo" "$work/client-go"
chmod -R u+w "$work/client-go"
grep -q '^func GetNamespace() (string, error) {$' "$work/client-go/util/util.go" || { log "client-go $KUBEVIRT_VERSION: no GetNamespace to patch"; exit 1; }
sed -i 's/^func GetNamespace() (string, error) {$/&\n\tif ns := os.Getenv("KUBEVIRT_NAMESPACE"); ns != "" {\n\t\treturn ns, nil\n\t}/' "$work/client-go/util/util.go"
(cd "$work" && go mod edit -replace="kubevirt.io/client-go=./client-go")

mkdir -p "$work/cmd/bed-virt-api-admission"
cp "$root/hack/kubevirt/virt-api-admission.go.in" "$work/cmd/bed-virt-api-admission/main.go"
log "building KubeVirt $KUBEVIRT_VERSION's admission and virt-controller (once; several minutes cold on 2 cores)"
(cd "$work" && go build -trimpath -ldflags "-s -w" -o "$dest/virt-api-admission.tmp" ./cmd/bed-virt-api-admission &&
  mv "$dest/virt-api-admission.tmp" "$dest/virt-api-admission")
(cd "$work" && go build -trimpath -ldflags "-s -w" -o "$dest/virt-controller.tmp" kubevirt.io/kubevirt/cmd/virt-controller &&
  mv "$dest/virt-controller.tmp" "$dest/virt-controller")
rm -rf "$dest/crds"
"$dest/virt-api-admission" --write-crds "$dest/crds"
touch "$dest/crds/.complete"
echo "$dest"
