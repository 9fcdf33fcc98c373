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
	"strings"
	"time"

	lbv1 "github.com/harvester/harvester-load-balancer/pkg/apis/loadbalancer.harvesterhci.io/v1beta1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	clusterctllog "sigs.k8s.io/cluster-api/cmd/clusterctl/log"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/controllers"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/bed"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/testenv"
)

// harvesterObjects maps each object the provider made in a Harvester namespace ("Kind name")
// to its UID: what a re-creation would change.
func harvesterObjects(g Gomega, namespace string) map[string]string {
	objects := map[string]string{}
	for kind, list := range map[string]client.ObjectList{
		"VirtualMachine":         &kubevirtv1.VirtualMachineList{},
		"VirtualMachineInstance": &kubevirtv1.VirtualMachineInstanceList{},
		"PersistentVolumeClaim":  &corev1.PersistentVolumeClaimList{},
		"Secret":                 &corev1.SecretList{},
		"LoadBalancer":           &lbv1.LoadBalancerList{},
		"ServiceAccount":         &corev1.ServiceAccountList{},
		"RoleBinding":            &rbacv1.RoleBindingList{},
	} {
		g.Expect(harvesterClient().List(ctx, list, client.InNamespace(namespace))).To(Succeed())
		items, err := meta.ExtractList(list)
		g.Expect(err).NotTo(HaveOccurred())
		for _, item := range items {
			o, err := meta.Accessor(item)
			g.Expect(err).NotTo(HaveOccurred())
			objects[kind+" "+o.GetName()] = string(o.GetUID())
		}
	}
	return objects
}

