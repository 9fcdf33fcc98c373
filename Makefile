# cluster-api-provider-harvester: the targets a developer and CI run.
# `make test` works on a fresh machine: it builds its tools and test control planes first.

SHELL := /usr/bin/env bash -o errexit -o pipefail -o nounset
.DEFAULT_GOAL := help

GO ?= go
ROOT := $(abspath .)
BIN := $(ROOT)/bin
# The tools the tests run (other projects' programs, pinned) are built once per machine into a
# cache outside the clone, shared by every clone: hack/tooldir.sh names each one's directory by
# version and by a digest of its build recipe (BED_TOOLS_CACHE, default
# ~/.cache/cluster-api-provider-harvester/tools). Each hack/ensure-*.sh prints its directory
# with --dir and builds into it when asked without.
# The tools the Makefile builds itself (clusterctl, jq, controller-gen, kustomize) are
# file targets without prerequisites: their path changes with what they are built from, and a
# fresh clone's files are newer than the cached binary, which must not make it stale.
TOOLDIR = $(shell hack/tooldir.sh $(1) $(2) $(3))
CONTROLLER_GEN := $(call TOOLDIR,hack-tools,mod,hack/tools/go.mod)/controller-gen
KUSTOMIZE := $(call TOOLDIR,hack-tools,mod,hack/tools/go.mod)/kustomize

# The test control planes (kube-apiserver and etcd) built from the Go module proxy.
KUBE_VERSION ?= v1.35.4
ETCD_VERSION ?= v3.5.21
KUBEBUILDER_ASSETS := $(shell KUBE_VERSION=$(KUBE_VERSION) ETCD_VERSION=$(ETCD_VERSION) hack/ensure-control-plane.sh --dir)

# Cluster API's in-cluster IPAM provider, which the e2e bed runs as its own process.
IPAM_PROVIDER_VERSION ?= v1.1.0
IPAM_PROVIDER_DIR := $(shell IPAM_VERSION=$(IPAM_PROVIDER_VERSION) hack/ensure-ipam-provider.sh --dir)

# The Cluster API Operator, which Rancher Turtles compiles in to install providers: the e2e bed
# runs the version Turtles v0.27 (Rancher v2.15) uses as its own process.
CAPI_OPERATOR_VERSION ?= v0.27.0
CAPI_OPERATOR_DIR := $(shell CAPI_OPERATOR_VERSION=$(CAPI_OPERATOR_VERSION) hack/ensure-capi-operator.sh --dir)

# cloud-init from the host's Debian packages (fetched, not installed), which the e2e suite asks
# whether the user data each flavour's VMs get is valid cloud-config.
CLOUD_INIT_DIR := $(shell hack/ensure-cloud-init.sh --dir)

# The bed's real guest: QEMU and a minimal Debian guest (kernel, cloud-init, qemu-guest-agent)
# built from Debian's packages into the tool cache (hack/ensure-guest-image.sh).
GUEST_IMAGE_DIR := $(shell hack/ensure-guest-image.sh --dir)

# Harvester's own load balancer (controller and webhook), which every simulated Harvester runs
# as processes: the version in go.mod (hack/ensure-harvester-lb.sh says what its build changes).
HARVESTER_LB_VERSION ?= $(shell awk '$$1 == "github.com/harvester/harvester-load-balancer" {print $$2}' go.mod)
HARVESTER_LB_DIR := $(shell HARVESTER_LB_VERSION=$(HARVESTER_LB_VERSION) hack/ensure-harvester-lb.sh --dir)
# Harvester's own admission webhook server, which every simulated Harvester runs as a process:
# the version in go.mod (hack/ensure-harvester-webhook.sh says what its build changes).
HARVESTER_VERSION ?= $(shell awk '$$1 == "github.com/harvester/harvester" {print $$2}' go.mod)
HARVESTER_WEBHOOK_DIR := $(shell HARVESTER_VERSION=$(HARVESTER_VERSION) hack/ensure-harvester-webhook.sh --dir)
# KubeVirt's own admission, which every simulated Harvester runs as a process: the KubeVirt that
# Harvester's go.mod names (hack/ensure-kubevirt.sh refuses another).
KUBEVIRT_VERSION ?= v1.7.0
KUBEVIRT_DIR := $(shell KUBEVIRT_VERSION=$(KUBEVIRT_VERSION) hack/ensure-kubevirt.sh --dir)
# The Cluster API managers the e2e bed runs as processes (hack/ensure-providers.sh).
PROVIDERS_DIR := $(shell hack/ensure-providers.sh --dir)
# How many of the tools `make test` builds at once: compiling is bound by the two cores, but each
# build also waits on downloads and on its single-threaded link, which another build fills.
TOOLS_JOBS ?= 3
TIMED := hack/timed.sh

