# syntax=docker/dockerfile:1
# Two images from one file: `--target manager` (the provider) and `--target ccm` (the guest's
# cloud controller manager). Static binaries on distroless, running as non-root.
ARG GO_VERSION=1.26

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS deps
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY api/ api/
COPY pkg/ pkg/
COPY internal/webhookguard/ internal/webhookguard/
COPY controllers/ controllers/
COPY cloudprovider/ cloudprovider/
COPY templates/ templates/
COPY main.go ./

# VERSION and REVISION are what both binaries print with --version, stamped as `make images`
# does; the Kubernetes libraries in them need a VERSION that starts with vX.Y.Z.
FROM deps AS build-manager
ARG TARGETOS TARGETARCH VERSION=v0.0.0-dev REVISION=unknown
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} go build -trimpath -buildvcs=false \
      -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=${VERSION} -X k8s.io/component-base/version.gitCommit=${REVISION} -X k8s.io/component-base/version/verflag.programName=cluster-api-provider-harvester" \
      -o /out/manager .

FROM deps AS build-ccm
ARG TARGETOS TARGETARCH VERSION=v0.0.0-dev REVISION=unknown
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} go build -trimpath -buildvcs=false \
      -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=${VERSION} -X k8s.io/component-base/version.gitCommit=${REVISION} -X k8s.io/component-base/version/verflag.programName=harvester-cloud-controller-manager" \
      -o /out/harvester-cloud-controller-manager ./cloudprovider/cmd/harvester-cloud-controller-manager

FROM gcr.io/distroless/static:nonroot AS ccm
COPY --from=build-ccm /out/harvester-cloud-controller-manager /harvester-cloud-controller-manager
USER 65532:65532
ENTRYPOINT ["/harvester-cloud-controller-manager"]

FROM gcr.io/distroless/static:nonroot AS manager
COPY --from=build-manager /out/manager /manager
USER 65532:65532
ENTRYPOINT ["/manager"]
