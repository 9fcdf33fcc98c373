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
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Annotations of the one descriptor of index.json: the OCI name, and containerd's (which
// `ctr images import` and Docker's containerd image store read).
const (
	annotationRefName       = "org.opencontainers.image.ref.name"
	annotationContainerName = "io.containerd.image.name"
)

// build writes the archive of o and returns the digest of its one descriptor (the image
// manifest, or the index of the platforms' manifests) and whether the file changed.
func build(o options) (string, bool, error) {
	dir, err := os.MkdirTemp("", "oci-layout-")
	if err != nil {
		return "", false, err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return "", false, err
	}
	annotations := layout.WithAnnotations(map[string]string{annotationRefName: o.ref, annotationContainerName: o.ref})

	var digest v1.Hash
	if len(o.binaries) == 1 {
		img, platform, err := image(o, o.binaries[0])
		if err != nil {
			return "", false, err
		}
		if err := p.AppendImage(img, annotations, layout.WithPlatform(*platform)); err != nil {
			return "", false, err
		}
		if digest, err = img.Digest(); err != nil {
			return "", false, err
		}
	} else {
		index := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
		for _, b := range o.binaries {
			img, platform, err := image(o, b)
			if err != nil {
				return "", false, err
			}
			index = mutate.AppendManifests(index, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: platform}})
		}
		if err := p.AppendIndex(index, annotations); err != nil {
			return "", false, err
		}
		if digest, err = index.Digest(); err != nil {
			return "", false, err
		}
	}

	var archive bytes.Buffer
	if err := tarDir(&archive, dir, o.created); err != nil {
		return "", false, err
	}
	changed, err := writeIfChanged(o.out, archive.Bytes())
	return digest.String(), changed, err
}

// tarDir writes dir's tree in lexical order, every entry owned by root with the same time.
func tarDir(w io.Writer, dir string, created time.Time) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		h := &tar.Header{Name: filepath.ToSlash(rel), Mode: 0o644, Typeflag: tar.TypeReg, ModTime: created}
		var data []byte
		if d.IsDir() {
			h.Name, h.Mode, h.Typeflag = h.Name+"/", 0o755, tar.TypeDir
		} else if data, err = os.ReadFile(path); err != nil {
			return err
		}
		h.Size = int64(len(data))
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err = tw.Write(data)
		return err
	})
	if err != nil {
		return fmt.Errorf("archiving the layout: %w", err)
	}
	return tw.Close()
}

// writeIfChanged leaves an identical file alone, so that make and rsync see no change.
func writeIfChanged(name string, data []byte) (bool, error) {
	if old, err := os.ReadFile(name); err == nil && bytes.Equal(old, data) {
		return false, nil
	}
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return false, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(name), filepath.Base(name)+".tmp-")
	if err != nil {
		return false, err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return false, err
	}
	if err := tmp.Close(); err != nil {
		return false, err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return false, err
	}
	return true, os.Rename(tmp.Name(), name)
}
