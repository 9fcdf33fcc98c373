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

package config_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

// The binaries the Dockerfile builds, as go build names them.
var dockerBinaries = []string{".", "./cloudprovider/cmd/harvester-cloud-controller-manager"}

// `docker build` sees only what the Dockerfile copies: every source and embedded file of this
// module that the two binaries compile must be copied to the same path under WORKDIR, and not
// be excluded by .dockerignore. A new package or //go:embed would otherwise break the image
// build, which no test here can run (there is no Docker engine).
func TestDockerfileCopiesWhatTheBinariesCompile(t *testing.T) {
	root := testenv.RepoRoot()
	copies := dockerfileCopies(t, filepath.Join(root, "Dockerfile"))
	ignored := dockerignore(t, filepath.Join(root, ".dockerignore"))

	files := append([]string{"go.mod", "go.sum"}, moduleFilesCompiledBy(t, root, dockerBinaries...)...)
	for _, f := range files {
		if !copies.cover(f) {
			t.Errorf("the Dockerfile's build stage does not copy %s (a binary compiles it)", f)
		}
		if pattern, ok := ignored.excludes(f); ok {
			t.Errorf(".dockerignore pattern %q excludes %s (a binary compiles it)", pattern, f)
		}
	}
}

// moduleFilesCompiledBy lists, relative to root, the Go and embedded files of the module's own
// packages that the binaries depend on, for the platform of the image.
func moduleFilesCompiledBy(t *testing.T, root string, pkgs ...string) []string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-deps", "-json=ImportPath,Dir,Module,GoFiles,CgoFiles,EmbedFiles"}, pkgs...)...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOOS=linux", "CGO_ENABLED=0")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var files []string
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			ImportPath, Dir               string
			Module                        *struct{ Main bool }
			GoFiles, CgoFiles, EmbedFiles []string
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if p.Module == nil || !p.Module.Main {
			continue
		}
		dir, err := filepath.Rel(root, p.Dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range append(append(p.GoFiles, p.CgoFiles...), p.EmbedFiles...) {
			files = append(files, path.Join(filepath.ToSlash(dir), f))
		}
	}
	if len(files) == 0 {
		t.Fatal("go list found no package of this module")
	}
	return files
}

// copyInstruction is a COPY of the build context into the build stage's WORKDIR.
type copyInstruction struct {
	sources []string
	dest    string
}

type dockerCopies []copyInstruction

// dockerfileCopies reads the COPY instructions that take files from the build context (those
// without --from) of a Dockerfile whose build stages work in one WORKDIR.
func dockerfileCopies(t *testing.T, file string) dockerCopies {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var copies dockerCopies
	for _, line := range dockerfileInstructions(string(data)) {
		fields := strings.Fields(line)
		if len(fields) < 3 || !strings.EqualFold(fields[0], "COPY") {
			continue
		}
		args, fromStage := fields[1:], false
		for len(args) > 0 && strings.HasPrefix(args[0], "--") {
			fromStage = fromStage || strings.HasPrefix(args[0], "--from")
			args = args[1:]
		}
		if fromStage || len(args) < 2 {
			continue
		}
		copies = append(copies, copyInstruction{sources: args[:len(args)-1], dest: args[len(args)-1]})
	}
	if len(copies) == 0 {
		t.Fatalf("%s has no COPY from the build context", file)
	}
	return copies
}

// dockerfileInstructions joins continued lines and drops comments.
func dockerfileInstructions(dockerfile string) []string {
	var out []string
	var cur strings.Builder
	sc := bufio.NewScanner(strings.NewReader(dockerfile))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasSuffix(line, "\\") {
			cur.WriteString(strings.TrimSuffix(line, "\\") + " ")
			continue
		}
		cur.WriteString(line)
		if s := strings.TrimSpace(cur.String()); s != "" {
			out = append(out, s)
		}
		cur.Reset()
	}
	return out
}

// cover tells whether file (relative to the context) lands at the same relative path in the
// WORKDIR: `COPY dir/ dir/` covers dir's files, `COPY f ./` and `COPY f f` cover f.
func (c dockerCopies) cover(file string) bool {
	for _, cp := range c {
		destIsDir := strings.HasSuffix(cp.dest, "/") || cp.dest == "." || len(cp.sources) > 1
		dest := path.Clean(cp.dest)
		for _, src := range cp.sources {
			src = path.Clean(src)
			if src == "." {
				if dest == "." {
					return true
				}
				continue
			}
			if file == src { // a file copied by name
				if (destIsDir && path.Join(dest, path.Base(src)) == file) || (!destIsDir && dest == file) {
					return true
				}
				continue
			}
			if rel, ok := strings.CutPrefix(file, src+"/"); ok && path.Join(dest, rel) == file { // a directory's content
				return true
			}
		}
	}
	return false
}

type ignorePatterns []string

func dockerignore(t *testing.T, file string) ignorePatterns {
	t.Helper()
	data, err := os.ReadFile(file)
	if os.IsNotExist(err) {
		return nil
	} else if err != nil {
		t.Fatal(err)
	}
	var patterns ignorePatterns
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.Contains(line, "**") {
			t.Fatalf("%s: this test does not understand ** in %q; teach it", file, line)
		}
		patterns = append(patterns, line)
	}
	return patterns
}

// excludes applies the patterns in order as Docker does (a later `!pattern` re-includes); a
// pattern that matches a directory excludes what is under it.
func (p ignorePatterns) excludes(file string) (string, bool) {
	excluded, by := false, ""
	for _, pattern := range p {
		negate := strings.HasPrefix(pattern, "!")
		clean := path.Clean(strings.TrimPrefix(strings.TrimPrefix(pattern, "!"), "/"))
		for prefix := file; prefix != "."; prefix = path.Dir(prefix) {
			if ok, _ := path.Match(clean, prefix); ok {
				excluded, by = !negate, pattern
				break
			}
		}
	}
	return by, excluded
}
