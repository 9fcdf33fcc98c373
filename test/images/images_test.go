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

package images

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
)

// layoutWriter builds an OCI archive by hand, independently of hack/images.
type layoutWriter struct {
	blobs map[string][]byte
}

func (l *layoutWriter) add(data []byte) descriptor {
	digest := fmt.Sprintf("sha256:%x", sha256.Sum256(data))
	l.blobs[digest] = data
	return descriptor{Digest: digest, Size: int64(len(data))}
}

func (l *layoutWriter) addJSON(mediaType string, v any) descriptor {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	d := l.add(data)
	d.MediaType = mediaType
	return d
}

type tarEntry struct {
	name, link string
	typ        byte
	mode       int64
	data       string
}

func layerOf(t *testing.T, gz bool, entries ...tarEntry) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: e.mode, Size: int64(len(e.data))}
		if e.typ != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.data)[:h.Size]); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if !gz {
		return buf.Bytes()
	}
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write(buf.Bytes())
	zw.Close()
	return z.Bytes()
}

// image adds an image of two layers for arch and returns its manifest's descriptor.
func (l *layoutWriter) image(t *testing.T, arch string) descriptor {
	lower := l.add(layerOf(t, true,
		tarEntry{name: "bin/", typ: tar.TypeDir, mode: 0o755},
		tarEntry{name: "bin/sh", typ: tar.TypeReg, mode: 0o755, data: "shell"},
		tarEntry{name: "etc/", typ: tar.TypeDir, mode: 0o755},
		tarEntry{name: "etc/old/", typ: tar.TypeDir, mode: 0o755},
		tarEntry{name: "etc/old/a", typ: tar.TypeReg, mode: 0o644, data: "a"},
		tarEntry{name: "app", typ: tar.TypeReg, mode: 0o644, data: "old app"},
	))
	lower.MediaType = "application/vnd.oci.image.layer.v1.tar+gzip"
	upper := l.add(layerOf(t, false,
		tarEntry{name: "./app", typ: tar.TypeReg, mode: 0o755, data: "app for " + arch},
		tarEntry{name: "bin/.wh.sh", typ: tar.TypeReg},
		tarEntry{name: "etc/old/.wh..wh..opq", typ: tar.TypeReg},
		tarEntry{name: "link", link: "app", typ: tar.TypeLink},
		tarEntry{name: "soft", link: "/app", typ: tar.TypeSymlink, mode: 0o777},
	))
	upper.MediaType = "application/vnd.oci.image.layer.v1.tar"
	config := l.addJSON("application/vnd.oci.image.config.v1+json", map[string]any{
		"os": "linux", "architecture": arch,
		"config": map[string]any{"Entrypoint": []string{"/app"}, "User": "65532:65532", "WorkingDir": "/",
			"Env": []string{"PATH=/bin"}, "Labels": map[string]string{"l": arch}},
	})
	d := l.addJSON(mediaTypeOCIManifest, manifest{MediaType: mediaTypeOCIManifest, Config: config, Layers: []descriptor{lower, upper}})
	d.Platform = &struct {
		OS           string `json:"os"`
		Architecture string `json:"architecture"`
		Variant      string `json:"variant,omitempty"`
	}{OS: "linux", Architecture: arch}
	return d
}

func (l *layoutWriter) write(t *testing.T, top descriptor) string {
	top.Annotations = map[string]string{RefNameAnnotation: "example.com/app:v1"}
	entries := []tarEntry{
		{name: "oci-layout", typ: tar.TypeReg, mode: 0o644, data: `{"imageLayoutVersion":"1.0.0"}`},
		{name: "blobs/", typ: tar.TypeDir, mode: 0o755},
		{name: "blobs/sha256/", typ: tar.TypeDir, mode: 0o755},
	}
	for digest, data := range l.blobs {
		entries = append(entries, tarEntry{name: "blobs/sha256/" + digest[len("sha256:"):], typ: tar.TypeReg, mode: 0o644, data: string(data)})
	}
	idx, _ := json.Marshal(index{MediaType: mediaTypeOCIIndex, Manifests: []descriptor{top}})
	entries = append(entries, tarEntry{name: "index.json", typ: tar.TypeReg, mode: 0o644, data: string(idx)})
	file := filepath.Join(t.TempDir(), "image.oci.tar")
	if err := os.WriteFile(file, layerOf(t, false, entries...), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

func TestOneImage(t *testing.T) {
	g := NewWithT(t)
	l := &layoutWriter{blobs: map[string][]byte{}}
	archive := l.write(t, l.image(t, "arm64"))

	img, err := OpenPlatform(archive, "linux", "arm64")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(img.RefName).To(Equal("example.com/app:v1"))
	cfg, err := img.Config()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cfg).To(Equal(Config{OS: "linux", Architecture: "arm64", Entrypoint: []string{"/app"}, User: "65532:65532",
		Env: []string{"PATH=/bin"}, WorkingDir: "/", Labels: map[string]string{"l": "arm64"}}))

	files, err := img.Files()
	g.Expect(err).NotTo(HaveOccurred())
	byPath := map[string]File{}
	var paths []string
	for _, f := range files {
		byPath[f.Path], paths = f, append(paths, f.Path)
	}
	// The whiteout removed /bin/sh, the opaque marker /etc/old's content.
	g.Expect(paths).To(Equal([]string{"/app", "/bin", "/etc", "/etc/old", "/link", "/soft"}))
	g.Expect(byPath["/app"].Mode).To(Equal(fs.FileMode(0o755)))
	g.Expect(byPath["/bin"].Mode.IsDir()).To(BeTrue())
	g.Expect(byPath["/soft"].Mode & fs.ModeSymlink).NotTo(BeZero())
	g.Expect(byPath["/link"].Linkname).To(Equal("/app"))

	dest := filepath.Join(t.TempDir(), "app")
	g.Expect(img.Extract("/link", dest)).To(Succeed())
	data, err := os.ReadFile(dest)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(data)).To(Equal("app for arm64"))
	st, err := os.Stat(dest)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Mode().Perm()).To(Equal(fs.FileMode(0o755)))

	g.Expect(img.Extract("/bin/sh", dest)).To(MatchError(ContainSubstring("has no /bin/sh")))
	g.Expect(img.Extract("/soft", dest)).To(MatchError(ContainSubstring("not a regular file")))
	_, err = OpenPlatform(archive, "linux", "amd64")
	g.Expect(err).To(MatchError(ContainSubstring("not linux/amd64")))
}

func TestMultiPlatformIndex(t *testing.T) {
	g := NewWithT(t)
	l := &layoutWriter{blobs: map[string][]byte{}}
	amd, arm := l.image(t, "amd64"), l.image(t, "arm64")
	archive := l.write(t, l.addJSON(mediaTypeOCIIndex, index{MediaType: mediaTypeOCIIndex, Manifests: []descriptor{amd, arm}}))

	for arch, want := range map[string]descriptor{"amd64": amd, "arm64": arm} {
		img, err := OpenPlatform(archive, "linux", arch)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(img.Digest).To(Equal(want.Digest))
		g.Expect(img.RefName).To(Equal("example.com/app:v1"))
		dest := filepath.Join(t.TempDir(), "app")
		g.Expect(img.Extract("/app", dest)).To(Succeed())
		g.Expect(os.ReadFile(dest)).To(BeEquivalentTo("app for " + arch))
	}
	_, err := OpenPlatform(archive, "linux", "s390x")
	g.Expect(err).To(MatchError(ContainSubstring("0 of 2 descriptors are images for linux/s390x")))
}
