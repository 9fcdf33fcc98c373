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

package harvestersim_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/seed-0a7eb009/cluster-api-provider-harvester/test/harvestersim"
)

// KubeVirt's own virt-controller runs the VM: it makes the VMI and its
// virt-launcher pod, which the simulator places and runs; virt-controller hands the VMI to the
// host, the simulated virt-handler runs it and its guest agent reports addresses, and
// virt-controller writes the VM's status. Deleting the VM takes the VMI, the pod and what the VM
// owned with it.
func TestKubeVirtsVirtControllerRunsAVM(t *testing.T) {
	g := NewWithT(t)
	// A Harvester of its own: the test counts every launcher pod of the namespace.
	h, err := harvestersim.Start(ctx, harvestersim.DefaultOptions())
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { g.Expect(h.Stop()).To(Succeed()) }()

	v := harvestersim.SampleVM(ns, "by-virt-controller", "")
	g.Expect(h.Client().Create(ctx, v)).To(Succeed())
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "by-virt-controller-cloudinit",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachine", Name: v.Name, UID: v.UID}}}}
	g.Expect(h.Client().Create(ctx, secret)).To(Succeed())

	key := client.ObjectKeyFromObject(v)
	g.Eventually(func(g Gomega) {
		vmi := &kubevirtv1.VirtualMachineInstance{}
		g.Expect(h.Client().Get(ctx, key, vmi)).To(Succeed())
		g.Expect(vmi.Status.Phase).To(Equal(kubevirtv1.Running))
		g.Expect(vmi.Status.NodeName).NotTo(BeEmpty())
		g.Expect(vmi.Status.Interfaces).NotTo(BeEmpty())
		g.Expect(vmi.Status.Interfaces[0].IP).NotTo(BeEmpty())
		pods := &corev1.PodList{}
		g.Expect(h.Client().List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{kubevirtv1.AppLabel: "virt-launcher"})).To(Succeed())
		g.Expect(pods.Items).To(HaveLen(1))
		g.Expect(pods.Items[0].Spec.NodeName).To(Equal(vmi.Status.NodeName))
		got := &kubevirtv1.VirtualMachine{}
		g.Expect(h.Client().Get(ctx, key, got)).To(Succeed())
		g.Expect(got.Status.PrintableStatus).To(Equal(kubevirtv1.VirtualMachineStatusRunning))
		g.Expect(got.Status.Ready).To(BeTrue())
	}, time.Minute, 200*time.Millisecond).Should(Succeed())

	// The VMI settles: virt-controller (its interfaces' pod names and "multus-status", from the
	// network-status annotation Multus puts on the launcher pod) and the simulated virt-handler
	// (the guest's addresses) agree on its status instead of rewriting each other's in turn,
	// which kept every load balancer's EndpointSlice changing until Multus' annotation was there.
	running := &kubevirtv1.VirtualMachineInstance{}
	g.Expect(h.Client().Get(ctx, key, running)).To(Succeed())
	for _, iface := range running.Status.Interfaces[:len(running.Spec.Networks)] {
		g.Expect(iface.PodInterfaceName).To(HavePrefix("pod"), "the pod interface name virt-controller gives %s", iface.Name)
		g.Expect(iface.InfoSource).To(Equal("domain, guest-agent, multus-status"))
	}
	// (A late write or two, such as virt-controller's last status patch, may come first.)
	resourceVersion := func(g Gomega) string {
		vmi := &kubevirtv1.VirtualMachineInstance{}
		g.Expect(h.Client().Get(ctx, key, vmi)).To(Succeed())
		return vmi.ResourceVersion
	}
	g.Eventually(func(g Gomega) {
		settled := resourceVersion(g)
		g.Consistently(resourceVersion, 2*time.Second, 200*time.Millisecond).Should(Equal(settled))
	}, settles).Should(Succeed())

	// A live migration: KubeVirt's migration controller makes the target pod (placed on another
	// host), hands over, and the simulated virt-handlers move the guest; the source's launcher exits.
	before := &kubevirtv1.VirtualMachineInstance{}
	g.Expect(h.Client().Get(ctx, key, before)).To(Succeed())
	vmim, err := h.Migrate(ctx, ns, v.Name)
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		g.Expect(h.Client().Get(ctx, client.ObjectKeyFromObject(vmim), vmim)).To(Succeed())
		g.Expect(vmim.Status.Phase).To(Equal(kubevirtv1.MigrationSucceeded))
		g.Expect(vmim.Finalizers).To(BeEmpty())
		vmi := &kubevirtv1.VirtualMachineInstance{}
		g.Expect(h.Client().Get(ctx, key, vmi)).To(Succeed())
		g.Expect(vmi.Status.NodeName).NotTo(Equal(before.Status.NodeName))
		g.Expect(vmi.Status.Interfaces[0].IP).To(Equal(before.Status.Interfaces[0].IP))
		pods := &corev1.PodList{}
		g.Expect(h.Client().List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{kubevirtv1.AppLabel: "virt-launcher"})).To(Succeed())
		running := map[string]corev1.PodPhase{}
		for _, p := range pods.Items {
			running[p.Spec.NodeName] = p.Status.Phase
		}
		// The source's launcher exited (Completed, as KubeVirt leaves it); the target's runs.
		g.Expect(running).To(Equal(map[string]corev1.PodPhase{
			before.Status.NodeName: corev1.PodSucceeded, vmi.Status.NodeName: corev1.PodRunning}))
	}, time.Minute, 200*time.Millisecond).Should(Succeed())

	g.Expect(h.Client().Delete(ctx, v)).To(Succeed())
	gone := func(obj client.Object) func() bool {
		return func() bool { return apierrors.IsNotFound(h.Client().Get(ctx, client.ObjectKeyFromObject(obj), obj)) }
	}
	g.Eventually(gone(&kubevirtv1.VirtualMachineInstance{ObjectMeta: v.ObjectMeta}), settles).Should(BeTrue())
	g.Eventually(gone(&kubevirtv1.VirtualMachine{ObjectMeta: v.ObjectMeta}), settles).Should(BeTrue())
	g.Eventually(gone(secret), settles).Should(BeTrue())
	g.Eventually(func(g Gomega) {
		pods := &corev1.PodList{}
		g.Expect(h.Client().List(ctx, pods, client.InNamespace(ns))).To(Succeed())
		g.Expect(pods.Items).To(BeEmpty())
	}, settles).Should(Succeed())
}

