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

// Package release builds the provider's release assets, the files clusterctl reads from a
// GitHub release: metadata.yaml, infrastructure-components.yaml and the cluster templates.
package release

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/templates"
)

// The images config/ names; a release replaces them with its own.
const (
	devImage    = "ghcr.io/seed-0a7eb009/cluster-api-provider-harvester:dev"
	devCCMImage = "ghcr.io/seed-0a7eb009/harvester-cloud-controller-manager:dev"
)

// InPlaceUpdatesAsset is the release asset that registers the in-place update extension
// (config/inplace): applied by hand where it is wanted.
const InPlaceUpdatesAsset = "in-place-updates.yaml"

// Options of a release.
type Options struct {
	// Root is the repository's root directory.
	Root string
	// Image and CCMImage are the manager's and the guests' CCM images of the release.
	Image, CCMImage string
}

// Build returns the release assets by file name.
func Build(o Options) (map[string][]byte, error) {
	assets := map[string][]byte{}
	metadata, err := os.ReadFile(filepath.Join(o.Root, "metadata.yaml"))
	if err != nil {
		return nil, err
	}
	assets["metadata.yaml"] = metadata

	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	resources, err := k.Run(filesys.MakeFsOnDisk(), filepath.Join(o.Root, "config", "default"))
	if err != nil {
		return nil, fmt.Errorf("kustomize config/default: %w", err)
	}
	components, err := resources.AsYaml()
	if err != nil {
		return nil, err
	}
	if components, err = Retag(components, o.Image, o.CCMImage); err != nil {
		return nil, err
	}
	assets["infrastructure-components.yaml"] = components
	// Not part of the components: CAPI refuses ExtensionConfigs unless its RuntimeSDK gate is on.
	extension, err := os.ReadFile(filepath.Join(o.Root, "config", "inplace", "extensionconfig.yaml"))
	if err != nil {
		return nil, err
	}
	assets[InPlaceUpdatesAsset] = extension

	err = fs.WalkDir(templates.Files, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := templates.Files.ReadFile(path)
		assets[path] = data
		return err
	})
	return assets, err
}

// Retag replaces the images config/ names in components (infrastructure-components.yaml as
// config/default makes it) with image and ccmImage; an empty one is left as it is.
func Retag(components []byte, image, ccmImage string) ([]byte, error) {
	for _, r := range []struct{ from, to string }{{devImage, image}, {devCCMImage, ccmImage}} {
		if r.to == "" {
			continue
		}
		if !bytes.Contains(components, []byte(r.from)) {
			return nil, fmt.Errorf("config/default no longer names the image %s", r.from)
		}
		components = bytes.ReplaceAll(components, []byte(r.from), []byte(r.to))
	}
	return components, nil
}

// Write builds the assets into dir.
func Write(dir string, o Options) ([]string, error) {
	assets, err := Build(o)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil { //nolint:gosec // a release is published: world-readable
		return nil, err
	}
	var names []string
	for name, data := range assets {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil { //nolint:gosec // a release is published: world-readable
			return nil, err
		}
		names = append(names, name)
	}
	return names, nil
}

// ChecksumsFile is the file WriteChecksums writes, in the format of `sha256sum` (so that
// `sha256sum -c checksums.txt` checks a download).
const ChecksumsFile = "checksums.txt"

// WriteChecksums writes ChecksumsFile into dir: the SHA-256 of every other regular file there,
// by name.
func WriteChecksums(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var names []string
	for _, e := range entries {
		if e.Type().IsRegular() && e.Name() != ChecksumsFile {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	var out bytes.Buffer
	for _, name := range names {
		sum, err := fileSHA256(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		fmt.Fprintf(&out, "%s  %s\n", sum, name)
	}
	return os.WriteFile(filepath.Join(dir, ChecksumsFile), out.Bytes(), 0o644) //nolint:gosec // a release is published: world-readable
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path) //nolint:gosec // the release's own files
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }() // read only
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
