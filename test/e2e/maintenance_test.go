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
	"context"
	"fmt"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/controllers"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/naming"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/harvestersim"
)

// Harvester's own maintenance mode (its node drain and maintain-status controllers, KubeVirt's
// eviction admitter and evacuation controller) empties the host of a DrainAndRestart worker: the
// provider drains the guest node first, holding on a PodDisruptionBudget until it is relaxed,
// then stops the VM and starts it on another host; no MachineHealthCheck replaces it meanwhile.
var _ = Describe("Harvester host maintenance", func() {
	It("drains a DrainAndRestart worker's guest node before its VM leaves the host, and replaces nothing", func() {
		tc := newTestCluster("maint", "maint")
		Expect(tc.Guest.StartScheduling(ctx, "")).To(Succeed())
		tc.controlPlaneMachine("maint-cp-0")
		restartSpec := machineSpec()
		restartSpec.HostMaintenance.Policy = infrav1.HostMaintenanceDrainAndRestart
		tc.machineDeployment("restart", "restart", 1, restartSpec)
		tc.machineDeployment("migrate", "migrate", 1, machineSpec())
		// Any worker whose node is NotReady for a second would be replaced, but for
		// skip-remediation.
		nodeHealthCheck(tc, 1, "restart", "migrate")

		machines := func(g Gomega) map[string]infrav1.HarvesterMachine { return machinesByName(g, tc) }
		ownerOf := func(g Gomega, hm infrav1.HarvesterMachine) *clusterv1.Machine {
			m := &clusterv1.Machine{}
			for _, ref := range hm.OwnerReferences {
				if ref.Kind == "Machine" {
					g.Expect(mgmt().Get(ctx, client.ObjectKey{Namespace: hm.Namespace, Name: ref.Name}, m)).To(Succeed())
				}
			}
			g.Expect(m.Name).NotTo(BeEmpty())
			return m
		}
		var before map[string]infrav1.HarvesterMachine
		var restart infrav1.HarvesterMachine
		var node string
		waitProgressing("three provisioned machines, the restart worker with its Node", tc.state, func(g Gomega) {
			before = machines(g)
			g.Expect(before).To(HaveLen(3))
			for _, hm := range before {
				g.Expect(hm.Status.Initialization.Provisioned).To(Equal(ptr.To(true)))
				if hm.Labels[clusterv1.MachineDeploymentNameLabel] == "restart" {
					restart = hm
				}
			}
			node = ownerOf(g, restart).Status.NodeRef.Name
			g.Expect(node).NotTo(BeEmpty())
		})
		host := restart.Status.VirtualMachine.Host
		vm := &kubevirtv1.VirtualMachine{}
		Expect(harvesterClient().Get(ctx, client.ObjectKey{Namespace: tc.Target, Name: restart.Status.VirtualMachine.Name}, vm)).To(Succeed())
		Expect(vm.Spec.Template.Spec.EvictionStrategy).To(Equal(ptr.To(kubevirtv1.EvictionStrategyExternal)))
		Expect(vm.Labels).To(HaveKeyWithValue(naming.LabelMaintainModeStrategy, naming.MaintainModeMigrate))

		By("running a guest workload on the worker's node, guarded by a PodDisruptionBudget")
		g := tc.Guest.Env.Client
		labels := map[string]string{"app": "web"}
		Expect(g.Create(ctx, &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](1),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{
						NodeSelector: map[string]string{"kubernetes.io/hostname": node},
						Containers:   []corev1.Container{{Name: "web", Image: "registry.k8s.io/pause:3.10"}},
					},
				},
			},
		})).To(Succeed())
		pdb := &policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
			Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: labels}},
		}
		Expect(g.Create(ctx, pdb)).To(Succeed())
		webRuns := func(gm Gomega) {
			pods := &corev1.PodList{}
			gm.Expect(g.List(ctx, pods, client.InNamespace("default"), client.MatchingLabels(labels))).To(Succeed())
			gm.Expect(pods.Items).To(ContainElement(And(HaveField("Spec.NodeName", node), HaveField("Status.Phase", corev1.PodRunning),
				HaveField("DeletionTimestamp", BeNil()))))
		}
		Eventually(func(gm Gomega) {
			webRuns(gm)
			gm.Expect(g.Get(ctx, client.ObjectKeyFromObject(pdb), pdb)).To(Succeed())
			gm.Expect(pdb.Status.DisruptionsAllowed).To(BeZero())
			gm.Expect(pdb.Status.CurrentHealthy).To(Equal(int32(1)))
		}).Should(Succeed())

		By("putting the worker's host in maintenance mode, as Harvester's UI does (not forced)")
		Expect(testBed.Harvester.EnableMaintenance(ctx, host, false)).To(Succeed())
		DeferCleanup(func() { Expect(testBed.Harvester.DisableMaintenance(ctx, host)).To(Succeed()) })
		Eventually(func(gm Gomega) {
			hm := machines(gm)[restart.Name]
			c := conditions.Get(&hm, infrav1.HostMaintenanceCondition)
			gm.Expect(c).NotTo(BeNil())
			gm.Expect(c.Reason).To(Equal(infrav1.DrainingNodeReason))
			gm.Expect(c.Message).To(ContainSubstring("disruption budget"))
			m := ownerOf(gm, hm)
			gm.Expect(m.Annotations).To(HaveKey(clusterv1.MachineSkipRemediationAnnotation))
			gm.Expect(m.Annotations).To(HaveKeyWithValue(controllers.MaintenanceAnnotation, "skip-remediation,drain,cordon"))
			n := &corev1.Node{}
			gm.Expect(g.Get(ctx, client.ObjectKey{Name: node}, n)).To(Succeed())
			gm.Expect(n.Spec.Unschedulable).To(BeTrue(), "the guest node is cordoned")
		}).WithTimeout(2 * time.Minute).Should(Succeed())
		out := runDocumentedOnManagement("operations.md", "watch-maintenance", "NAMESPACE="+tc.Namespace)
		Expect(out).To(MatchRegexp(restart.Name + ` +` + host + ` +` + infrav1.DrainingNodeReason))
		// The budget holds: the VM still runs on the host, and so does the workload.
		Consistently(func(gm Gomega) {
			webRuns(gm)
			vmi := &kubevirtv1.VirtualMachineInstance{}
			gm.Expect(harvesterClient().Get(ctx, client.ObjectKeyFromObject(vm), vmi)).To(Succeed())
			gm.Expect(vmi.Status.NodeName).To(Equal(host))
		}).WithTimeout(3 * time.Second).Should(Succeed())

		By("killing the manager mid-drain: the new one goes on from what the Machine and VM record")
		Expect(testBed.Provider.Kill()).To(Succeed())
		Expect(testBed.Provider.Start(ctx)).To(Succeed())
		Eventually(func(gm Gomega) {
			hm := machines(gm)[restart.Name]
			gm.Expect(conditions.GetReason(&hm, infrav1.HostMaintenanceCondition)).To(Equal(infrav1.DrainingNodeReason))
			gm.Expect(ownerOf(gm, hm).Annotations).To(HaveKeyWithValue(controllers.MaintenanceAnnotation, "skip-remediation,drain,cordon"))
		}).Should(Succeed())

		By("relaxing the budget: the node drains, the VM stops and starts on another host")
		Expect(g.Delete(ctx, pdb)).To(Succeed())
		waitProgressing("the worker drained and restarted off the host", tc.state, func(gm Gomega) {
			// A kubelet's status reports are the host changes Harvester's maintain-status
			// controller re-checks on.
			gm.Expect(testBed.Harvester.ReportHostStatus(ctx, host)).To(Succeed())
			hm := machines(gm)[restart.Name]
			gm.Expect(hm.Status.VirtualMachine.Host).NotTo(Equal(host))
			gm.Expect(conditions.GetReason(&hm, infrav1.HostMaintenanceCondition)).To(Equal(infrav1.NoHostMaintenanceReason))
			gm.Expect(conditions.IsTrue(&hm, infrav1.VirtualMachineReadyCondition)).To(BeTrue())
			m := ownerOf(gm, hm)
			gm.Expect(m.Annotations).NotTo(HaveKey(clusterv1.MachineSkipRemediationAnnotation))
			gm.Expect(m.Annotations).NotTo(HaveKey(controllers.MaintenanceAnnotation))
			n := &corev1.Node{}
			gm.Expect(g.Get(ctx, client.ObjectKey{Name: node}, n)).To(Succeed())
			gm.Expect(n.Spec.Unschedulable).To(BeFalse(), "the provider uncordoned the node it cordoned")
			webRuns(gm)
			h := &corev1.Node{}
			gm.Expect(harvesterClient().Get(ctx, client.ObjectKey{Name: host}, h)).To(Succeed())
			gm.Expect(h.Annotations).To(HaveKeyWithValue(harvestersim.AnnotationMaintainStatus, harvestersim.MaintainStatusCompleted))
			// The live-migrated machines' status follows their VMIs.
			for name, hm := range machines(gm) {
				gm.Expect(hm.Status.VirtualMachine.Host).NotTo(Equal(host), name)
			}
		})

		By("every machine is the one it was: same VM and providerID, off the host, none replaced")
		sameMachines(Default, before, machines(Default))
		vmis := &kubevirtv1.VirtualMachineInstanceList{}
		Expect(harvesterClient().List(ctx, vmis, client.InNamespace(tc.Target))).To(Succeed())
		for _, vmi := range vmis.Items {
			Expect(vmi.Status.NodeName).NotTo(Equal(host), "VMI %s", vmi.Name)
		}
		// Events are sent apart from the status.
		Eventually(func(gm Gomega) {
			said := eventsOn(gm, tc.Namespace, restart.Name)
			for _, reason := range []string{"DrainingNode", "VirtualMachineStopping", "VirtualMachineRestarting", "HostMaintenanceDone"} {
				gm.Expect(said).To(ContainElement(HavePrefix(reason + ": ")))
			}
		}).Should(Succeed())

		deleteCluster(tc)
		leakFree(tc.Target)
	})

	It("moves a vGPU worker off a cordoned host before maintenance mode, restarts one that forced maintenance halted, and moves it for an upgrade", func() {
		const vgpu = "nvidia.com/NVIDIA_A2-4Q"
		// Two worker hosts with a vGPU each, that only this test's machines select. Left cordoned
		// at the end: later tests' VMs stay on the three hosts they expect.
		hostA, hostB := "harvester-gpu-a", "harvester-gpu-b"
		for _, h := range []string{hostA, hostB} {
			Expect(testBed.Harvester.AddHost(ctx, harvestersim.Host{Name: h, Zone: "zone-a", Region: "region-1", Devices: map[string]int{vgpu: 1}})).To(Succeed())
			Eventually(func(g Gomega) {
				node := &corev1.Node{}
				g.Expect(harvesterClient().Get(ctx, client.ObjectKey{Name: h}, node)).To(Succeed())
				node.Labels["e2e-maintenance"] = "gpu"
				g.Expect(harvesterClient().Update(ctx, node)).To(Succeed())
			}).Should(Succeed())
			DeferCleanup(func() {
				Expect(testBed.Harvester.DisableMaintenance(ctx, h)).To(Succeed())
				cordon(h, true)
			})
		}
		onGPUHosts := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: "e2e-maintenance", Operator: corev1.NodeSelectorOpIn, Values: []string{"gpu"}}}}}}}}
		// Everything starts on host A.
		cordon(hostB, true)

		tc := newTestCluster("maint-gpu", "maint-gpu")
		cpSpec := machineSpec()
		cpSpec.Affinity = onGPUHosts
		tc.controlPlaneMachineWith("maint-gpu-cp-0", cpSpec)
		gpuSpec := machineSpec()
		gpuSpec.Affinity = onGPUHosts
		gpuSpec.GPUs = []infrav1.HostDevice{{DeviceName: vgpu}}
		tc.machineDeployment("gpu", "gpu", 1, gpuSpec)
		migrateSpec := machineSpec()
		migrateSpec.Affinity = onGPUHosts
		tc.machineDeployment("migrate", "migrate", 1, migrateSpec)
		// Longer than the 1 s of the first scenario: Harvester halts this VM while the manager is
		// down, before the provider can hold remediation, and a MachineHealthCheck is not meant to
		// beat the manager's return (sites give minutes; the manager's restart and first reconcile
		// took over 15 s on a loaded 2-core machine, and the MachineHealthCheck replaced the
		// machine).
		nodeHealthCheck(tc, 180, "gpu", "migrate")

		machines := func(g Gomega) map[string]infrav1.HarvesterMachine { return machinesByName(g, tc) }
		var before map[string]infrav1.HarvesterMachine
		var gpu string
		waitProgressing("three provisioned machines on host A", tc.state, func(g Gomega) {
			before = machines(g)
			g.Expect(before).To(HaveLen(3))
			for name, hm := range before {
				g.Expect(hm.Status.Initialization.Provisioned).To(Equal(ptr.To(true)))
				g.Expect(hm.Status.VirtualMachine.Host).To(Equal(hostA))
				if hm.Labels[clusterv1.MachineDeploymentNameLabel] == "gpu" {
					gpu = name
				}
			}
		})
		cordon(hostB, false)
		settled := func(g Gomega, hm infrav1.HarvesterMachine) {
			g.Expect(conditions.GetReason(&hm, infrav1.HostMaintenanceCondition)).To(Equal(infrav1.NoHostMaintenanceReason))
			g.Expect(conditions.IsTrue(&hm, infrav1.VirtualMachineReadyCondition)).To(BeTrue())
			for _, ref := range hm.OwnerReferences {
				m := &clusterv1.Machine{}
				g.Expect(mgmt().Get(ctx, client.ObjectKey{Namespace: hm.Namespace, Name: ref.Name}, m)).To(Succeed())
				g.Expect(m.Annotations).NotTo(HaveKey(clusterv1.MachineSkipRemediationAnnotation))
				g.Expect(m.Annotations).NotTo(HaveKey(controllers.MaintenanceAnnotation))
			}
		}
		completed := func(g Gomega, host string) {
			g.Expect(testBed.Harvester.ReportHostStatus(ctx, host)).To(Succeed())
			h := &corev1.Node{}
			g.Expect(harvesterClient().Get(ctx, client.ObjectKey{Name: host}, h)).To(Succeed())
			g.Expect(h.Annotations).To(HaveKeyWithValue(harvestersim.AnnotationMaintainStatus, harvestersim.MaintainStatusCompleted))
		}

		By("cordoning host A first: the provider drains the vGPU worker and restarts it on host B")
		cordon(hostA, true)
		waitProgressing("the vGPU worker restarted on host B", tc.state, func(g Gomega) {
			hm := machines(g)[gpu]
			g.Expect(hm.Status.VirtualMachine.Host).To(Equal(hostB))
			settled(g, hm)
		})

		By("maintenance mode on host A, not forced: Harvester accepts it, the others live-migrate")
		Expect(testBed.Harvester.EnableMaintenance(ctx, hostA, false)).To(Succeed())
		waitProgressing("host A's maintenance completed, every machine on host B", tc.state, func(g Gomega) {
			completed(g, hostA)
			for _, hm := range machines(g) {
				g.Expect(hm.Status.VirtualMachine.Host).To(Equal(hostB), hm.Name)
				settled(g, hm)
			}
		})

		By("forced maintenance on host B while the manager is down: Harvester halts the vGPU worker at once; the manager, back, starts it on host A")
		Expect(testBed.Harvester.DisableMaintenance(ctx, hostA)).To(Succeed())
		// Down, the manager cannot drain first (which it would race Harvester's halt to do):
		// what it finds is a VM Harvester halted.
		Expect(testBed.Provider.Kill()).To(Succeed())
		Expect(testBed.Harvester.EnableMaintenance(ctx, hostB, true)).To(Succeed())
		Eventually(func(g Gomega) {
			vm := &kubevirtv1.VirtualMachine{}
			g.Expect(harvesterClient().Get(ctx, client.ObjectKey{Namespace: tc.Target, Name: before[gpu].Status.VirtualMachine.Name}, vm)).To(Succeed())
			g.Expect(vm.Spec.RunStrategy).To(Equal(ptr.To(kubevirtv1.RunStrategyHalted)), "Harvester halted it")
			g.Expect(apierrors.IsNotFound(harvesterClient().Get(ctx, client.ObjectKeyFromObject(vm), &kubevirtv1.VirtualMachineInstance{}))).To(BeTrue())
		}).Should(Succeed())
		Expect(testBed.Provider.Start(ctx)).To(Succeed())
		waitProgressing("host B's maintenance completed, every machine on host A", tc.state, func(g Gomega) {
			completed(g, hostB)
			for _, hm := range machines(g) {
				g.Expect(hm.Status.VirtualMachine.Host).To(Equal(hostA), hm.Name)
				settled(g, hm)
			}
		})
		// Sent apart from the status, by a manager just started on a loaded machine.
		Eventually(func(g Gomega) []string { return eventsOn(g, tc.Namespace, gpu) }).WithTimeout(5 * time.Minute).
			Should(ContainElement(HavePrefix(infrav1.HaltedByHarvesterReason + ": ")))

		By("upgrading host A: Harvester's detector does not stop a vGPU-only VM, the drain taint makes the provider move it")
		Expect(testBed.Harvester.DisableMaintenance(ctx, hostB)).To(Succeed())
		gpuVMI := &kubevirtv1.VirtualMachineInstance{}
		Expect(harvesterClient().Get(ctx, client.ObjectKey{Namespace: tc.Target, Name: before[gpu].Status.VirtualMachine.Name}, gpuVMI)).To(Succeed())
		upgradeHost(hostA)
		waitProgressing("the vGPU worker restarted and the others live-migrated off host A", tc.state, func(g Gomega) {
			for name, hm := range machines(g) {
				settled(g, hm)
				vmi := &kubevirtv1.VirtualMachineInstance{}
				g.Expect(harvesterClient().Get(ctx, client.ObjectKey{Namespace: tc.Target, Name: hm.Status.VirtualMachine.Name}, vmi)).To(Succeed())
				if name == gpu {
					// Stopped and started again (the upgraded host may take it back once it is up).
					g.Expect(vmi.UID).NotTo(Equal(gpuVMI.UID))
					continue
				}
				g.Expect(hm.Status.VirtualMachine.Host).To(Equal(hostB), "%s live-migrated off the upgraded host", name)
			}
		})

		By("every machine is the one it was: same VM and providerID, none replaced")
		sameMachines(Default, before, machines(Default))

		deleteCluster(tc)
		leakFree(tc.Target)
	})

	It("keeps a 3+2 cluster's API reachable through a Harvester upgrade of every host in turn, and replaces nothing", func() {
		tc := newTestCluster("upgrade", "upgrade")
		for i := range 3 {
			tc.controlPlaneMachine(fmt.Sprintf("upgrade-cp-%d", i))
		}
		tc.machineDeployment("workers", "workers", 2, machineSpec())
		machines := func(g Gomega) map[string]infrav1.HarvesterMachine { return machinesByName(g, tc) }
		lbName := ""
		var before map[string]infrav1.HarvesterMachine
		waitProgressing("five provisioned machines behind three reachable backends", tc.state, func(g Gomega) {
			before = machines(g)
			g.Expect(before).To(HaveLen(5))
			for _, hm := range before {
				g.Expect(hm.Status.Initialization.Provisioned).To(Equal(ptr.To(true)))
			}
			lbName = tc.guest().LoadBalancerName()
			g.Expect(reachableBackends(g, tc, lbName)).To(Equal(3))
		})

		By("upgrading the three hosts one after the other while probing the control plane's load balancer")
		probe := startProbe(tc, lbName)
		for _, host := range []string{"harvester-1", "harvester-2", "harvester-3"} {
			upgradeHost(host)
		}
		minReachable, minRunning, samples := probe()
		GinkgoWriter.Printf("upgrade: %d probes; fewest reachable load-balancer backends %d, fewest running control-plane VMs %d\n", samples, minReachable, minRunning)
		Expect(samples).To(BeNumerically(">", 10))
		Expect(minReachable).To(BeNumerically(">=", 1), "the guest's API was unreachable during the upgrade")
		Expect(minRunning).To(Equal(3), "every control-plane VM live-migrated: none stopped")
		// Every host was emptied in turn: each VM moved at least once, by a live migration.
		vmis := &kubevirtv1.VirtualMachineInstanceList{}
		Expect(harvesterClient().List(ctx, vmis, client.InNamespace(tc.Target))).To(Succeed())
		Expect(vmis.Items).To(HaveLen(5))
		for _, vmi := range vmis.Items {
			Expect(vmi.Status.MigrationState).NotTo(BeNil(), "VMI %s never migrated", vmi.Name)
			Expect(vmi.Status.MigrationState.Completed).To(BeTrue(), "VMI %s", vmi.Name)
		}

		By("every machine is the one it was, provisioned, with its VM and providerID")
		Eventually(func(g Gomega) {
			after := machines(g)
			sameMachines(g, before, after)
			for name := range before {
				g.Expect(after[name].Status.Initialization.Provisioned).To(Equal(ptr.To(true)))
				g.Expect(conditions.GetReason(ptr.To(after[name]), infrav1.HostMaintenanceCondition)).To(Equal(infrav1.NoHostMaintenanceReason))
			}
		}).Should(Succeed())

		deleteCluster(tc)
		leakFree(tc.Target)
	})
})

