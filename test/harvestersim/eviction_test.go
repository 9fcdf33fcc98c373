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
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/harvestersim"
)

// launcherPod is the running virt-launcher pod of a VMI.
func launcherPod(g Gomega, vmi *kubevirtv1.VirtualMachineInstance) *corev1.Pod {
	pods := &corev1.PodList{}
	g.Expect(sim.Client().List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{kubevirtv1.AppLabel: "virt-launcher"})).To(Succeed())
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && len(p.OwnerReferences) > 0 && p.OwnerReferences[0].UID == vmi.UID {
			return p
		}
	}
	g.Expect(nil).NotTo(BeNil(), "no running launcher pod for VMI %s", vmi.Name)
	return nil
}

func evict(pod *corev1.Pod) error {
	return sim.Client().SubResource("eviction").Create(ctx, pod, &policyv1.Eviction{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name},
	})
}

// A host's drain evicts virt-launcher pods, and KubeVirt's own eviction admitter and evacuation
// controller decide what happens to the VM (LiveMigrateIfPossible, the strategy of the VMs
// Harvester's own UI makes): one that can migrate is marked for evacuation, its eviction refused,
// and live-migrated off the host; one with a PCI device cannot migrate, so its eviction goes
// through and the VM restarts (RerunOnFailure) on a host that can take it.
func TestDrainEvictionsAreKubeVirts(t *testing.T) {
	g := NewWithT(t)
	RegisterTestingT(t)

	g.Expect(sim.Client().Create(ctx, vm("evacuee", nil))).To(Succeed())
	defer deleteVM(t, "evacuee")
	var before *kubevirtv1.VirtualMachineInstance
	g.Eventually(func(g Gomega) {
		before = getVMI(g, "evacuee")
		g.Expect(before.Status.Phase).To(Equal(kubevirtv1.Running))
		g.Expect(conditionStatus(before, kubevirtv1.VirtualMachineInstanceIsMigratable)).To(Equal(corev1.ConditionTrue))
	}, settles).Should(Succeed())
	err := evict(launcherPod(g, before))
	g.Expect(apierrors.IsTooManyRequests(err)).To(BeTrue(), "KubeVirt refuses the eviction: %v", err)
	g.Expect(err.Error()).To(ContainSubstring("Eviction triggered evacuation of VMI"))
	g.Expect(getVMI(g, "evacuee").Status.EvacuationNodeName).To(Equal(before.Status.NodeName), "marked for evacuation")
	g.Eventually(func(g Gomega) {
		after := getVMI(g, "evacuee")
		g.Expect(after.UID).To(Equal(before.UID), "the same VMI, migrated")
		g.Expect(after.Status.NodeName).NotTo(Equal(before.Status.NodeName))
		g.Expect(after.Status.EvacuationNodeName).To(BeEmpty(), "the mark is cleared once the VM has left")
		g.Expect(after.Status.MigrationState).NotTo(BeNil())
		g.Expect(after.Status.MigrationState.Completed).To(BeTrue())
	}, settles).Should(Succeed())

	// Two hosts with the device; the VM's host is cordoned (a drain's first step).
	const gpu = "nvidia.com/GA102GL_A10"
	for _, name := range []string{"harvester-gpu-a", "harvester-gpu-b"} {
		g.Expect(sim.AddHost(ctx, harvestersim.Host{Name: name, Zone: "zone-a", Region: "region-1", Devices: map[string]int{gpu: 1}})).To(Succeed())
		defer func() { g.Expect(sim.Client().Delete(ctx, hostOf(name))).To(Succeed()) }()
	}
	g.Expect(sim.Client().Create(ctx, vm("pinned-by-gpu", func(v *kubevirtv1.VirtualMachine) {
		v.Spec.Template.Spec.Domain.Devices.GPUs = []kubevirtv1.GPU{{Name: "gpu-0", DeviceName: gpu}}
	}))).To(Succeed())
	defer deleteVM(t, "pinned-by-gpu")
	g.Eventually(func(g Gomega) {
		before = getVMI(g, "pinned-by-gpu")
		g.Expect(before.Status.Phase).To(Equal(kubevirtv1.Running))
		g.Expect(conditionStatus(before, kubevirtv1.VirtualMachineInstanceIsMigratable)).To(Equal(corev1.ConditionFalse))
	}, settles).Should(Succeed())
	host := hostOf(before.Status.NodeName)
	host.Spec.Unschedulable = true
	g.Expect(sim.Client().Update(ctx, host)).To(Succeed())
	defer func() {
		host := hostOf(before.Status.NodeName)
		host.Spec.Unschedulable = false
		g.Expect(sim.Client().Update(ctx, host)).To(Succeed())
	}()
	g.Expect(evict(launcherPod(g, before))).To(Succeed(), "nothing to migrate: the eviction goes through")
	g.Eventually(func(g Gomega) {
		after := getVMI(g, "pinned-by-gpu")
		g.Expect(after.UID).NotTo(Equal(before.UID), "a new VMI: the VM restarted")
		g.Expect(after.Status.Phase).To(Equal(kubevirtv1.Running))
		g.Expect(after.Status.NodeName).NotTo(Equal(before.Status.NodeName))
	}, settles).Should(Succeed())
}

func conditionStatus(vmi *kubevirtv1.VirtualMachineInstance, t kubevirtv1.VirtualMachineInstanceConditionType) corev1.ConditionStatus {
	for _, c := range vmi.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return corev1.ConditionUnknown
}

// A host tainted to keep pods off (as a drain or an upgrade taints it: kubevirt.io/drain)
// takes no VM that does not tolerate the taint, and takes it once the taint is gone.
func TestTaintedHostTakesNoVM(t *testing.T) {
	g := NewWithT(t)
	RegisterTestingT(t)
	g.Expect(sim.AddHost(ctx, harvestersim.Host{Name: "harvester-tainted", Zone: "zone-t", Region: "region-1"})).To(Succeed())
	defer func() { g.Expect(sim.Client().Delete(ctx, hostOf("harvester-tainted"))).To(Succeed()) }()
	host := hostOf("harvester-tainted")
	base := host.DeepCopy()
	host.Spec.Taints = append(host.Spec.Taints, corev1.Taint{Key: "kubevirt.io/drain", Value: "draining", Effect: corev1.TaintEffectNoSchedule})
	g.Expect(sim.Client().Patch(ctx, host, client.MergeFrom(base))).To(Succeed())

	g.Expect(sim.Client().Create(ctx, vm("zone-t", func(v *kubevirtv1.VirtualMachine) {
		v.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: harvestersim.LabelZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"zone-t"}}},
			}}},
		}}
	}))).To(Succeed())
	defer deleteVM(t, "zone-t")
	g.Eventually(func(g Gomega) {
		g.Expect(getVMI(g, "zone-t").Status.Phase).To(Equal(kubevirtv1.Scheduling))
		g.Expect(launcherSchedulingMessage(g, "zone-t")).To(ContainSubstring("harvester-tainted: node had untolerated taint {kubevirt.io/drain: draining}"))
	}, settles).Should(Succeed())

	host = hostOf("harvester-tainted")
	base = host.DeepCopy()
	host.Spec.Taints = nil
	g.Expect(sim.Client().Patch(ctx, host, client.MergeFrom(base))).To(Succeed())
	g.Eventually(func(g Gomega) {
		vmi := getVMI(g, "zone-t")
		g.Expect(vmi.Status.NodeName).To(Equal("harvester-tainted"))
		g.Expect(vmi.Status.Phase).To(Equal(kubevirtv1.Running))
	}, settles).Should(Succeed())
}
