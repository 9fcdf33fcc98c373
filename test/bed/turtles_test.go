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

package bed_test

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/bed"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

// The bed's stand-in for Turtles maps a CAPIProvider as Turtles' source does: the operator's
// kind by type, the operator's fields as they are, Turtles' own fields dropped, the variables
// Secret named for the provider in its namespace (whatever namespace the spec names), Turtles'
// defaults under spec.variables, and features over both.
func TestOperatorObjectsOfMapsACAPIProviderAsTurtles(t *testing.T) {
	g := NewWithT(t)
	capiProvider := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "turtles-capi.cattle.io/v1alpha1", "kind": "CAPIProvider",
		"metadata": map[string]any{"name": "harvester", "namespace": "capi-harvester-system"},
		"spec": map[string]any{
			"name": "harvester", "type": "infrastructure", "version": "v0.1.0",
			"fetchConfig":           map[string]any{"url": "https://github.com/o/r/releases/latest/infrastructure-components.yaml"},
			"configSecret":          map[string]any{"name": "vars", "namespace": "elsewhere"},
			"variables":             map[string]any{"A": "1", "EXP_MACHINE_POOL": "true"},
			"features":              map[string]any{"clusterResourceSet": true},
			"enableAutomaticUpdate": true,
		},
	}}
	provider, secret, err := bed.OperatorObjectsOf(capiProvider)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(provider.GetKind()).To(Equal("InfrastructureProvider"))
	g.Expect(provider.GetAPIVersion()).To(Equal(bed.OperatorGroupVersion))
	g.Expect(provider.GetNamespace()).To(Equal("capi-harvester-system"))
	g.Expect(provider.Object["spec"]).To(Equal(map[string]any{
		"version":      "v0.1.0",
		"fetchConfig":  map[string]any{"url": "https://github.com/o/r/releases/latest/infrastructure-components.yaml"},
		"configSecret": map[string]any{"name": "vars", "namespace": "capi-harvester-system"},
	}))
	g.Expect(secret.Namespace).To(Equal("capi-harvester-system"))
	g.Expect(secret.Name).To(Equal("vars"))
	g.Expect(secret.StringData).To(Equal(map[string]string{
		"A": "1", "EXP_CLUSTER_RESOURCE_SET": "true", "CLUSTER_TOPOLOGY": "false", "EXP_MACHINE_POOL": "false",
	}))

	// Each example maps, its Secret named for it.
	for _, file := range []string{"capiprovider.yaml", "capiprovider-airgapped.yaml"} {
		data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "examples", "turtles", file))
		g.Expect(err).NotTo(HaveOccurred())
		objs, err := testenv.DecodeObjects(data)
		g.Expect(err).NotTo(HaveOccurred())
		found := false
		for _, o := range objs {
			if o.GetKind() != "CAPIProvider" {
				continue
			}
			found = true
			provider, secret, err := bed.OperatorObjectsOf(o)
			g.Expect(err).NotTo(HaveOccurred(), file)
			g.Expect(provider.GetKind()).To(Equal("InfrastructureProvider"), file)
			g.Expect(secret.Name).To(Equal("harvester"), file)
			g.Expect(secret.StringData).To(HaveKeyWithValue("CAPHV_INSECURE_DIAGNOSTICS", "false"), file)
			version, _, _ := unstructured.NestedString(provider.Object, "spec", "version")
			g.Expect(version).To(MatchRegexp(`^v\d+\.\d+\.\d+$`), "%s pins a version", file)
		}
		g.Expect(found).To(BeTrue(), file)
	}

	// What the standalone operator cannot stand in for is refused.
	renamed := capiProvider.DeepCopy()
	g.Expect(unstructured.SetNestedField(renamed.Object, "other", "spec", "name")).To(Succeed())
	_, _, err = bed.OperatorObjectsOf(renamed)
	g.Expect(err).To(MatchError(ContainSubstring(`names its provider "other"`)))
	unknown := capiProvider.DeepCopy()
	g.Expect(unstructured.SetNestedField(unknown.Object, "cloud", "spec", "type")).To(Succeed())
	_, _, err = bed.OperatorObjectsOf(unknown)
	g.Expect(err).To(MatchError(ContainSubstring(`unknown type "cloud"`)))
}
