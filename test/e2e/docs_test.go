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

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/bed"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

// documentedBlock returns the shell block of a doc (a file of docs/, or README.md) that follows the marker
// `<!-- run by <test file>: <name> -->`: the commands the doc gives a user, which a test runs as
// they are.
func documentedBlock(doc, name string) string {
	GinkgoHelper()
	return documentedFence(doc, name, "sh")
}

// documentedYAML returns the YAML block of a doc that follows the marker
// `<!-- read by <test file>: <name> -->`: a file the doc tells a user to write, which a test
// writes from it.
func documentedYAML(doc, name string) string {
	GinkgoHelper()
	return documentedFence(doc, name, "yaml")
}

func documentedFence(doc, name, lang string) string {
	GinkgoHelper()
	path := filepath.Join(testenv.RepoRoot(), "docs", doc)
	if doc == "README.md" {
		path = filepath.Join(testenv.RepoRoot(), doc)
	}
	data, err := os.ReadFile(path)
	Expect(err).NotTo(HaveOccurred())
	text := string(data)
	i := strings.Index(text, ": "+name+" -->")
	Expect(i).To(BeNumerically(">=", 0), "docs/%s marks no block %q", doc, name)
	rest := text[i:]
	fence := "```" + lang + "\n"
	start := strings.Index(rest, fence)
	Expect(start).To(BeNumerically(">=", 0), "docs/%s has no %s block after %q", doc, lang, name)
	rest = rest[start+len(fence):]
	end := strings.Index(rest, "```")
	Expect(end).To(BeNumerically(">", 0))
	return rest[:end]
}

// runDocumented runs a documented block with bash (-e, -u, pipefail) in dir, with the kubectl,
// clusterctl and jq that `make kubectl`, `make clusterctl` and `make jq` build first on PATH and
// env added to the environment, and returns its output.
func runDocumented(block, dir string, env ...string) string {
	GinkgoHelper()
	kubectl := os.Getenv("KUBECTL")
	Expect(kubectl).NotTo(BeEmpty(), "KUBECTL names the kubectl `make kubectl` builds (make test sets it)")
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", block)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+documentedPath())
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "the documented commands failed:\n%s\n---\n%s", block, out)
	return string(out)
}

// runDocumentedOnManagement runs a documented block with kubectl pointed at the management
// cluster, as its admin.
func runDocumentedOnManagement(doc, name string, env ...string) string {
	GinkgoHelper()
	return runDocumentedOnManagementIn(GinkgoT().TempDir(), doc, name, env...)
}

// runDocumentedOnManagementIn is runDocumentedOnManagement in a directory of the test's (the
// files the doc has the user write are there); with doc "", name is the commands themselves.
func runDocumentedOnManagementIn(dir, doc, name string, env ...string) string {
	GinkgoHelper()
	return runDocumentedOn(testBed.Management, dir, doc, name, env...)
}

// runDocumentedOnManagementOf is runDocumentedOnManagement on another management cluster of the
// bed.
func runDocumentedOnManagementOf(m *bed.Management, doc, name string, env ...string) string {
	GinkgoHelper()
	return runDocumentedOn(m.Env, GinkgoT().TempDir(), doc, name, env...)
}

func runDocumentedOn(management *testenv.Environment, dir, doc, name string, env ...string) string {
	GinkgoHelper()
	kubeconfig, err := management.Kubeconfig()
	Expect(err).NotTo(HaveOccurred())
	path := filepath.Join(dir, "management.yaml")
	Expect(os.WriteFile(path, kubeconfig, 0o600)).To(Succeed())
	block := name
	if doc != "" {
		block = documentedBlock(doc, name)
	}
	return runDocumented(block, dir, append(env, "KUBECONFIG="+path)...)
}

// requireTool fails unless the environment names a tool the Makefile builds for the docs'
// commands (JQ, CLUSTERCTL): make test sets them.
func requireTool(variable string) {
	GinkgoHelper()
	Expect(os.Getenv(variable)).NotTo(BeEmpty(), "%s names a tool `make test` builds into bin/ for the docs' commands", variable)
}
