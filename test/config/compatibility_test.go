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
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"golang.org/x/mod/modfile"
	"golang.org/x/mod/semver"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/bed"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

// docs/compatibility.md's version table names what the build and the bed really use: each
// row below must be there with the version go.mod or the bed pins.
func TestCompatibilityTable(t *testing.T) {
	g := NewWithT(t)
	root := testenv.RepoRoot()
	data, err := os.ReadFile(filepath.Join(root, "docs", "compatibility.md"))
	g.Expect(err).NotTo(HaveOccurred())
	row := regexp.MustCompile(`(?m)^\| ([^|]+) \| ([^|]+) \| ([^|]+) \|$`)
	table := map[string]string{}
	for _, m := range row.FindAllStringSubmatch(string(data), -1) {
		table[strings.TrimSpace(m[1])] = strings.TrimSpace(m[2])
	}

	goMod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	g.Expect(err).NotTo(HaveOccurred())
	mod, err := modfile.Parse("go.mod", goMod, nil)
	g.Expect(err).NotTo(HaveOccurred())
	required := map[string]string{}
	for _, r := range mod.Require {
		required[r.Mod.Path] = r.Mod.Version
	}

	// The bed's IPAM provider: the Makefile's IPAM_PROVIDER_VERSION.
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	g.Expect(err).NotTo(HaveOccurred())
	m := regexp.MustCompile(`(?m)^IPAM_PROVIDER_VERSION \?= (\S+)`).FindSubmatch(makefile)
	g.Expect(m).NotTo(BeNil(), "the Makefile pins IPAM_PROVIDER_VERSION")
	ipam := string(m[1])
	// The bed's Harvester load balancer is built at go.mod's version.
	g.Expect(string(makefile)).To(ContainSubstring(`HARVESTER_LB_VERSION ?= $(shell awk '$$1 == "github.com/harvester/harvester-load-balancer" {print $$2}' go.mod)`))
	g.Expect(string(makefile)).To(ContainSubstring(`HARVESTER_VERSION ?= $(shell awk '$$1 == "github.com/harvester/harvester" {print $$2}' go.mod)`))
	for component, want := range map[string]string{
		"Cluster API (core, kubeadm bootstrap and control plane)":       required["sigs.k8s.io/cluster-api"],
		"Cluster API core, the previous minor":                          bed.PreviousCAPICore.Version,
		"Cluster API RKE2 provider (rancher/cluster-api-provider-rke2)": bed.RKE2.Version,
		"Cluster API K3s provider (k3s-io/cluster-api-k3s)":             bed.K3s.Version,
		"Cluster API IPAM provider in-cluster":                          ipam,
		"Harvester API types":                                           required["github.com/harvester/harvester"],
		"harvester-load-balancer API types":                             required["github.com/harvester/harvester-load-balancer"],
		"KubeVirt API types":                                            required["kubevirt.io/api"],
	} {
		g.Expect(want).NotTo(BeEmpty(), component)
		g.Expect(table).To(HaveKeyWithValue(component, want), "docs/compatibility.md's row for %s", component)
	}
	// The bed's CAPI processes (the in-place updates scenario) are go.mod's CAPI.
	g.Expect(bed.CAPIVersion).To(Equal(required["sigs.k8s.io/cluster-api"]), "bed.CAPIVersion")
	// Since v1.14 CAPI's API is a module of its own, required at CAPI's version.
	g.Expect(required).To(HaveKeyWithValue("sigs.k8s.io/cluster-api/api", required["sigs.k8s.io/cluster-api"]))
	// The previous minor is the one before go.mod's, and hack/ensure-providers.sh builds it.
	current, previous := semver.MajorMinor(required["sigs.k8s.io/cluster-api"]), semver.MajorMinor(bed.PreviousCAPICore.Version)
	var major, minor, prevMajor, prevMinor int
	_, err = fmt.Sscanf(current, "v%d.%d", &major, &minor)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = fmt.Sscanf(previous, "v%d.%d", &prevMajor, &prevMinor)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect([]int{prevMajor, prevMinor}).To(Equal([]int{major, minor - 1}), "bed.PreviousCAPICore is the minor before go.mod's CAPI")
	script, err := os.ReadFile(filepath.Join(root, "hack", "ensure-providers.sh"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(script)).To(ContainSubstring("CAPI_PREVIOUS_VERSION=${CAPI_PREVIOUS_VERSION:-" + bed.PreviousCAPICore.Version + "}"))
	// The clusterctl the docs' commands run with (`make clusterctl`) is the same CAPI's.
	hackMod, err := os.ReadFile(filepath.Join(root, "hack", "clusterctl", "go.mod"))
	g.Expect(err).NotTo(HaveOccurred())
	clusterctlMod, err := modfile.Parse("hack/clusterctl/go.mod", hackMod, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(clusterctlMod.Require).To(ContainElement(HaveField("Mod.Path", "sigs.k8s.io/cluster-api")))
	for _, r := range clusterctlMod.Require {
		if r.Mod.Path == "sigs.k8s.io/cluster-api" {
			g.Expect(r.Mod.Version).To(Equal(required["sigs.k8s.io/cluster-api"]), "hack/clusterctl builds the CAPI go.mod requires")
			g.Expect(table).To(HaveKeyWithValue("clusterctl", r.Mod.Version), "docs/compatibility.md's row for clusterctl")
		}
	}
	// The RKE2 and K3s CRDs the template tests apply are the same versions.
	for _, p := range bootstrapProviders {
		switch {
		case strings.Contains(p.module, "rke2"):
			g.Expect(p.version).To(Equal(bed.RKE2.Version))
		case strings.Contains(p.module, "k3s"):
			g.Expect(p.version).To(Equal(bed.K3s.Version))
		}
	}
}