// upgradeHost upgrades a Harvester host as Harvester's upgrade does (the simulator's UpgradeHost:
// the VMs that cannot leave stopped, the others moved, the host restarted), as long as its VMs
// keep leaving it.
func upgradeHost(host string) {
	GinkgoHelper()
	upgradeCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- testBed.Harvester.UpgradeHost(upgradeCtx, host) }()
	var err error
	waitProgressing("host "+host+" upgraded", func() string { return describeVMIsOn(host) }, func(g Gomega) {
		g.Expect(done).To(Receive(&err))
	})
	Expect(err).NotTo(HaveOccurred(), "host %s emptied: nothing stalled the upgrade", host)
}

// describeVMIsOn says which VMIs run on a Harvester host, in what phase, and where they migrate.
func describeVMIsOn(host string) string {
	vmis := &kubevirtv1.VirtualMachineInstanceList{}
	if err := harvesterClient().List(ctx, vmis); err != nil {
		return err.Error()
	}
	out := "VMIs on " + host + ":"
	for _, vmi := range vmis.Items {
		if vmi.Status.NodeName != host {
			continue
		}
		out += fmt.Sprintf(" %s/%s %s", vmi.Namespace, vmi.Name, vmi.Status.Phase)
		if m := vmi.Status.MigrationState; m != nil {
			out += fmt.Sprintf(" (migrating to %s, completed %v)", m.TargetNode, m.Completed)
		}
	}
	return out
}

