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
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/bed"
)

// Harvester's own webhook server refuses a VM the provider's webhook has no reason to refuse:
// in a namespace of a Rancher project whose storage quota the VM's disks exceed (Rancher writes
// the project's quota on the namespace, `field.cattle.io/resourceQuota`, and a default
// ResourceQuota; Harvester's VM validator checks the disks against it,
// pkg/util/resourcequota in github.com/harvester/harvester v1.8.0). The machine says so on its
// VirtualMachineReady condition with Harvester's own words, retries with back-off rather than in
// a loop, and provisions once the quota allows it.
func TestHarvesterRefusalIsACondition(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := testContext(t)
	t.Cleanup(cancel)
	testBed := startBed(t)
	c, h := testBed.Management.Client, testBed.Harvester.Client()

	// A Harvester namespace of its own: the quota counts every volume of its namespace, and the
	// bed's other tests keep theirs in the bed's usual one.
	const target = "quota-guests"
	g.Expect(testBed.Harvester.AddTargetNamespace(ctx, target)).To(Succeed())
	const quota = `{"limit":{"requestsStorage":"10Gi"}}`
	ns := &corev1.Namespace{}
	g.Expect(h.Get(ctx, client.ObjectKey{Name: target}, ns)).To(Succeed())
	if ns.Annotations == nil {
		ns.Annotations = map[string]string{}
	}
	ns.Annotations["field.cattle.io/resourceQuota"] = quota
	g.Expect(h.Update(ctx, ns)).To(Succeed())
	g.Expect(h.Create(ctx, &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Namespace: target, Name: "default-quota",
			Labels: map[string]string{"resourcequota.management.cattle.io/default-resource-quota": "true"}},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourceRequestsStorage: resource.MustParse("10Gi")}},
	})).To(Succeed())

	const name = "over-quota"
	g.Expect(testBed.CreateBareClusterIn(ctx, name, name, target)).To(Succeed())
	g.Expect(c.Create(ctx, &infrav1.HarvesterMachineTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: name},
		Spec: infrav1.HarvesterMachineTemplateSpec{Template: infrav1.HarvesterMachineTemplateResource{Spec: infrav1.HarvesterMachineSpec{
			CPU: 2, Memory: resource.MustParse("4Gi"),
			Disks:    []infrav1.Disk{{Image: "default/ubuntu-24.04", Size: resource.MustParse("40Gi")}},
			Networks: []infrav1.Network{{NetworkName: "default/vlan10"}},
		}}},
	})).To(Succeed())
	g.Expect(c.Create(ctx, bed.BareMachineDeployment(name, name, 1))).To(Succeed())

	machine := func(g Gomega) *infrav1.HarvesterMachine {
		hms := &infrav1.HarvesterMachineList{}
		g.Expect(c.List(ctx, hms, client.InNamespace(name))).To(Succeed())
		g.Expect(hms.Items).To(HaveLen(1))
		return &hms.Items[0]
	}
	g.Eventually(func(g Gomega) {
		cond := meta.FindStatusCondition(machine(g).Status.Conditions, infrav1.VirtualMachineReadyCondition)
		g.Expect(cond).NotTo(BeNil())
		g.Expect(cond.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(cond.Reason).To(Equal(infrav1.HarvesterRefusedReason))
		g.Expect(cond.Message).To(ContainSubstring("storage insufficient resources due to resource quota"))
	}, 2*time.Minute, 100*time.Millisecond).Should(Succeed())

	// Back-off, not a loop: controller-runtime's doubling delay allows about ten attempts in the first
	// five seconds; a loop would make hundreds.
	before := testBed.Harvester.Faults.RequestsOf("virtualmachines", "create")
	g.Consistently(func() int {
		return testBed.Harvester.Faults.RequestsOf("virtualmachines", "create") - before
	}, 5*time.Second, 500*time.Millisecond).Should(BeNumerically("<=", 12))

	// The project's quota raised: the next attempt goes through.
	g.Expect(h.Get(ctx, client.ObjectKey{Name: target}, ns)).To(Succeed())
	ns.Annotations["field.cattle.io/resourceQuota"] = `{"limit":{"requestsStorage":"100Gi"}}`
	g.Expect(h.Update(ctx, ns)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(machine(g).Status.Initialization.Provisioned).To(Equal(ptr.To(true)))
	}, 3*time.Minute, 200*time.Millisecond).Should(Succeed())
}