// clusterctl move, with clusterctl's own library, of a provisioned cluster to a second
// management cluster that runs Cluster API and the provider as the first does: Harvester sees
// nothing of it (the source's controllers stay off the paused cluster while clusterctl deletes
// its objects, and the target's adopt what exists), and the target manages the cluster from
// then on: it scales up and deletes it cleanly.
var _ = Describe("clusterctl move", func() {
	It("hands a provisioned cluster to another management cluster without touching Harvester", func() {
		tc := newTestCluster("move", "move")
		// A user's bootstrap Secret that no object owns moves only when labelled so.
		base := tc.Bootstrap.DeepCopy()
		tc.Bootstrap.Labels[clusterctlv1.ClusterctlMoveLabel] = ""
		Expect(mgmt().Patch(ctx, tc.Bootstrap, client.MergeFrom(base))).To(Succeed())
		tc.controlPlaneMachine("move-cp-0")
		md := tc.machineDeployment("workers", "workers", 1, machineSpec())

		By("waiting until clusterctl would move it: control plane initialised, every Machine with its Node")
		waitProgressing("the control plane initialised and every Machine with its Node", tc.state, func(g Gomega) {
			g.Expect(mgmt().Get(ctx, client.ObjectKeyFromObject(tc.Cluster), tc.Cluster)).To(Succeed())
			g.Expect(conditions.IsTrue(tc.Cluster, clusterv1.ClusterControlPlaneInitializedCondition)).To(BeTrue())
			machines := &clusterv1.MachineList{}
			g.Expect(mgmt().List(ctx, machines, client.InNamespace(tc.Namespace))).To(Succeed())
			g.Expect(machines.Items).To(HaveLen(2))
			for _, m := range machines.Items {
				g.Expect(m.Status.NodeRef.IsDefined()).To(BeTrue(), "machine %s has no node", m.Name)
			}
		})
		By("recording a volume the guest's CSI driver made on Harvester")
		guestVolume := tc.recordedGuestVolume()

		before := harvesterObjects(Default, tc.Target)
		Expect(before).To(HaveKey("VirtualMachine move-cp-0"))
		Expect(before).To(HaveKey("LoadBalancer " + tc.HarvesterCluster.Status.LoadBalancer.Name))
		providerIDs := map[string]string{}
		for _, hm := range tc.provisionedMachines(2) {
			providerIDs[hm.Name] = hm.Spec.ProviderID
		}

		By("moving the cluster from its Secret identity to a HarvesterClusterIdentity, as docs/harvester-identity.md says")
		kubeconfig, err := testBed.Harvester.ProviderKubeconfig(ctx)
		Expect(err).NotTo(HaveOccurred())
		adminSecret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: testBed.Provider.Namespace, Name: "move-identity"},
			Data:       map[string][]byte{infrav1.IdentitySecretKey: kubeconfig},
		}
		Expect(mgmt().Create(ctx, adminSecret)).To(Succeed())
		lent := &infrav1.HarvesterClusterIdentity{
			ObjectMeta: metav1.ObjectMeta{Name: "move"},
			Spec: infrav1.HarvesterClusterIdentitySpec{
				SecretName:        adminSecret.Name,
				AllowedNamespaces: &infrav1.AllowedNamespaces{NamespaceList: []string{tc.Namespace}},
				TargetNamespaces:  []string{tc.Target},
				// The bed's images and VM networks live in `default`, as on many Harvesters.
				SharedNamespaces: []string{"default"},
			},
		}
		Expect(mgmt().Create(ctx, lent)).To(Succeed())
		// clusterctl leaves an identity in the source: the clean-up there is the admin's.
		DeferCleanup(func() {
			for _, obj := range []client.Object{&infrav1.HarvesterClusterIdentity{ObjectMeta: metav1.ObjectMeta{Name: lent.Name}},
				&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: adminSecret.Namespace, Name: adminSecret.Name}}} {
				if mgmt().Get(ctx, client.ObjectKeyFromObject(obj), obj) == nil {
					obj.SetFinalizers(nil)
					Expect(client.IgnoreNotFound(mgmt().Update(ctx, obj))).To(Succeed())
					Expect(client.IgnoreNotFound(mgmt().Delete(ctx, obj))).To(Succeed())
				}
			}
		})
		oldSecret := tc.HarvesterCluster.Spec.IdentitySecret.Name
		runDocumentedOnManagement("harvester-identity.md", "switch-to-identity",
			"NAMESPACE="+tc.Namespace, "CLUSTER="+tc.HarvesterCluster.Name, "IDENTITY="+lent.Name)
		Eventually(func(g Gomega) {
			g.Expect(mgmt().Get(ctx, client.ObjectKeyFromObject(adminSecret), adminSecret)).To(Succeed())
			g.Expect(adminSecret.OwnerReferences).To(ContainElement(HaveField("Name", lent.Name)))
			g.Expect(adminSecret.Finalizers).NotTo(BeEmpty(), "the identity's Secret is kept while the cluster uses it")
			hc := &infrav1.HarvesterCluster{}
			g.Expect(mgmt().Get(ctx, client.ObjectKeyFromObject(tc.HarvesterCluster), hc)).To(Succeed())
			g.Expect(conditions.IsTrue(hc, infrav1.HarvesterAvailableCondition)).To(BeTrue(), "%v", hc.Status.Conditions)
			g.Expect(hc.Status.Initialization.Provisioned).To(Equal(ptr.To(true)))
		}).Should(Succeed())
		// The tenant's Secret keeps the provider's finalizer until taken off by hand (the doc's step).
		old := &corev1.Secret{}
		Expect(mgmt().Get(ctx, client.ObjectKey{Namespace: tc.Namespace, Name: oldSecret}, old)).To(Succeed())
		Expect(old.Finalizers).To(ContainElement(controllers.IdentityFinalizer))
		requireTool("JQ")
		Expect(runDocumentedOnManagement("harvester-identity.md", "old-secret-unused", "NAMESPACE="+tc.Namespace, "SECRET="+oldSecret)).To(BeEmpty(),
			"no HarvesterCluster names the old Secret")
		runDocumentedOnManagement("harvester-identity.md", "release-old-secret", "NAMESPACE="+tc.Namespace, "SECRET="+oldSecret)
		Eventually(func() bool { return apierrors.IsNotFound(mgmt().Get(ctx, client.ObjectKeyFromObject(old), old)) }).Should(BeTrue())
		Expect(harvesterObjects(Default, tc.Target)).To(Equal(before), "the change of identity touched nothing on Harvester")

		By("starting a second management cluster with Cluster API and the provider as it ships")
		target, err := testBed.AddManagement(ctx, providerOptions)
		Expect(err).NotTo(HaveOccurred())
		// Its provider, Cluster API and apiserver stop with the spec, not with the shard.
		DeferCleanup(func() { Expect(testBed.StopManagement(ctx, target)).To(Succeed()) })
		for _, env := range []*testenv.Environment{testBed.Management, target.Env} {
			Expect(bed.RecordClusterctlInstall(ctx, env, true)).To(Succeed())
		}
		to := target.Env.Client

		By("moving the namespace with clusterctl")
		clusterctllog.SetLogger(GinkgoLogr)
		start := time.Now()
		Expect(bed.Move(ctx, testBed.Management, target.Env, tc.Namespace)).To(Succeed())
		GinkgoWriter.Printf("clusterctl move took %s\n", time.Since(start).Round(time.Millisecond))

		By("the source keeps nothing of the cluster; the target has it all, unpaused")
		Eventually(func(g Gomega) {
			for _, list := range []client.ObjectList{&clusterv1.ClusterList{}, &infrav1.HarvesterClusterList{}, &infrav1.HarvesterMachineList{}, &clusterv1.MachineList{}} {
				g.Expect(mgmt().List(ctx, list, client.InNamespace(tc.Namespace))).To(Succeed())
				items, _ := meta.ExtractList(list)
				g.Expect(items).To(BeEmpty(), "%T left in the source", list)
			}
		}).Should(Succeed())
		movedCluster := &clusterv1.Cluster{}
		Expect(to.Get(ctx, client.ObjectKeyFromObject(tc.Cluster), movedCluster)).To(Succeed())
		Expect(ptr.Deref(movedCluster.Spec.Paused, false)).To(BeFalse())
		By("the identity and its Secret moved with the cluster")
		movedIdentity := &infrav1.HarvesterClusterIdentity{}
		Expect(to.Get(ctx, client.ObjectKey{Name: lent.Name}, movedIdentity)).To(Succeed())
		movedSecret := &corev1.Secret{}
		Expect(to.Get(ctx, client.ObjectKeyFromObject(adminSecret), movedSecret)).To(Succeed())
		Expect(movedSecret.Data).To(HaveKey(infrav1.IdentitySecretKey))

		By("the target's provider takes the cluster and its machines over as they are on Harvester")
		Eventually(func(g Gomega) {
			hc := &infrav1.HarvesterCluster{}
			g.Expect(to.Get(ctx, client.ObjectKeyFromObject(tc.HarvesterCluster), hc)).To(Succeed())
			g.Expect(hc.Status.Initialization.Provisioned).To(Equal(ptr.To(true)), "%v", hc.Status.Conditions)
			g.Expect(conditions.IsTrue(hc, clusterv1.ReadyCondition)).To(BeTrue(), "%v", hc.Status.Conditions)
			g.Expect(hc.Spec.ControlPlaneEndpoint).To(Equal(tc.HarvesterCluster.Spec.ControlPlaneEndpoint))
			// Its UID is new; the owner mark, which names its objects on Harvester, is not.
			g.Expect(hc.UID).NotTo(Equal(tc.HarvesterCluster.UID))
			g.Expect(hc.Annotations).To(HaveKeyWithValue(infrav1.OwnerMarkAnnotation, tc.guest().Mark))
			// The record of the guest's volumes that deletion reads (status does not move).
			g.Expect(hc.Annotations).To(HaveKeyWithValue(infrav1.GuestVolumesAnnotation, guestVolume))
			hms := &infrav1.HarvesterMachineList{}
			g.Expect(to.List(ctx, hms, client.InNamespace(tc.Namespace))).To(Succeed())
			g.Expect(hms.Items).To(HaveLen(2))
			for _, hm := range hms.Items {
				g.Expect(hm.Spec.ProviderID).To(Equal(providerIDs[hm.Name]), hm.Name)
				g.Expect(hm.Status.Initialization.Provisioned).To(Equal(ptr.To(true)), "%s: %v", hm.Name, hm.Status.Conditions)
			}
		}).Should(Succeed())
		Expect(harvesterObjects(Default, tc.Target)).To(Equal(before), "nothing on Harvester re-created, added or removed")

		By("scaling the moved cluster up by one machine from the target")
		Eventually(func(g Gomega) {
			g.Expect(to.Get(ctx, client.ObjectKeyFromObject(md), md)).To(Succeed())
			md.Spec.Replicas = ptr.To[int32](2)
			g.Expect(to.Update(ctx, md)).To(Succeed())
		}).Should(Succeed())
		waitProgressing("the third machine provisioned with its Node", clusterState(to, tc.Namespace, tc.Name), func(g Gomega) {
			machines := &clusterv1.MachineList{}
			g.Expect(to.List(ctx, machines, client.InNamespace(tc.Namespace))).To(Succeed())
			g.Expect(machines.Items).To(HaveLen(3))
			for _, m := range machines.Items {
				g.Expect(m.Status.Initialization.InfrastructureProvisioned).To(Equal(ptr.To(true)), m.Name)
				g.Expect(m.Status.NodeRef.IsDefined()).To(BeTrue(), "machine %s has no node", m.Name)
			}
		})
		after := harvesterObjects(Default, tc.Target)
		vms := 0
		for key, uid := range after {
			if old, ok := before[key]; ok {
				Expect(uid).To(Equal(old), "%s was re-created", key)
			}
			if strings.HasPrefix(key, "VirtualMachine ") {
				vms++
			}
		}
		Expect(vms).To(Equal(3), "one VM per machine, none twice")

		By("deleting the cluster from the target management cluster")
		tc.deletedFrom(to, guestVolume)
	})

	// Status does not move: the record of the guest's volumes does (an annotation). With no way to
	// the guest from the target (its kubeconfig Secret gone before the move), the target deletes
	// the volumes from that record alone.
	It("deletes the guest's volumes after a move, its guest unreachable from the target", func() {
		tc := newTestCluster("move-away", "move-away")
		base := tc.Bootstrap.DeepCopy()
		tc.Bootstrap.Labels[clusterctlv1.ClusterctlMoveLabel] = ""
		Expect(mgmt().Patch(ctx, tc.Bootstrap, client.MergeFrom(base))).To(Succeed())
		tc.controlPlaneMachine("move-away-cp-0")
		waitProgressing("the control plane initialised and its Machine with its Node", tc.state, func(g Gomega) {
			g.Expect(mgmt().Get(ctx, client.ObjectKeyFromObject(tc.Cluster), tc.Cluster)).To(Succeed())
			g.Expect(conditions.IsTrue(tc.Cluster, clusterv1.ClusterControlPlaneInitializedCondition)).To(BeTrue())
			machines := &clusterv1.MachineList{}
			g.Expect(mgmt().List(ctx, machines, client.InNamespace(tc.Namespace))).To(Succeed())
			g.Expect(machines.Items).To(HaveLen(1))
			g.Expect(machines.Items[0].Status.NodeRef.IsDefined()).To(BeTrue())
		})
		guestVolume := tc.recordedGuestVolume()
		// The status follows the annotation, in a patch of its own.
		Eventually(func(g Gomega) {
			g.Expect(mgmt().Get(ctx, client.ObjectKeyFromObject(tc.HarvesterCluster), tc.HarvesterCluster)).To(Succeed())
			g.Expect(tc.HarvesterCluster.Status.GuestVolumes).To(Equal([]string{guestVolume}))
		}).Should(Succeed())

		By("removing the guest's kubeconfig Secret, so that the target never reaches the guest")
		Expect(mgmt().Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: tc.Namespace, Name: tc.Name + "-kubeconfig"}})).To(Succeed())

		target, err := testBed.AddManagement(ctx, providerOptions)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { Expect(testBed.StopManagement(ctx, target)).To(Succeed()) })
		for _, env := range []*testenv.Environment{testBed.Management, target.Env} {
			Expect(bed.RecordClusterctlInstall(ctx, env, true)).To(Succeed())
		}
		to := target.Env.Client
		clusterctllog.SetLogger(GinkgoLogr)
		Expect(bed.Move(ctx, testBed.Management, target.Env, tc.Namespace)).To(Succeed())

		By("the target has the record in the annotation, and no status of it")
		moved := &infrav1.HarvesterCluster{}
		Eventually(func(g Gomega) {
			g.Expect(to.Get(ctx, client.ObjectKeyFromObject(tc.HarvesterCluster), moved)).To(Succeed())
			g.Expect(moved.Status.Initialization.Provisioned).To(Equal(ptr.To(true)), "%v", moved.Status.Conditions)
		}).Should(Succeed())
		Expect(moved.Annotations).To(HaveKeyWithValue(infrav1.GuestVolumesAnnotation, guestVolume))
		Expect(moved.Status.GuestVolumes).To(BeEmpty(), "status did not move, and the target cannot read the guest")

		By("deleting the cluster from the target")
		tc.deletedFrom(to, guestVolume)
	})
})

