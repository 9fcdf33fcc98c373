/*
Copyright 2026 The cluster-api-provider-harvester Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Command images packs a static Go binary into an OCI image and writes it as an OCI
// image-layout archive (a tar of oci-layout, index.json and blobs/sha256/...), without a
// Docker engine: what `make images` runs for the manager and the CCM. With -push it uploads
// such an archive to a registry instead (`make release-push`).
//
// The image has one layer over an empty base: the binary, the build machine's CA
// certificates, and /etc/passwd and /etc/group with the non-root user 65532 it runs as.
// With -base, the layer holds the binary only and the base provides the rest (e.g.
// gcr.io/distroless/static:nonroot). Every timestamp is -created and tar entries are sorted,
// so the same inputs give the same digest.
//
// It is a module of its own (hack/images/go.mod, run with GOWORK=off) so that
// go-containerregistry and what it requires stay out of the product's go.mod and do not move
// the versions hack/tools pins controller-gen and kustomize with.
package main

import (
	"flag"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"
)

type options struct {
	out        string
	ref        string
	entrypoint string
	binaries   platformBinaries
	version    string
	revision   string
	source     string
	created    time.Time
	caCerts    string
	base       string
}

// platformBinaries is the repeated -binary flag: os/arch=path.
type platformBinaries []platformBinary

type platformBinary struct{ platform, path string }

func (b *platformBinaries) String() string { return fmt.Sprint(*b) }

func (b *platformBinaries) Set(s string) error {
	platform, path, ok := strings.Cut(s, "=")
	if !ok || !strings.Contains(platform, "/") || path == "" {
		return fmt.Errorf("want os/arch=path, got %q", s)
	}
	*b = append(*b, platformBinary{platform: platform, path: path})
	return nil
}

// The Kubernetes libraries in both binaries parse the version stamped into
// k8s.io/component-base/version and panic at start-up when it does not begin with vX.Y.Z.
var stampableVersion = regexp.MustCompile(`^v\d+\.\d+\.\d+`)

func main() {
	o := options{}
	flag.StringVar(&o.out, "out", "", "The OCI archive to write.")
	flag.StringVar(&o.ref, "ref", "", "The image reference recorded in index.json (org.opencontainers.image.ref.name).")
	flag.StringVar(&o.entrypoint, "entrypoint", "", "Absolute path of the binary in the image, its entrypoint.")
	flag.Var(&o.binaries, "binary", "os/arch=path of the static binary for a platform; repeat for a multi-platform image.")
	flag.StringVar(&o.version, "version", "", "Version of the image (label org.opencontainers.image.version); the version stamped into the binary.")
	flag.StringVar(&o.revision, "revision", "", "Source revision (label org.opencontainers.image.revision).")
	flag.StringVar(&o.source, "source", "", "Source repository URL (label org.opencontainers.image.source).")
	flag.StringVar(&o.caCerts, "ca-certs", "/etc/ssl/certs/ca-certificates.crt", "CA certificate bundle to install (ignored with -base).")
	flag.StringVar(&o.base, "base", "", "Base image from a registry (default: none, an empty base).")
	created := flag.String("created", os.Getenv("SOURCE_DATE_EPOCH"), "Time of every timestamp, in seconds since the epoch (default: $SOURCE_DATE_EPOCH, else 0).")
	pushArchive := flag.String("push", "", "Instead of building: push this OCI archive's image to -ref, with the Docker config's credentials.")
	insecure := flag.Bool("insecure", false, "With -push: the registry speaks plain http.")
	flag.Parse()

	if *pushArchive != "" {
		digest, err := push(*pushArchive, o.ref, *insecure)
		if err != nil {
			fmt.Fprintln(os.Stderr, "images:", err)
			os.Exit(1)
		}
		fmt.Printf("%s %s (pushed)\n", o.ref, digest)
		return
	}

	if err := o.complete(*created); err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		flag.Usage()
		os.Exit(2)
	}
	digest, changed, err := build(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
	state := "written"
	if !changed {
		state = "unchanged"
	}
	fmt.Printf("%s %s %s (%s)\n", o.out, digest, o.ref, state)
}

func (o *options) complete(created string) error {
	switch {
	case o.out == "", o.ref == "", len(o.binaries) == 0:
		return fmt.Errorf("-out, -ref and -binary are required")
	case !strings.HasPrefix(o.entrypoint, "/"):
		return fmt.Errorf("-entrypoint must be an absolute path, got %q", o.entrypoint)
	case !stampableVersion.MatchString(o.version):
		return fmt.Errorf("-version %q does not start with vX.Y.Z, which the binaries' Kubernetes libraries require", o.version)
	}
	o.created = time.Unix(0, 0).UTC()
	if created != "" {
		sec, err := strconv.ParseInt(created, 10, 64)
		if err != nil {
			return fmt.Errorf("-created (or SOURCE_DATE_EPOCH) %q: %w", created, err)
		}
		o.created = time.Unix(sec, 0).UTC()
	}
	return nil
}
