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
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
)

// Behind a Rancher proxy (the documented way to reach Harvester) every request takes hundreds
// of milliseconds. The provider's requests then queue for the connection's few request slots:
// queueing is no outage, and no condition may say that Harvester does not answer.
// At full size only (make test-full): a performance property, not a behaviour another spec lacks.
var _ = Describe("A Harvester behind a slow proxy", Label(fullOnly), func() {
	It("provisions with 200 ms a request and never reports Harvester unreachable", func() {
		const machines = 10
		testBed.Harvester.Faults.Latency("*", 200*time.Millisecond)
		DeferCleanup(testBed.Harvester.Faults.Clear)
		tc := newTestCluster("slow", "slow")
		start := time.Now()
		tc.machineDeployment("workers", "workers", machines, machineSpec())

		var unreachable atomic.Int32
		waitProgressing(fmt.Sprintf("%d provisioned machines", machines), tc.state, func(g Gomega) {
			hms := &infrav1.HarvesterMachineList{}
			g.Expect(mgmt().List(ctx, hms, client.InNamespace(tc.Namespace))).To(Succeed())
			hc := &infrav1.HarvesterCluster{}
			g.Expect(mgmt().Get(ctx, client.ObjectKeyFromObject(tc.HarvesterCluster), hc)).To(Succeed())
			for _, c := range hc.Status.Conditions {
				if c.Reason == infrav1.HarvesterUnreachableReason {
					unreachable.Add(1)
				}
			}
			provisioned := 0
			for _, hm := range hms.Items {
				if c := conditions.Get(&hm, infrav1.VirtualMachineReadyCondition); c != nil && c.Reason == infrav1.HarvesterUnreachableReason {
					unreachable.Add(1)
				}
				if ptr.Deref(hm.Status.Initialization.Provisioned, false) {
					provisioned++
				}
			}
			g.Expect(provisioned).To(Equal(machines))
		})
		took := time.Since(start)
		Expect(unreachable.Load()).To(BeZero(), "a condition said HarvesterUnreachable while Harvester answered, slowly")
		GinkgoWriter.Printf("%d machines provisioned through 200 ms a request in %s\n", machines, took.Round(100*time.Millisecond))
		deleteCluster(tc)
		leakFree(tc.Target)
	})
})
