#!/usr/bin/env bash
# Builds Harvester's own load balancer (github.com/harvester/harvester-load-balancer): its
# controllers and its admission webhook, from the Go module proxy into
# the bed's tool cache (hack/tooldir.sh), once per version. The e2e bed runs both as processes against the
# simulated Harvester's apiserver, in place of a load balancer of our own (docs/decisions/0004).
#
# Usage: hack/ensure-harvester-lb.sh [--dir | dir] prints the directory holding `controller`,
# `webhook` and the CRDs (`crds/*.yaml`).
#
# The build differs from the release's in two places, both needed only because the bed has no
# cluster network, and both made to a copy in a throw-away directory:
#  - github.com/harvester/webhook v0.1.4 registers its webhook configurations with a Service
#    reference (port 443) after a 15 s pause. The copy reads HARVESTER_WEBHOOK_URL (a base URL,
#    e.g. https://127.0.0.1:9443) and, when it is set, registers that URL instead, and
#    HARVESTER_WEBHOOK_SETTLE (a duration) for the pause. Unset, it behaves as released.
#  - golang.org/x/tools v0.19.0 (reached through Rancher's norman code generator, never run by
#    these binaries) does not compile on Go 1.25+; the build takes v0.34.0, the first that does.
# and one upstream defect is fixed: the controller's tryReleaseDuplicatedIPToPool declares the
# pool it selects with := inside an if, so it always releases to pool "" ("fail to get
# allocator "), and a load balancer whose status write lost a race after its address was booked
# never gets an address ("duplicate allocation is not allowed"; docs/troubleshooting.md). The bed
# hit it under load; the fix lets the controller's own recovery work as its code intends.
set -euo pipefail

LB_VERSION=${HARVESTER_LB_VERSION:-v1.5.0}
module=github.com/harvester/harvester-load-balancer
root=$(cd "$(dirname "$0")/.." && pwd)
dest=$("$root/hack/tooldir.sh" harvester-lb "$LB_VERSION" hack/ensure-harvester-lb.sh)
case ${1:-} in --dir) echo "$dest"; exit 0 ;; "") ;; *) dest=$1 ;; esac
mkdir -p "$(dirname "$dest")"
exec 9>"$dest.lock" && flock 9 # one build at a time, whichever clone asks

log() { echo "ensure-harvester-lb: $*" >&2; }

export GOWORK=off
export GOFLAGS=-mod=mod
export CGO_ENABLED=0

# Downloaded from the project's root: its go.sum holds the module's checksums (the checksum
# database has no record of this tag).
moddir() { (cd "$root" && go mod download -json "$1" | sed -n 's/.*"Dir": "\(.*\)",/\1/p'); }

if [ -x "$dest/controller" ] && [ -x "$dest/webhook" ] && [ -d "$dest/crds" ]; then
  echo "$dest"
  exit 0
fi
src=$(moddir "$module@$LB_VERSION")
[ -f "$src/go.mod" ] || { log "cannot download $module@$LB_VERSION"; exit 1; }
log "building $module $LB_VERSION (once; a few minutes cold on 2 cores)"
mkdir -p "$dest"
work=$(mktemp -d)
trap 'chmod -R u+w "$work"; rm -rf "$work"' EXIT
cp -r "$src/." "$work/"
chmod -R u+w "$work"
rm -rf "$work/vendor"

webhook_version=$(cd "$work" && go list -m -f '{{.Version}}' github.com/harvester/webhook)
whsrc=$(cd "$work" && go mod download -json "github.com/harvester/webhook@$webhook_version" | sed -n 's/.*"Dir": "\(.*\)",/\1/p')
mkdir -p "$work/third_party"
cp -r "$whsrc" "$work/third_party/webhook"
chmod -R u+w "$work/third_party/webhook"
server=$work/third_party/webhook/pkg/server/server.go
for want in 'time.Sleep(15 \* time.Second)' 'mutatingWebhookConfiguration := s.mutatingWebhookConfiguration()' 'if _, err := crdClient.Update(crdCopy); err != nil {'; do
  grep -q "$want" "$server" || { log "harvester/webhook $webhook_version: no '$want' to patch"; exit 1; }
done
sed -i \
  -e 's/time.Sleep(15 \* time.Second)/time.Sleep(bedSettle())/' \
  -e 's/^\(\t*\)mutatingWebhookConfiguration := s.mutatingWebhookConfiguration()$/&\n\1bedPointAtURL(validatingWebhookConfiguration, mutatingWebhookConfiguration)/' \
  -e 's/^\(\t*\)if _, err := crdClient.Update(crdCopy); err != nil {$/\1bedPointConversionAtURL(crdCopy)\n&/' \
  "$server"
cp "$root/hack/bed-webhook-url.go.in" "$work/third_party/webhook/pkg/server/bed.go"
cat >"$work/third_party/webhook/pkg/server/bed_conversion.go" <<'GO'
package server

// Added by the test bed's build (hack/ensure-harvester-lb.sh): the CRDs' conversion webhook at
// the loopback URL too.

import apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

func bedPointConversionAtURL(crd *apiextensionsv1.CustomResourceDefinition) {
	if u := bedURL(conversionPath); u != nil && crd.Spec.Conversion.Webhook != nil {
		crd.Spec.Conversion.Webhook.ClientConfig.Service, crd.Spec.Conversion.Webhook.ClientConfig.URL = nil, u
	}
}
GO
lbctl=$work/pkg/controller/loadbalancer/controller.go
perl -0pi -e 's/(func \(h \*Handler\) tryReleaseDuplicatedIPToPool[^\n]*\n(?:[^\n]*\n){0,4}?)(\t+)pool, err := h\.selectIPPool\(lb\)/$1$2var err error\n$2pool, err = h.selectIPPool(lb)/' "$lbctl"
grep -q 'pool, err = h.selectIPPool(lb)' "$lbctl" || { log "harvester-load-balancer $LB_VERSION: tryReleaseDuplicatedIPToPool not as expected, not patched"; exit 1; }
(cd "$work" &&
  go mod edit -replace="github.com/harvester/webhook=./third_party/webhook" &&
  go get golang.org/x/tools@v0.34.0 >/dev/null)
(cd "$work" && go build -trimpath -ldflags "-s -w" -o "$dest/controller.tmp" . && mv "$dest/controller.tmp" "$dest/controller")
(cd "$work" && go build -trimpath -ldflags "-s -w" -o "$dest/webhook.tmp" ./cmd/webhook && mv "$dest/webhook.tmp" "$dest/webhook")
rm -rf "$dest/crds" && cp -r "$src/crds" "$dest/crds" && chmod -R u+w "$dest/crds"
echo "$dest"
