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

// Package images reads the OCI image-layout archives `make images` writes (a tar of
// oci-layout, index.json and blobs/sha256/...): an image's config, its files, and one file
// extracted to disk, e.g. to run the manager binary of the image in the test bed.
//
// It parses the layout with archive/tar and encoding/json only, so the product's module needs
// no image library.
package images

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"runtime"
	"sort"
	"strings"
)

// Media types this package reads.
const (
	mediaTypeOCIIndex       = "application/vnd.oci.image.index.v1+json"
	mediaTypeOCIManifest    = "application/vnd.oci.image.manifest.v1+json"
	mediaTypeDockerList     = "application/vnd.docker.distribution.manifest.list.v2+json"
	mediaTypeDockerManifest = "application/vnd.docker.distribution.manifest.v2+json"
)

// RefNameAnnotation names the image in index.json.
const RefNameAnnotation = "org.opencontainers.image.ref.name"

// Config is what an image's config says about running it.
type Config struct {
	OS, Architecture string
	Entrypoint, Cmd  []string
	User             string
	Env              []string
	WorkingDir       string
	Labels           map[string]string
}

// File is an entry of the image's file system: the layers applied in order, whiteouts
// honoured.
type File struct {
	// Path is absolute, e.g. /manager.
	Path string
	// Mode has the type bits (fs.ModeDir, fs.ModeSymlink) and the permissions.
	Mode     fs.FileMode
	Size     int64
	UID, GID int
	// Linkname is the target of a symbolic or hard link.
	Linkname string
}

// Image is one image (one platform) of an OCI archive.
type Image struct {
	archive  string
	blobs    map[string]bool // digests present in the archive
	RefName  string          // the ref.name annotation of index.json, if any
	Digest   string          // the image manifest's digest
	manifest manifest
}

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Platform    *struct {
		OS           string `json:"os"`
		Architecture string `json:"architecture"`
		Variant      string `json:"variant,omitempty"`
	} `json:"platform,omitempty"`
}

type index struct {
	MediaType string       `json:"mediaType"`
	Manifests []descriptor `json:"manifests"`
}

type manifest struct {
	MediaType string       `json:"mediaType"`
	Config    descriptor   `json:"config"`
	Layers    []descriptor `json:"layers"`
}

// Open reads the archive's index and chooses its image: the only one, or the one for
// linux/GOARCH of this process when the archive holds several platforms.
func Open(archive string) (*Image, error) {
	return OpenPlatform(archive, "linux", runtime.GOARCH)
}

// OpenPlatform is Open for the image of a given platform, among several.
func OpenPlatform(archive, goos, goarch string) (*Image, error) {
	img := &Image{archive: archive, blobs: map[string]bool{}}
	var top *index
	err := img.walk(func(h *tar.Header, r io.Reader) (bool, error) {
		name := strings.TrimPrefix(h.Name, "./")
		switch {
		case name == "index.json":
			top = &index{}
			return false, json.NewDecoder(r).Decode(top)
		case strings.HasPrefix(name, "blobs/") && h.Typeflag == tar.TypeReg:
			if parts := strings.Split(name, "/"); len(parts) == 3 {
				img.blobs[parts[1]+":"+parts[2]] = true
			}
		}
		return false, nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", archive, err)
	}
	if top == nil {
		return nil, fmt.Errorf("%s has no index.json: not an OCI image layout archive", archive)
	}
	// index.json names one image or index (what `make images` writes), or one image per
	// platform (as some tools write a multi-platform layout).
	d, err := img.choose(top.Manifests, goos, goarch)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", archive, err)
	}
	img.RefName = d.Annotations[RefNameAnnotation]
	if d, err = img.resolve(d, goos, goarch); err != nil {
		return nil, fmt.Errorf("%s: %w", archive, err)
	}
	img.Digest = d.Digest
	if err := img.readJSON(d.Digest, &img.manifest); err != nil {
		return nil, err
	}
	return img, nil
}

