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
	"bytes"
	"context"
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/seed-0a7eb009/cluster-api-provider-harvester/api/v1alpha1"
	harvestercloud "github.com/seed-0a7eb009/cluster-api-provider-harvester/cloudprovider"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/guestcloud"
	"github.com/seed-0a7eb009/cluster-api-provider-harvester/pkg/harvester/build"
)

// guestCloud builds our cloud provider from the guest's credential, as the CCM does from its
// mounted cloud-config (the token file moved to a temporary directory).
func guestCloud(tc *testCluster, opts harvestercloud.Options) *harvestercloud.Cloud {
	var kubeconfig []byte
	var token string
	Eventually(func(g Gomega) { kubeconfig, token, _ = guestCredential(g, tc) }).Should(Succeed())
	return cloudFromCredential(kubeconfig, token, opts)
}

// cloudFromCredential builds our cloud provider from a cloud-config kubeconfig and the token its
// tokenFile holds.
func cloudFromCredential(kubeconfig []byte, token string, opts harvestercloud.Options) *harvestercloud.Cloud {
	api, err := clientcmd.Load(kubeconfig)
	Expect(err).NotTo(HaveOccurred())
	file := filepath.Join(GinkgoT().TempDir(), "token")
	Expect(os.WriteFile(file, []byte(token), 0o600)).To(Succeed())
	api.AuthInfos[api.Contexts[api.CurrentContext].AuthInfo].TokenFile = file
	patched, err := clientcmd.Write(*api)
	Expect(err).NotTo(HaveOccurred())
	cloud, err := harvestercloud.New(bytes.NewReader(patched), opts)
	Expect(err).NotTo(HaveOccurred())
	return cloud
}

var _ = Describe("cloud provider InstancesV2", func() {
	It("maps guest Nodes to their VMs with the guest's own credential", func() {
		tc := newTestCluster("ccm", "ccm")
		tc.controlPlaneMachine("ccm-cp-0")
		hm := &infrav1.HarvesterMachine{}
		waitProgressing("ccm-cp-0 provisioned", tc.state, func(g Gomega) {
			g.Expect(mgmt().Get(ctx, client.ObjectKey{Namespace: tc.Namespace, Name: "ccm-cp-0"}, hm)).To(Succeed())
			g.Expect(hm.Status.Initialization.Provisioned).To(Equal(ptr.To(true)))
		})
		vmi := &kubevirtv1.VirtualMachineInstance{}
		Expect(harvesterClient().Get(ctx, client.ObjectKey{Namespace: tc.Target, Name: hm.Name}, vmi)).To(Succeed())
		host := &corev1.Node{}
		Expect(harvesterClient().Get(ctx, client.ObjectKey{Name: vmi.Status.NodeName}, host)).To(Succeed())

		_, err := harvestercloud.New(bytes.NewReader(nil), harvestercloud.Options{})
		Expect(err).To(MatchError(ContainSubstring("--cluster-name")))

		cloud := guestCloud(tc, harvestercloud.Options{ClusterName: tc.guest().ID()})
		Expect(cloud.Namespace()).To(Equal(tc.Target))
		instances, ok := cloud.InstancesV2()
		Expect(ok).To(BeTrue())

		byID := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "renamed"}, Spec: corev1.NodeSpec{ProviderID: hm.Spec.ProviderID}}
		byName := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: hm.Name}}
		for _, node := range []*corev1.Node{byID, byName} {
			Expect(instances.InstanceExists(ctx, node)).To(BeTrue())
			Expect(instances.InstanceShutdown(ctx, node)).To(BeFalse())
			md, err := instances.InstanceMetadata(ctx, node)
			Expect(err).NotTo(HaveOccurred())
			Expect(md.ProviderID).To(Equal(hm.Spec.ProviderID))
			Expect(md.InstanceType).To(Equal("2cpu-4Gi"))
			Expect(md.Zone).To(Equal(host.Labels[build.LabelZone]))
			Expect(md.Region).To(Equal("region-1"))
			Expect(md.NodeAddresses[0]).To(Equal(corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: vmi.Status.Interfaces[0].IP}))
			Expect(md.NodeAddresses).To(ContainElement(corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: vmi.Status.Interfaces[1].IP}))
			Expect(md.NodeAddresses).To(ContainElement(corev1.NodeAddress{Type: corev1.NodeHostName, Address: hm.Name}))
			Expect(md.NodeAddresses).NotTo(ContainElement(HaveField("Address", HavePrefix("fe80:"))))
		}

		By("honouring kubelet's --node-ip")
		provided := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: hm.Name,
			Annotations: map[string]string{guestcloud.AnnotationProvidedNodeIP: vmi.Status.Interfaces[1].IP}}}
		md, err := instances.InstanceMetadata(ctx, provided)
		Expect(err).NotTo(HaveOccurred())
		Expect(md.NodeAddresses[0]).To(Equal(corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: vmi.Status.Interfaces[1].IP}))

		By("telling a gone VM from a stopped one")
		unknown := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "nobody"}}
		Expect(instances.InstanceExists(ctx, unknown)).To(BeFalse())
		_, err = instances.InstanceMetadata(ctx, unknown)
		Expect(err).To(MatchError(cloudprovider.InstanceNotFound))
		stale := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: hm.Name}, Spec: corev1.NodeSpec{ProviderID: "harvester://00000000-0000-0000-0000-000000000000"}}
		Expect(instances.InstanceExists(ctx, stale)).To(BeFalse(), "a VM of the same name is not the VM of this providerID")

		Eventually(func(g Gomega) {
			vm := &kubevirtv1.VirtualMachine{}
			g.Expect(harvesterClient().Get(ctx, client.ObjectKeyFromObject(vmi), vm)).To(Succeed())
			vm.Spec.RunStrategy = ptr.To(kubevirtv1.RunStrategyHalted)
			g.Expect(harvesterClient().Update(ctx, vm)).To(Succeed())
		}).Should(Succeed())
		Eventually(func() (bool, error) { return instances.InstanceShutdown(ctx, byID) }).Should(BeTrue())
		Expect(instances.InstanceExists(ctx, byID)).To(BeTrue())

		deleteCluster(tc)
		leakFree(tc.Target)
	})
})

