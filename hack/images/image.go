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
	"bytes"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Labels of the image config (OCI image-spec annotations, as labels).
const (
	labelSource   = "org.opencontainers.image.source"
	labelVersion  = "org.opencontainers.image.version"
	labelRevision = "org.opencontainers.image.revision"
	labelTitle    = "org.opencontainers.image.title"
	labelCreated  = "org.opencontainers.image.created"
)

var defaultEnv = []string{
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"SSL_CERT_FILE=" + caCertsPath,
}

// image builds the image of one platform's binary.
func image(o options, b platformBinary) (v1.Image, *v1.Platform, error) {
	platform, err := v1.ParsePlatform(b.platform)
	if err != nil {
		return nil, nil, err
	}
	base, err := baseImage(o.base, *platform)
	if err != nil {
		return nil, nil, err
	}
	baseManifest, err := base.MediaType()
	if err != nil {
		return nil, nil, err
	}
	layerType := types.OCILayer
	if baseManifest == types.DockerManifestSchema2 {
		layerType = types.DockerLayer // one manifest, one family of media types
	}

	raw, err := layerTar(b.path, o.entrypoint, o.caCerts, o.base == "", o.created)
	if err != nil {
		return nil, nil, fmt.Errorf("layer of %s: %w", b.path, err)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(raw)), nil
	}, tarball.WithMediaType(layerType), tarball.WithCompressedCaching)
	if err != nil {
		return nil, nil, err
	}
	what := o.entrypoint
	if o.base == "" {
		what += ", CA certificates, passwd and group with the user " + nonrootName
	}
	img, err := mutate.Append(base, mutate.Addendum{Layer: layer, History: v1.History{
		Created:   v1.Time{Time: o.created},
		CreatedBy: "hack/images: " + what,
	}})
	if err != nil {
		return nil, nil, err
	}

	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture, cfg.Variant, cfg.OSVersion = platform.OS, platform.Architecture, platform.Variant, platform.OSVersion
	cfg.Created = v1.Time{Time: o.created}
	c := &cfg.Config
	c.Entrypoint, c.Cmd = []string{o.entrypoint}, nil
	c.User = fmt.Sprintf("%d:%d", nonrootUID, nonrootUID)
	c.WorkingDir = nonrootHome
	c.Env = withEnv(c.Env, defaultEnv...)
	if c.Labels == nil {
		c.Labels = map[string]string{}
	}
	for k, v := range map[string]string{
		labelSource: o.source, labelVersion: o.version, labelRevision: o.revision,
		labelTitle: path.Base(o.entrypoint), labelCreated: o.created.Format("2006-01-02T15:04:05Z"),
	} {
		if v != "" {
			c.Labels[k] = v
		}
	}
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		return nil, nil, err
	}
	return img, platform, nil
}

// baseImage is an empty OCI image, or the base's image for the platform.
func baseImage(ref string, platform v1.Platform) (v1.Image, error) {
	if ref == "" {
		return mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON), nil
	}
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil, fmt.Errorf("-base %q: %w", ref, err)
	}
	img, err := remote.Image(r, remote.WithPlatform(platform), remote.WithAuthFromKeychain(authn.DefaultKeychain))
	if err != nil {
		return nil, fmt.Errorf("pulling the base %s for %s: %w", ref, platform, err)
	}
	return img, nil
}

// withEnv sets variables (KEY=value) in env, replacing those of the same key.
func withEnv(env []string, set ...string) []string {
	out := make([]string, 0, len(env)+len(set))
	keys := map[string]bool{}
	for _, kv := range set {
		k, _, _ := strings.Cut(kv, "=")
		keys[k] = true
	}
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); !keys[k] {
			out = append(out, kv)
		}
	}
	return append(out, set...)
}