IMG ?= ghcr.io/seed-0a7eb009/cluster-api-provider-harvester:dev
CCM_IMG ?= ghcr.io/seed-0a7eb009/harvester-cloud-controller-manager:dev
# A bound for a hung test binary, not for slowness: the e2e waits fail by themselves when nothing
# moves (test/e2e/progress_test.go), and a loaded machine may take twice as long as an idle one.
TEST_TIMEOUT ?= 70m
TEST_FLAGS ?= -count=1

##@ General

.PHONY: help
help: ## Show the targets.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*?##/ { printf "  %-20s %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deepcopy code.
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate CRDs, RBAC and webhook configuration from the code's markers.
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	$(CONTROLLER_GEN) rbac:roleName=manager-role paths=./controllers/... output:rbac:artifacts:config=config/rbac
	$(CONTROLLER_GEN) webhook paths=./api/... output:webhook:artifacts:config=config/webhook
	# KubeVirt ships no CRD YAML: the simulated Harvester's come from the real Go types.
	$(CONTROLLER_GEN) crd:allowDangerousTypes=true,maxDescLen=0 paths=kubevirt.io/api/core/v1 output:crd:artifacts:config=test/crds/kubevirt

.PHONY: verify-generated
verify-generated: ## Fail when generated files or go.mod are not current (part of `make test`).
	hack/verify-generated.sh

.PHONY: fmt
fmt: ## gofmt the code.
	gofmt -w $$(git ls-files '*.go')

.PHONY: lint
lint: golangci-lint ## gofmt, go vet and golangci-lint (.golangci.yml; part of make test).
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GOLANGCI_LINT) run ./...

# golangci-lint, built from the Go module proxy at the version of hack/golangci-lint/go.mod, once.
GOLANGCI_LINT := $(call TOOLDIR,golangci-lint,mod,hack/golangci-lint)/golangci-lint

.PHONY: golangci-lint
golangci-lint: $(GOLANGCI_LINT) ## Build golangci-lint (hack/golangci-lint's version) into the tool cache once.

$(GOLANGCI_LINT):
	cd hack/golangci-lint && GOWORK=off CGO_ENABLED=0 $(ROOT)/$(TIMED) golangci-lint $(GO) build -trimpath -o $(GOLANGCI_LINT) github.com/golangci/golangci-lint/v2/cmd/golangci-lint

.PHONY: verify
verify: lint verify-generated ## Everything lint and verify-generated check.

##@ Build

.PHONY: build
build: ## Build the manager into bin/manager.
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/manager .

.PHONY: build-ccm
build-ccm: ## Build the guest's cloud controller manager into bin/harvester-cloud-controller-manager.
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/harvester-cloud-controller-manager ./cloudprovider/cmd/harvester-cloud-controller-manager

.PHONY: caphv-takeover
caphv-takeover: ## Build the command that takes clusters over from the community provider into bin/caphv-takeover (docs/migrating-from-caphv.md).
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/caphv-takeover ./cmd/caphv-takeover

.PHONY: release-manifests
release-manifests: ## Write the release assets clusterctl reads (metadata, components, templates) into out/, for IMG and CCM_IMG.
	$(GO) run ./hack/release -out $(ROOT)/out -image $(IMG) -ccm-image $(CCM_IMG)

