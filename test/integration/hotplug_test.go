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

package integration

import (
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/build"
)

// A machine with CPU and memory maximums gets a VM that Harvester's mutator leaves
// hot-pluggable, and the provider grows it while it runs when the machine's cpu and memory grow
// (what Cluster API's in-place update writes into it, with its update-in-progress mark): it
// patches the VM's sockets and guest memory as Harvester's hotplug action does, KubeVirt's VM
// controller and workload updater change the running VMI through a live migration (same VMI),
// and the machine's ResourcesUpToDate condition follows until the VMI has the new size; its image
// disk grows too (the volume's request raised, through Kubernetes' resize admission and
// Harvester's PVC webhook, which checks KubeVirt's ExpandDisks gate and the provisioner's online
// expansion). (With a memory limit on the VM, as the provider sets on others, KubeVirt's hotplug
// makes a migration target pod that asks for more memory than its limit, and the migration never
// starts: this test found it.)
func TestMachineWithMaximumsIsHotPluggable(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := testContext(t)
	t.Cleanup(cancel)
	testBed := startBed(t)
	c := testBed.Management.Client

	const ns, name = "hotplug", "hotplug"
	g.Expect(testBed.CreateBareCluster(ctx, ns, name)).To(Succeed())
	spec := infrav1.HarvesterMachineSpec{
		CPU: 2, MaxCPU: 4, Memory: resource.MustParse("4Gi"), MaxMemory: ptr.To(resource.MustParse("8Gi")),
		Disks:    []infrav1.Disk{{Image: "default/ubuntu-24.04", Size: resource.MustParse("40Gi")}},
		Networks: []infrav1.Network{{NetworkName: "default/vlan10"}},
	}
	machine := createMachinePool(ctx, g, c, ns, name, spec)
	h := testBed.Harvester.Client()
	var before *kubevirtv1.VirtualMachineInstance
	g.Eventually(func(g Gomega) {
		hm := machine(g)
		g.Expect(hm.Status.Initialization.Provisioned).To(Equal(ptr.To(true)))
		g.Expect(conditions.IsTrue(hm, infrav1.ResourcesUpToDateCondition)).To(BeTrue())
		before = &kubevirtv1.VirtualMachineInstance{}
		g.Expect(h.Get(ctx, client.ObjectKey{Namespace: "guests", Name: hm.Status.VirtualMachine.Name}, before)).To(Succeed())
	}, settles, 100*time.Millisecond).Should(Succeed())
	g.Expect(before.Spec.Domain.CPU.MaxSockets).To(Equal(uint32(4)), "Harvester's mutator kept the maximum")
	g.Expect(before.Spec.Domain.Memory.MaxGuest.String()).To(Equal("8Gi"))
	g.Expect(before.Status.CurrentCPUTopology).To(Equal(&kubevirtv1.CPUTopology{Sockets: 2, Cores: 1, Threads: 1}))

	// By hand, or beyond the maximum: refused before anything reaches Harvester.
	hm := machine(g)
	hm.Spec.CPU = 3
	g.Expect(c.Update(ctx, hm)).To(MatchError(ContainSubstring("resized only by Cluster API's in-place update")))
	hm = machine(g)
	markInPlace(hm)
	hm.Spec.CPU = 5
	g.Expect(c.Update(ctx, hm)).To(MatchError(ContainSubstring("can grow only up to maxCPU (4)")))

	// As Cluster API's in-place update writes it (its MachineSet controller).
	var resizing []string
	g.Eventually(func() error {
		hm := machine(g)
		markInPlace(hm)
		hm.Spec.CPU, hm.Spec.Memory = 3, resource.MustParse("6Gi")
		hm.Spec.Disks[0].Size = resource.MustParse("50Gi")
		return c.Update(ctx, hm)
	}, settles).Should(Succeed())
	g.Eventually(func(g Gomega) {
		hm := machine(g)
		if c := conditions.Get(hm, infrav1.ResourcesUpToDateCondition); c != nil && c.Reason == infrav1.ResizingReason && !slices.Contains(resizing, c.Message) {
			resizing = append(resizing, c.Message)
		}
		g.Expect(conditions.IsTrue(hm, infrav1.ResourcesUpToDateCondition)).To(BeTrue(), "%+v", conditions.Get(hm, infrav1.ResourcesUpToDateCondition))
		g.Expect(conditions.Get(hm, infrav1.ResourcesUpToDateCondition).ObservedGeneration).To(Equal(hm.Generation))
		vmi := &kubevirtv1.VirtualMachineInstance{}
		g.Expect(h.Get(ctx, client.ObjectKeyFromObject(before), vmi)).To(Succeed())
		g.Expect(vmi.UID).To(Equal(before.UID))
		g.Expect(vmi.Status.CurrentCPUTopology).To(Equal(&kubevirtv1.CPUTopology{Sockets: 3, Cores: 1, Threads: 1}), "VMI conditions %+v", vmi.Status.Conditions)
		g.Expect(vmi.Status.Memory.GuestRequested.String()).To(Equal("6Gi"))
		g.Expect(vmi.Status.MigrationState).NotTo(BeNil(), "KubeVirt moved the VMI to give it the new size")
		pvc := &corev1.PersistentVolumeClaim{}
		g.Expect(h.Get(ctx, client.ObjectKey{Namespace: "guests", Name: build.ClaimName(hm, hm.Spec.DiskName(0))}, pvc)).To(Succeed())
		g.Expect(pvc.Spec.Resources.Requests.Storage().String()).To(Equal("50Gi"))
		g.Expect(pvc.Status.Capacity.Storage().String()).To(Equal("50Gi"))
		g.Expect(hm.Status.Initialization.Provisioned).To(Equal(ptr.To(true)))
	}, settles, 100*time.Millisecond).Should(Succeed())
	g.Expect(resizing).NotTo(BeEmpty(), "the machine said it was resizing on the way")
	t.Logf("ResourcesUpToDate while resizing: %q", resizing)
}

// markInPlace puts Cluster API's update-in-progress annotation on a machine, as its in-place
// update does in the same write as the new spec.
func markInPlace(hm *infrav1.HarvesterMachine) {
	if hm.Annotations == nil {
		hm.Annotations = map[string]string{}
	}
	hm.Annotations[clusterv1.UpdateInProgressAnnotation] = ""
}
