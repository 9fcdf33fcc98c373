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
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/harvestersim"
)

// KubeVirt's own admission (the simulated Harvester runs it) refuses a VM the provider's webhook
// has no reason to refuse: a PCI device on a Harvester whose KubeVirt has the HostDevices
// feature gate turned off. The machine says so in KubeVirt's words, the provider backs off
// instead of retrying in a loop, and once the gate is back the same machine is provisioned.
func TestKubeVirtAdmissionRefusalIsReportedAndBackedOff(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := testContext(t)
	t.Cleanup(cancel)
	testBed := startBed(t)
	c := testBed.Management.Client
	h := testBed.Harvester

	const ns, name, device = "kvrefused", "kvrefused", "intel.com/82599_ETHERNET"
	gates := slices.DeleteFunc(slices.Clone(harvestersim.HarvesterKubeVirtFeatureGates), func(g string) bool { return g == "HostDevices" })
	g.Expect(h.SetKubeVirtFeatureGates(ctx, gates)).To(Succeed())
	t.Cleanup(func() { // the bed's later tests run with Harvester's gates, whatever happens here
		NewWithT(t).Expect(h.SetKubeVirtFeatureGates(ctx, harvestersim.HarvesterKubeVirtFeatureGates)).To(Succeed())
	})
	// KubeVirt's admission has read the change once it refuses such a VM (a dry run reaches the
	// webhooks and stores nothing).
	probe := harvestersim.SampleVM("guests", "kvrefused-probe", "")
	probe.Spec.Template.Spec.Domain.Devices.HostDevices = []kubevirtv1.HostDevice{{Name: "nic", DeviceName: device}}
	g.Eventually(func() error {
		return h.Client().Create(ctx, probe.DeepCopy(), client.DryRunAll)
	}, settles, 100*time.Millisecond).Should(MatchError(ContainSubstring("Host Devices feature gate is not enabled")))

	g.Expect(testBed.CreateBareCluster(ctx, ns, name)).To(Succeed())
	spec := infrav1.HarvesterMachineSpec{
		CPU: 2, Memory: resource.MustParse("4Gi"),
		Disks:       []infrav1.Disk{{Image: "default/ubuntu-24.04", Size: resource.MustParse("40Gi")}},
		Networks:    []infrav1.Network{{NetworkName: "default/vlan10"}},
		HostDevices: []infrav1.HostDevice{{DeviceName: device}},
	}
	machine := createMachinePool(ctx, g, c, ns, name, spec)
	g.Eventually(func(g Gomega) {
		cond := conditions.Get(machine(g), infrav1.VirtualMachineReadyCondition)
		g.Expect(cond).NotTo(BeNil())
		g.Expect(cond.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(cond.Reason).To(Equal(infrav1.HarvesterRefusedReason))
		g.Expect(cond.Message).To(ContainSubstring("Host Devices feature gate is not enabled"))
	}, settles, 100*time.Millisecond).Should(Succeed())
	hm := machine(g)
	g.Expect(hm.Status.Initialization.Provisioned).To(BeNil())
	vm := &kubevirtv1.VirtualMachine{}
	g.Expect(h.Client().Get(ctx, client.ObjectKey{Namespace: "guests", Name: hm.Name}, vm)).NotTo(Succeed(), "nothing is stored")

	// Back-off, not a loop: the provider's requests for VMs through Harvester's API grow by a
	// few over ten seconds (a hot loop would send hundreds; the client allows 100 a second).
	before := h.Faults.Requests("virtualmachines")
	g.Consistently(func() int { return h.Faults.Requests("virtualmachines") - before }, 10*time.Second, 500*time.Millisecond).
		Should(BeNumerically("<", 30))

	g.Expect(h.SetKubeVirtFeatureGates(ctx, harvestersim.HarvesterKubeVirtFeatureGates)).To(Succeed())
	g.Expect(h.AddHost(ctx, harvestersim.Host{Name: "harvester-nic", Zone: "zone-a", Region: "region-1",
		Devices: map[string]int{device: 1}})).To(Succeed())
	g.Eventually(func(g Gomega) {
		hm := machine(g)
		g.Expect(hm.Status.Initialization.Provisioned).To(Equal(ptr.To(true)))
		g.Expect(hm.Status.VirtualMachine.Host).To(Equal("harvester-nic"))
	}, 3*time.Minute, 100*time.Millisecond).Should(Succeed())
}
