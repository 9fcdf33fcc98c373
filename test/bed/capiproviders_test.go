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
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/bed"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/harvestersim"
)

// TestCAPIProvidersServeTheirWebhooks runs the RKE2 and K3s managers as the bed does and checks
// what only their processes can do: RKE2's validating webhook rejects a registry without
// credentials, K3s's defaulting webhook fills in the external cloud provider, and K3s's CRD
// conversion (v1beta2 stored, v1beta1 read) goes through its process.
func TestCAPIProvidersServeTheirWebhooks(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	b, err := bed.Start(ctx, bed.Options{Harvester: harvestersim.DefaultOptions()})
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { g.Expect(b.Stop(ctx)).To(Succeed()) }()
	c := b.Management.Client

	_, err = b.StartCAPIProviders(ctx, bed.RKE2)
	g.Expect(err).NotTo(HaveOccurred())
	again, err := b.StartCAPIProviders(ctx, bed.RKE2)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again.Processes).To(HaveLen(2), "a second start returns the running managers")
	rke2Config := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta1",
		"kind":       "RKE2Config",
		"metadata":   map[string]any{"namespace": "default", "name": "registry-without-credentials"},
		"spec": map[string]any{"privateRegistriesConfig": map[string]any{
			"configs": map[string]any{"registry.example": map[string]any{}},
		}},
	}}
	g.Expect(c.Create(ctx, rke2Config)).To(MatchError(ContainSubstring("need either credentials, tls settings or both for registry: registry.example")))

	_, err = b.StartCAPIProviders(ctx, bed.K3s)
	g.Expect(err).NotTo(HaveOccurred())
	k3sConfig := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2",
		"kind":       "KThreesConfig",
		"metadata":   map[string]any{"namespace": "default", "name": "defaulted"},
		"spec":       map[string]any{},
	}}
	g.Expect(c.Create(ctx, k3sConfig)).To(Succeed())
	provider, _, _ := unstructured.NestedString(k3sConfig.Object, "spec", "serverConfig", "cloudProviderName")
	g.Expect(provider).To(Equal("external"), "K3s's defaulting webhook")
	old := &unstructured.Unstructured{}
	old.SetAPIVersion("bootstrap.cluster.x-k8s.io/v1beta1")
	old.SetKind("KThreesConfig")
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(k3sConfig), old)).To(Succeed())
	g.Expect(old.GetAPIVersion()).To(Equal("bootstrap.cluster.x-k8s.io/v1beta1"))
}
