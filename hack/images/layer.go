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
	"os"
	"path"
	"sort"
	"strings"
	"time"
)

// The user the images run as, as in distroless' :nonroot images.
const (
	nonrootUID  = 65532
	nonrootName = "nonroot"
	nonrootHome = "/home/nonroot"
	caCertsPath = "/etc/ssl/certs/ca-certificates.crt"
)

var (
	passwd = "root:x:0:0:root:/root:/sbin/nologin\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
		fmt.Sprintf("%s:x:%d:%d:%s:%s:/sbin/nologin\n", nonrootName, nonrootUID, nonrootUID, nonrootName, nonrootHome)
	group = "root:x:0:\n" +
		"nobody:x:65534:\n" +
		fmt.Sprintf("%s:x:%d:\n", nonrootName, nonrootUID)
)

// entry is a file or directory of the layer.
type entry struct {
	dir      bool
	mode     int64
	uid, gid int
	data     []byte
}

// rootfs collects the layer's entries by absolute path.
type rootfs map[string]entry

func (r rootfs) file(p string, mode int64, data []byte) {
	r.parents(p)
	r[p] = entry{mode: mode, data: data}
}

func (r rootfs) dir(p string, mode int64, uid, gid int) {
	r.parents(p)
	r[p] = entry{dir: true, mode: mode, uid: uid, gid: gid}
}

func (r rootfs) parents(p string) {
	for d := path.Dir(p); d != "/"; d = path.Dir(d) {
		if _, ok := r[d]; !ok {
			r[d] = entry{dir: true, mode: 0o755}
		}
	}
}

// layerTar returns the uncompressed layer: the binary at entrypoint and, when system is set,
// the CA certificates, passwd, group, the user's home and /tmp.
func layerTar(binary, entrypoint, caCerts string, system bool, created time.Time) ([]byte, error) {
	fs := rootfs{}
	bin, err := os.ReadFile(binary)
	if err != nil {
		return nil, err
	}
	fs.file(entrypoint, 0o755, bin)
	if system {
		certs, err := os.ReadFile(caCerts)
		if err != nil {
			return nil, fmt.Errorf("reading the CA certificates (-ca-certs): %w", err)
		}
		fs.file(caCertsPath, 0o644, certs)
		fs.file("/etc/passwd", 0o644, []byte(passwd))
		fs.file("/etc/group", 0o644, []byte(group))
		fs.dir(nonrootHome, 0o700, nonrootUID, nonrootUID)
		fs.dir("/tmp", 0o1777, 0, 0)
	}
	return fs.tar(created)
}

// tar writes the entries sorted by path (a directory before its content), owned by root
// unless said otherwise, every timestamp at created.
func (r rootfs) tar(created time.Time) ([]byte, error) {
	paths := make([]string, 0, len(r))
	for p := range r {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range paths {
		e := r[p]
		h := &tar.Header{
			Name:    strings.TrimPrefix(p, "/"),
			Mode:    e.mode,
			Uid:     e.uid,
			Gid:     e.gid,
			ModTime: created,
		}
		if e.dir {
			h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
