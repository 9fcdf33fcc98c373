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

var _ = Describe("an RKE2 cluster from cluster-template-rke2.yaml", func() {
	It("comes up from its manifest applied as Fleet applies it, with the RKE2 bootstrap and control-plane providers (v0.21.0, as processes), upgrades from Git as docs/operations.md says, and leaves nothing behind", func() {
		f := rke2Flavour
		f.upgradeTo = "v1.35.5+rke2r1"
		// The commands of upgrade-rke2-k3s run in the K3s scenario (make test-full).
		f.fromGit = true
		provisionsWithItsProviders(f, "rke2", "rc", "127.77.0.30", "127.77.0.39")
	})
})

var rke2Flavour = distributionFlavour{
	providers: bed.RKE2,
	template:  "cluster-template-rke2.yaml",
	variables: map[string]string{"RKE2_VERSION": "v1.35.4+rke2r1"},
	// The template writes v1beta1, the provider's storage version.
	controlPlaneAPIVersion: "controlplane.cluster.x-k8s.io/v1beta1", controlPlaneKind: "RKE2ControlPlane",
	// What an RKE2 server puts on its Node (embedded etcd).
	serverLabels: map[string]string{
		"node-role.kubernetes.io/control-plane": "true",
		"node-role.kubernetes.io/master":        "true",
		"node-role.kubernetes.io/etcd":          "true",
	},
}
