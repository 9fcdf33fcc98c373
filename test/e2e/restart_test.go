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
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
)

// The manager killed (SIGKILL) again and again while machines are being provisioned: the
// controllers keep no state outside the APIs, so each new process picks up where the last one
// stopped, makes no second VM for a machine, and leaves nothing behind. A bounded version of
// the restart suite: make test kills it a few times during one MachineDeployment.
var _ = Describe("Manager restarts during provisioning", func() {
	It("make no duplicate VM and lose no machine", func() {
		// make test: 5 machines, 4 kills; make chaos: 30 machines, 20 kills.
		machines, kills := chaosInt("CHAOS_MACHINES", 5), chaosInt("CHAOS_KILLS", 4)
		tc := newTestCluster("restarts", "restarts")
		tc.machineDeployment("workers", "workers", int32(machines), machineSpec())
		vmCount := func(g Gomega) int {
			vms := &kubevirtv1.VirtualMachineList{}
			g.Expect(harvesterClient().List(ctx, vms, client.InNamespace(tc.Target))).To(Succeed())
			return len(vms.Items)
		}
		var lastStart time.Time
		for i := range kills {
			// Kill at different points of the provisioning: spread over the machines' VMs.
			want := min(1+i*machines/kills, machines)
			waitProgressing(fmt.Sprintf("%d VMs", want), tc.state, func(g Gomega) { g.Expect(vmCount(g)).To(BeNumerically(">=", want)) })
			Expect(testBed.Provider.Kill()).To(Succeed())
			Expect(testBed.Provider.Start(ctx)).To(Succeed())
			lastStart = time.Now()
		}
		hms := tc.provisionedMachines(machines)
		recovery := time.Since(lastStart)
		Expect(vmCount(Default)).To(Equal(machines), "one VM per machine, none twice")
		dups := duplicateVMs(tc.Target)
		Expect(dups).To(BeZero())
		for _, hm := range hms {
			Expect(hm.Spec.ProviderID).To(HavePrefix(infrav1.ProviderIDPrefix))
		}
		Eventually(func(g Gomega) {
			machineList := &clusterv1.MachineList{}
			g.Expect(mgmt().List(ctx, machineList, client.InNamespace(tc.Namespace), client.MatchingLabels{"pool": "workers"})).To(Succeed())
			g.Expect(machineList.Items).To(HaveLen(machines))
			for _, m := range machineList.Items {
				g.Expect(m.Status.Initialization.InfrastructureProvisioned).To(Equal(ptr.To(true)), m.Name)
			}
		}).Should(Succeed())
		deleteCluster(tc)
		leakFree(tc.Target)
		recordChaos(chaosRow{scenario: fmt.Sprintf("manager SIGKILLed %d times during provisioning", kills), runs: 1,
			machines: machines, duplicates: dups, recovery: recovery, recoveryMeasuredFrom: "last restart -> all provisioned"})
	})

	// A manager told to stop (a rolling update's old pod) gives its lease up, so that the next
	// leads at once instead of a lease duration later.
	It("gives its leader lease up when stopped, and the next manager takes it", func() {
		lease := &coordinationv1.Lease{}
		key := client.ObjectKey{Namespace: "capi-harvester-system", Name: "controller-leader-election-capi-harvester"}
		var holder string
		Eventually(func(g Gomega) {
			g.Expect(mgmt().Get(ctx, key, lease)).To(Succeed())
			g.Expect(lease.Spec.HolderIdentity).NotTo(BeNil())
			holder = *lease.Spec.HolderIdentity
			g.Expect(holder).NotTo(BeEmpty(), "the shared manager leads")
		}, 3*time.Minute).Should(Succeed())
		Expect(testBed.Provider.Stop()).To(Succeed())
		Expect(mgmt().Get(ctx, key, lease)).To(Succeed())
		Expect(ptr.Deref(lease.Spec.HolderIdentity, "")).To(BeEmpty(), "the stopped manager released the lease")
		Expect(testBed.Provider.Start(ctx)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(mgmt().Get(ctx, key, lease)).To(Succeed())
			g.Expect(ptr.Deref(lease.Spec.HolderIdentity, "")).NotTo(BeEmpty())
			g.Expect(*lease.Spec.HolderIdentity).NotTo(Equal(holder), "the new process leads")
			started, err := testBed.Provider.WorkersStarted("harvestermachine")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(started).To(BeTrue())
		}, 3*time.Minute).Should(Succeed())
	})
})
