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

package cloudprovider_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The guest's cloud controller manager is an image of its own in every guest: it links what it
// uses (k8s.io/cloud-provider, client-go, controller-runtime's client and cache, the Harvester
// API types and pkg/guestcloud), never Cluster API nor controller-runtime's manager, builder or
// webhook packages, which the provider's API types would bring in through api/v1alpha1 or
// pkg/harvester.
func TestTheCCMLinksNoClusterAPI(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/seed-0a7eb009/cluster-api-provider-harvester/cloudprovider/cmd/harvester-cloud-controller-manager").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 100 {
		t.Fatalf("go list gave %d packages: %q", len(deps), out)
	}
	forbidden := []string{
		"sigs.k8s.io/cluster-api",
		"sigs.k8s.io/controller-runtime/pkg/manager",
		"sigs.k8s.io/controller-runtime/pkg/builder",
		"sigs.k8s.io/controller-runtime/pkg/webhook",
		"github.com/seed-0a7eb009/cluster-api-provider-harvester/api/",
		"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester",
		"github.com/seed-0a7eb009/cluster-api-provider-harvester/controllers",
	}
	for _, dep := range deps {
		for _, f := range forbidden {
			if dep == f || strings.HasPrefix(dep, f+"/") || (strings.HasSuffix(f, "/") && strings.HasPrefix(dep, f)) {
				t.Errorf("the CCM links %s", dep)
			}
		}
	}
}