// A program of Harvester's or KubeVirt's that ends (a lost leader lease on a loaded apiserver ends
// virt-controller; an OOM kill ends anything) is started again after the kubelet's back-off, as its
// pod's container is on a real Harvester: VMs made meanwhile still run once it is back, and a
// failed test can say that it ended.
func TestAProgramThatEndsIsStartedAgain(t *testing.T) {
	g := NewWithT(t)
	before, err := sim.KillProgram("virt-controller")
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() int { return sim.ProgramRestarts("virt-controller") }, settles).Should(Equal(before + 1))

	v := vm("after-a-restart", nil)
	g.Expect(sim.Client().Create(ctx, v)).To(Succeed())
	defer deleteVM(t, v.Name)
	// Only KubeVirt's virt-controller makes a VM's VMI: it runs once the program is back and has
	// taken its leader lease again (the killed one never gave it back), which on an apiserver
	// loaded by the rest of make test took more than two minutes (load average 25 to 30).
	g.Eventually(func(g Gomega) {
		g.Expect(getVMI(g, v.Name).Status.Phase).To(Equal(kubevirtv1.Running))
	}, 5*time.Minute).Should(Succeed())

	g.Expect(sim.EndedPrograms(5)).To(ContainElement(ContainSubstring("virt-controller ended by itself")))
	_, err = sim.KillProgram("no-such-program")
	g.Expect(err).To(MatchError(ContainSubstring(`no program "no-such-program"`)))
}
