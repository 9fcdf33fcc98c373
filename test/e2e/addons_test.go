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
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester"
)

var _ = Describe("addons", func() {
	It("reach the guest through a ClusterResourceSet, and so do renewed tokens", func() {
		// Tokens Harvester grants for seconds only: renewals follow, and must reach the guest.
		testBed.Harvester.Faults.GrantTokenLifetime(9 * time.Second)
		DeferCleanup(func() { testBed.Harvester.Faults.GrantTokenLifetime(0) })
		tc := newTestCluster("addons", "addons")
		// A ClusterResourceSet applies once the control plane is initialised.
		tc.controlPlaneMachine("addons-cp-0")
		guest := tc.Guest.Env.Client

		By("delivering the cloud-config and the cloud controller manager")
		secret := &corev1.Secret{}
		waitProgressing("the control plane initialised and the cloud-config delivered", tc.state, func(g Gomega) {
			g.Expect(guest.Get(ctx, client.ObjectKey{Namespace: harvester.GuestCloudConfigNamespace, Name: harvester.GuestCloudConfigSecret}, secret)).To(Succeed())
		})
		var token string
		Eventually(func(g Gomega) {
			_, token, _ = guestCredential(g, tc)
			g.Expect(guest.Get(ctx, client.ObjectKeyFromObject(secret), secret)).To(Succeed())
			g.Expect(string(secret.Data[harvester.GuestTokenKey])).To(Equal(token))
		}).Should(Succeed())
		Expect(string(secret.Data[harvester.GuestCloudConfigKey])).To(ContainSubstring("tokenFile: " + harvester.GuestCloudConfigDir + "/token"))

		deployment := &appsv1.Deployment{}
		Eventually(func(g Gomega) {
			g.Expect(guest.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "harvester-cloud-controller-manager"}, deployment)).To(Succeed())
		}).Should(Succeed())
		ccm := deployment.Spec.Template.Spec
		Expect(ccm.HostNetwork).To(BeTrue())
		Expect(ccm.Containers[0].Args).To(ContainElement("--cluster-name=" + tc.guest().ID()))
		Expect(ccm.Containers[0].VolumeMounts[0].SubPath).To(BeEmpty(), "a renewed token must reach the running process")
		Expect(ccm.Tolerations).To(ContainElement(HaveField("Key", "node.cloudprovider.kubernetes.io/uninitialized")))

		// kube-vip (for the CCM's load balancers) and the CSI driver with its StorageClass, which
		// reads the same cloud-config Secret.
		Eventually(func(g Gomega) {
			g.Expect(guest.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "kube-vip"}, &appsv1.DaemonSet{})).To(Succeed())
			g.Expect(guest.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "harvester-csi-driver"}, &appsv1.DaemonSet{})).To(Succeed())
			sc := &storagev1.StorageClass{}
			g.Expect(guest.Get(ctx, client.ObjectKey{Name: "harvester"}, sc)).To(Succeed())
			g.Expect(sc.Provisioner).To(Equal("driver.harvesterhci.io"))
		}).Should(Succeed())

		hc := tc.HarvesterCluster
		Eventually(func(g Gomega) {
			c := conditionOf(g, hc, infrav1.AddonsReadyCondition)
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		}).Should(Succeed())

		By("carrying a renewed token into the guest")
		Eventually(func(g Gomega) {
			_, renewed, _ := guestCredential(g, tc)
			g.Expect(renewed).NotTo(Equal(token))
			g.Expect(guest.Get(ctx, client.ObjectKeyFromObject(secret), secret)).To(Succeed())
			g.Expect(string(secret.Data[harvester.GuestTokenKey])).To(Equal(renewed))
		}).Should(Succeed())

		By("saying so when the Cluster lacks the addons label")
		Eventually(func(g Gomega) {
			g.Expect(mgmt().Get(ctx, client.ObjectKeyFromObject(tc.Cluster), tc.Cluster)).To(Succeed())
			delete(tc.Cluster.Labels, infrav1.AddonsLabel)
			g.Expect(mgmt().Update(ctx, tc.Cluster)).To(Succeed())
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			c := conditionOf(g, hc, infrav1.AddonsReadyCondition)
			g.Expect(c.Reason).To(Equal(infrav1.AddonsNotSelectedReason))
			g.Expect(c.Message).To(ContainSubstring(infrav1.AddonsLabel + "=" + tc.Name))
		}).Should(Succeed())
		Expect(conditions.IsFalse(hc, "Ready")).To(BeTrue())

		deleteCluster(tc)
		leakFree(tc.Target)
	})
})
