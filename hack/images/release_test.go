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

package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// `make release` and `make release-push`, as a release workflow runs them: every asset clusterctl
// and Turtles read, the components naming the version's images in the given registry, both image
// archives, checksums that verify, and a push after which the registry serves exactly the
// archived images.
func TestMakeReleaseAndPush(t *testing.T) {
	if testing.Short() {
		t.Skip("builds both binaries")
	}
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	// 127.0.0.1 is spoken to over plain http, as for a local registry.
	reg := strings.TrimPrefix(srv.URL, "http://") + "/capi"
	version := "v0.0.0-releasetest"
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "out", "release", version)
	t.Cleanup(func() {
		os.RemoveAll(dir)
		os.RemoveAll(filepath.Join(root, "out", "release-build", version))
	})
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	makeIn := func(target string) {
		t.Helper()
		cmd := exec.Command("make", "-C", root, target, "VERSION="+version, "REGISTRY="+reg)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("make %s: %v\n%s", target, err, out)
		}
	}

	bad := exec.Command("make", "-C", root, "release", "VERSION=latest")
	if out, err := bad.CombinedOutput(); err == nil || !bytes.Contains(out, []byte("VERSION=vX.Y.Z")) {
		t.Fatalf("make release without a version: %v\n%s", err, out)
	}

	makeIn("release")
	for _, name := range []string{"metadata.yaml", "infrastructure-components.yaml", "cluster-template.yaml",
		"cluster-template-topology.yaml", "clusterclass-harvester.yaml", "cluster-template-rke2.yaml",
		"cluster-api-provider-harvester.oci.tar", "harvester-cloud-controller-manager.oci.tar", "checksums.txt"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("release asset %s: %v", name, err)
		}
	}
	components, err := os.ReadFile(filepath.Join(dir, "infrastructure-components.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, img := range []string{reg + "/cluster-api-provider-harvester:" + version, reg + "/harvester-cloud-controller-manager:" + version} {
		if !bytes.Contains(components, []byte(img)) {
			t.Errorf("infrastructure-components.yaml does not name %s", img)
		}
	}
	if bytes.Contains(components, []byte(":dev")) {
		t.Error("infrastructure-components.yaml still names a :dev image")
	}

	// checksums.txt covers every other file and verifies, as `sha256sum -c` would.
	sums, err := os.Open(filepath.Join(dir, "checksums.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer sums.Close()
	listed := map[string]bool{}
	sc := bufio.NewScanner(sums)
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok {
			t.Fatalf("checksums.txt line %q", sc.Text())
		}
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		got := sha256.Sum256(data)
		if hex.EncodeToString(got[:]) != sum {
			t.Errorf("checksum of %s does not verify", name)
		}
		listed[name] = true
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != "checksums.txt" && !listed[e.Name()] {
			t.Errorf("checksums.txt leaves out %s", e.Name())
		}
	}

	makeIn("release-push")
	for archive, repo := range map[string]string{
		"cluster-api-provider-harvester.oci.tar":     "cluster-api-provider-harvester",
		"harvester-cloud-controller-manager.oci.tar": "harvester-cloud-controller-manager",
	} {
		p := readLayout(t, filepath.Join(dir, archive))
		index, err := p.ImageIndex()
		if err != nil {
			t.Fatal(err)
		}
		m, err := index.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		served, err := remote.Head(mustRef(t, reg+"/"+repo+":"+version))
		if err != nil {
			t.Fatal(err)
		}
		if served.Digest != m.Manifests[0].Digest {
			t.Errorf("%s: the registry serves %s, the archive holds %s", repo, served.Digest, m.Manifests[0].Digest)
		}
	}
}