var _ = Describe("cloud provider topology sync", func() {
	It("keeps a Node's zone and region equal to its VM's host after a live migration", func() {
		tc := newTestCluster("topo", "topo")
		tc.controlPlaneMachine("topo-cp-0")
		hm := &infrav1.HarvesterMachine{}
		waitProgressing("topo-cp-0 provisioned", tc.state, func(g Gomega) {
			g.Expect(mgmt().Get(ctx, client.ObjectKey{Namespace: tc.Namespace, Name: "topo-cp-0"}, hm)).To(Succeed())
			g.Expect(hm.Status.Initialization.Provisioned).To(Equal(ptr.To(true)))
		})

		cloud := guestCloud(tc, harvestercloud.Options{ClusterName: tc.guest().ID()})
		guest, err := kubernetes.NewForConfig(tc.Guest.Env.Config)
		Expect(err).NotTo(HaveOccurred())
		syncCtx, stop := context.WithCancel(ctx)
		defer stop()
		go func() { _ = cloud.SyncTopology(syncCtx, guest) }()

		zoneOf := func(g Gomega, host string) string {
			node := &corev1.Node{}
			g.Expect(harvesterClient().Get(ctx, client.ObjectKey{Name: host}, node)).To(Succeed())
			return node.Labels[build.LabelZone]
		}
		nodeLabels := func(g Gomega) map[string]string {
			node := &corev1.Node{}
			g.Expect(tc.Guest.Env.Client.Get(ctx, client.ObjectKey{Name: hm.Name}, node)).To(Succeed())
			return node.Labels
		}
		// The node agent registered the Node; the sync labels it with its host's zone.
		waitProgressing("topo-cp-0's Node labelled with its host's zone", tc.state, func(g Gomega) {
			g.Expect(mgmt().Get(ctx, client.ObjectKeyFromObject(hm), hm)).To(Succeed())
			g.Expect(nodeLabels(g)).To(HaveKeyWithValue(build.LabelZone, zoneOf(g, hm.Status.VirtualMachine.Host)))
			g.Expect(nodeLabels(g)).To(HaveKeyWithValue(build.LabelRegion, "region-1"))
		})

		By("migrating to a host of the other zone")
		source := hm.Status.VirtualMachine.Host
		for _, host := range []string{"harvester-1", "harvester-2", "harvester-3"} {
			if host != source && zoneOf(Default, host) == zoneOf(Default, source) {
				cordon(host, true)
				defer cordon(host, false)
			}
		}
		_, err = testBed.Harvester.Migrate(ctx, tc.Target, hm.Name)
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			g.Expect(mgmt().Get(ctx, client.ObjectKeyFromObject(hm), hm)).To(Succeed())
			g.Expect(hm.Status.VirtualMachine.Host).NotTo(Equal(source))
			g.Expect(zoneOf(g, hm.Status.VirtualMachine.Host)).NotTo(Equal(zoneOf(g, source)))
			g.Expect(nodeLabels(g)).To(HaveKeyWithValue(build.LabelZone, zoneOf(g, hm.Status.VirtualMachine.Host)))
		}).Should(Succeed())

		deleteCluster(tc)
		leakFree(tc.Target)
	})
})

// cordon marks a Harvester host (un)schedulable.
func cordon(host string, on bool) {
	Eventually(func(g Gomega) {
		node := &corev1.Node{}
		g.Expect(harvesterClient().Get(ctx, client.ObjectKey{Name: host}, node)).To(Succeed())
		node.Spec.Unschedulable = on
		g.Expect(harvesterClient().Update(ctx, node)).To(Succeed())
	}).Should(Succeed())
}