// reachableBackends counts the endpoints of the guest's control-plane load balancer that are
// ready (Harvester's prober found them healthy) and whose VM runs: the addresses the guest's API
// is reachable at.
func reachableBackends(g Gomega, tc *testCluster, lbName string) int {
	slice := &discoveryv1.EndpointSlice{}
	g.Expect(harvesterClient().Get(ctx, client.ObjectKey{Namespace: tc.Target, Name: lbName}, slice)).To(Succeed())
	vmis := &kubevirtv1.VirtualMachineInstanceList{}
	g.Expect(harvesterClient().List(ctx, vmis, client.InNamespace(tc.Target))).To(Succeed())
	running := map[string]bool{}
	for _, vmi := range vmis.Items {
		if vmi.Status.Phase == kubevirtv1.Running {
			for _, iface := range vmi.Status.Interfaces {
				running[iface.IP] = true
			}
		}
	}
	n := 0
	for _, e := range slice.Endpoints {
		if ptr.Deref(e.Conditions.Ready, false) && len(e.Addresses) > 0 && running[e.Addresses[0]] {
			n++
		}
	}
	return n
}

// startProbe samples the control-plane load balancer's reachable backends and the running
// control-plane VMs every 100 ms until the returned function stops it and reports the fewest of
// each and how many samples it took.
func startProbe(tc *testCluster, lbName string) func() (minReachable, minRunning, samples int) {
	stop, done := make(chan struct{}), make(chan struct{})
	minReachable, minRunning, samples := 1<<30, 1<<30, 0
	go func() {
		defer GinkgoRecover()
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			g := NewGomega(func(string, ...int) {})
			reachable := 0
			func() {
				defer func() { _ = recover() }()
				reachable = reachableBackends(g, tc, lbName)
			}()
			vmis := &kubevirtv1.VirtualMachineInstanceList{}
			if err := harvesterClient().List(ctx, vmis, client.InNamespace(tc.Target), client.MatchingLabels{naming.LabelRole: naming.RoleControlPlane}); err != nil {
				continue
			}
			running := 0
			for _, vmi := range vmis.Items {
				if vmi.Status.Phase == kubevirtv1.Running {
					running++
				}
			}
			minReachable, minRunning, samples = min(minReachable, reachable), min(minRunning, running), samples+1
		}
	}()
	return func() (int, int, int) {
		close(stop)
		<-done
		return minReachable, minRunning, samples
	}
}