# A release: `make release VERSION=vX.Y.Z [REGISTRY=...]` writes into out/release/VERSION every
# asset clusterctl and Rancher Turtles read (metadata.yaml, infrastructure-components.yaml with
# the version's images, the cluster templates and the ClusterClass), both images as OCI
# archives, and checksums.txt over all of them; `make release-push` pushes the images to
# REGISTRY with the Docker config's credentials (`docker login`, no Docker engine needed).
REGISTRY ?= ghcr.io/seed-0a7eb009
RELEASE_DIR = $(ROOT)/out/release/$(VERSION)
RELEASE_IMG = $(REGISTRY)/cluster-api-provider-harvester:$(VERSION)
RELEASE_CCM_IMG = $(REGISTRY)/harvester-cloud-controller-manager:$(VERSION)

.PHONY: release
release: ## Build release VERSION (vX.Y.Z) into out/release/VERSION: clusterctl's and Turtles' assets for REGISTRY's images, both image archives, checksums.txt.
	@echo '$(VERSION)' | grep -Eq '^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.]+)?$$' || { echo 'make release needs VERSION=vX.Y.Z (got $(VERSION))' >&2; exit 2; }
	rm -rf $(RELEASE_DIR)
	$(MAKE) images IMG=$(RELEASE_IMG) CCM_IMG=$(RELEASE_CCM_IMG) IMAGES_DIR=$(ROOT)/out/release-build/$(VERSION)
	mkdir -p $(RELEASE_DIR)
	cp $(ROOT)/out/release-build/$(VERSION)/manager.oci.tar $(RELEASE_DIR)/cluster-api-provider-harvester.oci.tar
	cp $(ROOT)/out/release-build/$(VERSION)/ccm.oci.tar $(RELEASE_DIR)/harvester-cloud-controller-manager.oci.tar
	$(GO) run ./hack/release -out $(RELEASE_DIR) -image $(RELEASE_IMG) -ccm-image $(RELEASE_CCM_IMG) -checksums

.PHONY: release-push
release-push: ## Push release VERSION's two images (from out/release/VERSION) to REGISTRY.
	test -f $(RELEASE_DIR)/checksums.txt || { echo 'run make release VERSION=$(VERSION) first' >&2; exit 2; }
	cd hack/images && GOWORK=off $(GO) run . -push $(RELEASE_DIR)/cluster-api-provider-harvester.oci.tar -ref $(RELEASE_IMG)
	cd hack/images && GOWORK=off $(GO) run . -push $(RELEASE_DIR)/harvester-cloud-controller-manager.oci.tar -ref $(RELEASE_CCM_IMG)

.PHONY: docker-build
docker-build: ## Build both images (needs a Docker engine).
	docker build --target manager --build-arg VERSION=$(VERSION) --build-arg REVISION=$(REVISION) -t $(IMG) .
	docker build --target ccm --build-arg VERSION=$(VERSION) --build-arg REVISION=$(REVISION) -t $(CCM_IMG) .

.PHONY: docker-push
docker-push: ## Push both images.
	docker push $(IMG)
	docker push $(CCM_IMG)

# `make images` builds the binaries and packs each into an OCI archive with hack/images (its own
# module), without a Docker engine. ARCH may list several ("amd64 arm64": one multi-platform
# archive); BASE names a registry base image (default: none); timestamps are SOURCE_DATE_EPOCH's.
VERSION ?= $(shell git describe --tags --match 'v[0-9]*' --dirty 2>/dev/null || echo v0.0.0-dev)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
ARCH ?= amd64
BASE ?=
CA_CERTS ?= /etc/ssl/certs/ca-certificates.crt
IMAGES_DIR ?= $(ROOT)/out/images
IMAGE_SOURCE ?= https://github.com/seed-0a7eb009/cluster-api-provider-harvester
# Both binaries print these with --version (k8s.io/component-base/version/verflag).
VERSION_LDFLAGS = -s -w -X k8s.io/component-base/version.gitVersion=$(VERSION) -X k8s.io/component-base/version.gitCommit=$(REVISION) -X k8s.io/component-base/version/verflag.programName=$(1)
IMAGE_FLAGS = -version $(VERSION) -revision $(REVISION) -source $(IMAGE_SOURCE) -created $(SOURCE_DATE_EPOCH) -ca-certs $(CA_CERTS) -base '$(BASE)'

