package e2e

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
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
		const machines, kills = 5, 4
		tc := newTestCluster("restarts", "restarts")
		tc.machineDeployment("workers", "workers", machines, machineSpec())
		vmCount := func() int {
			vms := &kubevirtv1.VirtualMachineList{}
			Expect(harvesterClient().List(ctx, vms, client.InNamespace(tc.Target))).To(Succeed())
			return len(vms.Items)
		}
		for i := range kills {
			// Kill at different points of the provisioning: after the i-th VM exists.
			Eventually(vmCount).WithTimeout(time.Minute).Should(BeNumerically(">=", min(i+1, machines)))
			Expect(testBed.Provider.Kill()).To(Succeed())
			Expect(testBed.Provider.Start(ctx)).To(Succeed())
		}
		hms := tc.provisionedMachines(machines)
		Expect(vmCount()).To(Equal(machines), "one VM per machine, none twice")
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
	})
})
