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
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// push uploads the one image (or platform index) of an OCI archive that build wrote to ref, with
// the credentials of the Docker config (`docker login`, or $DOCKER_CONFIG), and returns its digest,
// which is the archive's: the bytes pushed are the ones built.
func push(archive, ref string, insecure bool) (string, error) {
	var opts []name.Option
	if insecure {
		opts = append(opts, name.Insecure)
	}
	tag, err := name.ParseReference(ref, opts...)
	if err != nil {
		return "", fmt.Errorf("-ref %q: %w", ref, err)
	}
	dir, err := os.MkdirTemp("", "oci-push-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	if err := untar(archive, dir); err != nil {
		return "", fmt.Errorf("reading %s: %w", archive, err)
	}
	p, err := layout.FromPath(dir)
	if err != nil {
		return "", err
	}
	index, err := p.ImageIndex()
	if err != nil {
		return "", err
	}
	manifest, err := index.IndexManifest()
	if err != nil {
		return "", err
	}
	if len(manifest.Manifests) != 1 {
		return "", fmt.Errorf("%s holds %d descriptors, want the one build writes", archive, len(manifest.Manifests))
	}
	desc := manifest.Manifests[0]
	auth := remote.WithAuthFromKeychain(authn.DefaultKeychain)
	switch {
	case desc.MediaType.IsIndex():
		idx, err := index.ImageIndex(desc.Digest)
		if err != nil {
			return "", err
		}
		if err := remote.WriteIndex(tag, idx, auth); err != nil {
			return "", err
		}
	case desc.MediaType.IsImage():
		img, err := index.Image(desc.Digest)
		if err != nil {
			return "", err
		}
		if err := remote.Write(tag, img, auth); err != nil {
			return "", err
		}
	default:
		return "", fmt.Errorf("%s: unexpected media type %s", archive, desc.MediaType)
	}
	return desc.Digest.String(), nil
}

// untar unpacks an archive tarDir wrote.
func untar(archive, dir string) error {
	f, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		p := filepath.Join(dir, filepath.Clean("/"+h.Name))
		if !strings.HasPrefix(p, filepath.Clean(dir)+string(filepath.Separator)) {
			return fmt.Errorf("entry %q leaves the archive", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			out, err := os.Create(p)
			if err != nil {
				return err
			}
			_, err = io.Copy(out, tr)
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		default:
			return fmt.Errorf("entry %q: unexpected type %c", h.Name, h.Typeflag)
		}
	}
}