.PHONY: images
images: ## Build both images as OCI archives into out/images, without a Docker engine (IMG, CCM_IMG, VERSION, ARCH, BASE).
	for arch in $(ARCH); do \
	  CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) build -trimpath -buildvcs=false -ldflags '$(call VERSION_LDFLAGS,cluster-api-provider-harvester)' \
	    -o $(IMAGES_DIR)/linux-$$arch/manager . ; \
	  CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) build -trimpath -buildvcs=false -ldflags '$(call VERSION_LDFLAGS,harvester-cloud-controller-manager)' \
	    -o $(IMAGES_DIR)/linux-$$arch/harvester-cloud-controller-manager ./cloudprovider/cmd/harvester-cloud-controller-manager ; \
	done
	cd hack/images && GOWORK=off $(GO) run . $(IMAGE_FLAGS) -out $(IMAGES_DIR)/manager.oci.tar -ref $(IMG) -entrypoint /manager \
	  $(foreach a,$(ARCH),-binary linux/$(a)=$(IMAGES_DIR)/linux-$(a)/manager)
	cd hack/images && GOWORK=off $(GO) run . $(IMAGE_FLAGS) -out $(IMAGES_DIR)/ccm.oci.tar -ref $(CCM_IMG) -entrypoint /harvester-cloud-controller-manager \
	  $(foreach a,$(ARCH),-binary linux/$(a)=$(IMAGES_DIR)/linux-$(a)/harvester-cloud-controller-manager)

.PHONY: run
run: ## Run the manager against the cluster of the current kubeconfig (webhooks off).
	$(GO) run . --enable-webhooks=false

##@ Test

.PHONY: test
# hack/test.sh runs the e2e suite as two processes alongside the other packages.
test: ## Run every test: unit, envtest and end-to-end on the simulated Harvester (the manager from its image); fuzz targets replay their seeds (make fuzz fuzzes).
	@rm -f $(ROOT)/out/timings.txt
	$(TIMED) verify-generated $(MAKE) --no-print-directory verify-generated
	$(TIMED) tools $(MAKE) --no-print-directory -j$(TOOLS_JOBS) --output-sync=target test-tools
	$(TIMED) lint $(MAKE) --no-print-directory lint
	$(TIMED) tests env GO=$(GO) TEST_TIMEOUT=$(TEST_TIMEOUT) IMAGES_DIR=$(IMAGES_DIR) KUBEBUILDER_ASSETS=$(KUBEBUILDER_ASSETS) IPAM_PROVIDER_DIR=$(IPAM_PROVIDER_DIR) CAPI_OPERATOR_DIR=$(CAPI_OPERATOR_DIR) CLOUD_INIT_DIR=$(CLOUD_INIT_DIR) HARVESTER_LB_DIR=$(HARVESTER_LB_DIR) HARVESTER_WEBHOOK_DIR=$(HARVESTER_WEBHOOK_DIR) KUBEVIRT_DIR=$(KUBEVIRT_DIR) PROVIDERS_DIR=$(PROVIDERS_DIR) KUBECTL=$(KUBECTL) CLUSTERCTL=$(CLUSTERCTL) JQ=$(JQ) PREVIOUS_RELEASE_DIR=$(PREVIOUS_RELEASE_DIR) hack/test.sh $(TEST_FLAGS)
	$(TIMED) images-module-tests bash -c 'cd hack/images && GOWORK=off $(GO) test $(TEST_FLAGS) ./...'
	$(MAKE) --no-print-directory test-real-guest
	@echo "make test: phases in seconds (out/timings.txt):"; cat $(ROOT)/out/timings.txt

# The real guest runs under QEMU's emulation, which a machine busy with the other tests starves
# (a boot took minutes at a load of 30): it has the machine to itself, after them.
.PHONY: test-real-guest
test-real-guest: guest-image ## The tests that boot the real Debian guest under QEMU (make test runs them last).
	$(TIMED) real-guest env GUEST_IMAGE_DIR=$(GUEST_IMAGE_DIR) $(GO) test $(TEST_FLAGS) -timeout 20m -run '^TestRealGuest' ./test/harvestersim

