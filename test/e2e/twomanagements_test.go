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
	"slices"

	lbv1 "github.com/harvester/harvester-load-balancer/pkg/apis/loadbalancer.harvesterhci.io/v1beta1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	addonsv1 "sigs.k8s.io/cluster-api/api/addons/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/controllers"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/guestcloud"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/naming"
)

// Two management clusters (two Rancher installations, say) whose admins lent identities to the
// same Harvester namespace, each with a cluster of the same namespace and name: names on
// Harvester came from namespace/name only, so the second adopted the first's control-plane load
// balancer, VM and ServiceAccount, and its deletion revoked the first's guest token. Each
// HarvesterCluster's owner mark now sets its objects apart: the second cluster gets its own, a
// machine name the first holds is reported NameTaken, and deleting the second leaves the first
// exactly as it was.
//
// The second management's manager is a shard (--watch-filter): it reconciles only objects that
// carry the filter label, and still acts at once on events of kinds that never carry it (its
// guest's ClusterResourceSet deleted by hand is written again without waiting for a resync).
var _ = Describe("Two management clusters sharing a Harvester namespace", func() {
	It("keep their clusters of the same namespace and name apart", func() {
		const namespace, name, target = "twin-managements", "prod", "h-two-managements"
		a := newTestCluster(namespace, name, target)
		a.controlPlaneMachine("prod-cp-0")
		aMachine := a.provisionedMachines(1)[0]
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: types.UID("5e2d3b1a-0000-4000-8000-000000000002")},
			Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Name: "http", Port: 80, NodePort: 30080, Protocol: corev1.ProtocolTCP}}},
		}
		// As the first guest's CCM makes it (the second's deletion deletes its own guest's).
		guestLB := guestcloud.BuildServiceLoadBalancer(target, a.guest().ID(), svc, lbv1.Pool)
		Expect(harvesterClient().Create(ctx, guestLB)).To(Succeed())
		var aLB lbv1.LoadBalancer
		Eventually(func(g Gomega) {
			g.Expect(harvesterClient().Get(ctx, client.ObjectKey{Namespace: target, Name: a.guest().LoadBalancerName()}, &aLB)).To(Succeed())
			g.Expect(aLB.Status.BackendServers).To(HaveLen(1))
		}).Should(Succeed())
		aBackends := aLB.Status.BackendServers
		before := harvesterObjects(Default, target)

		By("starting a second management cluster with the provider, and a cluster of the same namespace and name there")
		const shard = "second-management"
		sharded := providerOptions
		sharded.ExtraArgs = append(slices.Clone(providerOptions.ExtraArgs), "--watch-filter="+shard)
		other, err := testBed.AddManagement(ctx, sharded)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { Expect(testBed.StopManagement(ctx, other)).To(Succeed()) })
		to := other.Env.Client
		kubeconfig, err := testBed.Harvester.ProviderKubeconfig(ctx)
		Expect(err).NotTo(HaveOccurred())
		hc := &infrav1.HarvesterCluster{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{clusterv1.WatchLabel: shard}},
			Spec: infrav1.HarvesterClusterSpec{
				IdentitySecret:  infrav1.SecretReference{Name: name + "-identity"},
				TargetNamespace: target,
				LoadBalancer:    infrav1.LoadBalancerSpec{Network: "default/vlan10"},
			},
		}
		// No cluster-name label on the bootstrap Secret: the bed's node agent then joins the
		// second cluster's VMs to no guest (the first's guest has the same namespace and name).
		bootstrap := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name + "-bootstrap"},
			Type:       clusterv1.ClusterSecretType,
			Data:       map[string][]byte{"value": []byte("#cloud-config\nruncmd:\n- echo second management\n"), "format": []byte("cloud-config")},
		}
		for _, obj := range []client.Object{
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}},
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name + "-identity"},
				Data: map[string][]byte{infrav1.IdentitySecretKey: kubeconfig}},
			bootstrap, hc,
			&clusterv1.Cluster{
				ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
				Spec: clusterv1.ClusterSpec{
					ClusterNetwork: clusterv1.ClusterNetwork{Pods: clusterv1.NetworkRanges{CIDRBlocks: []string{"10.244.0.0/16"}}},
					InfrastructureRef: clusterv1.ContractVersionedObjectReference{
						APIGroup: infrav1.GroupVersion.Group, Kind: "HarvesterCluster", Name: name,
					},
				},
			},
		} {
			Expect(to.Create(ctx, obj)).To(Succeed())
		}
		// prod-cp-0 is the first cluster's machine name too; prod-cp-1 is the second's only.
		for _, m := range []string{"prod-cp-0", "prod-cp-1"} {
			Expect(to.Create(ctx, &infrav1.HarvesterMachine{
				ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: m, Labels: map[string]string{
					clusterv1.ClusterNameLabel: name, clusterv1.WatchLabel: shard}},
				Spec: machineSpec(),
			})).To(Succeed())
			Expect(to.Create(ctx, &clusterv1.Machine{
				ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: m, Labels: map[string]string{
					clusterv1.ClusterNameLabel: name, clusterv1.MachineControlPlaneLabel: "",
				}},
				Spec: clusterv1.MachineSpec{
					ClusterName: name, Version: "v1.35.4",
					Bootstrap: clusterv1.Bootstrap{DataSecretName: ptr.To(bootstrap.Name)},
					InfrastructureRef: clusterv1.ContractVersionedObjectReference{
						APIGroup: infrav1.GroupVersion.Group, Kind: "HarvesterMachine", Name: m,
					},
				},
			})).To(Succeed())
		}

		By("the second cluster gets a load balancer, an address and a ServiceAccount of its own")
		var b naming.Guest
		// Bounded by progress: a first load balancer and credentials on a loaded machine.
		waitProgressing("the second cluster provisioned", clusterState(to, namespace, name), func(g Gomega) {
			g.Expect(to.Get(ctx, client.ObjectKeyFromObject(hc), hc)).To(Succeed())
			g.Expect(hc.Status.Initialization.Provisioned).To(Equal(ptr.To(true)), "%v", hc.Status.Conditions)
			g.Expect(conditions.IsTrue(hc, infrav1.GuestCredentialsReadyCondition)).To(BeTrue(), "%v", hc.Status.Conditions)
			var ok bool
			b, ok = naming.GuestOf(hc, name)
			g.Expect(ok).To(BeTrue())
		})
		Expect(hc.Annotations[infrav1.OwnerMarkAnnotation]).NotTo(Equal(a.HarvesterCluster.Annotations[infrav1.OwnerMarkAnnotation]))
		Expect(b.ID()).NotTo(Equal(a.guest().ID()))
		Expect(hc.Status.LoadBalancer.Name).To(Equal(b.LoadBalancerName()))
		Expect(hc.Status.LoadBalancer.Name).NotTo(Equal(a.guest().LoadBalancerName()))
		Expect(hc.Spec.ControlPlaneEndpoint.Host).NotTo(Equal(a.HarvesterCluster.Spec.ControlPlaneEndpoint.Host))
		sa := &corev1.ServiceAccount{}
		Expect(harvesterClient().Get(ctx, client.ObjectKey{Namespace: target, Name: b.ServiceAccountName()}, sa)).To(Succeed())
		Expect(sa.Annotations).To(HaveKeyWithValue(harvester.AnnotationGuestCluster, b.ID()))

		By("a machine name the first cluster holds is NameTaken; the other machine gets its VM, behind the second's load balancer only")
		state := clusterState(to, namespace, name)
		waitProgressing("prod-cp-0 NameTaken, prod-cp-1 provisioned behind the second load balancer", state, func(g Gomega) {
			taken := &infrav1.HarvesterMachine{}
			g.Expect(to.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "prod-cp-0"}, taken)).To(Succeed())
			c := conditions.Get(taken, infrav1.VirtualMachineReadyCondition)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(infrav1.NameTakenReason), c.Message)
			own := &infrav1.HarvesterMachine{}
			g.Expect(to.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "prod-cp-1"}, own)).To(Succeed())
			g.Expect(own.Status.Initialization.Provisioned).To(Equal(ptr.To(true)), "%v", own.Status.Conditions)
			bLB := &lbv1.LoadBalancer{}
			g.Expect(harvesterClient().Get(ctx, client.ObjectKey{Namespace: target, Name: b.LoadBalancerName()}, bLB)).To(Succeed())
			g.Expect(bLB.Status.BackendServers).To(HaveLen(1))
			g.Expect(bLB.Status.BackendServers).NotTo(ContainElements(aBackends))
			g.Expect(harvesterClient().Get(ctx, client.ObjectKeyFromObject(&aLB), &aLB)).To(Succeed())
			g.Expect(aLB.Status.BackendServers).To(Equal(aBackends), "the first load balancer does not select the second cluster's VM")
		})
		vm := &kubevirtv1.VirtualMachine{}
		Expect(harvesterClient().Get(ctx, client.ObjectKey{Namespace: target, Name: "prod-cp-1"}, vm)).To(Succeed())
		Expect(vm.Labels).To(HaveKeyWithValue(naming.LabelCluster, b.ID()))
		Expect(harvesterClient().Get(ctx, client.ObjectKey{Namespace: target, Name: "prod-cp-0"}, vm)).To(Succeed())
		Expect(vm.Labels).To(HaveKeyWithValue(naming.LabelCluster, a.guest().ID()), "the first cluster's VM keeps its labels")
		Expect(vm.UID).To(Equal(types.UID(before["VirtualMachine prod-cp-0"])))

		By("the sharded manager writes its guest's ClusterResourceSet again at once when it is deleted by hand")
		crs := &addonsv1.ClusterResourceSet{}
		crsKey := client.ObjectKey{Namespace: namespace, Name: controllers.AddonsResourceSetName(name)}
		// Written after the guest's credentials, by the same reconciles.
		Eventually(func() error { return to.Get(ctx, crsKey, crs) }).Should(Succeed())
		Expect(crs.Labels).NotTo(HaveKey(clusterv1.WatchLabel), "a kind the filter label is not on")
		Expect(to.Delete(ctx, crs)).To(Succeed())
		Eventually(func(g Gomega) {
			again := &addonsv1.ClusterResourceSet{}
			g.Expect(to.Get(ctx, crsKey, again)).To(Succeed())
			g.Expect(again.UID).NotTo(Equal(crs.UID))
		}).Should(Succeed(), "not left to the 10-minute resync")

		By("deleting the second cluster leaves the first exactly as it was")
		Expect(to.Delete(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}})).To(Succeed())
		waitProgressing("the second cluster deleted, Harvester as it was before it", state, func(g Gomega) {
			list := &infrav1.HarvesterClusterList{}
			g.Expect(to.List(ctx, list, client.InNamespace(namespace))).To(Succeed())
			g.Expect(list.Items).To(BeEmpty())
			g.Expect(harvesterObjects(g, target)).To(Equal(before))
		})
		Expect(mgmt().Get(ctx, client.ObjectKeyFromObject(a.HarvesterCluster), a.HarvesterCluster)).To(Succeed())
		Expect(conditions.IsTrue(a.HarvesterCluster, clusterv1.ReadyCondition)).To(BeTrue(), "%v", a.HarvesterCluster.Status.Conditions)
		hm := &infrav1.HarvesterMachine{}
		Expect(mgmt().Get(ctx, client.ObjectKeyFromObject(&aMachine), hm)).To(Succeed())
		Expect(conditions.IsTrue(hm, infrav1.VirtualMachineReadyCondition)).To(BeTrue(), "%v", hm.Status.Conditions)

		deleteCluster(a)
		leakFree(target)
	})
})
