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

package e2e

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
)

var _ = Describe("HarvesterMachineTemplate capacity for scaling from zero", func() {
	It("writes status.capacity and status.nodeInfo from the spec and keeps them so", func() {
		const namespace = "capacity"
		Expect(client.IgnoreAlreadyExists(mgmt().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}))).To(Succeed())
		spec := machineSpec()
		spec.CPU = 4
		spec.Memory = resource.MustParse("16Gi")
		spec.ReservedMemory = ptr.To(resource.MustParse("512Mi"))
		spec.Disks = append(spec.Disks, infrav1.Disk{StorageClassName: "longhorn", Size: resource.MustParse("200Gi")})
		template := &infrav1.HarvesterMachineTemplate{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "workers-4x16"},
			Spec:       infrav1.HarvesterMachineTemplateSpec{Template: infrav1.HarvesterMachineTemplateResource{Spec: spec}},
		}
		Expect(mgmt().Create(ctx, template)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(mgmt().Delete(ctx, template))).To(Succeed()) })

		// What the cluster autoscaler's Cluster API provider reads for a node group of size 0.
		wantCapacity := func(g Gomega) {
			t := &infrav1.HarvesterMachineTemplate{}
			g.Expect(mgmt().Get(ctx, client.ObjectKeyFromObject(template), t)).To(Succeed())
			g.Expect(t.Status.Capacity).To(HaveLen(3))
			for name, want := range map[corev1.ResourceName]string{
				corev1.ResourceCPU:              "4",
				corev1.ResourceMemory:           "15872Mi", // 16Gi less the 512Mi Harvester keeps
				corev1.ResourceEphemeralStorage: machineSpec().Disks[0].Size.String(),
			} {
				have := t.Status.Capacity[name]
				g.Expect(have.Cmp(resource.MustParse(want))).To(BeZero(), "%s is %s, want %s", name, have.String(), want)
			}
			g.Expect(t.Status.NodeInfo).To(Equal(infrav1.NodeInfo{Architecture: infrav1.ArchitectureAmd64, OperatingSystem: "linux"}))
		}
		Eventually(wantCapacity).Should(Succeed())

		By("putting a status someone else wrote back in step with the spec")
		Eventually(func(g Gomega) {
			t := &infrav1.HarvesterMachineTemplate{}
			g.Expect(mgmt().Get(ctx, client.ObjectKeyFromObject(template), t)).To(Succeed())
			t.Status.Capacity[corev1.ResourceCPU] = resource.MustParse("64")
			t.Status.Capacity["nvidia.com/gpu"] = resource.MustParse("1")
			g.Expect(mgmt().Status().Update(ctx, t)).To(Succeed())
		}).Should(Succeed())
		Eventually(wantCapacity).Should(Succeed())
	})
})