.PHONY: test-full
test-full: ## make test with the long scenarios at full size (TEST_FULL=1: more rotations, outages and the bench at a tiny size; docs/development.md).
	TEST_FULL=1 $(MAKE) --no-print-directory test

# Everything `make test` runs besides the code under test, each timed (hack/timed.sh); `make
# test` builds them TOOLS_JOBS at a time.
.PHONY: test-tools
test-tools: envtest harvester-lb harvester-webhook kubevirt providers previous-release ipam-provider capi-operator cloud-init guest-image golangci-lint timed-images kubectl clusterctl jq


.PHONY: timed-images
timed-images:
	$(TIMED) images $(MAKE) --no-print-directory images

FUZZTIME ?= 2m

.PHONY: fuzz
fuzz: envtest ## Run each fuzz target for FUZZTIME (default 2m); crashers land in testdata/fuzz/ as regression seeds.
	FUZZTIME=$(FUZZTIME) hack/fuzz.sh

.PHONY: envtest
envtest: ## Build the test control planes (kube-apiserver, etcd; kube-scheduler, kube-controller-manager and kubectl of the same release) into the tool cache once.
	KUBE_VERSION=$(KUBE_VERSION) ETCD_VERSION=$(ETCD_VERSION) $(TIMED) envtest hack/ensure-control-plane.sh >/dev/null

# kubectl, for the tests that run the docs' commands: the test control planes' release, built
# with them (hack/ensure-control-plane.sh), so that their shared packages compile once.
KUBECTL := $(KUBEBUILDER_ASSETS)/kubectl

.PHONY: kubectl
kubectl: envtest ## Build kubectl (the test control planes' release, with them) into the tool cache once, for the tests that run the docs' commands.

# clusterctl, for the tests that run the docs' clusterctl commands: built from
# sigs.k8s.io/cluster-api at the version of hack/clusterctl/go.mod (the provider's), once, with
# that version stamped in as CAPI's release build does.
CLUSTERCTL := $(call TOOLDIR,clusterctl,mod,hack/clusterctl)/clusterctl
CLUSTERCTL_VERSION = $(shell awk '$$1 == "sigs.k8s.io/cluster-api" {print $$2}' hack/clusterctl/go.mod)

.PHONY: clusterctl
clusterctl: $(CLUSTERCTL) ## Build clusterctl (sigs.k8s.io/cluster-api, hack/clusterctl's version) into the tool cache once, for the tests that run the docs' commands.

# jq, for the tests that run the docs' jq filters: gojq built from the Go module proxy at the
# version of hack/jq/go.mod, once.
JQ := $(call TOOLDIR,jq,mod,hack/jq)/jq

.PHONY: jq
jq: $(JQ) ## Build jq (gojq, hack/jq's version) into the tool cache once, for the tests that run the docs' jq filters.

$(JQ):
	cd hack/jq && GOWORK=off CGO_ENABLED=0 $(ROOT)/$(TIMED) jq $(GO) build -trimpath -o $(JQ) .

$(CLUSTERCTL):
	cd hack/clusterctl && GOWORK=off CGO_ENABLED=0 $(ROOT)/$(TIMED) clusterctl $(GO) build -trimpath \
	  -ldflags "-X sigs.k8s.io/cluster-api/version.gitVersion=$(CLUSTERCTL_VERSION)" -o $(CLUSTERCTL) .

# The provider's previous release, which the clusterctl e2e scenario installs and then upgrades
# to the code checked out: a commit of this repository until release tags are published. Move it
# forward at each release (the scenario then tests the upgrade users of that release make).
PREVIOUS_RELEASE_COMMIT ?= ac9cb42f491138b0cc6a15bb74be01e84f771444
PREVIOUS_RELEASE_DIR := $(shell hack/ensure-previous-release.sh $(PREVIOUS_RELEASE_COMMIT) --dir)

.PHONY: previous-release
previous-release: ## Build the previous release (PREVIOUS_RELEASE_COMMIT: its manager and clusterctl assets) into the tool cache once.
	$(TIMED) previous-release hack/ensure-previous-release.sh $(PREVIOUS_RELEASE_COMMIT) >/dev/null