// choose picks the only descriptor, or the one of the platform.
func (img *Image) choose(ds []descriptor, goos, goarch string) (descriptor, error) {
	if len(ds) == 1 {
		return ds[0], nil
	}
	var candidates []descriptor
	for _, d := range ds {
		if d.Platform != nil && d.Platform.OS == goos && d.Platform.Architecture == goarch {
			candidates = append(candidates, d)
		}
	}
	if len(candidates) != 1 {
		return descriptor{}, fmt.Errorf("%d of %d descriptors are images for %s/%s, want one", len(candidates), len(ds), goos, goarch)
	}
	return candidates[0], nil
}

// resolve follows indexes down to the image manifest of the platform.
func (img *Image) resolve(d descriptor, goos, goarch string) (descriptor, error) {
	switch d.MediaType {
	case mediaTypeOCIManifest, mediaTypeDockerManifest:
		if p := d.Platform; p != nil && (p.OS != goos || p.Architecture != goarch) {
			return descriptor{}, fmt.Errorf("the image is for %s/%s, not %s/%s", p.OS, p.Architecture, goos, goarch)
		}
		return d, nil
	case mediaTypeOCIIndex, mediaTypeDockerList:
		var nested index
		if err := img.readJSON(d.Digest, &nested); err != nil {
			return descriptor{}, err
		}
		d, err := img.choose(nested.Manifests, goos, goarch)
		if err != nil {
			return descriptor{}, err
		}
		return img.resolve(d, goos, goarch)
	default:
		return descriptor{}, fmt.Errorf("unsupported media type %q", d.MediaType)
	}
}

// Config returns the image's config.
func (img *Image) Config() (Config, error) {
	var file struct {
		OS           string `json:"os"`
		Architecture string `json:"architecture"`
		Config       struct {
			Entrypoint, Cmd, Env []string
			User, WorkingDir     string
			Labels               map[string]string
		} `json:"config"`
	}
	if err := img.readJSON(img.manifest.Config.Digest, &file); err != nil {
		return Config{}, err
	}
	c := file.Config
	return Config{
		OS: file.OS, Architecture: file.Architecture,
		Entrypoint: c.Entrypoint, Cmd: c.Cmd, User: c.User, Env: c.Env, WorkingDir: c.WorkingDir, Labels: c.Labels,
	}, nil
}

