package e2e

import (
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/harvestersim"
)

// The smoke test proves the bed: CAPI's own controllers create Machines for a
// MachineDeployment and match them to Nodes in the guest apiserver by providerID. Until the
// provider's reconcilers exist, the test plays them: it marks the HarvesterCluster provisioned
// and creates each HarvesterMachine's VM on the simulated Harvester itself.
var _ = Describe("the test bed", func() {
	const (
		ns     = "smoke"
		name   = "smoke"
		target = "smoke"
	)
	mgmt := func() client.Client { return testBed.Management.Client }
	harvester := func() client.Client { return testBed.Harvester.Client() }

	It("lets CAPI's Machine controller match guest Nodes by providerID", func() {
		Expect(mgmt().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())

		By("creating the cluster objects")
		hc := &infrav1.HarvesterCluster{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: infrav1.HarvesterClusterSpec{
				IdentitySecret:  infrav1.SecretReference{Name: "harvester-identity"},
				TargetNamespace: target,
			},
		}
		Expect(mgmt().Create(ctx, hc)).To(Succeed())
		cluster := &clusterv1.Cluster{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: clusterv1.ClusterSpec{
				ClusterNetwork: clusterv1.ClusterNetwork{Pods: clusterv1.NetworkRanges{CIDRBlocks: []string{"10.244.0.0/16"}}},
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{
					APIGroup: infrav1.GroupVersion.Group, Kind: "HarvesterCluster", Name: name,
				},
			},
		}
		Expect(mgmt().Create(ctx, cluster)).To(Succeed())
		_, err := testBed.AddGuest(ctx, ns, name, false)
		Expect(err).NotTo(HaveOccurred())

		By("playing the HarvesterCluster reconciler: endpoint and provisioned")
		Eventually(func(g Gomega) {
			g.Expect(mgmt().Get(ctx, client.ObjectKeyFromObject(hc), hc)).To(Succeed())
			hc.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: "10.10.100.10", Port: 6443}
			g.Expect(mgmt().Update(ctx, hc)).To(Succeed())
		}).Should(Succeed())
		hc.Status.Initialization.Provisioned = ptr.To(true)
		Expect(mgmt().Status().Update(ctx, hc)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(mgmt().Get(ctx, client.ObjectKeyFromObject(cluster), cluster)).To(Succeed())
			g.Expect(cluster.Status.Initialization.InfrastructureProvisioned).To(Equal(ptr.To(true)))
		}).Should(Succeed())

		By("creating a MachineDeployment of two machines with static bootstrap data")
		bootstrap := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-bootstrap",
				Labels: map[string]string{clusterv1.ClusterNameLabel: name}},
			Type: clusterv1.ClusterSecretType,
			Data: map[string][]byte{"value": []byte("#cloud-config\nruncmd:\n- echo joining " + name + "\n"), "format": []byte("cloud-config")},
		}
		Expect(mgmt().Create(ctx, bootstrap)).To(Succeed())
		Expect(mgmt().Create(ctx, &infrav1.HarvesterMachineTemplate{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-md"},
			Spec: infrav1.HarvesterMachineTemplateSpec{Template: infrav1.HarvesterMachineTemplateResource{Spec: infrav1.HarvesterMachineSpec{
				CPU: 2, Memory: resource.MustParse("4Gi"),
				Disks:    []infrav1.Disk{{Image: "default/ubuntu-24.04", Size: resource.MustParse("40Gi")}},
				Networks: []infrav1.Network{{NetworkName: "default/vlan10"}},
			}}},
		})).To(Succeed())
		md := &clusterv1.MachineDeployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-md"},
			Spec: clusterv1.MachineDeploymentSpec{
				ClusterName: name,
				Replicas:    ptr.To[int32](2),
				Selector:    metav1.LabelSelector{MatchLabels: map[string]string{"pool": "md"}},
				Template: clusterv1.MachineTemplateSpec{
					ObjectMeta: clusterv1.ObjectMeta{Labels: map[string]string{"pool": "md"}},
					Spec: clusterv1.MachineSpec{
						ClusterName: name,
						Version:     "v1.35.4",
						Bootstrap:   clusterv1.Bootstrap{DataSecretName: ptr.To(bootstrap.Name)},
						InfrastructureRef: clusterv1.ContractVersionedObjectReference{
							APIGroup: infrav1.GroupVersion.Group, Kind: "HarvesterMachineTemplate", Name: name + "-md",
						},
					},
				},
			},
		}
		Expect(mgmt().Create(ctx, md)).To(Succeed())

		By("playing the HarvesterMachine reconciler: a VM per machine, then providerID")
		Eventually(func(g Gomega) {
			hms := &infrav1.HarvesterMachineList{}
			g.Expect(mgmt().List(ctx, hms, client.InNamespace(ns))).To(Succeed())
			g.Expect(hms.Items).To(HaveLen(2))
			for i := range hms.Items {
				provisionMachine(g, &hms.Items[i], bootstrap, target)
			}
		}).Should(Succeed())

		By("waiting for CAPI to match each Machine to its guest Node")
		Eventually(func(g Gomega) {
			machines := &clusterv1.MachineList{}
			g.Expect(mgmt().List(ctx, machines, client.InNamespace(ns))).To(Succeed())
			g.Expect(machines.Items).To(HaveLen(2))
			for _, m := range machines.Items {
				g.Expect(m.Status.NodeRef.IsDefined()).To(BeTrue(), "machine %s has no nodeRef", m.Name)
				g.Expect(m.Status.Phase).To(Equal(string(clusterv1.MachinePhaseRunning)))
				g.Expect(m.Status.NodeRef.Name).To(Equal(m.Spec.InfrastructureRef.Name))
			}
		}).Should(Succeed())

		By("deleting the cluster: CAPI removes the machines, the test removes their VMs")
		Expect(mgmt().Delete(ctx, cluster)).To(Succeed())
		Eventually(func(g Gomega) {
			hms := &infrav1.HarvesterMachineList{}
			g.Expect(mgmt().List(ctx, hms, client.InNamespace(ns))).To(Succeed())
			g.Expect(hms.Items).To(BeEmpty())
			err := mgmt().Get(ctx, client.ObjectKeyFromObject(cluster), cluster)
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
		}).Should(Succeed())
		vms := &kubevirtv1.VirtualMachineList{}
		Expect(harvester().List(ctx, vms, client.InNamespace(target))).To(Succeed())
		for i := range vms.Items {
			Expect(harvester().Delete(ctx, &vms.Items[i])).To(Succeed())
		}
		Eventually(func(g Gomega) {
			leaks, err := testBed.LeakCheck(ctx, target)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(leaks).To(BeEmpty())
		}).Should(Succeed())
	})
})