// recordedGuestVolume makes a volume as the guest's Harvester CSI driver does (a claim in the
// target namespace, named by the guest PersistentVolume's volume handle) and waits until the
// HarvesterCluster records it where clusterctl move carries it.
func (tc *testCluster) recordedGuestVolume() string {
	GinkgoHelper()
	guestVolume := "pvc-" + string(uuid.NewUUID())
	Expect(harvesterClient().Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: tc.Target, Name: guestVolume},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ptr.To("harvester-longhorn"),
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	})).To(Succeed())
	Expect(tc.Guest.Env.Client.Create(ctx, &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: guestVolume},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: controllers.CSIDriverName, VolumeHandle: guestVolume,
			}},
		},
	})).To(Succeed())
	Eventually(func(g Gomega) {
		g.Expect(mgmt().Get(ctx, client.ObjectKeyFromObject(tc.HarvesterCluster), tc.HarvesterCluster)).To(Succeed())
		g.Expect(tc.HarvesterCluster.Annotations).To(HaveKeyWithValue(infrav1.GuestVolumesAnnotation, guestVolume))
	}).Should(Succeed())
	return guestVolume
}

// deletedFrom deletes the cluster from a management cluster and waits until it is gone there,
// nothing of it is left on Harvester, and the guest's recorded volume is deleted too.
func (tc *testCluster) deletedFrom(to client.Client, guestVolume string) {
	GinkgoHelper()
	Expect(to.Delete(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: tc.Namespace, Name: tc.Name}})).To(Succeed())
	clusterGone(to, tc.Namespace, tc.Name)
	leakFree(tc.Target)
	err := harvesterClient().Get(ctx, client.ObjectKey{Namespace: tc.Target, Name: guestVolume}, &corev1.PersistentVolumeClaim{})
	Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the guest's volume is deleted with the cluster, from its record: %v", err)
}
