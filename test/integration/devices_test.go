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

// Package integration runs the provider's controllers in-process against the simulated
// Harvester and CAPI's core controllers, for behaviour between the controllers and the
// simulator that needs no guest cluster.
package integration

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/harvestersim"
)

// A machine that asks for a vGPU no host has is Unschedulable, saying which resource lacks;
// once a host with it joins, the VM runs there and the machine is provisioned, with the
// address of the NIC it chose as management as its InternalIP.
func TestMachineWithADeviceNoHostHasIsUnschedulable(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := testContext(t)
	t.Cleanup(cancel)
	testBed := startBed(t)
	c := testBed.Management.Client

	const ns, name, vgpu = "devices", "devices", "nvidia.com/NVIDIA_A2-4Q"
	g.Expect(testBed.CreateBareCluster(ctx, ns, name)).To(Succeed())
	spec := infrav1.HarvesterMachineSpec{
		CPU: 2, Memory: resource.MustParse("4Gi"), CPUModel: "host-passthrough",
		Disks:    []infrav1.Disk{{Image: "default/ubuntu-24.04", Size: resource.MustParse("40Gi")}},
		Networks: []infrav1.Network{{NetworkName: "default/vlan20"}, {Name: "mgmt", NetworkName: "default/vlan10", Management: true}},
		GPUs:     []infrav1.HostDevice{{DeviceName: vgpu}},
	}
	machine := createMachinePool(ctx, g, c, ns, name, spec)
	g.Eventually(func(g Gomega) {
		cond := conditions.Get(machine(g), infrav1.VirtualMachineReadyCondition)
		g.Expect(cond).NotTo(BeNil())
		g.Expect(cond.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(cond.Reason).To(Equal(infrav1.VMUnschedulableReason))
		g.Expect(cond.Message).To(ContainSubstring("Insufficient " + vgpu))
	}, settles, 100*time.Millisecond).Should(Succeed())
	g.Expect(machine(g).Status.Initialization.Provisioned).To(BeNil())

	// The VM asks KubeVirt for the device and the CPU model, as the builder wrote them.
	hm := machine(g)
	vm := &kubevirtv1.VirtualMachine{}
	g.Expect(testBed.Harvester.Client().Get(ctx, client.ObjectKey{Namespace: "guests", Name: hm.Name}, vm)).To(Succeed())
	g.Expect(vm.Spec.Template.Spec.Domain.Devices.GPUs).To(Equal([]kubevirtv1.GPU{{Name: "gpu-0", DeviceName: vgpu}}))
	g.Expect(vm.Spec.Template.Spec.Domain.CPU.Model).To(Equal("host-passthrough"))

	g.Expect(testBed.Harvester.AddHost(ctx, harvestersim.Host{Name: "harvester-gpu", Zone: "zone-a", Region: "region-1",
		Devices: map[string]int{vgpu: 2}})).To(Succeed())
	g.Eventually(func(g Gomega) {
		hm := machine(g)
		g.Expect(hm.Status.Initialization.Provisioned).To(Equal(ptr.To(true)))
		g.Expect(hm.Status.VirtualMachine.Host).To(Equal("harvester-gpu"))
	}, settles, 100*time.Millisecond).Should(Succeed())

	// The management NIC (the second) gives the InternalIP; the first NIC's is external.
	vmi := &kubevirtv1.VirtualMachineInstance{}
	g.Expect(testBed.Harvester.Client().Get(ctx, client.ObjectKey{Namespace: "guests", Name: hm.Name}, vmi)).To(Succeed())
	ips := map[string]string{}
	for _, iface := range vmi.Status.Interfaces {
		ips[iface.Name] = iface.IP
	}
	g.Expect(ips["mgmt"]).NotTo(BeEmpty())
	g.Expect(ips["nic-0"]).NotTo(BeEmpty())
	g.Expect(machine(g).Status.Addresses).To(ContainElements(
		clusterv1.MachineAddress{Type: clusterv1.MachineInternalIP, Address: ips["mgmt"]},
		clusterv1.MachineAddress{Type: clusterv1.MachineExternalIP, Address: ips["nic-0"]},
	))
	g.Expect(machine(g).Status.Addresses).NotTo(ContainElement(clusterv1.MachineAddress{Type: clusterv1.MachineInternalIP, Address: ips["nic-0"]}))
}
