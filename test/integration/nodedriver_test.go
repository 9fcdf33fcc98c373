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
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/naming"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/bed"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/harvestersim"
)

// What a Rancher node-driver user sets reaches the VM: a machine with pinned CPUs (and an
// isolated emulator thread) is Unschedulable until a host with its CPU manager enabled joins, as
// KubeVirt places it, then runs there; its NIC has the model asked for, its TPM and UEFI
// variables persist, and its VM and VMI carry the MachineDeployment's name, by which a load
// balancer can select a pool's VMs.
func TestMachineWithNodeDriverOptions(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := testContext(t)
	t.Cleanup(cancel)
	testBed := startBed(t)
	c := testBed.Management.Client

	const ns, name = "pinned", "pinned"
	g.Expect(testBed.CreateBareCluster(ctx, ns, name)).To(Succeed())
	spec := infrav1.HarvesterMachineSpec{
		CPU: 4, Memory: resource.MustParse("8Gi"), DedicatedCPUPlacement: true, IsolateEmulatorThread: true,
		Disks:    []infrav1.Disk{{Image: "default/ubuntu-24.04", Size: resource.MustParse("40Gi")}},
		Networks: []infrav1.Network{{NetworkName: "default/vlan10", Model: "e1000"}},
		Firmware: infrav1.Firmware{BootMode: infrav1.BootModeEFI, TPM: true, PersistentTPM: true, PersistentEFIVars: true},
		UserData: "#cloud-config\npackages: [open-iscsi]\nruncmd: [systemctl enable --now iscsid]\n",
	}
	machine := createMachinePool(ctx, g, c, ns, name, spec)
	g.Eventually(func(g Gomega) {
		cond := conditions.Get(machine(g), infrav1.VirtualMachineReadyCondition)
		g.Expect(cond).NotTo(BeNil())
		g.Expect(cond.Reason).To(Equal(infrav1.VMUnschedulableReason))
		g.Expect(cond.Message).To(ContainSubstring("cpumanager=true"))
	}, settles, 100*time.Millisecond).Should(Succeed())

	hm := machine(g)
	vm := &kubevirtv1.VirtualMachine{}
	g.Expect(testBed.Harvester.Client().Get(ctx, client.ObjectKey{Namespace: "guests", Name: hm.Name}, vm)).To(Succeed())
	domain := vm.Spec.Template.Spec.Domain
	g.Expect(domain.CPU.DedicatedCPUPlacement).To(BeTrue())
	g.Expect(domain.CPU.IsolateEmulatorThread).To(BeTrue())
	g.Expect(domain.Devices.Interfaces).To(ConsistOf(HaveField("Model", "e1000")))
	g.Expect(domain.Devices.TPM.Persistent).To(Equal(ptr.To(true)))
	g.Expect(domain.Firmware.Bootloader.EFI.Persistent).To(Equal(ptr.To(true)))
	g.Expect(vm.Labels).To(HaveKeyWithValue(clusterv1.MachineDeploymentNameLabel, name))
	g.Expect(vm.Spec.Template.ObjectMeta.Labels).To(HaveKeyWithValue(clusterv1.MachineDeploymentNameLabel, name))

	// The user's cloud-config merged under the bootstrap data: its command after the join.
	userData := &corev1.Secret{}
	g.Expect(testBed.Harvester.Client().Get(ctx, client.ObjectKey{Namespace: "guests", Name: naming.CloudInitSecretName(hm.Name)}, userData)).To(Succeed())
	var cfg map[string]any
	g.Expect(yaml.Unmarshal(userData.Data["userdata"], &cfg)).To(Succeed())
	g.Expect(cfg["packages"]).To(ContainElement("open-iscsi"))
	g.Expect(cfg["runcmd"]).To(ContainElements("echo join", "systemctl enable --now iscsid"))

	g.Expect(testBed.Harvester.AddHost(ctx, harvestersim.Host{Name: "harvester-pinning", Zone: "zone-a", Region: "region-1", CPUManager: true})).To(Succeed())
	g.Eventually(func(g Gomega) {
		hm := machine(g)
		g.Expect(hm.Status.Initialization.Provisioned).To(Equal(ptr.To(true)))
		g.Expect(hm.Status.VirtualMachine.Host).To(Equal("harvester-pinning"))
	}, settles, 100*time.Millisecond).Should(Succeed())
	vmi := &kubevirtv1.VirtualMachineInstance{}
	g.Expect(testBed.Harvester.Client().Get(ctx, client.ObjectKey{Namespace: "guests", Name: hm.Name}, vmi)).To(Succeed())
	g.Expect(vmi.Labels).To(HaveKeyWithValue(clusterv1.MachineDeploymentNameLabel, name), "a load balancer selects the pool's VMIs")

	// userData that sets what the bootstrap data sets otherwise: no VM, a condition naming the key.
	const clash = "clash"
	conflicting := spec
	conflicting.DedicatedCPUPlacement, conflicting.IsolateEmulatorThread = false, false
	conflicting.UserData = "runcmd: {first: echo}\n"
	g.Expect(c.Create(ctx, &infrav1.HarvesterMachineTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: clash},
		Spec:       infrav1.HarvesterMachineTemplateSpec{Template: infrav1.HarvesterMachineTemplateResource{Spec: conflicting}},
	})).To(Succeed())
	md := bed.BareMachineDeployment(ns, name, 1)
	md.Name = clash
	md.Spec.Selector.MatchLabels = map[string]string{"pool": clash}
	md.Spec.Template.Labels = map[string]string{"pool": clash}
	md.Spec.Template.Spec.InfrastructureRef.Name = clash
	g.Expect(c.Create(ctx, md)).To(Succeed())
	g.Eventually(func(g Gomega) {
		hms := &infrav1.HarvesterMachineList{}
		g.Expect(c.List(ctx, hms, client.InNamespace(ns), client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: clash})).To(Succeed())
		g.Expect(hms.Items).To(HaveLen(1))
		cond := conditions.Get(&hms.Items[0], infrav1.VirtualMachineReadyCondition)
		g.Expect(cond).NotTo(BeNil())
		g.Expect(cond.Reason).To(Equal(infrav1.UserDataConflictReason))
		g.Expect(cond.Message).To(ContainSubstring("userData's runcmd must be a list"))
		g.Expect(cond.Message).NotTo(ContainSubstring("echo join"), "no value of the bootstrap data")
		g.Expect(apierrors.IsNotFound(testBed.Harvester.Client().Get(ctx, client.ObjectKey{Namespace: "guests", Name: hms.Items[0].Name}, &kubevirtv1.VirtualMachine{}))).To(BeTrue(), "no VM")
	}, settles, 100*time.Millisecond).Should(Succeed())
}
