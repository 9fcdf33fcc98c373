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
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/internal/release"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

// The release assets are what clusterctl installs from: `make release-manifests` writes them.
func TestReleaseAssets(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	_, err := release.Write(dir, release.Options{
		Root: testenv.RepoRoot(), Image: "ghcr.io/example/capi-harvester:v9.9.9", CCMImage: "ghcr.io/example/ccm:v9.9.9",
	})
	g.Expect(err).NotTo(HaveOccurred())
	for _, name := range []string{"metadata.yaml", "infrastructure-components.yaml", "cluster-template.yaml"} {
		g.Expect(filepath.Join(dir, name)).To(BeAnExistingFile())
	}

	components, err := os.ReadFile(filepath.Join(dir, "infrastructure-components.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	objs, err := testenv.DecodeObjects(components)
	g.Expect(err).NotTo(HaveOccurred())
	var namespaces, crds int
	var managerImage string
	var managerArgs []any
	for _, o := range objs {
		switch o.GetKind() {
		case "Namespace":
			namespaces++
		case "CustomResourceDefinition":
			crds++
			g.Expect(o.GetLabels()).To(HaveKeyWithValue("cluster.x-k8s.io/v1beta2", "v1alpha1"), o.GetName())
		case "Deployment":
			containers, _, err := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			g.Expect(err).NotTo(HaveOccurred())
			for _, c := range containers {
				c := c.(map[string]any)
				if c["name"] == "manager" {
					managerImage, _ = c["image"].(string)
					managerArgs, _ = c["args"].([]any)
				}
			}
		}
	}
	g.Expect(namespaces).To(Equal(1))
	g.Expect(crds).To(Equal(5))
	g.Expect(managerImage).To(Equal("ghcr.io/example/capi-harvester:v9.9.9"))
	g.Expect(managerArgs).To(ContainElement("--ccm-image=${CAPHV_CCM_IMAGE:=ghcr.io/example/ccm:v9.9.9}"))

	g.Expect(managerArgs).To(ContainElement("--in-place-updates=${EXP_IN_PLACE_UPDATES:=false}"), "the extension is off unless clusterctl's EXP_IN_PLACE_UPDATES says so")

	// The in-place update extension's registration names the components' webhook Service and
	// the Secret of its certificate.
	extension, err := os.ReadFile(filepath.Join(dir, release.InPlaceUpdatesAsset))
	g.Expect(err).NotTo(HaveOccurred())
	extObjs, err := testenv.DecodeObjects(extension)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(extObjs).To(HaveLen(1))
	g.Expect(extObjs[0].GetKind()).To(Equal("ExtensionConfig"))
	service, _, _ := unstructured.NestedMap(extObjs[0].Object, "spec", "clientConfig", "service")
	var certSecret string
	serviceFound := false
	for _, o := range objs {
		switch o.GetKind() {
		case "Service":
			serviceFound = serviceFound || (o.GetNamespace() == service["namespace"] && o.GetName() == service["name"])
		case "Certificate":
			certSecret, _, _ = unstructured.NestedString(o.Object, "spec", "secretName")
			certSecret = o.GetNamespace() + "/" + certSecret
		}
	}
	g.Expect(serviceFound).To(BeTrue(), "the ExtensionConfig's service %v is the components' webhook Service", service)
	g.Expect(extObjs[0].GetAnnotations()).To(HaveKeyWithValue("runtime.cluster.x-k8s.io/inject-ca-from-secret", certSecret))

	// Every clusterctl variable of the components is documented.
	guide, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "docs", "getting-started.md"))
	g.Expect(err).NotTo(HaveOccurred())
	for _, m := range regexp.MustCompile(`\$\{([A-Z0-9_]+)`).FindAllStringSubmatch(string(components), -1) {
		g.Expect(string(guide)).To(ContainSubstring("`"+m[1]+"`"), "variable %s of infrastructure-components.yaml", m[1])
	}
}

// The previous release the clusterctl e2e scenario upgrades from is a commit of main's own
// history, older than the code checked out, and its metadata.yaml offers a release series with
// this version's contract (else clusterctl would refuse the upgrade for another reason).
func TestPreviousReleaseIsACommitOfThisHistory(t *testing.T) {
	g := NewWithT(t)
	makefile, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "Makefile"))
	g.Expect(err).NotTo(HaveOccurred())
	m := regexp.MustCompile(`(?m)^PREVIOUS_RELEASE_COMMIT \?= ([0-9a-f]{40})$`).FindSubmatch(makefile)
	g.Expect(m).NotTo(BeNil(), "the Makefile pins PREVIOUS_RELEASE_COMMIT to a full commit id")
	commit := string(m[1])
	git := func(args ...string) (string, error) {
		cmd := exec.Command("git", args...)
		cmd.Dir = testenv.RepoRoot()
		out, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	_, err = git("merge-base", "--is-ancestor", commit, "HEAD")
	g.Expect(err).NotTo(HaveOccurred(), "%s is an ancestor of HEAD", commit)
	head, err := git("rev-parse", "HEAD")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(commit).NotTo(Equal(head), "the previous release is not the code checked out")
	metadata, err := git("show", commit+":metadata.yaml")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(metadata).To(ContainSubstring("contract: v1beta2"))
}
