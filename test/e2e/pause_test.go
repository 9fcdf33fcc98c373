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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
)

// CAPI's contract: an infrastructure object's Paused condition is True while its Cluster's
// spec.paused is set or the object carries the cluster.x-k8s.io/paused annotation, and False
// again when neither is. Both kinds of pause, and both resumes, reach the provider as events of
// their own (no resync): the provider's event filters let them through.
var _ = Describe("Pausing", func() {
	It("says Paused for a paused Cluster and for the paused annotation, and resumes from both", func() {
		tc := newTestCluster("pause", "pause")
		tc.machineDeployment("workers", "workers", 1, machineSpec())
		hm := &infrav1.HarvesterMachine{}
		waitProgressing("the worker provisioned", tc.state, func(g Gomega) {
			hms := &infrav1.HarvesterMachineList{}
			g.Expect(mgmt().List(ctx, hms, client.InNamespace(tc.Namespace))).To(Succeed())
			g.Expect(hms.Items).To(HaveLen(1))
			*hm = hms.Items[0]
			g.Expect(hm.Status.Initialization.Provisioned).To(Equal(ptr.To(true)))
		})
		hc := tc.HarvesterCluster

		paused := func(obj client.Object, setter conditions.Getter) func(g Gomega) metav1.ConditionStatus {
			return func(g Gomega) metav1.ConditionStatus {
				g.Expect(mgmt().Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed())
				c := conditions.Get(setter, clusterv1.PausedCondition)
				g.Expect(c).NotTo(BeNil())
				return c.Status
			}
		}
		annotate := func(obj client.Object, on bool) {
			Expect(mgmt().Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed())
			base := obj.DeepCopyObject().(client.Object)
			a := obj.GetAnnotations()
			if a == nil {
				a = map[string]string{}
			}
			if on {
				a[clusterv1.PausedAnnotation] = ""
			} else {
				delete(a, clusterv1.PausedAnnotation)
			}
			obj.SetAnnotations(a)
			Expect(mgmt().Patch(ctx, obj, client.MergeFrom(base))).To(Succeed())
		}
		Expect(paused(hc, hc)(Default)).To(Equal(metav1.ConditionFalse))
		Expect(paused(hm, hm)(Default)).To(Equal(metav1.ConditionFalse))

		By("annotating the HarvesterMachine, then removing the annotation")
		annotate(hm, true)
		Eventually(paused(hm, hm)).Should(Equal(metav1.ConditionTrue))
		Expect(conditions.Get(hm, clusterv1.PausedCondition).Message).To(ContainSubstring("annotation"))
		Expect(paused(hc, hc)(Default)).To(Equal(metav1.ConditionFalse), "only the machine is paused")
		annotate(hm, false)
		Eventually(paused(hm, hm)).Should(Equal(metav1.ConditionFalse))

		By("annotating the HarvesterCluster, then removing the annotation")
		annotate(hc, true)
		Eventually(paused(hc, hc)).Should(Equal(metav1.ConditionTrue))
		annotate(hc, false)
		Eventually(paused(hc, hc)).Should(Equal(metav1.ConditionFalse))

		By("pausing the Cluster, then resuming it")
		setPaused := func(on bool) {
			Expect(mgmt().Get(ctx, client.ObjectKeyFromObject(tc.Cluster), tc.Cluster)).To(Succeed())
			base := tc.Cluster.DeepCopy()
			tc.Cluster.Spec.Paused = ptr.To(on)
			Expect(mgmt().Patch(ctx, tc.Cluster, client.MergeFrom(base))).To(Succeed())
		}
		setPaused(true)
		Eventually(paused(hc, hc)).Should(Equal(metav1.ConditionTrue))
		Eventually(paused(hm, hm)).Should(Equal(metav1.ConditionTrue))
		Expect(conditions.Get(hm, clusterv1.PausedCondition).Message).To(ContainSubstring("spec.paused"))
		setPaused(false)
		Eventually(paused(hc, hc)).Should(Equal(metav1.ConditionFalse))
		Eventually(paused(hm, hm)).Should(Equal(metav1.ConditionFalse))

		deleteCluster(tc)
		leakFree(tc.Target)
	})
})