// provisionMachine does what the HarvesterMachine reconciler will: the cloud-init Secret and the
// VM on Harvester, then providerID, addresses and provisioned once the VMI runs with an IP.
func provisionMachine(g Gomega, hm *infrav1.HarvesterMachine, bootstrap *corev1.Secret, target string) {
	if hm.Spec.ProviderID != "" {
		return
	}
	harvester := testBed.Harvester.Client()
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: target, Name: hm.Name + "-cloudinit"},
		Data:       map[string][]byte{"userdata": bootstrap.Data["value"]},
	}
	if err := harvester.Create(ctx, secret); err != nil && !apierrors.IsAlreadyExists(err) {
		g.Expect(err).NotTo(HaveOccurred())
	}
	vm := harvestersim.SampleVM(target, hm.Name, secret.Name)
	vm.Annotations[harvestersim.AnnotationRemovedPVCs] = hm.Name + "-disk-0-abcde"
	if err := harvester.Create(ctx, vm); err != nil && !apierrors.IsAlreadyExists(err) {
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(harvester.Get(ctx, client.ObjectKeyFromObject(vm), vm)).To(Succeed())
	if err := harvester.Get(ctx, client.ObjectKeyFromObject(secret), secret); err == nil && len(secret.OwnerReferences) == 0 {
		secret.OwnerReferences = []metav1.OwnerReference{{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachine", Name: vm.Name, UID: vm.UID}}
		g.Expect(harvester.Update(ctx, secret)).To(Succeed())
	}
	vmi := &kubevirtv1.VirtualMachineInstance{}
	g.Expect(harvester.Get(ctx, client.ObjectKeyFromObject(vm), vmi)).To(Succeed())
	g.Expect(vmi.Status.Interfaces).NotTo(BeEmpty())
	ip := vmi.Status.Interfaces[0].IP
	g.Expect(ip).NotTo(BeEmpty(), fmt.Sprintf("VMI %s has no IP yet", vmi.Name))

	mgmt := testBed.Management.Client
	hm.Spec.ProviderID = infrav1.ProviderIDPrefix + string(vm.UID)
	g.Expect(mgmt.Update(ctx, hm)).To(Succeed())
	hm.Status.Initialization.Provisioned = ptr.To(true)
	hm.Status.Addresses = []clusterv1.MachineAddress{{Type: clusterv1.MachineInternalIP, Address: ip}, {Type: clusterv1.MachineHostName, Address: hm.Name}}
	g.Expect(mgmt.Status().Update(ctx, hm)).To(Succeed())
}
