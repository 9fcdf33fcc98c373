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
	. "github.com/onsi/ginkgo/v2"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/bed"
)

// At full size only (make test-full): make test provisions RKE2 with the same code.
var _ = Describe("a K3s cluster from cluster-template-k3s.yaml", Label(fullOnly), func() {
	It("comes up with the K3s bootstrap and control-plane providers (v0.4.0, as processes), upgrades as docs/operations.md says, and leaves nothing behind", func() {
		provisionsWithItsProviders(distributionFlavour{
			providers:              bed.K3s,
			template:               "cluster-template-k3s.yaml",
			variables:              map[string]string{"K3S_VERSION": "v1.35.4+k3s1"},
			upgradeTo:              "v1.35.5+k3s1",
			controlPlaneAPIVersion: "controlplane.cluster.x-k8s.io/v1beta2", controlPlaneKind: "KThreesControlPlane",
			// What a K3s server started with cluster-init (the provider's default: embedded etcd)
			// puts on its Node.
			serverLabels: map[string]string{
				"node-role.kubernetes.io/control-plane": "true",
				"node-role.kubernetes.io/master":        "true",
				"node-role.kubernetes.io/etcd":          "true",
			},
		}, "k3s", "k3c", "127.77.0.40", "127.77.0.49")
	})
})
