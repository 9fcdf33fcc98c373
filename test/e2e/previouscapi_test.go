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

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/bed"
)

// The provider is built with the current Cluster API minor (go.mod); management clusters that
// have not upgraded CAPI yet (Rancher Turtles v0.27 installs CAPI v1.13) run the previous one.
// At full size only (make test-full): a flavour of what make test runs on the current minor.
var _ = Describe("a management cluster on the previous Cluster API minor", Label(fullOnly), func() {
	It("runs CAPI v1.13's core as its own process (its CRDs, webhooks and conversion) with the RKE2 providers and our shipped manager, and provisions and deletes an RKE2 cluster", func() {
		m, err := testBed.AddManagementOnCAPI(ctx, bed.PreviousCAPICore, providerOptions)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { Expect(testBed.StopManagement(ctx, m)).To(Succeed()) })
		DeferCleanup(func() {
			if !CurrentSpecReport().Failed() {
				return
			}
			if core, err := m.StartCAPIProviders(ctx, bed.PreviousCAPICore); err == nil {
				for part, log := range core.Logs() {
					GinkgoWriter.Printf("--- CAPI %s %s manager log (tail) ---\n%s\n", bed.PreviousCAPICore.Version, part, lastLines(log, 60))
				}
			}
			if log, err := os.ReadFile(m.Provider.LogFile); err == nil {
				GinkgoWriter.Printf("--- our manager's log there (tail) ---\n%s\n", lastLines(string(log), 60))
			}
		})

		By("the Cluster CRD is v1.13's: no status.controlPlane.versions, which v1.14 added")
		crd := &apiextensionsv1.CustomResourceDefinition{}
		Expect(m.Env.Client.Get(ctx, client.ObjectKey{Name: "clusters.cluster.x-k8s.io"}, crd)).To(Succeed())
		var storage *apiextensionsv1.CustomResourceDefinitionVersion
		for i := range crd.Spec.Versions {
			if crd.Spec.Versions[i].Storage {
				storage = &crd.Spec.Versions[i]
			}
		}
		Expect(storage).NotTo(BeNil())
		Expect(storage.Name).To(Equal("v1beta2"))
		controlPlaneStatus := storage.Schema.OpenAPIV3Schema.Properties["status"].Properties["controlPlane"].Properties
		Expect(controlPlaneStatus).To(HaveKey("replicas"))
		Expect(controlPlaneStatus).NotTo(HaveKey("versions"))

		provisionsOn(onManagement{
			client: m.Env.Client,
			startProviders: func(spec bed.CAPIProviderSpec) (*bed.CAPIProviders, error) {
				return m.StartCAPIProviders(ctx, spec)
			},
			lendIdentity: func(name, namespace, target string) error {
				return testBed.LendIdentityIn(ctx, m, name, namespace, target)
			},
		}, rke2Flavour, "capi-previous", "pc", "127.77.0.60", "127.77.0.69")
	})
})