.PHONY: providers
providers: ## Build the managers the e2e suite runs as processes (RKE2 and K3s bootstrap and control plane, go.mod's CAPI core and kubeadm managers; with TEST_FULL=1 the previous CAPI minor's core too) into the tool cache once.
	PREVIOUS_CAPI=$(if $(TEST_FULL),1,0) $(TIMED) providers hack/ensure-providers.sh >/dev/null

# In test-tools, builds that share most of their compiled packages run one after the other: Go
# reuses a compiled package only once another build has put it in its cache, so on a first run
# two such builds side by side would compile the shared packages twice (the previous release's
# manager and ours; clusterctl and go.mod's CAPI managers).
ifneq ($(filter test-tools,$(MAKECMDGOALS)),)
previous-release: | timed-images
$(CLUSTERCTL): | providers
endif

.PHONY: chaos
CHAOS_FOCUS ?= Manager restarts|Deletion|stops answering
chaos: envtest harvester-lb harvester-webhook kubevirt images providers ## The fault scenarios at full size (30 machines, 20 manager kills, 30 deleted at once, a 60 s Harvester outage) and their table (out/chaos.md).
	CHAOS_MACHINES=30 CHAOS_KILLS=20 CHAOS_DELETE_MACHINES=30 CHAOS_OUTAGE=60s CHAOS_REPORT=$(ROOT)/out/chaos.md \
	  IMAGES_DIR=$(IMAGES_DIR) KUBEBUILDER_ASSETS=$(KUBEBUILDER_ASSETS) HARVESTER_LB_DIR=$(HARVESTER_LB_DIR) HARVESTER_WEBHOOK_DIR=$(HARVESTER_WEBHOOK_DIR) KUBEVIRT_DIR=$(KUBEVIRT_DIR) $(GO) test -count=1 -timeout 60m ./test/e2e -ginkgo.focus '$(CHAOS_FOCUS)'
	@cat $(ROOT)/out/chaos.md

.PHONY: harvester-lb
harvester-lb: ## Build Harvester's load balancer (controller and webhook, go.mod's version) into the tool cache once (every simulated Harvester runs them).
	HARVESTER_LB_VERSION=$(HARVESTER_LB_VERSION) $(TIMED) harvester-lb hack/ensure-harvester-lb.sh >/dev/null

.PHONY: kubevirt
kubevirt: ## Build KubeVirt's own admission (the webhooks virt-api serves, the KubeVirt Harvester runs; every simulated Harvester runs it), its virt-controller and its CRDs into the tool cache once.
	HARVESTER_VERSION=$(HARVESTER_VERSION) KUBEVIRT_VERSION=$(KUBEVIRT_VERSION) $(TIMED) kubevirt hack/ensure-kubevirt.sh >/dev/null

.PHONY: harvester-webhook
harvester-webhook: ## Build Harvester's admission webhook server and VM controllers (go.mod's version) and collect the CRDs they watch into the tool cache once (every simulated Harvester runs them).
	HARVESTER_VERSION=$(HARVESTER_VERSION) $(TIMED) harvester-webhook hack/ensure-harvester-webhook.sh >/dev/null

.PHONY: ipam-provider
ipam-provider: ## Build Cluster API's in-cluster IPAM provider and copy its CRDs into the tool cache once (for the e2e bed).
	IPAM_VERSION=$(IPAM_PROVIDER_VERSION) $(TIMED) ipam-provider hack/ensure-ipam-provider.sh >/dev/null

.PHONY: capi-operator
capi-operator: ## Build the Cluster API Operator (CAPI_OPERATOR_VERSION, the one Rancher Turtles v0.27 compiles in) and copy its CRDs into the tool cache once (for the e2e bed).
	CAPI_OPERATOR_VERSION=$(CAPI_OPERATOR_VERSION) $(TIMED) capi-operator hack/ensure-capi-operator.sh >/dev/null

