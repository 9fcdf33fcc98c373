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

package config

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

// The release workflow cannot run here, so its wiring is checked: it runs on version tags, tests,
// builds the release with the Makefile's targets for the tag's version, pushes the images after
// logging in, and publishes exactly the directory `make release` writes.
func TestReleaseWorkflow(t *testing.T) {
	g := NewWithT(t)
	root := testenv.RepoRoot()
	data, err := os.ReadFile(filepath.Join(root, ".github", "workflows", "release.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	var wf struct {
		On struct {
			Push struct {
				Tags []string `json:"tags"`
			} `json:"push"`
		} `json:"on"`
		Permissions map[string]string `json:"permissions"`
		Name        string            `json:"name"`
		Jobs        map[string]struct {
			RunsOn         string            `json:"runs-on"`
			TimeoutMinutes int               `json:"timeout-minutes"`
			Env            map[string]string `json:"env"`
			Steps          []struct {
				Name string            `json:"name"`
				Env  map[string]string `json:"env"`
				Uses string            `json:"uses"`
				Run  string            `json:"run"`
				With map[string]string `json:"with"`
			} `json:"steps"`
		} `json:"jobs"`
	}
	g.Expect(yaml.UnmarshalStrict(data, &wf)).To(Succeed())

	// GitHub's filter pattern: `+` repeats the character before it.
	g.Expect(wf.On.Push.Tags).To(HaveLen(1))
	pattern := "^" + strings.NewReplacer(".", `\.`, "*", ".*").Replace(wf.On.Push.Tags[0]) + "$"
	tag := regexp.MustCompile(pattern)
	for _, v := range []string{"v0.1.0", "v1.12.3", "v0.2.0-rc.1"} {
		g.Expect(tag.MatchString(v)).To(BeTrue(), "tag %s", v)
	}
	for _, v := range []string{"latest", "0.1.0", "vX"} {
		g.Expect(tag.MatchString(v)).To(BeFalse(), "tag %s", v)
	}
	g.Expect(wf.Permissions).To(HaveKeyWithValue("contents", "write"))
	g.Expect(wf.Permissions).To(HaveKeyWithValue("packages", "write"))

	g.Expect(wf.Jobs).To(HaveLen(1))
	for _, job := range wf.Jobs {
		g.Expect(job.Env).To(HaveKeyWithValue("VERSION", "${{ github.ref_name }}"))
		g.Expect(job.Env).To(HaveKeyWithValue("REGISTRY", "ghcr.io/${{ github.repository_owner }}"))
		var order []string
		for _, s := range job.Steps {
			switch {
			case s.Run == "make test":
				order = append(order, "test")
			case s.Run == `make release VERSION="$VERSION" REGISTRY="$REGISTRY"`:
				order = append(order, "release")
			case strings.HasPrefix(s.Uses, "docker/login-action@"):
				g.Expect(s.With).To(HaveKeyWithValue("registry", "ghcr.io"))
				order = append(order, "login")
			case s.Run == `make release-push VERSION="$VERSION" REGISTRY="$REGISTRY"`:
				order = append(order, "push")
			case strings.HasPrefix(s.Run, "gh release create "):
				// `make release` writes into out/release/VERSION (the Makefile's RELEASE_DIR).
				g.Expect(s.Run).To(HaveSuffix(`out/release/"$VERSION"/*`))
				order = append(order, "publish")
			}
		}
		g.Expect(order).To(Equal([]string{"test", "release", "login", "push", "publish"}))
	}
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(makefile)).To(ContainSubstring("RELEASE_DIR = $(ROOT)/out/release/$(VERSION)"))
}
