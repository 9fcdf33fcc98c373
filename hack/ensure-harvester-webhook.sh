#!/usr/bin/env bash
# Builds Harvester's own admission webhook server (cmd/webhook of github.com/harvester/harvester)
# and its VM, VMI and host maintenance controllers from the Go module proxy into the bed's tool cache (hack/tooldir.sh),
# once per version, with the CustomResourceDefinitions they watch (crds/*.yaml). The e2e bed runs
# both as processes against every simulated Harvester's apiserver
# (test/harvestersim/harvesterwebhook.go).
#
# Usage: hack/ensure-harvester-webhook.sh [--dir | dir] prints the directory holding `webhook`,
# `vmcontroller` and `crds/`.
#
# Harvester ships its VM and VMI controllers (pkg/controller/master/virtualmachine) only inside
# its whole server (with Rancher's API, steve and the UI); the build adds a small program to the
# copy, cmd/bed-vmcontroller, that sets up Harvester's client factories (config.SetupScaled), the
# cache indexes its server adds (indexeres.Setup), registers those controllers as its server does
# and starts them, unthrottled as its server's are.
#
# The webhook's build differs from the release's in one place, made to a copy in a throw-away
# directory, because the bed has no cluster network: pkg/webhook/server/server.go registers its two webhook
# configurations with a Service reference (port 443) after a 15 s pause. The copy reads
# HARVESTER_WEBHOOK_URL (a base URL, e.g. https://127.0.0.1:9444) and, when set, registers that
# URL instead, and HARVESTER_WEBHOOK_SETTLE (a duration) for the pause. Unset, it behaves as
# released.
#
# The CRDs: the server waits, with no timeout, for an informer of every kind it reads before it
# registers anything, so the simulated Harvester needs them all. Harvester's own and the snapshot
# classes come from Harvester's chart (in the module), Harvester's network controller's from its
# module, Longhorn's from longhorn-manager's (their Helm label line removed), CAPI v1beta1 clusters
# and machines from cluster-api v1.9.5 (the version Harvester's go.mod names), Fleet's clusters
# from Rancher's module. Rancher's management kinds and the logging operator's exist in no YAML
# in those modules: they are written here as schema-less stubs (the server only lists them).
set -euo pipefail

HV_VERSION=${HARVESTER_VERSION:-v1.8.0}
module=github.com/harvester/harvester
root=$(cd "$(dirname "$0")/.." && pwd)
dest=$("$root/hack/tooldir.sh" harvester-webhook "$HV_VERSION" hack/ensure-harvester-webhook.sh hack/bed-webhook-url.go.in)
case ${1:-} in --dir) echo "$dest"; exit 0 ;; "") ;; *) dest=$1 ;; esac
mkdir -p "$(dirname "$dest")"
exec 9>"$dest.lock" && flock 9 # one build at a time, whichever clone asks

log() { echo "ensure-harvester-webhook: $*" >&2; }

export GOWORK=off
export GOFLAGS=-mod=mod
export CGO_ENABLED=0

moddir() { (cd "${2:-$root}" && go mod download -json "$1" | sed -n 's/.*"Dir": "\(.*\)",/\1/p'); }

if [ -x "$dest/webhook" ] && [ -x "$dest/vmcontroller" ] && [ -f "$dest/crds/.complete" ]; then
  echo "$dest"
  exit 0
fi
src=$(moddir "$module@$HV_VERSION")
[ -f "$src/go.mod" ] || { log "cannot download $module@$HV_VERSION"; exit 1; }
mkdir -p "$dest"
work=$(mktemp -d)
trap 'chmod -R u+w "$work"; rm -rf "$work"' EXIT
cp -r "$src/." "$work/"
chmod -R u+w "$work"
rm -rf "$work/vendor"

if [ ! -x "$dest/webhook" ]; then
  log "building $module $HV_VERSION cmd/webhook (once; ten minutes or more cold on 2 cores)"
  server=$work/pkg/webhook/server/server.go
  for want in 'time.Sleep(15 \* time.Second)' 'return secret, apply.WithOwner(secret).ApplyObjects(validatingWebhookConfiguration, mutatingWebhookConfiguration)'; do
    grep -q "$want" "$server" || { log "harvester $HV_VERSION: no '$want' to patch"; exit 1; }
  done
  sed -i \
    -e 's/time.Sleep(15 \* time.Second)/time.Sleep(bedSettle())/' \
    -e 's/^\(\t*\)return secret, apply.WithOwner(secret).ApplyObjects(validatingWebhookConfiguration, mutatingWebhookConfiguration)$/\1bedPointAtURL(validatingWebhookConfiguration, mutatingWebhookConfiguration)\n&/' \
    "$server"
  cp "$root/hack/bed-webhook-url.go.in" "$work/pkg/webhook/server/bed.go"
  (cd "$work" && go build -trimpath -ldflags "-s -w" -o "$dest/webhook.tmp" ./cmd/webhook && mv "$dest/webhook.tmp" "$dest/webhook")
fi