// Files lists the image's file system, sorted by path.
func (img *Image) Files() ([]File, error) {
	files := map[string]File{}
	for _, layer := range img.manifest.Layers {
		err := img.readLayer(layer, func(h *tar.Header, _ io.Reader) error {
			p := "/" + strings.TrimPrefix(path.Clean("/"+h.Name), "/")
			dir, base := path.Split(p)
			switch {
			case base == ".wh..wh..opq": // the directory's lower content is gone
				removeUnder(files, path.Clean(dir))
				return nil
			case strings.HasPrefix(base, ".wh."):
				gone := path.Join(dir, strings.TrimPrefix(base, ".wh."))
				delete(files, gone)
				removeUnder(files, gone)
				return nil
			}
			if h.Typeflag != tar.TypeDir {
				removeUnder(files, p) // a file replaces a directory
			}
			f := File{Path: p, Mode: h.FileInfo().Mode(), Size: h.Size, UID: h.Uid, GID: h.Gid, Linkname: h.Linkname}
			if h.Typeflag == tar.TypeLink {
				f.Linkname = "/" + strings.TrimPrefix(path.Clean("/"+h.Linkname), "/")
			}
			files[p] = f
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	out := make([]File, 0, len(files))
	for _, f := range files {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

func removeUnder(files map[string]File, dir string) {
	prefix := strings.TrimSuffix(dir, "/") + "/"
	for p := range files {
		if strings.HasPrefix(p, prefix) {
			delete(files, p)
		}
	}
}

// Extract writes the regular file at path (absolute, in the image) to dest with its
// permissions, the executable bit included; a hard link is followed.
func (img *Image) Extract(file, dest string) error {
	files, err := img.Files()
	if err != nil {
		return err
	}
	f, ok := find(files, file)
	if !ok {
		return fmt.Errorf("%s has no %s", img.archive, file)
	}
	if target := f.Linkname; f.Mode&fs.ModeType == 0 && target != "" { // a hard link: the content is the target's
		if f, ok = find(files, target); !ok {
			return fmt.Errorf("%s: %s links to missing %s", img.archive, file, target)
		}
	}
	if !f.Mode.IsRegular() {
		return fmt.Errorf("%s: %s is not a regular file (%s)", img.archive, file, f.Mode)
	}
	// The last layer that has the file holds the content the image shows.
	for i := len(img.manifest.Layers) - 1; i >= 0; i-- {
		found := false
		err := img.readLayer(img.manifest.Layers[i], func(h *tar.Header, r io.Reader) error {
			if found || h.Typeflag != tar.TypeReg || "/"+strings.TrimPrefix(path.Clean("/"+h.Name), "/") != f.Path {
				return nil
			}
			found = true
			return writeFile(dest, r, f.Mode.Perm())
		})
		if err != nil || found {
			return err
		}
	}
	return fmt.Errorf("%s: the layers have no content for %s", img.archive, f.Path)
}

func find(files []File, p string) (File, bool) {
	i := sort.Search(len(files), func(i int) bool { return files[i].Path >= p })
	if i < len(files) && files[i].Path == p {
		return files[i], true
	}
	return File{}, false
}

func writeFile(dest string, r io.Reader, perm fs.FileMode) error {
	out, err := os.OpenFile(dest, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, r); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Chmod(dest, perm) // the umask would have cleared bits
}

// walk calls fn for each entry of the archive until it says it is done.
func (img *Image) walk(fn func(*tar.Header, io.Reader) (bool, error)) error {
	f, err := os.Open(img.archive)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f) // skips entries by seeking: f is a file
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
		if done, err := fn(h, tr); done || err != nil {
			return err
		}
	}
}

// blob calls fn with the content of the blob of a digest.
func (img *Image) blob(digest string, fn func(io.Reader) error) error {
	if !img.blobs[digest] {
		return fmt.Errorf("%s has no blob %s", img.archive, digest)
	}
	algorithm, hex, _ := strings.Cut(digest, ":")
	name := "blobs/" + algorithm + "/" + hex
	return img.walk(func(h *tar.Header, r io.Reader) (bool, error) {
		if strings.TrimPrefix(h.Name, "./") != name {
			return false, nil
		}
		return true, fn(r)
	})
}

func (img *Image) readJSON(digest string, v any) error {
	err := img.blob(digest, func(r io.Reader) error { return json.NewDecoder(r).Decode(v) })
	if err != nil {
		return fmt.Errorf("reading %s: %w", digest, err)
	}
	return nil
}

// readLayer calls fn for each entry of a layer.
func (img *Image) readLayer(layer descriptor, fn func(*tar.Header, io.Reader) error) error {
	err := img.blob(layer.Digest, func(r io.Reader) error {
		switch {
		case strings.HasSuffix(layer.MediaType, "gzip"):
			gz, err := gzip.NewReader(r)
			if err != nil {
				return err
			}
			defer gz.Close()
			r = gz
		case strings.HasSuffix(layer.MediaType, ".tar"): // uncompressed
		default:
			return fmt.Errorf("unsupported layer media type %q", layer.MediaType)
		}
		tr := tar.NewReader(r)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				return nil
			} else if err != nil {
				return err
			}
			if err := fn(h, tr); err != nil {
				return err
			}
		}
	})
	if err != nil {
		return fmt.Errorf("layer %s: %w", layer.Digest, err)
	}
	return nil
}
