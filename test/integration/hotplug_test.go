package integration

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
)

// A machine with CPU and memory maximums gets a VM that Harvester's mutator leaves
// hot-pluggable and KubeVirt grows while it runs: raising its sockets and guest memory (what
// Harvester's CPU and memory hotplug action patches) changes the running VMI through KubeVirt's
// live migration, same VMI, and the machine stays provisioned. (With a memory limit on the VM,
// as the provider sets on others, KubeVirt's hotplug makes a migration target pod that asks for
// more memory than its limit, and the migration never starts: this test found it.)
func TestMachineWithMaximumsIsHotPluggable(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	testBed := startBed(ctx, t)
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
		before = &kubevirtv1.VirtualMachineInstance{}
		g.Expect(h.Get(ctx, client.ObjectKey{Namespace: "guests", Name: hm.Status.VirtualMachine.Name}, before)).To(Succeed())
	}, time.Minute, 100*time.Millisecond).Should(Succeed())
	g.Expect(before.Spec.Domain.CPU.MaxSockets).To(Equal(uint32(4)), "Harvester's mutator kept the maximum")
	g.Expect(before.Spec.Domain.Memory.MaxGuest.String()).To(Equal("8Gi"))
	g.Expect(before.Status.CurrentCPUTopology).To(Equal(&kubevirtv1.CPUTopology{Sockets: 2, Cores: 1, Threads: 1}))

	g.Eventually(func() error {
		vm := &kubevirtv1.VirtualMachine{}
		if err := h.Get(ctx, client.ObjectKeyFromObject(before), vm); err != nil {
			return err
		}
		vm.Spec.Template.Spec.Domain.CPU.Sockets = 3
		vm.Spec.Template.Spec.Domain.Memory.Guest = ptr.To(resource.MustParse("6Gi"))
		return h.Update(ctx, vm)
	}, 10*time.Second).Should(Succeed())
	g.Eventually(func(g Gomega) {
		vmi := &kubevirtv1.VirtualMachineInstance{}
		g.Expect(h.Get(ctx, client.ObjectKeyFromObject(before), vmi)).To(Succeed())
		g.Expect(vmi.UID).To(Equal(before.UID))
		g.Expect(vmi.Status.CurrentCPUTopology).To(Equal(&kubevirtv1.CPUTopology{Sockets: 3, Cores: 1, Threads: 1}), "VMI conditions %+v", vmi.Status.Conditions)
		g.Expect(vmi.Status.Memory.GuestRequested.String()).To(Equal("6Gi"))
		g.Expect(machine(g).Status.Initialization.Provisioned).To(Equal(ptr.To(true)))
	}, time.Minute, 200*time.Millisecond).Should(Succeed())
}
