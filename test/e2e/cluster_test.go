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
	"fmt"

	lbv1 "github.com/harvester/harvester-load-balancer/pkg/apis/loadbalancer.harvesterhci.io/v1beta1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/controllers"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/guestcloud"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/build"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/naming"
)

// deleteCluster deletes a test cluster and waits until it is gone.
func deleteCluster(tc *testCluster) {
	GinkgoHelper()
	Expect(mgmt().Delete(ctx, tc.Cluster)).To(Succeed())
	clusterGone(mgmt(), tc.Namespace, tc.Name)
}

// clusterGone waits until the Cluster namespace/name of management cluster c is deleted, as long
// as its deletion goes on.
func clusterGone(c client.Client, namespace, name string) {
	GinkgoHelper()
	waitProgressing(fmt.Sprintf("Cluster %s/%s to be deleted", namespace, name), clusterState(c, namespace, name), func(g Gomega) {
		err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &clusterv1.Cluster{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the Cluster is still there (%v)", err)
	})
}

func conditionOf(g Gomega, hc *infrav1.HarvesterCluster, t string) *metav1.Condition {
	g.Expect(mgmt().Get(ctx, client.ObjectKeyFromObject(hc), hc)).To(Succeed())
	c := conditions.Get(hc, t)
	g.Expect(c).NotTo(BeNil(), "no %s condition yet", t)
	return c
}

var _ = Describe("HarvesterCluster", func() {
	It("gets a pool address as endpoint, reports failure domains and cleans up", func() {
		tc := newTestCluster("cl", "cl")
		hc := tc.HarvesterCluster
		lbName := tc.guest().LoadBalancerName()
		lb := &lbv1.LoadBalancer{}
		// Provisioned is written with the endpoint; Ready follows the credentials and addons.
		Eventually(func(g Gomega) {
			g.Expect(mgmt().Get(ctx, client.ObjectKeyFromObject(hc), hc)).To(Succeed())
			g.Expect(harvesterClient().Get(ctx, client.ObjectKey{Namespace: tc.Target, Name: lbName}, lb)).To(Succeed())
			g.Expect(hc.Spec.ControlPlaneEndpoint).To(Equal(clusterv1.APIEndpoint{Host: lb.Status.AllocatedAddress.IP, Port: 6443}))
			g.Expect(lb.Status.AllocatedAddress.IPPool).To(Equal("guests"))
			g.Expect(lb.Spec.BackendServerSelector).To(HaveKeyWithValue(naming.LabelRole, []string{naming.RoleControlPlane}))
			g.Expect(hc.Status.LoadBalancer).To(Equal(infrav1.LoadBalancerStatus{Name: lbName, Address: lb.Status.AllocatedAddress.IP}))
			g.Expect(hc.Status.HarvesterVersion).To(Equal("v1.8.0"))
			g.Expect(hc.Status.FailureDomains).To(HaveLen(2))
			g.Expect(hc.Status.FailureDomains[0].Name).To(Equal("zone-a"))
			g.Expect(hc.Status.FailureDomains[0].Attributes).To(HaveKeyWithValue(build.FailureDomainTopologyKey, build.LabelZone))
			g.Expect(conditions.GetReason(hc, infrav1.FailureDomainsReadyCondition)).To(Equal(infrav1.ZonesReason))
			g.Expect(conditions.IsTrue(hc, clusterv1.ReadyCondition)).To(BeTrue(), "%v", hc.Status.Conditions)
			g.Expect(hc.Annotations).To(HaveKeyWithValue(infrav1.LoadBalancerAnnotation, lbName), "the load balancer is recorded as the provider's")
		}).Should(Succeed())

		Eventually(func(g Gomega) {
			g.Expect(mgmt().Get(ctx, client.ObjectKeyFromObject(tc.Cluster), tc.Cluster)).To(Succeed())
			g.Expect(tc.Cluster.Spec.ControlPlaneEndpoint.Host).To(Equal(lb.Status.AllocatedAddress.IP))
			g.Expect(tc.Cluster.Status.FailureDomains).To(HaveLen(2))
		}).Should(Succeed())

		By("getting the control-plane load balancer back with its address when it is deleted on Harvester")
		Expect(harvesterClient().Delete(ctx, lb)).To(Succeed())
		Eventually(func(g Gomega) {
			again := &lbv1.LoadBalancer{}
			g.Expect(harvesterClient().Get(ctx, client.ObjectKeyFromObject(lb), again)).To(Succeed())
			g.Expect(again.UID).NotTo(Equal(lb.UID), "made again")
			g.Expect(again.Status.AllocatedAddress.IP).To(Equal(hc.Spec.ControlPlaneEndpoint.Host), "its former address, which the pool gives the same name back")
			g.Expect(mgmt().Get(ctx, client.ObjectKeyFromObject(hc), hc)).To(Succeed())
			g.Expect(conditions.Get(hc, infrav1.LoadBalancerReadyCondition).Reason).To(Equal(infrav1.ReadyReason))
			g.Expect(conditions.IsTrue(hc, clusterv1.ReadyCondition)).To(BeTrue())
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			events := &corev1.EventList{}
			g.Expect(mgmt().List(ctx, events, client.InNamespace(tc.Namespace))).To(Succeed())
			g.Expect(events.Items).To(ContainElement(And(
				HaveField("InvolvedObject.Name", hc.Name), HaveField("Reason", "LoadBalancerRecreated"), HaveField("Type", corev1.EventTypeWarning))))
		}).Should(Succeed())

		identity := &corev1.Secret{}
		Expect(mgmt().Get(ctx, client.ObjectKey{Namespace: tc.Namespace, Name: hc.Spec.IdentitySecret.Name}, identity)).To(Succeed())
		Expect(identity.Finalizers).To(ContainElement(controllers.IdentityFinalizer))
		Expect(identity.Labels).To(HaveKey(controllers.MoveLabel))

		deleteCluster(tc)
		leakFree(tc.Target)
		Expect(mgmt().Get(ctx, client.ObjectKeyFromObject(identity), identity)).To(Succeed())
		Expect(identity.Finalizers).NotTo(ContainElement(controllers.IdentityFinalizer), "released with the last cluster that used it")
	})

	// Harvester's load balancer reaches a VM backend at the first IPv4 of its VMI's interfaces,
	// which KubeVirt lists in the VM's order: a control-plane machine whose management NIC is
	// second in its spec is still reached at its InternalIP, its only one.
	It("puts the management NIC first, so the load balancer reaches the control plane at its InternalIP", func() {
		tc := newTestCluster("mgmtnic", "mgmtnic")
		spec := machineSpec()
		spec.Networks = []infrav1.Network{{NetworkName: "default/vlan20"}, {NetworkName: "default/vlan10", Management: true}}
		tc.controlPlaneMachineWith("mgmtnic-cp-0", spec)
		hm := tc.provisionedMachines(1)[0]
		var internal []string
		for _, a := range hm.Status.Addresses {
			if a.Type == clusterv1.MachineInternalIP {
				internal = append(internal, a.Address)
			}
		}
		Expect(internal).To(HaveLen(1), "%v", hm.Status.Addresses)
		// No failure domain was asked for: status says the one the VM runs in, its host's zone.
		node := &corev1.Node{}
		Expect(harvesterClient().Get(ctx, client.ObjectKey{Name: hm.Status.VirtualMachine.Host}, node)).To(Succeed())
		Expect(hm.Status.FailureDomain).To(Equal(node.Labels[build.LabelZone]))
		Expect(hm.Status.FailureDomain).NotTo(BeEmpty())
		vm := &kubevirtv1.VirtualMachine{}
		Expect(harvesterClient().Get(ctx, client.ObjectKey{Namespace: tc.Target, Name: hm.Name}, vm)).To(Succeed())
		Expect(vm.Spec.Template.Spec.Networks[0].Multus.NetworkName).To(Equal("default/vlan10"), "the management NIC first")
		Eventually(func(g Gomega) {
			lb := &lbv1.LoadBalancer{}
			g.Expect(harvesterClient().Get(ctx, client.ObjectKey{Namespace: tc.Target, Name: tc.guest().LoadBalancerName()}, lb)).To(Succeed())
			g.Expect(lb.Status.BackendServers).To(Equal(internal))
		}).Should(Succeed())
		deleteCluster(tc)
		leakFree(tc.Target)
	})

	It("leaves an externally managed HarvesterCluster alone", func() {
		const namespace = "extmgd"
		Expect(client.IgnoreAlreadyExists(mgmt().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}))).To(Succeed())
		hc := &infrav1.HarvesterCluster{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "ext",
				Annotations: map[string]string{clusterv1.ManagedByAnnotation: "someone-else"}},
			Spec: infrav1.HarvesterClusterSpec{
				IdentitySecret: infrav1.SecretReference{Name: "not-ours"}, TargetNamespace: "h-" + namespace,
				ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: "192.0.2.10", Port: 6443},
			},
		}
		Expect(mgmt().Create(ctx, hc)).To(Succeed())
		cluster := &clusterv1.Cluster{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "ext"},
			Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: infrav1.GroupVersion.Group, Kind: "HarvesterCluster", Name: hc.Name}},
		}
		Expect(mgmt().Create(ctx, cluster)).To(Succeed())
		// CAPI adopts it (an event our controller maps to it), and a cluster of ours created
		// after it is fully provisioned: the provider had its chance to act on the first one.
		Eventually(func(g Gomega) {
			g.Expect(mgmt().Get(ctx, client.ObjectKeyFromObject(hc), hc)).To(Succeed())
			g.Expect(hc.OwnerReferences).NotTo(BeEmpty())
		}).Should(Succeed())
		tc := newTestCluster(namespace, "ours")
		Expect(mgmt().Get(ctx, client.ObjectKeyFromObject(hc), hc)).To(Succeed())
		Expect(hc.Finalizers).To(BeEmpty())
		Expect(hc.Status.Conditions).To(BeEmpty())

		Expect(mgmt().Delete(ctx, cluster)).To(Succeed())
		deleteCluster(tc)
		Eventually(func() bool {
			return apierrors.IsNotFound(mgmt().Get(ctx, client.ObjectKeyFromObject(cluster), cluster))
		}).Should(BeTrue())
		leakFree(tc.Target)
	})

	It("deletes the load balancers the guest's CCM made, and only those, with the cluster", func() {
		tc := newTestCluster("guestlb", "guestlb")
		guestLB := func(name, cluster string) *lbv1.LoadBalancer {
			return &lbv1.LoadBalancer{
				ObjectMeta: metav1.ObjectMeta{Namespace: tc.Target, Name: name, Labels: map[string]string{
					guestcloud.LabelLBCluster: guestcloud.LabelValue(cluster), guestcloud.LabelLBServiceNamespace: "default",
					guestcloud.LabelLBServiceName: name,
				}},
				Spec: lbv1.LoadBalancerSpec{WorkloadType: lbv1.Cluster, IPAM: lbv1.Pool,
					Listeners: []lbv1.Listener{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, BackendPort: 30080}}},
			}
		}
		// As the guest's CCM labels them: its --cluster-name is the cluster's ID.
		ours := guestLB("svc-ours", tc.guest().ID())
		other := guestLB("svc-other", naming.Guest{Namespace: "elsewhere", Name: tc.Name}.ID())
		// Each holds a pool address that Harvester's controller guards (its finalizer): deleted
		// before that, Harvester would never free the address (guestcloud.PoolAddressUnguarded).
		// One after the other: two made at once can trip Harvester's controller into a booking it
		// never completes (docs/troubleshooting.md, `duplicate allocation is not allowed`).
		for _, lb := range []*lbv1.LoadBalancer{ours, other} {
			Expect(harvesterClient().Create(ctx, lb)).To(Succeed())
			Eventually(func(g Gomega) {
				g.Expect(harvesterClient().Get(ctx, client.ObjectKeyFromObject(lb), lb)).To(Succeed())
				g.Expect(lb.Status.AllocatedAddress.IP).NotTo(BeEmpty())
				g.Expect(lb.Finalizers).To(ContainElement(guestcloud.FinalizerHarvesterLBController))
			}).Should(Succeed())
		}

		deleteCluster(tc)
		Expect(harvesterClient().Get(ctx, client.ObjectKeyFromObject(ours), ours)).To(Satisfy(apierrors.IsNotFound))
		Expect(harvesterClient().Get(ctx, client.ObjectKeyFromObject(other), other)).To(Succeed(), "another cluster's load balancer stays")
		Expect(harvesterClient().Delete(ctx, other)).To(Succeed())
		leakFree(tc.Target)
	})

	It("reports a revoked identity and recovers with a new kubeconfig, without a restart", func() {
		tc := newTestCluster("revoke", "revoke")
		hc := tc.HarvesterCluster
		Expect(testBed.Harvester.RevokeProviderIdentity(ctx)).To(Succeed())
		// The next reconcile is what shows it; any change of the Secret triggers one.
		identity := &corev1.Secret{}
		Expect(mgmt().Get(ctx, client.ObjectKey{Namespace: tc.Namespace, Name: hc.Spec.IdentitySecret.Name}, identity)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(mgmt().Get(ctx, client.ObjectKeyFromObject(identity), identity)).To(Succeed())
			identity.Annotations = map[string]string{"touched": metav1.Now().String()}
			g.Expect(mgmt().Update(ctx, identity)).To(Succeed())
			g.Expect(conditionOf(g, hc, infrav1.HarvesterAvailableCondition).Reason).To(Equal(infrav1.UnauthorizedReason))
		}).Should(Succeed())
		Expect(conditionOf(Default, hc, infrav1.HarvesterAvailableCondition).Message).To(ContainSubstring("401"))

		kubeconfig, err := testBed.Harvester.RestoreProviderIdentity(ctx)
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			g.Expect(mgmt().Get(ctx, client.ObjectKeyFromObject(identity), identity)).To(Succeed())
			identity.Data[infrav1.IdentitySecretKey] = kubeconfig
			g.Expect(mgmt().Update(ctx, identity)).To(Succeed())
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			c := conditionOf(g, hc, infrav1.HarvesterAvailableCondition)
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue), "%s: %s", c.Reason, c.Message)
		}).Should(Succeed())

		deleteCluster(tc)
		leakFree(tc.Target)
	})

	It("keeps two clusters of the same name in two namespaces apart", func() {
		// Both in one Harvester namespace: the harder case.
		a := newTestCluster("twin-a", "twin", "h-twins")
		b := newTestCluster("twin-b", "twin", "h-twins")
		Expect(a.guest().LoadBalancerName()).NotTo(Equal(b.guest().LoadBalancerName()))
		Expect(a.HarvesterCluster.Spec.ControlPlaneEndpoint.Host).NotTo(Equal(b.HarvesterCluster.Spec.ControlPlaneEndpoint.Host))

		deleteCluster(a)
		lb := &lbv1.LoadBalancer{}
		Expect(harvesterClient().Get(ctx, client.ObjectKey{Namespace: b.Target, Name: b.guest().LoadBalancerName()}, lb)).To(Succeed())
		Expect(lb.DeletionTimestamp).To(BeNil())
		Expect(mgmt().Get(ctx, client.ObjectKeyFromObject(b.HarvesterCluster), b.HarvesterCluster)).To(Succeed())
		Expect(conditions.IsTrue(b.HarvesterCluster, clusterv1.ReadyCondition)).To(BeTrue())

		deleteCluster(b)
		leakFree("h-twins")
	})
})