.PHONY: cloud-init
cloud-init: ## Fetch cloud-init and its Python libraries from the host's Debian packages into the tool cache once (apt-get download, dpkg-deb -x; nothing installed): the e2e suite checks the VMs' user data with it.
	$(TIMED) cloud-init hack/ensure-cloud-init.sh >/dev/null

.PHONY: guest-image
guest-image: ## Build the bed's real guest into the tool cache once: QEMU from Debian's packages (fetched, not installed) and a minimal Debian guest made by mmdebstrap; make test boots it under QEMU's TCG.
	$(TIMED) guest-image hack/ensure-guest-image.sh >/dev/null

.PHONY: e2e-harvester
e2e-harvester: envtest ## The end-to-end suite against a real Harvester: HARVESTER_KUBECONFIG (admin), HARVESTER_NETWORK, HARVESTER_IMAGE [, HARVESTER_LB_IPAM].
	@test -n "$${HARVESTER_KUBECONFIG:-}" || { echo "set HARVESTER_KUBECONFIG (an admin kubeconfig of Harvester), HARVESTER_NETWORK and HARVESTER_IMAGE" >&2; exit 2; }
	KUBEBUILDER_ASSETS=$(KUBEBUILDER_ASSETS) $(GO) test -count=1 -timeout 60m -v -run '^TestRealHarvester$$' ./test/realharvester/

.PHONY: bench
BENCH_MACHINES ?= 50
BENCH_OUT ?= $(CURDIR)/out/bench
bench: envtest harvester-lb harvester-webhook kubevirt images ## The bench suite (docs/performance.md): BENCH_MACHINES, BENCH_CLUSTERS, BENCH_STEADY, BENCH_BOOT_DELAY, BENCH_PROFILE=1, BENCH_SCALEOUT=0; table and plot in out/bench.
	@rm -f $(BENCH_OUT)/report.json
	BENCH_MACHINES=$(BENCH_MACHINES) BENCH_OUT=$(BENCH_OUT) KUBEBUILDER_ASSETS=$(KUBEBUILDER_ASSETS) IMAGES_DIR=$(IMAGES_DIR) HARVESTER_LB_DIR=$(HARVESTER_LB_DIR) HARVESTER_WEBHOOK_DIR=$(HARVESTER_WEBHOOK_DIR) KUBEVIRT_DIR=$(KUBEVIRT_DIR) \
		$(GO) test -run '^$$' -bench '^BenchmarkSuite$$' -benchtime 1x -timeout 60m ./test/bench/; \
	status=$$?; \
	if [ -f $(BENCH_OUT)/report.json ]; then (cd hack/benchplot && GOWORK=off $(GO) run . -in $(BENCH_OUT)/report.json -out $(BENCH_OUT)/bench.png) && echo "plot: $(BENCH_OUT)/bench.png"; fi; \
	exit $$status

.PHONY: demo
DEMO_FLAGS ?=
FLAVOR ?= kubeadm
demo: envtest harvester-lb harvester-webhook kubevirt images providers ## Provision a whole cluster on the simulated Harvester with the manager from its image, delete it, check nothing is left (FLAVOR=kubeadm|rke2|k3s, DEMO_FLAGS="--workers 3").
	IMAGES_DIR=$(IMAGES_DIR) KUBEBUILDER_ASSETS=$(KUBEBUILDER_ASSETS) HARVESTER_LB_DIR=$(HARVESTER_LB_DIR) HARVESTER_WEBHOOK_DIR=$(HARVESTER_WEBHOOK_DIR) KUBEVIRT_DIR=$(KUBEVIRT_DIR) $(GO) run ./test/demo --flavor $(FLAVOR) $(DEMO_FLAGS)

##@ Tools

$(CONTROLLER_GEN):
	cd hack/tools && GOWORK=off $(GO) build -o $@ sigs.k8s.io/controller-tools/cmd/controller-gen

$(KUSTOMIZE):
	cd hack/tools && GOWORK=off $(GO) build -o $@ sigs.k8s.io/kustomize/kustomize/v5

.PHONY: tools
tools: $(CONTROLLER_GEN) $(KUSTOMIZE) ## Build the pinned code generators (controller-gen, kustomize) into the tool cache.
