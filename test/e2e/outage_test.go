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
	"os"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
)

// outageLength is how long Harvester stays silent: 20 s in make test, CHAOS_OUTAGE (make chaos:
// 60s) otherwise.
func outageLength() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("CHAOS_OUTAGE")); err == nil && d > 0 {
		return d
	}
	return 20 * time.Second
}

// One tenant's Harvester black-holed (nothing refused, nothing answered) while its machines are
// being provisioned: the manager does not crash, the machines say why, another tenant's
// Harvester is served meanwhile (each connection has its own deadline, rate limit
// and cap on requests out, so the shared workers are not all stuck on the silent one), and
// provisioning resumes soon after the silent Harvester answers again.
var _ = Describe("A Harvester that stops answering", func() {
	It("holds up only its own clusters, says why, and resumes when it answers again", func() {
		outage := outageLength()
		const machinesA, machinesB = 12, 3
		endpoint, err := testBed.Harvester.NewEndpoint()
		Expect(err).NotTo(HaveOccurred())
		kubeconfig, err := endpoint.ProviderKubeconfig(ctx)
		Expect(err).NotTo(HaveOccurred())
		a := newTestClusterWith(kubeconfig, "outage-a", "outage-a")
		b := newTestCluster("outage-b", "outage-b")
		vms := func(tc *testCluster) func() int {
			return func() int {
				list := &kubevirtv1.VirtualMachineList{}
				Expect(harvesterClient().List(ctx, list, client.InNamespace(tc.Target))).To(Succeed())
				return len(list.Items)
			}
		}
		provisioned := func(tc *testCluster) func() int {
			return func() int {
				hms := &infrav1.HarvesterMachineList{}
				Expect(mgmt().List(ctx, hms, client.InNamespace(tc.Namespace))).To(Succeed())
				n := 0
				for _, hm := range hms.Items {
					if ptr.Deref(hm.Status.Initialization.Provisioned, false) {
						n++
					}
				}
				return n
			}
		}

		By("black-holing tenant A's Harvester once its first VM exists")
		a.machineDeployment("workers", "workers", machinesA, machineSpec())
		Eventually(vms(a)).Should(BeNumerically(">=", 1))
		endpoint.BlackHoleAPI(true)
		silentSince := time.Now()
		DeferCleanup(func() { endpoint.BlackHoleAPI(false) })

		// A's Harvester stays silent until B is provisioned and A's machines say why (and for at
		// least the outage): how long B takes depends on the machine's load, not on A.
		By("tenant B provisions meanwhile, while A's Harvester is still silent")
		b.machineDeployment("workers", "workers", machinesB, machineSpec())
		start := time.Now()
		waitProgressing("tenant B's machines provisioned during tenant A's outage", b.state, func(g Gomega) {
			g.Expect(provisioned(b)()).To(Equal(machinesB))
		})
		tenantB := time.Since(start)

		By("tenant A's machines say why")
		Eventually(func(g Gomega) {
			hms := &infrav1.HarvesterMachineList{}
			g.Expect(mgmt().List(ctx, hms, client.InNamespace(a.Namespace))).To(Succeed())
			var unreachable int
			for _, hm := range hms.Items {
				if c := conditions.Get(&hm, infrav1.VirtualMachineReadyCondition); c != nil && c.Reason == infrav1.HarvesterUnreachableReason {
					unreachable++
				}
			}
			g.Expect(unreachable).To(BeNumerically(">", 0))
		}).Should(Succeed(), "while tenant A's Harvester is silent")
		Expect(provisioned(a)()).To(BeNumerically("<", machinesA), "tenant A is held up")

		By("waiting out the outage, then letting Harvester answer again")
		Eventually(func() time.Duration { return time.Since(silentSince) }).WithTimeout(outage + time.Second).Should(BeNumerically(">=", outage))
		endpoint.BlackHoleAPI(false)
		back := time.Now()
		// The connection probes the silent Harvester at growing intervals (the next probe comes
		// seconds after the outage), and then twelve machines are provisioned on a machine that
		// may be busy: the wait fails when nothing moves, and the chaos table records how long.
		waitProgressing("tenant A's machines provisioned once its Harvester answers", a.state, func(g Gomega) {
			g.Expect(provisioned(a)()).To(Equal(machinesA))
		})
		recovery := time.Since(back)
		Expect(vms(a)()).To(Equal(machinesA), "one VM per machine")
		Expect(testBed.Provider.Log()).NotTo(ContainSubstring("panic"))
		GinkgoWriter.Printf("outage %s: tenant B's %d machines provisioned in %s while it lasted; tenant A's %d all provisioned %s after it ended\n",
			outage, machinesB, tenantB.Round(time.Millisecond), machinesA, recovery.Round(time.Millisecond))

		dups := duplicateVMs(a.Target) + duplicateVMs(b.Target)
		Expect(dups).To(BeZero())
		for _, tc := range []*testCluster{a, b} {
			Expect(mgmt().Delete(ctx, tc.Cluster)).To(Succeed())
		}
		for _, tc := range []*testCluster{a, b} {
			clusterGone(mgmt(), tc.Namespace, tc.Name)
			leakFree(tc.Target)
		}
		recordChaos(chaosRow{scenario: fmt.Sprintf("tenant A's Harvester silent %s (tenant B's %d provisioned in %s meanwhile)", outage, machinesB, tenantB.Round(100*time.Millisecond)),
			runs: 1, machines: machinesA + machinesB, duplicates: dups, recovery: recovery, recoveryMeasuredFrom: "Harvester back -> tenant A all provisioned"})
	})
})