if [ ! -x "$dest/vmcontroller" ]; then
  log "building Harvester $HV_VERSION's VM controllers (pkg/controller/master/virtualmachine) as a program of their own"
  mkdir -p "$work/cmd/bed-vmcontroller"
  cat >"$work/cmd/bed-vmcontroller/main.go" <<'GO'
// Command bed-vmcontroller runs Harvester's VM and VMI controllers
// (pkg/controller/master/virtualmachine) and its host maintenance controllers (the node drain
// controller, pkg/controller/master/nodedrain, and the maintain-status controller,
// pkg/controller/master/node) alone, as Harvester's controller manager registers them, against
// the apiserver KUBECONFIG names. Added by the test bed's build (hack/ensure-harvester-webhook.sh):
// Harvester ships them only inside its whole server.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/rancher/wrangler/v3/pkg/generic"
	"github.com/rancher/wrangler/v3/pkg/ratelimit"
	"github.com/sirupsen/logrus"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/harvester/harvester/pkg/config"
	"github.com/harvester/harvester/pkg/controller/master/node"
	"github.com/harvester/harvester/pkg/controller/master/nodedrain"
	"github.com/harvester/harvester/pkg/controller/master/virtualmachine"
	"github.com/harvester/harvester/pkg/indexeres"
)

func main() {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	restConfig, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		logrus.Fatal(err)
	}
	restConfig.RateLimiter = ratelimit.None // as Harvester's server (pkg/server/types.go)
	ctx, scaled, err := config.SetupScaled(ctx, restConfig, &generic.FactoryOptions{})
	if err != nil {
		logrus.Fatal(err)
	}
	// The cache indexes Harvester's server adds before its controllers run.
	if err := indexeres.Setup(ctx, nil, nil, config.Options{}); err != nil {
		logrus.Fatal(err)
	}
	options := config.Options{Namespace: os.Getenv("NAMESPACE"), Threadiness: 5}
	for _, register := range []func(context.Context, *config.Management, config.Options) error{
		virtualmachine.Register, nodedrain.Register, node.MaintainRegister,
	} {
		if err := register(ctx, scaled.Management, options); err != nil {
			logrus.Fatal(err)
		}
	}
	if err := scaled.Management.Start(5); err != nil {
		logrus.Fatal(err)
	}
	logrus.Info("Harvester's VM and maintenance controllers started")
	<-ctx.Done()
}
GO
  (cd "$work" && go build -trimpath -ldflags "-s -w" -o "$dest/vmcontroller.tmp" ./cmd/bed-vmcontroller && mv "$dest/vmcontroller.tmp" "$dest/vmcontroller")
fi

crds=$dest/crds
rm -rf "$crds" && mkdir -p "$crds"
chart=$src/deploy/charts/harvester-crd/templates
for f in "$chart"/harvesterhci.io_*.yaml "$chart"/volumesnapshot*.yaml "$chart"/crd-kubevirt-*.yaml; do
  cp "$f" "$crds/"
done
netctl=$(moddir "$(cd "$work" && go list -m -f '{{if .Replace}}{{.Replace.Path}}@{{.Replace.Version}}{{else}}{{.Path}}@{{.Version}}{{end}}' github.com/harvester/harvester-network-controller)" "$work")
cp "$netctl"/manifests/crds/*.yaml "$crds/"
longhorn=$(moddir "$(cd "$work" && go list -m -f '{{.Path}}@{{.Version}}' github.com/longhorn/longhorn-manager)" "$work")
sed -e '/{{.*}}/d' "$longhorn/k8s/crds.yaml" >"$crds/longhorn.yaml"
capi=$(moddir "$(cd "$work" && go list -m -f '{{.Path}}@{{.Version}}' sigs.k8s.io/cluster-api)" "$work")
cp "$capi"/config/crd/bases/cluster.x-k8s.io_clusters.yaml "$capi"/config/crd/bases/cluster.x-k8s.io_machines.yaml "$crds/"
rancher=$(moddir "$(cd "$work" && go list -m -f '{{if .Replace}}{{.Replace.Path}}@{{.Replace.Version}}{{else}}{{.Path}}@{{.Version}}{{end}}' github.com/rancher/rancher)" "$work")
cp "$rancher/pkg/crds/yaml/fleet/fleet.yaml" "$crds/fleet.yaml"
stub() { # group version kind plural scope
  cat >"$crds/stub-$4.$1.yaml" <<YAML
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: $4.$1
spec:
  group: $1
  names: {kind: $3, plural: $4, singular: $(echo "$3" | tr '[:upper:]' '[:lower:]'), listKind: ${3}List}
  scope: $5
  versions:
  - name: $2
    served: true
    storage: true
    subresources: {status: {}}
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
YAML
}
stub management.cattle.io v3 ManagedChart managedcharts Namespaced
stub management.cattle.io v3 Feature features Cluster
stub logging.banzaicloud.io v1beta1 Flow flows Namespaced
stub logging.banzaicloud.io v1beta1 Output outputs Namespaced
stub logging.banzaicloud.io v1beta1 ClusterFlow clusterflows Namespaced
stub logging.banzaicloud.io v1beta1 ClusterOutput clusteroutputs Namespaced
chmod -R u+w "$crds"
touch "$crds/.complete"
echo "$dest"
