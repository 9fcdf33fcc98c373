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
	"encoding/json"
	"os"
	"path/filepath"
	"strings"

	harvesterv1 "github.com/harvester/harvester/pkg/apis/harvesterhci.io/v1beta1"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/naming"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/guest"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/harvestersim"
)

var _ = Describe("HarvesterMachine", func() {
	It("provisions a MachineDeployment's VMs, follows scale-down and leaves nothing behind", func() {
		tc := newTestCluster("md", "md")
		md := tc.machineDeployment("workers", "workers-v1", 3, machineSpec())

		By("waiting for three provisioned HarvesterMachines")
		hms := &infrav1.HarvesterMachineList{}
		waitProgressing("three provisioned HarvesterMachines", tc.state, func(g Gomega) {
			g.Expect(mgmt().List(ctx, hms, client.InNamespace(tc.Namespace))).To(Succeed())
			g.Expect(hms.Items).To(HaveLen(3))
			for _, hm := range hms.Items {
				g.Expect(hm.Status.Initialization.Provisioned).To(Equal(ptr.To(true)), "%s: %v", hm.Name, hm.Status.Conditions)
				g.Expect(hm.Spec.ProviderID).To(HavePrefix("harvester://"))
				g.Expect(conditions.IsTrue(&hm, clusterv1.ReadyCondition)).To(BeTrue())
			}
		})

		By("checking the VMs on Harvester")
		for _, hm := range hms.Items {
			vm := &kubevirtv1.VirtualMachine{}
			Expect(harvesterClient().Get(ctx, client.ObjectKey{Namespace: tc.Target, Name: hm.Name}, vm)).To(Succeed())
			Expect(hm.Spec.ProviderID).To(Equal("harvester://" + string(vm.UID)))
			Expect(vm.Labels).To(HaveKeyWithValue(naming.LabelCluster, tc.guest().ID()))
			Expect(vm.Labels).To(HaveKeyWithValue(naming.LabelRole, naming.RoleWorker))
			tmpl := vm.Spec.Template
			Expect(tmpl.ObjectMeta.Labels).To(HaveKeyWithValue(naming.LabelMachine, hm.Name))
			Expect(tmpl.ObjectMeta.Labels).To(HaveKeyWithValue(naming.LabelHarvesterCreator, naming.HarvesterCreatorValue))
			Expect(tmpl.Spec.Hostname).To(Equal(hm.Name))
			Expect(tmpl.Spec.Domain.Devices.Disks).To(HaveLen(3), "root, data and cloud-init disks")
			Expect(tmpl.Spec.Domain.Devices.Disks[0].BootOrder).To(Equal(ptr.To[uint](1)))
			Expect(tmpl.Spec.Networks).To(HaveLen(2))
			Expect(tmpl.Spec.Networks[0].Multus.NetworkName).To(Equal("default/vlan10"))
			Expect(*tmpl.Spec.EvictionStrategy).To(Equal(kubevirtv1.EvictionStrategyLiveMigrate), "hostMaintenance.policy LiveMigrate, the default without devices")
			Expect(tmpl.Spec.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution).To(HaveLen(1))

			var claims []corev1.PersistentVolumeClaim
			Expect(json.Unmarshal([]byte(vm.Annotations[naming.AnnotationVolumeClaimTemplates]), &claims)).To(Succeed())
			Expect(claims).To(HaveLen(2))
			Expect(claims[0].Annotations).To(HaveKeyWithValue(naming.AnnotationImageID, "default/ubuntu-24.04"))
			Expect(*claims[0].Spec.StorageClassName).To(Equal("longhorn-ubuntu-24.04"))
			Expect(*claims[1].Spec.StorageClassName).To(Equal("harvester-longhorn"))

			vmi := &kubevirtv1.VirtualMachineInstance{}
			Expect(harvesterClient().Get(ctx, client.ObjectKeyFromObject(vm), vmi)).To(Succeed())
			Expect(vmi.Labels).To(HaveKeyWithValue(naming.LabelMachine, hm.Name), "labels reach the VMI")
			Expect(hm.Status.VirtualMachine.Host).To(Equal(vmi.Status.NodeName))
			Expect(hm.Status.Addresses).To(ContainElement(clusterv1.MachineAddress{Type: clusterv1.MachineInternalIP, Address: vmi.Status.Interfaces[0].IP}))
			Expect(hm.Status.Addresses).NotTo(ContainElement(HaveField("Address", HavePrefix("fe80:"))))
			Expect(hm.Status.Addresses).NotTo(ContainElement(HaveField("Address", "10.42.0.1")), "only interfaces of the spec")

			secret := &corev1.Secret{}
			Expect(harvesterClient().Get(ctx, client.ObjectKey{Namespace: tc.Target, Name: naming.CloudInitSecretName(hm.Name)}, secret)).To(Succeed())
			userData := string(secret.Data["userdata"])
			Expect(userData).To(HavePrefix("#cloud-config\n"))
			Expect(userData).To(ContainSubstring("qemu-guest-agent"))
			Expect(userData).To(ContainSubstring("ssh-ed25519 "))
			Expect(guest.CarriesBootstrapData(secret.Data["userdata"], tc.Bootstrap.Data["value"])).To(BeTrue())
		}

		By("waiting for CAPI to match each Machine to its guest Node")
		waitProgressing("each Machine matched to its Node", tc.state, func(g Gomega) {
			machines := &clusterv1.MachineList{}
			g.Expect(mgmt().List(ctx, machines, client.InNamespace(tc.Namespace))).To(Succeed())
			g.Expect(machines.Items).To(HaveLen(3))
			for _, m := range machines.Items {
				g.Expect(m.Status.NodeRef.IsDefined()).To(BeTrue(), "machine %s has no nodeRef", m.Name)
				g.Expect(m.Status.NodeRef.Name).To(Equal(m.Spec.InfrastructureRef.Name))
			}
		})

		By("scaling down to one machine")
		Eventually(func(g Gomega) {
			g.Expect(mgmt().Get(ctx, client.ObjectKeyFromObject(md), md)).To(Succeed())
			md.Spec.Replicas = ptr.To[int32](1)
			g.Expect(mgmt().Update(ctx, md)).To(Succeed())
		}).Should(Succeed())
		waitProgressing("the scale-down's VMs and volumes deleted", tc.state, func(g Gomega) {
			vms := &kubevirtv1.VirtualMachineList{}
			g.Expect(harvesterClient().List(ctx, vms, client.InNamespace(tc.Target),
				client.MatchingLabels{naming.LabelCluster: tc.guest().ID()})).To(Succeed())
			g.Expect(vms.Items).To(HaveLen(1))
			pvcs := &corev1.PersistentVolumeClaimList{}
			g.Expect(harvesterClient().List(ctx, pvcs, client.InNamespace(tc.Target),
				client.MatchingLabels{naming.LabelCluster: tc.guest().ID()})).To(Succeed())
			g.Expect(pvcs.Items).To(HaveLen(2), "the remaining machine's two volumes")
		})

		By("deleting the cluster")
		deleteCluster(tc)
		leakFree(tc.Target)
	})

	It("adopts its own VM after a restart instead of creating a second one", func() {
		tc := newTestCluster("adopt", "adopt")
		tc.machineDeployment("workers", "adopt-v1", 1, machineSpec())
		var hm infrav1.HarvesterMachine
		var uid string
		waitProgressing("the worker provisioned", tc.state, func(g Gomega) {
			hms := &infrav1.HarvesterMachineList{}
			g.Expect(mgmt().List(ctx, hms, client.InNamespace(tc.Namespace))).To(Succeed())
			g.Expect(hms.Items).To(HaveLen(1))
			hm = hms.Items[0]
			g.Expect(hm.Status.Initialization.Provisioned).To(Equal(ptr.To(true)))
			uid = hm.Status.VirtualMachine.UID
			g.Expect(uid).NotTo(BeEmpty())
		})

		// A controller that restarts knows only what the APIs hold: forget the status, as if the
		// patch that recorded it had been lost, and let it reconcile again.
		Eventually(func(g Gomega) {
			g.Expect(mgmt().Get(ctx, client.ObjectKeyFromObject(&hm), &hm)).To(Succeed())
			hm.Status = infrav1.HarvesterMachineStatus{}
			g.Expect(mgmt().Status().Update(ctx, &hm)).To(Succeed())
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(mgmt().Get(ctx, client.ObjectKeyFromObject(&hm), &hm)).To(Succeed())
			g.Expect(hm.Status.Initialization.Provisioned).To(Equal(ptr.To(true)))
			g.Expect(hm.Status.VirtualMachine.UID).To(Equal(uid))
		}).Should(Succeed())
		vms := &kubevirtv1.VirtualMachineList{}
		Expect(harvesterClient().List(ctx, vms, client.InNamespace(tc.Target),
			client.MatchingLabels{naming.LabelMachine: hm.Name})).To(Succeed())
		Expect(vms.Items).To(HaveLen(1))

		deleteCluster(tc)
		leakFree(tc.Target)
	})

	It("gives machines whose names no VM name can hold a hashed VM name and follows them to the end", func() {
		tc := newTestCluster("longnames", "longnames")
		long := "control-plane-" + strings.Repeat("with-a-very-long-name-", 4) + "0"
		dotted := "cp.eu-west-1.example"
		Expect(len(long)).To(BeNumerically(">", 63))
		for _, name := range []string{long, dotted} {
			tc.controlPlaneMachine(name)
		}

		for _, name := range []string{long, dotted} {
			hm := &infrav1.HarvesterMachine{}
			vmName := naming.VMName(name)
			Expect(vmName).NotTo(Equal(name))
			By("provisioning " + name + " as VM " + vmName)
			waitProgressing(name+" provisioned", tc.state, func(g Gomega) {
				g.Expect(mgmt().Get(ctx, client.ObjectKey{Namespace: tc.Namespace, Name: name}, hm)).To(Succeed())
				g.Expect(hm.Status.Initialization.Provisioned).To(Equal(ptr.To(true)), "%v", hm.Status.Conditions)
				g.Expect(hm.Status.VirtualMachine.Name).To(Equal(vmName))
				g.Expect(hm.Status.Addresses).To(ContainElement(clusterv1.MachineAddress{Type: clusterv1.MachineHostName, Address: vmName}))
			})
			vm := &kubevirtv1.VirtualMachine{}
			Expect(harvesterClient().Get(ctx, client.ObjectKey{Namespace: tc.Target, Name: vmName}, vm)).To(Succeed())
			Expect(vm.Annotations).To(HaveKeyWithValue(naming.AnnotationMachine, name))
			Expect(vm.Labels).To(HaveKeyWithValue(naming.LabelMachine, naming.MachineLabelValue(name)))
			Expect(vm.Spec.Template.Spec.Hostname).To(Equal(vmName))

			By("matching the Machine to the guest Node named after the VM")
			waitProgressing(name+" matched to its Node", tc.state, func(g Gomega) {
				m := &clusterv1.Machine{}
				g.Expect(mgmt().Get(ctx, client.ObjectKey{Namespace: tc.Namespace, Name: name}, m)).To(Succeed())
				g.Expect(m.Status.NodeRef.Name).To(Equal(vmName))
			})
		}

		deleteCluster(tc)
		leakFree(tc.Target)
	})

	It("reports each bad reference and resumes once it is fixed", func() {
		tc := newTestCluster("badref", "badref")
		spec := machineSpec()
		spec.Disks[0].Image = "default/not-yet"
		spec.SSHKeyPairs = []string{"default/later"}
		spec.Networks[1].NetworkName = "default/vlan30"
		tc.machineDeployment("workers", "badref-v1", 1, spec)

		hm := func(g Gomega) *infrav1.HarvesterMachine {
			hms := &infrav1.HarvesterMachineList{}
			g.Expect(mgmt().List(ctx, hms, client.InNamespace(tc.Namespace))).To(Succeed())
			g.Expect(hms.Items).To(HaveLen(1))
			return &hms.Items[0]
		}
		reason := func(g Gomega) string {
			c := conditions.Get(hm(g), infrav1.VirtualMachineReadyCondition)
			g.Expect(c).NotTo(BeNil())
			return c.Reason
		}
		Eventually(reason).Should(Equal(infrav1.ImageNotFoundReason))
		Expect(testBed.Harvester.AddImage(ctx, "default", "not-yet", false)).To(Succeed())
		// What docs/guest-images.md has the user run to find an image's name.
		admin, err := testBed.Harvester.Env.Kubeconfig()
		Expect(err).NotTo(HaveOccurred())
		adminPath := filepath.Join(GinkgoT().TempDir(), "harvester-admin.yaml")
		Expect(os.WriteFile(adminPath, admin, 0o600)).To(Succeed())
		listed := runDocumented(documentedBlock("guest-images.md", "list-images"), GinkgoT().TempDir(), "KUBECONFIG="+adminPath)
		Expect(listed).To(MatchRegexp(`(?m)^default\s+not-yet\s`))

		By("an image put on Harvester as docs/guest-images.md says: applied, waited for until imported, listed under both names")
		dir := GinkgoT().TempDir()
		Expect(os.WriteFile(filepath.Join(dir, "image.yaml"), []byte(documentedYAML("guest-images.md", "image-yaml")), 0o600)).To(Succeed())
		uploaded := make(chan string, 1)
		go func() {
			defer GinkgoRecover()
			uploaded <- runDocumented(documentedBlock("guest-images.md", "upload-image"), dir, "KUBECONFIG="+adminPath)
		}()
		// Harvester downloads the file; the simulated one finishes the import once the object is there.
		Eventually(func() error {
			return testBed.Harvester.SetImageImported(ctx, "default", "ubuntu-2404-kube-v1-35-4", true)
		}).Should(Succeed())
		Eventually(uploaded).Should(Receive(ContainSubstring("condition met")))
		listed = runDocumented(documentedBlock("guest-images.md", "list-images"), GinkgoT().TempDir(), "KUBECONFIG="+adminPath)
		Expect(listed).To(MatchRegexp(`(?m)^default\s+ubuntu-2404-kube-v1-35-4\s+ubuntu-2404-kube-v1.35.4$`))
		Expect(harvesterClient().Delete(ctx, &harvesterv1.VirtualMachineImage{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "ubuntu-2404-kube-v1-35-4"}})).To(Succeed())
		Eventually(reason).Should(Equal(infrav1.ImageNotImportedReason))
		Expect(testBed.Harvester.SetImageImported(ctx, "default", "not-yet", true)).To(Succeed())
		Eventually(reason).Should(Equal(infrav1.KeyPairNotFoundReason))
		Expect(testBed.Harvester.AddKeyPair(ctx, "default", "later")).To(Succeed())
		Eventually(reason).Should(Equal(infrav1.NetworkNotFoundReason))
		Expect(testBed.Harvester.AddNetwork(ctx, harvestersim.Network{Namespace: "default", Name: "vlan30", VLAN: 30, CIDRs: []string{"10.30.0.0/16"}})).To(Succeed())
		waitProgressing("the worker provisioned", tc.state, func(g Gomega) {
			g.Expect(hm(g).Status.Initialization.Provisioned).To(Equal(ptr.To(true)))
		})

		deleteCluster(tc)
		leakFree(tc.Target)
	})

	It("refuses a VM name that a foreign VM holds and leaves that VM alone", func() {
		tc := newTestCluster("clash", "clash")
		foreign := harvestersim.SampleVM(tc.Target, "clash-1", "")
		foreign.Annotations[harvestersim.AnnotationRemovedPVCs] = "clash-1-disk-0-abcde"
		Expect(harvesterClient().Create(ctx, foreign)).To(Succeed())

		hm := &infrav1.HarvesterMachine{
			ObjectMeta: metav1.ObjectMeta{Namespace: tc.Namespace, Name: "clash-1", Labels: map[string]string{clusterv1.ClusterNameLabel: tc.Name}},
			Spec:       machineSpec(),
		}
		Expect(mgmt().Create(ctx, hm)).To(Succeed())
		machine := &clusterv1.Machine{
			ObjectMeta: metav1.ObjectMeta{Namespace: tc.Namespace, Name: "clash-1"},
			Spec: clusterv1.MachineSpec{
				ClusterName: tc.Name,
				Bootstrap:   clusterv1.Bootstrap{DataSecretName: ptr.To(tc.Bootstrap.Name)},
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{
					APIGroup: infrav1.GroupVersion.Group, Kind: "HarvesterMachine", Name: hm.Name,
				},
			},
		}
		Expect(mgmt().Create(ctx, machine)).To(Succeed())

		Eventually(func(g Gomega) {
			g.Expect(mgmt().Get(ctx, client.ObjectKeyFromObject(hm), hm)).To(Succeed())
			c := conditions.Get(hm, infrav1.VirtualMachineReadyCondition)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(infrav1.NameTakenReason))
			g.Expect(c.Message).To(ContainSubstring("left untouched"))
		}).Should(Succeed())
		Expect(hm.Spec.ProviderID).To(BeEmpty())

		deleteCluster(tc)
		after := &kubevirtv1.VirtualMachine{}
		Expect(harvesterClient().Get(ctx, client.ObjectKeyFromObject(foreign), after)).To(Succeed())
		Expect(after.UID).To(Equal(foreign.UID))
		Expect(after.DeletionTimestamp).To(BeNil())
		Expect(after.Labels).To(Equal(foreign.Labels))
		Expect(harvesterClient().Delete(ctx, after)).To(Succeed())
		leakFree(tc.Target)
	})
})
