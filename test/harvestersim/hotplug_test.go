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

package harvestersim_test

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A running VM's CPU sockets and guest memory grow without a restart as KubeVirt v1.7 does it on
// Harvester (with Harvester's hotplug annotation, which keeps its mutator from pinning
// maxSockets to 1): KubeVirt's VM controller patches the VMI, its workload updater live-migrates
// it (Harvester's KubeVirt lists LiveMigrate), and the target's handler applies the change as it
// finalises the migration. More sockets than maxSockets are refused by KubeVirt's admission.
func TestKubeVirtHotplugsCPUAndMemoryThroughAMigration(t *testing.T) {
	g := NewWithT(t)
	RegisterTestingT(t)
	g.Expect(sim.Client().Create(ctx, vm("hotplug", func(v *kubevirtv1.VirtualMachine) {
		v.Annotations["harvesterhci.io/enableCPUAndMemoryHotplug"] = "true"
		v.Spec.Template.Spec.Domain.CPU = &kubevirtv1.CPU{Sockets: 1, Cores: 1, Threads: 1, MaxSockets: 4}
		v.Spec.Template.Spec.Domain.Memory = &kubevirtv1.Memory{Guest: ptr.To(resource.MustParse("2Gi")), MaxGuest: ptr.To(resource.MustParse("8Gi"))}
	}))).To(Succeed())
	defer deleteVM(t, "hotplug")
	var before *kubevirtv1.VirtualMachineInstance
	g.Eventually(func(g Gomega) {
		before = getVMI(g, "hotplug")
		g.Expect(before.Status.Phase).To(Equal(kubevirtv1.Running))
		g.Expect(conditionStatus(before, kubevirtv1.VirtualMachineInstanceIsMigratable)).To(Equal(corev1.ConditionTrue))
		g.Expect(before.Status.CurrentCPUTopology).To(Equal(&kubevirtv1.CPUTopology{Sockets: 1, Cores: 1, Threads: 1}))
		g.Expect(before.Status.Memory).NotTo(BeNil())
		g.Expect(before.Status.Memory.GuestAtBoot.String()).To(Equal("2Gi"))
	}, settles).Should(Succeed())

	setTopology := func(sockets uint32, guest string) error {
		v := &kubevirtv1.VirtualMachine{}
		if err := sim.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: "hotplug"}, v); err != nil {
			return err
		}
		v.Spec.Template.Spec.Domain.CPU.Sockets = sockets
		v.Spec.Template.Spec.Domain.Memory.Guest = ptr.To(resource.MustParse(guest))
		return sim.Client().Update(ctx, v)
	}
	g.Eventually(func() error { return setTopology(2, "4Gi") }, settles).Should(Succeed())
	g.Eventually(func(g Gomega) {
		vmi := getVMI(g, "hotplug")
		g.Expect(vmi.UID).To(Equal(before.UID), "the same VMI: no restart")
		g.Expect(vmi.Status.CurrentCPUTopology).To(Equal(&kubevirtv1.CPUTopology{Sockets: 2, Cores: 1, Threads: 1}))
		g.Expect(vmi.Status.Memory.GuestRequested.String()).To(Equal("4Gi"))
		g.Expect(vmi.Status.Memory.GuestAtBoot.String()).To(Equal("2Gi"))
		g.Expect(conditionStatus(vmi, kubevirtv1.VirtualMachineInstanceVCPUChange)).To(Equal(corev1.ConditionUnknown), "no hotplug pending")
		g.Expect(conditionStatus(vmi, kubevirtv1.VirtualMachineInstanceMemoryChange)).To(Equal(corev1.ConditionUnknown))
		migrations := &kubevirtv1.VirtualMachineInstanceMigrationList{}
		g.Expect(sim.Client().List(ctx, migrations, client.InNamespace(ns))).To(Succeed())
		var succeeded bool
		for _, m := range migrations.Items {
			if m.Spec.VMIName == "hotplug" && strings.HasPrefix(m.Name, "kubevirt-workload-update-") && m.Status.Phase == kubevirtv1.MigrationSucceeded {
				succeeded = true
			}
		}
		g.Expect(succeeded).To(BeTrue(), "KubeVirt's workload updater migrated the VMI for the hotplug")
		v := &kubevirtv1.VirtualMachine{}
		g.Expect(sim.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: "hotplug"}, v)).To(Succeed())
		for _, c := range v.Status.Conditions {
			g.Expect(c.Type).NotTo(Equal(kubevirtv1.VirtualMachineRestartRequired), c.Message)
		}
	}, settles).Should(Succeed())

	err := setTopology(8, "4Gi")
	g.Expect(err).To(HaveOccurred(), "more sockets than maxSockets")
	g.Expect(err.Error()).To(ContainSubstring("greater than the maximum sockets allowed"))
}
