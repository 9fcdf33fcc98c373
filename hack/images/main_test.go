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
	"archive/tar"
	"bytes"
	"io"
	"log"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

func testOptions(t *testing.T, out string, binaries ...string) options {
	t.Helper()
	dir := t.TempDir()
	certs := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(certs, []byte("certificates"), 0o644); err != nil {
		t.Fatal(err)
	}
	o := options{out: out, ref: "example.com/app:v1", entrypoint: "/app", version: "v1.2.3", revision: "abc",
		source: "https://example.com/app", created: time.Unix(1700000000, 0).UTC(), caCerts: certs}
	for _, platform := range binaries {
		bin := filepath.Join(dir, strings.ReplaceAll(platform, "/", "-"))
		if err := os.WriteFile(bin, []byte("binary for "+platform), 0o755); err != nil {
			t.Fatal(err)
		}
		o.binaries = append(o.binaries, platformBinary{platform: platform, path: bin})
	}
	return o
}

// readLayout unpacks an archive and opens it as an OCI layout.
func readLayout(t *testing.T, archive string) layout.Path {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dir := t.TempDir()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, h.Name)
		if h.Typeflag == tar.TypeDir {
			os.MkdirAll(p, 0o755)
			continue
		}
		data, _ := io.ReadAll(tr)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// layerFiles reads the image's one layer.
func layerFiles(t *testing.T, img v1.Image) map[string]*tar.Header {
	t.Helper()
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers %d: %v", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	files := map[string]*tar.Header{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		} else if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = h
	}
}