// machinesByName are the HarvesterMachines of the test cluster's namespace by name.
func machinesByName(g Gomega, tc *testCluster) map[string]infrav1.HarvesterMachine {
	hms := &infrav1.HarvesterMachineList{}
	g.Expect(mgmt().List(ctx, hms, client.InNamespace(tc.Namespace))).To(Succeed())
	out := map[string]infrav1.HarvesterMachine{}
	for _, hm := range hms.Items {
		out[hm.Name] = hm
	}
	return out
}

// nodeHealthCheck makes a MachineHealthCheck over the machines of the given pools that replaces
// one whose Node is not Ready (Unknown or False) for timeout seconds.
func nodeHealthCheck(tc *testCluster, timeout int32, pools ...string) {
	Expect(mgmt().Create(ctx, &clusterv1.MachineHealthCheck{
		ObjectMeta: metav1.ObjectMeta{Namespace: tc.Namespace, Name: "workers"},
		Spec: clusterv1.MachineHealthCheckSpec{
			ClusterName: tc.Name,
			Selector: metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
				Key: "pool", Operator: metav1.LabelSelectorOpIn, Values: pools}}},
			Checks: clusterv1.MachineHealthCheckChecks{UnhealthyNodeConditions: []clusterv1.UnhealthyNodeCondition{
				{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, TimeoutSeconds: ptr.To(timeout)},
				{Type: corev1.NodeReady, Status: corev1.ConditionFalse, TimeoutSeconds: ptr.To(timeout)},
			}},
		},
	})).To(Succeed())
}

// sameMachines checks that after holds the machines of before and no other, each with its VM
// and providerID: none was replaced, no VM made again.
func sameMachines(g Gomega, before, after map[string]infrav1.HarvesterMachine) {
	g.Expect(after).To(HaveLen(len(before)))
	for name, hm := range before {
		g.Expect(after).To(HaveKey(name))
		g.Expect(after[name].Spec.ProviderID).To(Equal(hm.Spec.ProviderID))
		g.Expect(after[name].Status.VirtualMachine.UID).To(Equal(hm.Status.VirtualMachine.UID))
	}
}

// eventsOn lists the events about one object of the management cluster as "Reason: note", in
// the order they were first seen, so that a failed wait shows what was said.
func eventsOn(g Gomega, namespace, name string) []string {
	events := &corev1.EventList{}
	g.Expect(mgmt().List(ctx, events, client.InNamespace(namespace))).To(Succeed())
	slices.SortFunc(events.Items, func(a, b corev1.Event) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
	var said []string
	for _, e := range events.Items {
		if e.InvolvedObject.Name == name {
			said = append(said, e.Reason+": "+e.Message)
		}
	}
	return said
}
