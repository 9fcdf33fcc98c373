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
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/harvestersim"
)

// Maintenance mode as Harvester v1.8's own node drain and maintain-status controllers do it, with
// KubeVirt's eviction admitter and evacuation controller: a host whose VMs can migrate drains
// (each VM live-migrates to another host) and reaches "completed"; a non-forced request for a
// host with a VM that cannot migrate (a GPU) is refused and its annotations removed, the VM left
// running; a forced one halts that VM (run strategy Halted, which Harvester never undoes) and
// completes.
func TestMaintenanceModeIsHarvesters(t *testing.T) {
	g := NewWithT(t)
	h, err := harvestersim.Start(ctx, harvestersim.DefaultOptions())
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { g.Expect(h.Stop()).To(Succeed()) }()
	const gpu = "nvidia.com/GA102GL_A10"
	for _, name := range []string{"harvester-gpu-a", "harvester-gpu-b"} {
		g.Expect(h.AddHost(ctx, harvestersim.Host{Name: name, Zone: "zone-g", Region: "region-1", Devices: map[string]int{gpu: 1}})).To(Succeed())
	}
	vmiOf := func(g Gomega, name string) *kubevirtv1.VirtualMachineInstance {
		vmi := &kubevirtv1.VirtualMachineInstance{}
		g.Expect(h.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, vmi)).To(Succeed())
		return vmi
	}
	host := func(g Gomega, name string) *corev1.Node {
		node := &corev1.Node{}
		g.Expect(h.Client().Get(ctx, client.ObjectKey{Name: name}, node)).To(Succeed())
		return node
	}

	// A VM that can migrate, kept to zone-a's two hosts; one with a GPU, on a GPU host.
	moves := harvestersim.SampleVM(ns, "moves", "")
	moves.Spec.Template.Spec.NodeSelector = map[string]string{harvestersim.LabelZone: "zone-a"}
	g.Expect(h.Client().Create(ctx, moves)).To(Succeed())
	pinned := harvestersim.SampleVM(ns, "pinned", "")
	pinned.Spec.Template.Spec.Domain.Devices.GPUs = []kubevirtv1.GPU{{Name: "gpu-0", DeviceName: gpu}}
	g.Expect(h.Client().Create(ctx, pinned)).To(Succeed())
	var movesHost, pinnedHost string
	g.Eventually(func(g Gomega) {
		m, p := vmiOf(g, "moves"), vmiOf(g, "pinned")
		g.Expect(m.Status.Phase).To(Equal(kubevirtv1.Running), "%v", m.Status.Conditions)
		g.Expect(p.Status.Phase).To(Equal(kubevirtv1.Running), "%v", p.Status.Conditions)
		movesHost, pinnedHost = m.Status.NodeName, p.Status.NodeName
	}, settles).Should(Succeed())

	// A host whose VM can migrate drains and completes.
	g.Expect(h.EnableMaintenance(ctx, movesHost, false)).To(Succeed())
	g.Eventually(func(g Gomega) {
		// The host's kubelet reports its status now and then: Harvester re-checks the host then.
		g.Expect(h.ReportHostStatus(ctx, movesHost)).To(Succeed())
		node := host(g, movesHost)
		g.Expect(node.Annotations).To(HaveKeyWithValue(harvestersim.AnnotationMaintainStatus, harvestersim.MaintainStatusCompleted))
		g.Expect(node.Spec.Unschedulable).To(BeTrue())
		m := vmiOf(g, "moves")
		g.Expect(m.Status.NodeName).NotTo(Equal(movesHost))
		g.Expect(m.Status.MigrationState).NotTo(BeNil())
		g.Expect(m.Status.MigrationState.Completed).To(BeTrue())
	}, 2*time.Minute, time.Second).Should(Succeed())

	// A non-forced request for a host with a VM that cannot migrate is refused.
	g.Expect(h.EnableMaintenance(ctx, pinnedHost, false)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(host(g, pinnedHost).Annotations).NotTo(HaveKey(harvestersim.AnnotationDrainRequested))
	}, settles).Should(Succeed())
	g.Consistently(func(g Gomega) {
		node := host(g, pinnedHost)
		g.Expect(node.Annotations).NotTo(HaveKey(harvestersim.AnnotationMaintainStatus))
		g.Expect(node.Spec.Unschedulable).To(BeFalse())
		g.Expect(vmiOf(g, "pinned").Status.Phase).To(Equal(kubevirtv1.Running))
	}, 3*time.Second).Should(Succeed())

	// A forced one halts it and completes.
	g.Expect(h.EnableMaintenance(ctx, pinnedHost, true)).To(Succeed())
	g.Eventually(func(g Gomega) {
		vm := &kubevirtv1.VirtualMachine{}
		g.Expect(h.Client().Get(ctx, client.ObjectKeyFromObject(pinned), vm)).To(Succeed())
		g.Expect(vm.Spec.RunStrategy).To(HaveValue(Equal(kubevirtv1.RunStrategyHalted)))
		g.Expect(h.ReportHostStatus(ctx, pinnedHost)).To(Succeed())
		g.Expect(host(g, pinnedHost).Annotations).To(HaveKeyWithValue(harvestersim.AnnotationMaintainStatus, harvestersim.MaintainStatusCompleted))
	}, 2*time.Minute, time.Second).Should(Succeed())

	for _, name := range []string{movesHost, pinnedHost} {
		g.Expect(h.DisableMaintenance(ctx, name)).To(Succeed())
	}
}