func TestReproducible(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.tar"), filepath.Join(dir, "b.tar")
	da, changed, err := build(testOptions(t, a, "linux/amd64"))
	if err != nil || !changed {
		t.Fatalf("first build: %v, changed %v", err, changed)
	}
	db, _, err := build(testOptions(t, b, "linux/amd64"))
	if err != nil {
		t.Fatal(err)
	}
	ba, _ := os.ReadFile(a)
	bb, _ := os.ReadFile(b)
	if da != db || !bytes.Equal(ba, bb) {
		t.Fatalf("two builds differ: %s and %s", da, db)
	}
	if _, changed, err := build(testOptions(t, a, "linux/amd64")); err != nil || changed {
		t.Fatalf("rebuild: %v, changed %v (want unchanged)", err, changed)
	}

	p := readLayout(t, a)
	index, _ := p.ImageIndex()
	manifest, _ := index.IndexManifest()
	if len(manifest.Manifests) != 1 || manifest.Manifests[0].Annotations[annotationRefName] != "example.com/app:v1" {
		t.Fatalf("index.json: %+v", manifest.Manifests)
	}
	img, err := p.Image(manifest.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := img.ConfigFile()
	if cfg.Config.User != "65532:65532" || cfg.Config.Entrypoint[0] != "/app" || cfg.Architecture != "amd64" ||
		cfg.Config.Labels[labelVersion] != "v1.2.3" || !cfg.Created.Equal(time.Unix(1700000000, 0)) {
		t.Fatalf("config: %+v", cfg)
	}
	files := layerFiles(t, img)
	for name, mode := range map[string]int64{"app": 0o755, "etc/passwd": 0o644, "etc/ssl/certs/ca-certificates.crt": 0o644, "tmp/": 0o1777} {
		if h := files[name]; h == nil || h.Mode != mode || !h.ModTime.Equal(time.Unix(1700000000, 0)) {
			t.Errorf("%s: %+v", name, h)
		}
	}
}

func TestMultiPlatform(t *testing.T) {
	out := filepath.Join(t.TempDir(), "multi.tar")
	if _, _, err := build(testOptions(t, out, "linux/amd64", "linux/arm64")); err != nil {
		t.Fatal(err)
	}
	index, _ := readLayout(t, out).ImageIndex()
	top, _ := index.IndexManifest()
	if len(top.Manifests) != 1 || top.Manifests[0].Annotations[annotationRefName] != "example.com/app:v1" {
		t.Fatalf("index.json: %+v", top.Manifests)
	}
	nested, err := index.ImageIndex(top.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := nested.IndexManifest()
	if len(m.Manifests) != 2 {
		t.Fatalf("want 2 platforms: %+v", m.Manifests)
	}
	for _, d := range m.Manifests {
		img, _ := nested.Image(d.Digest)
		cfg, _ := img.ConfigFile()
		if d.Platform == nil || d.Platform.Architecture != cfg.Architecture {
			t.Errorf("descriptor %+v, config architecture %s", d.Platform, cfg.Architecture)
		}
	}
}

// With -base, the layer holds the binary only, over the base's layers.
func TestBase(t *testing.T) {
	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer reg.Close()
	u, _ := url.Parse(reg.URL)
	baseRef := u.Host + "/base:nonroot"
	base, err := random.Image(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	base, err = mutate.Config(base, v1.Config{Env: []string{"PATH=/base", "KEEP=1"}, Labels: map[string]string{"base": "yes"}})
	if err != nil {
		t.Fatal(err)
	}
	ref, _ := name.ParseReference(baseRef)
	if err := remote.Write(ref, base); err != nil {
		t.Fatal(err)
	}

	o := testOptions(t, filepath.Join(t.TempDir(), "based.tar"), "linux/amd64")
	o.base = baseRef
	if _, _, err := build(o); err != nil {
		t.Fatal(err)
	}
	index, _ := readLayout(t, o.out).ImageIndex()
	m, _ := index.IndexManifest()
	img, _ := index.Image(m.Manifests[0].Digest)
	layers, _ := img.Layers()
	if len(layers) != 2 {
		t.Fatalf("want the base's layer and ours, got %d", len(layers))
	}
	ours := map[string]bool{}
	rc, _ := layers[1].Uncompressed()
	defer rc.Close()
	tr := tar.NewReader(rc)
	for h, err := tr.Next(); err == nil; h, err = tr.Next() {
		ours[h.Name] = true
	}
	if len(ours) != 1 || !ours["app"] {
		t.Errorf("our layer over a base: %v, want only app", ours)
	}
	cfg, _ := img.ConfigFile()
	env := strings.Join(cfg.Config.Env, " ")
	if !strings.Contains(env, "KEEP=1") || strings.Contains(env, "PATH=/base") || cfg.Config.Labels["base"] != "yes" {
		t.Errorf("config over a base: %+v", cfg.Config)
	}
}

// An archive build wrote is pushed as it is: the registry then serves the same digest, for a
// one-platform image and for a platform index, and a second push changes nothing.
func TestPush(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	t.Setenv("DOCKER_CONFIG", t.TempDir()) // no credentials: the test registry needs none
	for _, tc := range []struct {
		name     string
		binaries []string
	}{{"one platform", []string{"linux/amd64"}}, {"two platforms", []string{"linux/amd64", "linux/arm64"}}} {
		out := filepath.Join(t.TempDir(), "img.oci.tar")
		digest, _, err := build(testOptions(t, out, tc.binaries...))
		if err != nil {
			t.Fatal(err)
		}
		ref := host + "/capi/manager:v9.9.9"
		for i := 0; i < 2; i++ {
			pushed, err := push(out, ref, true)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if pushed != digest {
				t.Fatalf("%s: pushed %s, built %s", tc.name, pushed, digest)
			}
		}
		served, err := remote.Head(mustRef(t, ref))
		if err != nil {
			t.Fatal(err)
		}
		if served.Digest.String() != digest {
			t.Fatalf("%s: the registry serves %s, built %s", tc.name, served.Digest, digest)
		}
	}
	if _, err := push(filepath.Join(t.TempDir(), "missing.oci.tar"), host+"/x:y", true); err == nil {
		t.Fatal("pushing a missing archive succeeded")
	}
}

func mustRef(t *testing.T, ref string) name.Reference {
	t.Helper()
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
