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
	"os/exec"
	"strings"
	"testing"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

// The product's packages import one way (docs/development.md, "Layout"): each package may import,
// of this module, only the packages listed for it; tests and test/ are free.
func TestImportsGoOneWay(t *testing.T) {
	const module = "github.com/seed-0a7eb009/cluster-api-provider-harvester"
	allowed := map[string][]string{
		"pkg/guestcloud": nil,
		"api/v1alpha1":   nil, // a leaf: importing our API brings in no Harvester or KubeVirt types
		// naming: the names and labels of what the provider makes on Harvester; transport: the
		// connections (client factory, request guard, request metrics, kubeconfig policy, errors);
		// build: the VM, cloud-init and network-data builders; pkg/harvester: the services.
		"pkg/harvester/naming":                {"api/v1alpha1"},
		"pkg/harvester/transport":             {"api/v1alpha1", "pkg/guestcloud", "pkg/harvester/naming"},
		"pkg/harvester/build":                 {"api/v1alpha1", "pkg/guestcloud", "pkg/harvester/naming"},
		"pkg/harvester":                       {"api/v1alpha1", "pkg/guestcloud", "pkg/harvester/naming", "pkg/harvester/transport", "pkg/harvester/build"},
		"pkg/ipam":                            {"api/v1alpha1", "pkg/harvester/build"},
		"pkg/maintenance":                     {"api/v1alpha1", "pkg/harvester", "pkg/harvester/naming", "pkg/harvester/transport"},
		"controllers":                         {"api/v1alpha1", "pkg/guestcloud", "pkg/harvester", "pkg/harvester/naming", "pkg/harvester/transport", "pkg/harvester/build", "pkg/ipam", "pkg/maintenance", "controllers/internal/readyourwrites", "templates/addons"},
		"controllers/internal/readyourwrites": nil,
		"cloudprovider":                       {"pkg/guestcloud"},
		"cloudprovider/app":                   {"cloudprovider"},
		"cloudprovider/cmd/harvester-cloud-controller-manager": {"cloudprovider/app"},
		"templates":             nil,
		"templates/addons":      nil,
		"internal/release":      {"templates"},
		"internal/webhookguard": nil,
		"internal/takeover":     {"api/v1alpha1", "pkg/harvester/naming", "pkg/harvester/build"},
		"cmd/caphv-takeover":    {"internal/takeover"},
		"":                      {"api/v1alpha1", "controllers", "internal/webhookguard", "pkg/guestcloud", "pkg/harvester", "pkg/harvester/transport"},
	}
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./...")
	cmd.Dir = testenv.RepoRoot()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(strings.TrimPrefix(fields[0], module), "/")
		if strings.HasPrefix(pkg, "test/") || strings.HasPrefix(pkg, "hack/") {
			continue
		}
		may, known := allowed[pkg]
		if !known {
			t.Errorf("package %q has no import rule: add it to TestImportsGoOneWay and docs/development.md", pkg)
			continue
		}
		seen[pkg] = true
		for _, imp := range fields[1:] {
			if !strings.HasPrefix(imp, module) {
				continue
			}
			dep := strings.TrimPrefix(strings.TrimPrefix(imp, module), "/")
			ok := false
			for _, a := range may {
				ok = ok || a == dep
			}
			if !ok {
				t.Errorf("%s imports %s", fields[0], imp)
			}
		}
	}
	for pkg := range allowed {
		if !seen[pkg] {
			t.Errorf("the rule for %q names no package", pkg)
		}
	}
}

// The API package is a leaf: a project that imports our API types (a controller of its own, a
// migration tool) gets Kubernetes', controller-runtime's and Cluster API's packages, never
// Harvester's, KubeVirt's, the load balancer's or any other package of this module, and so none
// of go.mod's replace lines for them.
func TestTheAPIIsALeaf(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "./api/v1alpha1")
	cmd.Dir = testenv.RepoRoot()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 50 {
		t.Fatalf("go list gave %d packages: %q", len(deps), out)
	}
	const module = "github.com/seed-0a7eb009/cluster-api-provider-harvester/"
	for _, dep := range deps {
		switch {
		case strings.HasPrefix(dep, module) && dep != module+"api/v1alpha1",
			strings.HasPrefix(dep, "github.com/harvester/"),
			strings.HasPrefix(dep, "kubevirt.io/"),
			strings.HasPrefix(dep, "github.com/rancher/"):
			t.Errorf("api/v1alpha1 depends on %s", dep)
		}
	}
}
