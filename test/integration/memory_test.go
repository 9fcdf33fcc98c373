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

	harvesterv1 "github.com/harvester/harvester/pkg/apis/harvesterhci.io/v1beta1"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/bed"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/harvestersim"
)

// Harvester's VM mutator decides the guest memory a VM gets (Harvester's own webhook server runs
// in the bed). On a Harvester with v1.8's default settings, what a machine template's
// status.capacity says (what the cluster autoscaler plans with) is what Harvester keeps in the
// VM, with or without reservedMemory, and the provider never writes the VM again to undo the
// mutation. With the guest-memory overhead ratio turned off, Harvester keeps 100Mi back from a
// VM without reservedMemory, which the capacity cannot know (docs/api.md says to set
// reservedMemory there).
func TestGuestMemoryIsWhatHarvesterKeeps(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := testContext(t)
	t.Cleanup(cancel)
	testBed := startBed(t)
	c, h := testBed.Management.Client, testBed.Harvester.Client()

	// guestMemory provisions one machine of spec in a bare cluster of its own and returns the
	// capacity its template reports and the guest memory of its VM once it runs.
	guestMemory := func(name string, reserved *resource.Quantity) (capacity, guest resource.Quantity) {
		// The bed's other tests have written VMs of their own before: count from here.
		writes := map[string]int{}
		for _, verb := range []string{"create", "update", "patch"} {
			writes[verb] = testBed.Harvester.Faults.RequestsOf("virtualmachines", verb)
		}
		g.Expect(testBed.CreateBareCluster(ctx, name, name)).To(Succeed())
		spec := infrav1.HarvesterMachineSpec{
			CPU: 2, Memory: resource.MustParse("4Gi"), ReservedMemory: reserved,
			Disks:    []infrav1.Disk{{Image: "default/ubuntu-24.04", Size: resource.MustParse("40Gi")}},
			Networks: []infrav1.Network{{NetworkName: "default/vlan10"}},
		}
		template := &infrav1.HarvesterMachineTemplate{
			ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: name},
			Spec:       infrav1.HarvesterMachineTemplateSpec{Template: infrav1.HarvesterMachineTemplateResource{Spec: spec}},
		}
		g.Expect(c.Create(ctx, template)).To(Succeed())
		g.Expect(c.Create(ctx, bed.BareMachineDeployment(name, name, 1))).To(Succeed())
		var hm infrav1.HarvesterMachine
		g.Eventually(func(g Gomega) {
			hms := &infrav1.HarvesterMachineList{}
			g.Expect(c.List(ctx, hms, client.InNamespace(name))).To(Succeed())
			g.Expect(hms.Items).To(HaveLen(1))
			hm = hms.Items[0]
			g.Expect(hm.Status.Initialization.Provisioned).To(Equal(ptr.To(true)))
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(template), template)).To(Succeed())
			g.Expect(template.Status.Capacity).To(HaveKey(corev1.ResourceMemory))
		}, 2*time.Minute, 100*time.Millisecond).Should(Succeed())
		vm := &kubevirtv1.VirtualMachine{}
		g.Expect(h.Get(ctx, client.ObjectKey{Namespace: "guests", Name: hm.Name}, vm)).To(Succeed())
		// Harvester's own controllers write the VM after its creation (its MAC addresses, its run
		// strategy); the provider, whose requests pass the simulated Harvester's proxy, never does.
		g.Expect(testBed.Harvester.Faults.RequestsOf("virtualmachines", "create")-writes["create"]).NotTo(BeZero(), "the provider's requests are counted")
		for _, verb := range []string{"update", "patch"} {
			g.Expect(testBed.Harvester.Faults.RequestsOf("virtualmachines", verb)-writes[verb]).To(BeZero(),
				"the provider wrote the VM once (%s), and left Harvester's mutation alone", verb)
		}
		vmi := &kubevirtv1.VirtualMachineInstance{}
		g.Expect(h.Get(ctx, client.ObjectKey{Namespace: "guests", Name: hm.Name}, vmi)).To(Succeed())
		g.Expect(vmi.Spec.Domain.Memory.Guest.Equal(*vm.Spec.Template.Spec.Domain.Memory.Guest)).To(BeTrue(), "the guest runs with it")
		return template.Status.Capacity[corev1.ResourceMemory], *vm.Spec.Template.Spec.Domain.Memory.Guest
	}

	capacity, guest := guestMemory("mem-default", nil)
	g.Expect(guest.String()).To(Equal("4Gi"), "Harvester v1.8's overhead ratio reserves nothing")
	g.Expect(capacity.Equal(guest)).To(BeTrue(), "capacity %s, guest %s", capacity.String(), guest.String())

	capacity, guest = guestMemory("mem-reserved", ptr.To(resource.MustParse("512Mi")))
	g.Expect(guest.String()).To(Equal("3584Mi"))
	g.Expect(capacity.Equal(guest)).To(BeTrue(), "capacity %s, guest %s", capacity.String(), guest.String())

	ratio := &harvesterv1.Setting{}
	g.Expect(h.Get(ctx, client.ObjectKey{Name: harvestersim.SettingOverheadRatio}, ratio)).To(Succeed())
	before := ratio.Value
	ratio.Value = "0"
	g.Expect(h.Update(ctx, ratio)).To(Succeed())
	t.Cleanup(func() { // the bed's later tests run with Harvester's default
		NewWithT(t).Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := h.Get(ctx, client.ObjectKeyFromObject(ratio), ratio); err != nil {
				return err
			}
			ratio.Value = before
			return h.Update(ctx, ratio)
		})).To(Succeed())
	})
	capacity, guest = guestMemory("mem-legacy", nil)
	g.Expect(guest.String()).To(Equal("3996Mi"), "the ratio off: Harvester keeps 100Mi back")
	g.Expect(capacity.String()).To(Equal("4Gi"), "which the template's capacity cannot know")
}
